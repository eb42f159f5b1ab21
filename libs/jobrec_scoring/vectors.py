"""Word vectors of query terms, for DRMM's embedding term gating.

With `model.gating: embedding` the gate of a query term is `w · v`, `v` the term's unit word
vector. The vectors come from the embeddings version the pairs were built with, and they are
saved inside the trained model. So a registered model scores from query words alone, with no
embeddings file next to it.

Words are kept as UTF-8 bytes, sorted, so that a batch's words are looked up with one
vectorised binary search (Greek included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

TERM_SEPARATOR = b"\x1f"  # the ASCII unit separator: never part of a cleaned token


def unit_vectors(vectors: np.ndarray) -> np.ndarray:
    """Unit-length rows, computed as gensim does (`vectors / norms`, float32)."""
    norms = np.linalg.norm(vectors, axis=1)
    return (vectors / norms[:, None]).astype(np.float32)


@dataclass(frozen=True)
class QueryVectors:
    words: np.ndarray  # sorted UTF-8 bytes (object array)
    vectors: np.ndarray  # (words, dim) float32, unit length

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @staticmethod
    def of(words: list[bytes], vectors: np.ndarray) -> QueryVectors:
        array = np.empty(len(words), dtype=object)
        array[:] = words
        order = np.argsort(array)
        return QueryVectors(array[order], unit_vectors(np.asarray(vectors)[order]))

    def lookup(self, words: list[bytes]) -> np.ndarray:
        """Vectors of `words`, zeros for words without one."""
        found = np.zeros((len(words), self.dim), dtype=np.float32)
        if not words or not len(self.words):
            return found
        query = np.empty(len(words), dtype=object)
        query[:] = words
        position = np.minimum(np.searchsorted(self.words, query), len(self.words) - 1)
        known = self.words[position] == query
        found[known] = self.vectors[position[known]]
        return found

    def to_state(self) -> dict[str, Any]:
        return {"words": list(self.words), "vectors": self.vectors}

    @staticmethod
    def from_state(state: dict[str, Any]) -> QueryVectors:
        return QueryVectors.of(list(state["words"]), state["vectors"])
