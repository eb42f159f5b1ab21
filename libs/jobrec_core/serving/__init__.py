"""Stage 5b: top-k recommendations with the champion model."""
