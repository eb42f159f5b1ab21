"""Character trigrams of titles: seed 001's baseline matcher (its §4.1, after Daelemans et
al.), and the trigram cosine the title normaliser may mix into its own score
(`jobrec_scoring.titles.Lookup`).

A title Q is matched to the taxonomy title C that maximises `sim(Q, C) = M - match(Q, C)`
with `match = |T_Q ⊖ T_C| - |T_Q ∩ T_C|` over the two sets of character trigrams. For one Q,
`M` and `|T_Q|` are constants, so the best C maximises `3 |T_Q ∩ T_C| - |T_C|`: extra words
in Q cost nothing, which is why it is the paper's reference for the Extra words test. All
titles are compared at once as sparse binary matrices, one product per block of queries.
scipy is the one import beyond numpy, pandas and torch that the scoring package allows: the
registered normaliser pins it (`models.registry.scoring_requirements`).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse


def trigrams(text: str) -> set[str]:
    """The character trigrams of a title, with a space before and after it."""
    padded = f" {text} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


class TrigramMatcher:
    """The nearest taxonomy title of each query by :func:`trigrams` (see the module)."""

    def __init__(self, taxonomy: list[str]) -> None:
        self.vocabulary: dict[str, int] = {}
        for text in taxonomy:
            for gram in trigrams(text):
                self.vocabulary.setdefault(gram, len(self.vocabulary))
        self.rows = self._matrix(taxonomy)
        self.sizes = np.asarray(self.rows.sum(axis=1), dtype=np.float32).ravel()
        self.transposed = self.rows.T.tocsc()

    def _matrix(self, texts: list[str]) -> sparse.csr_matrix:
        rows: list[int] = []
        columns: list[int] = []
        for row, text in enumerate(texts):
            found = [self.vocabulary[g] for g in trigrams(text) if g in self.vocabulary]
            rows.extend([row] * len(found))
            columns.extend(found)
        data = np.ones(len(rows), dtype=np.float32)
        return sparse.csr_matrix((data, (rows, columns)), shape=(len(texts), len(self.vocabulary)))

    def nearest(
        self, queries: list[str], excluded: np.ndarray | None = None, block: int = 2048
    ) -> np.ndarray:
        """Index of each query's best taxonomy title (ties: the first). With `excluded` (a
        label per taxonomy title, then one per query), a query never matches a title of its
        own label."""
        matrix = self._matrix(queries)
        best = np.zeros(len(queries), dtype=np.int64)
        # Labels as integers: comparing a block's labels with every title's is then a numeric
        # comparison, not one of Python objects (4x faster on O*NET's codes).
        codes = None if excluded is None else np.unique(excluded, return_inverse=True)[1]
        titles = len(self.sizes)
        for start in range(0, len(queries), block):
            scores = (matrix[start : start + block] @ self.transposed).toarray()
            scores *= 3.0
            scores -= self.sizes[None, :]
            if codes is not None:
                own = codes[titles + start : titles + start + block]
                scores[own[:, None] == codes[None, :titles]] = -np.inf
            best[start : start + block] = scores.argmax(axis=1)
        return best

    def pair_cosine(self, queries: list[str], titles: np.ndarray) -> np.ndarray:
        """`|T_Q ∩ T_C| / sqrt(|T_Q| |T_C|)` of each query and each of its taxonomy titles
        (`titles`: one row of title indices per query), in `titles`' shape; a query with no
        known trigram scores 0."""
        matrix = self._matrix(queries)
        query_sizes = np.asarray(matrix.sum(axis=1), dtype=np.float32).ravel()
        per_query = titles.shape[1]
        queries_again = matrix[np.repeat(np.arange(len(queries)), per_query)]
        shared = np.asarray(queries_again.multiply(self.rows[titles.ravel()]).sum(axis=1))
        sizes = np.repeat(np.maximum(query_sizes, 1.0), per_query) * np.maximum(
            self.sizes[titles.ravel()], 1.0
        )
        return (shared.ravel() / np.sqrt(sizes)).reshape(titles.shape).astype(np.float32)
