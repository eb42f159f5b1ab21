"""Ranking metrics of seed §7, vectorised over many queries at once (numpy, no Spark).

Rankings arrive as flat arrays, one entry per (query, document): the query id, the model's
score, the relevance label. :func:`rank_within_queries` sorts them once (by query, then score
descending, ties broken by the document id so that results are reproducible) and every metric
is a cumulative sum over that order.

AP@k divides by `min(R, k)`, R the query's relevant documents. The seed's formula divides by
R; with its MAP sets (R = 50 positives, k = 10) that would cap AP at 0.2, against the 0.966
it reports, so its R can only have been the relevant documents that fit in the top k.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def pairwise_accuracy(positive: np.ndarray, negative: np.ndarray) -> float:
    """Share of triples whose positive document scores strictly above the negative."""
    if len(positive) == 0:
        return float("nan")
    return float(np.mean(np.asarray(positive) > np.asarray(negative)))


@dataclass(frozen=True)
class Ranked:
    """Documents sorted by query, then by score (best first); `rank` counts from 0 per query."""

    query: np.ndarray
    label: np.ndarray
    rank: np.ndarray
    starts: np.ndarray  # index of each query's first document in the sorted arrays

    @property
    def queries(self) -> int:
        return len(self.starts)


def rank_within_queries(
    query: np.ndarray, score: np.ndarray, label: np.ndarray, document: np.ndarray
) -> Ranked:
    order = np.lexsort((np.asarray(document), -np.asarray(score, dtype=np.float64), query))
    sorted_query = np.asarray(query)[order]
    starts = np.flatnonzero(np.r_[True, sorted_query[1:] != sorted_query[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    rank = np.arange(len(order)) - np.repeat(starts, sizes)
    return Ranked(sorted_query, np.asarray(label)[order], rank, starts)


def average_precision_at_k(ranked: Ranked, k: int) -> np.ndarray:
    """AP@k per query (see the module for the denominator)."""
    relevant = (ranked.label > 0).astype(np.float64)
    cumulative = np.cumsum(relevant)
    before = np.repeat(cumulative[ranked.starts] - relevant[ranked.starts], _sizes(ranked))
    hits_so_far = cumulative - before
    precision = hits_so_far / (ranked.rank + 1)
    in_top = ranked.rank < k
    numerator = np.add.reduceat(precision * relevant * in_top, ranked.starts)
    total_relevant = np.add.reduceat(relevant, ranked.starts)
    denominator = np.minimum(total_relevant, k)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


def mean_average_precision(
    query: np.ndarray, score: np.ndarray, label: np.ndarray, document: np.ndarray, k: int
) -> float:
    if len(query) == 0:
        return float("nan")
    return float(
        average_precision_at_k(rank_within_queries(query, score, label, document), k).mean()
    )


def _sizes(ranked: Ranked) -> np.ndarray:
    return np.diff(np.r_[ranked.starts, len(ranked.rank)])
