"""The retrieve -> features -> re-rank -> cut-off pipeline, composed with `>>` like PyTerrier's;
used the same way by evaluation and serving."""
