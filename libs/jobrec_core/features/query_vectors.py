"""The query-term vectors a DRMM with embedding gating saves with its weights, read from an
embeddings version (the type itself, :class:`~jobrec_scoring.vectors.QueryVectors`, ships
with the registered model)."""

from __future__ import annotations

from jobrec_core.text.vectors import keyed_vectors
from jobrec_scoring.vectors import QueryVectors


def query_vectors_of(path: str) -> QueryVectors:
    """Every word of the keyed vectors at `path`, as UTF-8 bytes with its unit vector."""
    keyed = keyed_vectors(path)
    return QueryVectors.of([w.encode("utf-8") for w in keyed.index_to_key], keyed.vectors)
