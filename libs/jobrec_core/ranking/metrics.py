"""Ranking metrics of paper §7, vectorised over many queries at once (numpy, no Spark).

Rankings arrive as flat arrays, one entry per (query, document): the query id, the model's
score, the relevance label. :func:`rank_within_queries` sorts them once (by query, then score
descending, ties broken by the document id so that results are reproducible) and every metric
is a cumulative sum over that order.

Relevance labels are graded (0 irrelevant; 1, 2, ... more relevant): binary measures count
any label above 0, nDCG uses the labels as gains, as trec_eval does (the tests compare every
measure with trec_eval's own code through pytrec_eval).

AP@k divides by `min(R, k)`, R the query's relevant documents (trec_eval's `map_cut_k`
divides by R; the two agree whenever R <= k). The paper's formula divides by
R; with its MAP sets (R = 50 positives, k = 10) that would cap AP at 0.2, against the 0.966
it reports, so its R can only have been the relevant documents that fit in the top k.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    document: np.ndarray
    label: np.ndarray
    rank: np.ndarray
    starts: np.ndarray  # index of each query's first document in the sorted arrays

    @property
    def queries(self) -> int:
        return len(self.starts)


def rank_within_queries(
    query: np.ndarray, score: np.ndarray, label: np.ndarray, document: np.ndarray
) -> Ranked:
    """The rows sorted (see the module); no rows, no queries: every metric then gives an empty
    array per query, which the statistics turn into NaN."""
    order = np.lexsort((np.asarray(document), -np.asarray(score, dtype=np.float64), query))
    sorted_query = np.asarray(query)[order]
    starts = np.flatnonzero(np.r_[len(order) > 0, sorted_query[1:] != sorted_query[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    rank = np.arange(len(order)) - np.repeat(starts, sizes)
    return Ranked(sorted_query, np.asarray(document)[order], np.asarray(label)[order], rank, starts)


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


def precision_at_k(ranked: Ranked, k: int) -> np.ndarray:
    """P@k per query: relevant documents among the top k, over k."""
    hits = ((ranked.label > 0) & (ranked.rank < k)).astype(np.float64)
    return np.add.reduceat(hits, ranked.starts) / k


def ndcg_at_k(ranked: Ranked, k: int, ideal: np.ndarray | None = None) -> np.ndarray:
    """nDCG@k per query with linear gains (the label) and discount log2(rank + 2), rank from
    0. The ideal DCG is by default the query's own labels sorted: the best order of the pool,
    which compares rankers of the same pool. Pools that differ need one `ideal` per query
    from outside them (:func:`ideal_dcg_at_k` of the whole collection; in the order of
    `ranked`'s queries, sorted by id): within its own pool, a pool that misses the best
    documents would have a smaller ideal and score higher."""
    gains = ranked.label.astype(np.float64)
    discount = np.where(ranked.rank < k, 1.0 / np.log2(ranked.rank + 2.0), 0.0)
    dcg = np.add.reduceat(gains * discount, ranked.starts)
    if ideal is None:
        order = np.lexsort((-gains, ranked.query))  # the ideal order within each query
        ideal = np.add.reduceat(gains[order] * discount, ranked.starts)
    return np.divide(dcg, ideal, out=np.zeros_like(dcg), where=ideal > 0)


def ideal_dcg_at_k(documents_by_gain: Mapping[int, np.ndarray], k: int) -> np.ndarray:
    """The best DCG@k of each query over a whole collection, from how many documents of each
    gain (the label) it holds for the query: the highest gains fill the top k first."""
    gains = sorted(documents_by_gain, reverse=True)
    counts = np.column_stack([np.asarray(documents_by_gain[g], dtype=np.int64) for g in gains])
    ends = np.minimum(np.cumsum(counts, axis=1), k)  # each gain's documents fill ranks up to here
    begins = np.c_[np.zeros(len(ends), dtype=np.int64), ends[:, :-1]]
    discounts = np.r_[0.0, np.cumsum(1.0 / np.log2(np.arange(k) + 2.0))]  # of the first n ranks
    return np.asarray((discounts[ends] - discounts[begins]) @ np.asarray(gains, dtype=np.float64))


def first_relevant_rank(ranked: Ranked, k: int) -> np.ndarray:
    """The rank (from 1) of each query's first relevant document within the top k; k + 1,
    just past the cut, when none is there."""
    found = (ranked.label > 0) & (ranked.rank < k)
    return np.minimum.reduceat(np.where(found, ranked.rank + 1.0, k + 1.0), ranked.starts)


def reciprocal_rank(ranked: Ranked, k: int) -> np.ndarray:
    """1 / the rank (from 1) of each query's first relevant document within the top k; 0 when
    none is there."""
    return reciprocal_of_ranks(first_relevant_rank(ranked, k), k)


def reciprocal_of_ranks(ranks: np.ndarray, k: float = np.inf) -> np.ndarray:
    """1 / each rank (from 1), 0 for a rank past the top `k` (:func:`first_relevant_rank`'s
    k + 1 for a miss; no cut by default)."""
    ranks = np.asarray(ranks, dtype=np.float64)
    return np.where(ranks <= k, 1.0 / ranks, 0.0)


def log_rank_score(ranked: Ranked, k: int) -> np.ndarray:
    """-ln of the rank (from 1) of each query's first relevant document within the top k
    (k + 1 when none is there): the held-out measure that selects epochs, BM25 mixes and
    champions. Higher is better; exp(-mean) is the geometric-mean rank.

    With one relevant document per query (a held-out job), the reciprocal rank spends almost
    all of its range on ranks 1 to 3: moving the job from 40 to 8 counts less than from 2 to
    1. The log rank counts every halving of the rank alike, so it sees a model that lifts
    the job from deep in the pool as well as one that swaps the top two, and on the same
    pools it separates two rankers with two to three times the z of the reciprocal rank
    (docs/TRAINING.md, "where the held-out metric and the ground truth part")."""
    return log_rank_scores_of(first_relevant_rank(ranked, k))


def log_rank_scores_of(ranks: np.ndarray) -> np.ndarray:
    """-ln of each rank (from 1): the log-rank score of ranks already known."""
    return -np.log(np.asarray(ranks, dtype=np.float64))


def geometric_mean_rank(mean_log_rank_score: float) -> float:
    """The rank a mean log-rank score stands for, exp(-mean): what tables print beside it."""
    return float(np.exp(-mean_log_rank_score))


def top_k(ranked: Ranked, k: int) -> list[np.ndarray]:
    """The first k documents of each query, in ranked order."""
    ends = np.minimum(np.r_[ranked.starts[1:], len(ranked.rank)], ranked.starts + k)
    return [ranked.document[s:e] for s, e in zip(ranked.starts, ends, strict=True)]


# The document of a query's placeholder row: a query whose pool came back empty keeps one
# unjudged row, so that it stays in every ranker's paired comparison (it finds nothing).
NO_DOCUMENT = -1


def diversity(model_top: list[np.ndarray], reference_top: list[np.ndarray], k: int) -> float:
    """The paper's §7.5 measure: k minus the documents two top-k lists share, averaged over
    queries; in [0, k]. Against BM25's top k it says how much a re-ranker changed. A query
    with nothing to rank (its reference top holds only :data:`NO_DOCUMENT`) changes nothing
    and is left out; NaN without any other."""
    shared = [
        np.intersect1d(a[:k], b[:k]).size
        for a, b in zip(model_top, reference_top, strict=True)
        if not (b.size == 1 and b[0] == NO_DOCUMENT)
    ]
    return float(k - np.mean(shared)) if shared else float("nan")


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
