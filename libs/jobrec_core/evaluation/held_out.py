"""Held-out interest: a relevance metric that exists on real data, unlike the ground truth.

For a held-out candidate, the highest-scored of their (cleaned, so genuine) jobs is held out;
the query is built from their other jobs, retrieved and re-ranked exactly as recommendations
are, and the held-out job's rank in each ranker's order says how well it recovers a real
interest: MRR over the pool (100), Recall@k and nDCG@k with the held-out job as the one
relevant document, and the log-rank score (-ln rank, `ranking.metrics.log_rank_score`), which
the comparisons with BM25 are paired on, as model selection is. A candidate whose held-out job
is not in the pool scores 0 for every ranker, and a log-rank score of -ln 101, just past the
pool (the share found says how often that happens).

Because it needs no latent interests, this is the metric that can select and promote models;
:func:`agreement` measures, across the rankers evaluated, how well its order matches the
ground truth's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from scipy.stats import kendalltau, spearmanr

from jobrec_core.evaluation.protocols import ranked_by
from jobrec_core.ranking.metrics import (
    first_relevant_rank,
    log_rank_scores_of,
    ndcg_at_k,
    reciprocal_of_ranks,
)
from jobrec_core.ranking.scorers import score_column_of
from jobrec_core.ranking.statistics import (
    PairedDifference,
    against_reference,
    bootstrap_mean,
)


@dataclass(frozen=True)
class HeldOutRow:
    """One ranker's MRR, Recall@k, nDCG@k and log-rank score of the held-out job (95%
    intervals), and its paired log-rank difference with the reference (BM25), Holm-corrected."""

    ranker: str
    mrr: float
    mrr_low: float
    mrr_high: float
    recall: float
    recall_low: float
    recall_high: float
    ndcg: float
    ndcg_low: float
    ndcg_high: float
    log_rank: float
    log_rank_low: float
    log_rank_high: float
    versus_reference: PairedDifference | None = None
    p_holm: float = float("nan")


@dataclass(frozen=True)
class HeldOut:
    rows: list[HeldOutRow]
    candidates: int
    found: float  # the share of candidates whose held-out job is in the pool at all


@dataclass(frozen=True)
class Agreement:
    """Rank correlations, across the rankers, of the held-out log-rank score with ground-truth
    P@k."""

    rankers: int
    spearman: float
    kendall: float


def with_held_out_label(scored: DataFrame, queries: DataFrame) -> DataFrame:
    """`label` := 1 for the candidate's held-out job, 0 for the rest of the pool."""
    held_out = queries.select("candidate_id", "held_out_job_id")
    return (
        scored.join(held_out, "candidate_id")
        .withColumn("label", (F.col("job_id") == F.col("held_out_job_id")).cast("int"))
        .drop("held_out_job_id")
    )


def held_out_interest(
    scored: pd.DataFrame, rankers: list[str], k: int, pool: int, resamples: int, seed: int
) -> HeldOut:
    """Labelled pools with one score column per ranker -> the rows (see the module)."""
    if scored.empty:
        return HeldOut([], 0, float("nan"))
    ranked = {name: ranked_by(scored, score_column_of(name)) for name in rankers}
    ranks = {name: first_relevant_rank(r, pool) for name, r in ranked.items()}
    scores = {name: log_rank_scores_of(r) for name, r in ranks.items()}
    compared = against_reference(scores, resamples, seed)
    rows = []
    for name, r in ranked.items():
        m = bootstrap_mean(reciprocal_of_ranks(ranks[name], pool), resamples, seed)
        recall = bootstrap_mean(ranks[name] <= k, resamples, seed)
        n = bootstrap_mean(ndcg_at_k(r, k), resamples, seed)
        log_rank = bootstrap_mean(scores[name], resamples, seed)
        versus, p_holm = compared.get(name, (None, float("nan")))
        rows.append(
            HeldOutRow(
                name,
                *(m.mean, m.low, m.high),
                *(recall.mean, recall.low, recall.high),
                *(n.mean, n.low, n.high),
                *(log_rank.mean, log_rank.low, log_rank.high),
                versus_reference=versus,
                p_holm=p_holm,
            )
        )
    first = next(iter(ranked.values()))
    found = float(np.mean(np.add.reduceat(first.label, first.starts) > 0))
    return HeldOut(rows, first.queries, found)


def agreement(held_out: HeldOut, truth: Mapping[str, float]) -> Agreement | None:
    """Spearman's rho and Kendall's tau between the rankers' held-out log-rank score and their
    ground-truth P@k (`truth`, by ranker); None with fewer than three rankers in both."""
    pairs = [(row.log_rank, truth[row.ranker]) for row in held_out.rows if row.ranker in truth]
    if len(pairs) < 3:
        return None
    ours, theirs = zip(*pairs, strict=True)
    return Agreement(
        len(pairs),
        float(spearmanr(ours, theirs).statistic),
        float(kendalltau(ours, theirs).statistic),
    )
