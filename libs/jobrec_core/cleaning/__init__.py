"""Stage 1b: rule filters, then the distributed Word Mover's Distance filter."""
