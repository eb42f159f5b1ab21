"""Word Mover's Distance, exactly as gensim computes it, at a fraction of the cost.

gensim's `KeyedVectors.wmdistance` builds a dictionary, a vocabulary-sized distance matrix and
normalised bag-of-words vectors in Python for every pair, then solves the transport problem
with POT's `emd2`. The optimum only depends on the words each document actually contains, so
this module solves the same problem on the documents' unique words:

* a document is its unique word ids and their normalised frequencies (:class:`WmdDocument`),
  computed once per job, not once per pair;
* distances are Euclidean between unit vectors (gensim's `norm=True` default), kept in
  float32 as gensim keeps them (half the memory and cache of float64) and multiplied in
  float64, so each distance is what scipy's `cdist` gives gensim;
* many pairs at once (:func:`wmd_pairs`), on documents packed into flat arrays
  (:class:`DocumentBatch`, built straight from Arrow columns with no Python per document):
  small problems are solved in one compiled loop (:mod:`jobrec_core.text.transport`), larger ones
  by POT's network simplex called without `emd2`'s wrapper, as :func:`wmd` does for one pair;
* the same edge cases: a document with no in-vocabulary word is infinitely far; two documents
  made of one and the same word are at distance 0; an all-zero distance matrix gives inf.

:func:`centroid_bounds` bounds the WMD of many pairs at once from each document's centroid
alone, with no distance matrix: below by the word centroid distance (Kusner et al., 2015),
above by the root mean squared distance of the independent transport plan. The relaxed WMD is
tighter but needs the distance matrix, which here costs more than solving exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from ot.lp.emd_wrap import emd_c

from jobrec_core.text.transport import transport_batch
from jobrec_scoring.vectors import unit_vectors

INF = float("inf")
EMD_MAX_ITERATIONS = 100_000  # ot.emd2's default
BOUND_SLACK = 1e-9  # rounding margin, so that a bound never excludes the exact value
# Problems up to this many cells (n x m unique words) go to the compiled solver, larger ones to
# POT, whose network simplex scales better. With repeated words (unequal weights) the compiled
# solver needs about one shortest path per word, and a long document against a short one (the
# re-ranker's query against a job ad) falls behind POT from about 2,000 cells: 2x slower at
# 4,000, 5x at 16,000 (`benchmarks/wmd.py --sizes ... --zipf`, `docs/CLEANING.md`).
COMPILED_MAX_CELLS = 1_000


@dataclass(frozen=True)
class WmdDocument:
    ids: np.ndarray  # unique word ids (int64), sorted
    weights: np.ndarray  # normalised frequencies (float64), summing to 1

    @staticmethod
    def from_word_ids(word_ids: np.ndarray) -> WmdDocument:
        """The nBOW of a document given its in-vocabulary word ids, repeats included."""
        ids, counts = np.unique(np.asarray(word_ids, dtype=np.int64), return_counts=True)
        total = counts.sum()
        return WmdDocument(ids, counts / float(total) if total else counts.astype(np.float64))

    @property
    def empty(self) -> bool:
        return self.ids.size == 0


@dataclass(frozen=True)
class VectorTable:
    """gensim's unit vectors (float32) with their squared norms (float64), for distances."""

    unit: np.ndarray
    squared_norms: np.ndarray

    @staticmethod
    def from_vectors(vectors: np.ndarray) -> VectorTable:
        unit = unit_vectors(vectors)
        wide = unit.astype(np.float64)
        return VectorTable(unit, np.einsum("ij,ij->i", wide, wide))


@dataclass(frozen=True)
class DocumentBatch:
    """Documents packed for the compiled loop: document `d` is `ids[offsets[d]:offsets[d+1]]`
    with its `weights`."""

    ids: np.ndarray  # int64
    weights: np.ndarray  # float64
    offsets: np.ndarray  # int64, one more than the documents

    def __len__(self) -> int:
        return self.offsets.size - 1

    def document(self, index: int) -> WmdDocument:
        start, end = self.offsets[index], self.offsets[index + 1]
        return WmdDocument(self.ids[start:end], self.weights[start:end])

    @staticmethod
    def from_documents(documents: Sequence[WmdDocument]) -> DocumentBatch:
        offsets = np.zeros(len(documents) + 1, dtype=np.int64)
        np.cumsum([d.ids.size for d in documents], out=offsets[1:])
        if not documents:
            return DocumentBatch(np.empty(0, np.int64), np.empty(0), offsets)
        return DocumentBatch(
            np.concatenate([d.ids for d in documents]).astype(np.int64, copy=False),
            np.concatenate([d.weights for d in documents]).astype(np.float64, copy=False),
            offsets,
        )

    @staticmethod
    def from_arrow(
        ids: pa.Array | pa.ChunkedArray, weights: pa.Array | pa.ChunkedArray
    ) -> DocumentBatch:
        """From list columns, one document per row, without a Python object per row: the
        flat values and the offsets are what Arrow already holds."""
        ids_values, offsets = _flat(ids)
        weight_values, weight_offsets = _flat(weights)
        if not np.array_equal(offsets, weight_offsets):
            raise ValueError("a document has not as many weights as word ids")
        return DocumentBatch(
            ids_values.astype(np.int64), weight_values.astype(np.float64, copy=False), offsets
        )

    @staticmethod
    def concat(first: DocumentBatch, second: DocumentBatch) -> DocumentBatch:
        """`first`'s documents, then `second`'s."""
        return DocumentBatch(
            np.concatenate([first.ids, second.ids]),
            np.concatenate([first.weights, second.weights]),
            np.concatenate([first.offsets, second.offsets[1:] + first.offsets[-1]]),
        )


def _flat(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A list column's values and its offsets from 0 (a sliced array starts further on)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    offsets = np.asarray(column.offsets, dtype=np.int64)
    values = np.asarray(column.values[offsets[0] : offsets[-1]])
    return values, offsets - offsets[0]


def distance_matrix(table: VectorTable, ids1: np.ndarray, ids2: np.ndarray) -> np.ndarray:
    """Euclidean distances between words `ids1` and `ids2` (one BLAS product, in float64); a
    word's distance to itself is exactly 0, as in scipy's cdist, which gensim uses."""
    squared = (
        table.squared_norms[ids1][:, None]
        + table.squared_norms[ids2][None, :]
        - 2.0 * (table.unit[ids1].astype(np.float64) @ table.unit[ids2].astype(np.float64).T)
    )
    distances = np.sqrt(np.maximum(squared, 0.0))
    distances[ids1[:, None] == ids2[None, :]] = 0.0
    return distances


def _trivial(doc1: WmdDocument, doc2: WmdDocument) -> float | None:
    """gensim's answer where it does not solve a transport problem, else None."""
    if doc1.empty or doc2.empty:
        return INF
    if doc1.ids.size == 1 and doc2.ids.size == 1 and doc1.ids[0] == doc2.ids[0]:
        return 0.0
    return None


def wmd(table: VectorTable, doc1: WmdDocument, doc2: WmdDocument) -> float:
    """Exact WMD between two documents, equal to gensim's `wmdistance` on the same vectors."""
    trivial = _trivial(doc1, doc2)
    if trivial is not None:
        return trivial
    distances = distance_matrix(table, doc1.ids, doc2.ids)
    if abs(distances.sum()) < 1e-8:
        return INF
    return transport_cost(doc1.weights, doc2.weights, distances)


def wmd_pairs(
    table: VectorTable, documents: DocumentBatch, first: np.ndarray, second: np.ndarray
) -> np.ndarray:
    """Exact WMD of the pairs (`documents[first[k]]`, `documents[second[k]]`), equal to
    :func:`wmd` on each. Problems of up to `COMPILED_MAX_CELLS` cells (job titles, keywords)
    are solved in one compiled loop (:mod:`jobrec_core.text.transport`), with no Python per pair;
    larger ones, and any the compiled solver leaves unsolved, go to POT one by one."""
    distances = transport_batch(
        table.unit,
        table.squared_norms,
        documents.ids,
        documents.weights,
        documents.offsets,
        np.asarray(first, dtype=np.int64),
        np.asarray(second, dtype=np.int64),
        COMPILED_MAX_CELLS,
    )
    for k in np.flatnonzero(np.isnan(distances)):
        distances[k] = wmd(table, documents.document(first[k]), documents.document(second[k]))
    return distances


def transport_cost(a: np.ndarray, b: np.ndarray, distances: np.ndarray) -> float:
    """The optimal transport cost, from POT's network simplex called directly.

    `ot.emd2` (what gensim calls) spends about 200 us per call on backend detection and
    argument checks before reaching this solver (about 10 us for a 12-word pair); the inputs
    are prepared here exactly as `emd2` prepares them, so the result is the same.
    """
    b = b * (a.sum() / b.sum())
    _, cost, _, _, status = emd_c(
        np.ascontiguousarray(a, dtype=np.float64),
        np.ascontiguousarray(b, dtype=np.float64),
        np.ascontiguousarray(distances, dtype=np.float64),
        EMD_MAX_ITERATIONS,
        1,
        None,
        None,
    )
    if status != 1:
        raise ArithmeticError(f"network simplex did not reach the optimum (status {status})")
    return float(cost)


def centroid(table: VectorTable, doc: WmdDocument) -> tuple[np.ndarray, float]:
    """(weighted mean of the document's unit vectors, weighted mean of their squared norms)."""
    if doc.empty:
        return np.full(table.unit.shape[1], np.nan), np.nan
    return doc.weights @ table.unit[doc.ids], float(doc.weights @ table.squared_norms[doc.ids])


def centroid_bounds(
    centroids1: np.ndarray, norms1: np.ndarray, centroids2: np.ndarray, norms2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) WMD bounds for rows of paired centroids (an empty document: nan -> inf).

    Lower: |c1 - c2| (the word centroid distance). Upper: moving each word of one document
    to every word of the other in proportion to their weights is a feasible plan; its cost,
    the mean distance, is at most the root of the mean squared distance, which is
    n1 + n2 - 2 c1.c2 for weighted mean squared norms n1, n2.
    """
    lower = np.linalg.norm(centroids1 - centroids2, axis=1)
    mean_squared = norms1 + norms2 - 2.0 * np.einsum("ij,ij->i", centroids1, centroids2)
    upper = np.sqrt(np.maximum(mean_squared, 0.0)) + BOUND_SLACK
    lower = np.maximum(lower - BOUND_SLACK, 0.0)
    empty = np.isnan(lower) | np.isnan(upper)
    return np.where(empty, INF, lower), np.where(empty, INF, upper)


def similarity(distance: float | np.ndarray) -> float | np.ndarray:
    """Word Mover's similarity as gensim's `WmdSimilarity`: 1 / (1 + WMD); 0 for inf."""
    return 1.0 / (1.0 + np.asarray(distance, dtype=np.float64))
