"""A re-ranker's score interpolated with BM25's, z-normalised per query (issue 18; seed 002's
`alpha * newScore + (1 - alpha) * score`, with both scores standardised first).

Seed 002 mixed the raw scores; a DRMM's score and BM25's live on unrelated scales, and BM25's
scale changes from query to query (a 300-word query scores in the hundreds, a 20-word one in
the tens), so one alpha would mean something else for every query. Standardising each score
within its query (mean 0, standard deviation 1 over the pool) makes alpha the share of the
ranking each side decides, whatever the query. Alpha is chosen on the dev candidates'
held-out-interest log-rank score (:func:`best_alpha`, `ranking.metrics.log_rank_score`), never
on the ground truth, and only when it beats the model alone by more than noise.

Plain numpy, one pass over flat arrays (one entry per query and document), no loop per query.
"""

from __future__ import annotations

import numpy as np

from jobrec_core.ranking.metrics import log_rank_score, rank_within_queries
from jobrec_core.ranking.statistics import paired_difference

# The weights tried on dev: 1 is the model alone, 0 is BM25 alone.
ALPHA_GRID = tuple(round(0.05 * step, 2) for step in range(21))


def zscores(query: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`values` standardised within each query (population standard deviation); 0 for every
    document of a query whose values are all equal.

    The same bits whatever the order of the rows: each query's sums run over its values in
    ascending order, not in the rows' (an online request keeps its pool's order, Spark's
    grouped pass sorts by job, and a float sum depends on its order)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return values
    _, owner, sizes = np.unique(np.asarray(query), return_inverse=True, return_counts=True)
    ascending = np.lexsort((values, owner))  # by query, then by value: one order for any input
    means = np.bincount(owner[ascending], weights=values[ascending]) / sizes
    centred = values - means[owner]
    squares = (centred * centred)[ascending]  # centred values keep the values' order
    spread = np.sqrt(np.bincount(owner[ascending], weights=squares) / sizes)[owner]
    return np.divide(centred, spread, out=np.zeros_like(centred), where=spread > 1e-12)


def interpolate(query: np.ndarray, score: np.ndarray, bm25: np.ndarray, alpha: float) -> np.ndarray:
    """`alpha * z(score) + (1 - alpha) * z(bm25)`, z within each query."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], not {alpha}")
    return _mixed(alpha, zscores(query, score), zscores(query, bm25))


def _mixed(alpha: float, model_z: np.ndarray, bm25_z: np.ndarray) -> np.ndarray:
    return alpha * model_z + (1.0 - alpha) * bm25_z


def best_alpha(
    query: np.ndarray,
    score: np.ndarray,
    bm25: np.ndarray,
    label: np.ndarray,
    document: np.ndarray,
    resamples: int,
    seed: int,
    grid: tuple[float, ...] = ALPHA_GRID,
    pool_size: int | None = None,
) -> tuple[float, dict[float, float]]:
    """(the alpha to rank with, every alpha's mean held-out log-rank score) over held-out pools
    (`label` 1 on each query's held-out job): the alpha of `grid` with the best score (a tie
    goes to the higher alpha), but 1, the model alone, unless that alpha's paired gain over the
    model alone, per query, has a 95% bootstrap interval above zero. As at the promotion gate, a
    mix is never chosen on noise: on a few hundred dev candidates the best of 21 weights
    beats the model alone by chance more often than not. A query whose pool lacks its
    held-out job scores it just past `pool_size` (None: every pool holds it, as the stored
    held-out pools do)."""
    if len(query) == 0:
        return 1.0, {}
    model_z, bm25_z = zscores(query, score), zscores(query, bm25)  # once, not per alpha
    cut = len(query) if pool_size is None else pool_size
    per_query = {}
    for alpha in grid:
        ranked = rank_within_queries(query, _mixed(alpha, model_z, bm25_z), label, document)
        per_query[alpha] = log_rank_score(ranked, cut)
    means = {alpha: float(scores.mean()) for alpha, scores in per_query.items()}
    top = max(means.values())
    best = max(alpha for alpha, value in means.items() if value == top)
    alone = per_query.get(1.0)
    if best == 1.0 or alone is None:
        return best, means
    gain = paired_difference(per_query[best], alone, resamples, seed)
    return (best if gain.low > 0 else 1.0), means
