"""Ground truth: each ranker's top k judged against the generator's latent interests.

A job of the candidate's primary occupation is relevance 2, of the related one 1, any other 0
(`with_relevance`). The labels only judge: they are joined after every ranker has scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobrec_core.evaluation.protocols import BM25, ranked_by
from jobrec_core.ranking.metrics import Ranked, diversity, ndcg_at_k, precision_at_k, top_k
from jobrec_core.ranking.scorers import score_column_of
from jobrec_core.ranking.statistics import (
    Interval,
    PairedDifference,
    against_reference,
    bootstrap_mean,
)

PAPER_PRECISION = {BM25: 0.84, "DRMM v1": 0.82}  # P@10 judged by hand, 100 candidates
GRADES = {"primary": 2, "related": 1}  # the occupations' relevance (`data.generate`)


@dataclass(frozen=True)
class GroundTruthRow:
    """One ranker's P@k and nDCG@k with 95% intervals, and its paired P@k difference with the
    reference (BM25: zero by definition), Holm-corrected across the rankers compared."""

    ranker: str
    precision: float
    ndcg: float
    diversity: float
    precision_low: float = float("nan")
    precision_high: float = float("nan")
    ndcg_low: float = float("nan")
    ndcg_high: float = float("nan")
    versus_reference: PairedDifference | None = None
    p_holm: float = float("nan")


@dataclass(frozen=True)
class BaselineComparison:
    """One ranker against a baseline (`evaluation.paired_baseline`: the strong untrained
    `profile-tfidf` unless set), paired per candidate on P@k and on nDCG@k, each p
    Holm-corrected across the rankers compared."""

    ranker: str
    baseline: str
    precision: PairedDifference
    precision_p: float
    ndcg: PairedDifference
    ndcg_p: float


@dataclass(frozen=True)
class GroundTruth:
    rows: list[GroundTruthRow]
    candidates: int
    ceiling: Interval  # the best P@k any order of the same pools could reach
    # The same rows over the candidates whose relevant jobs in the pool include a real ad
    # (scored rows with a `real_ad` column): do the rankings hold on real job text?
    real_ad_rows: list[GroundTruthRow] = field(default_factory=list)
    real_ad_candidates: int = 0
    versus_baseline: list[BaselineComparison] = field(default_factory=list)


def with_relevance(documents: DataFrame, jobs: DataFrame, truth: DataFrame) -> DataFrame:
    """`label` := the job's occupation's relevance to the candidate's latent interests."""
    relevance = F.when(
        F.col("occupation_code").isNotNull(),
        F.element_at("occupation_relevance", F.col("occupation_code")),
    )
    return (
        documents.drop("label")
        .join(jobs.select("job_id", "occupation_code"), "job_id")
        .join(truth.select("candidate_id", "occupation_relevance"), "candidate_id")
        .withColumn("label", F.coalesce(relevance, F.lit(0)).cast("int"))
        .drop("occupation_code", "occupation_relevance")
    )


def ground_truth(
    scored: pd.DataFrame,
    rankers: list[str],
    k: int,
    resamples: int,
    seed: int,
    baseline: str | None = None,
) -> GroundTruth:
    """Labelled rows with one score column per ranker -> per ranker P@k, nDCG@k and diversity
    against the first ranker's top k (the reference, BM25), each with its interval, and the
    paired P@k difference with the reference per candidate; the same over the real-ad slice
    when the rows say which jobs are real ads (`real_ad`); and with a `baseline` among the
    rankers, every other ranker but the reference against it (:class:`BaselineComparison`)."""
    if scored.empty:
        return GroundTruth([], 0, Interval(float("nan"), float("nan"), float("nan")))
    rows, ranked = _judged(scored, rankers, k, resamples, seed)
    reference = ranked[rankers[0]]
    measured = GroundTruth(
        rows,
        reference.queries,
        ceiling(reference, k, resamples, seed),
        versus_baseline=against_baseline(ranked, baseline, k, resamples, seed),
    )
    if "real_ad" not in scored.columns:
        return measured
    relevant_real = scored["real_ad"].astype(bool) & (scored["label"] > 0)
    sliced = scored[scored["candidate_id"].isin(scored.loc[relevant_real, "candidate_id"])]
    if sliced.empty:
        return measured
    slice_rows, slice_ranked = _judged(sliced, rankers, k, resamples, seed)
    queries = slice_ranked[rankers[0]].queries
    return replace(measured, real_ad_rows=slice_rows, real_ad_candidates=queries)


def _judged(
    scored: pd.DataFrame, rankers: list[str], k: int, resamples: int, seed: int
) -> tuple[list[GroundTruthRow], dict[str, Ranked]]:
    """The rows of :func:`ground_truth` and every ranker's ranking, in `rankers`' order."""
    ranked = {name: ranked_by(scored, score_column_of(name)) for name in rankers}
    reference = ranked[rankers[0]]
    reference_top = top_k(reference, k)
    precision = {name: precision_at_k(r, k) for name, r in ranked.items()}
    compared = against_reference(precision, resamples, seed)
    rows = []
    for name, r in ranked.items():
        p_interval = bootstrap_mean(precision[name], resamples, seed)
        n_interval = bootstrap_mean(ndcg_at_k(r, k), resamples, seed)
        versus, p_holm = compared.get(name, (None, float("nan")))
        rows.append(
            GroundTruthRow(
                name,
                p_interval.mean,
                n_interval.mean,
                diversity(top_k(r, k), reference_top, k),
                p_interval.low,
                p_interval.high,
                n_interval.low,
                n_interval.high,
                versus,
                p_holm,
            )
        )
    return rows, ranked


def against_baseline(
    ranked: dict[str, Ranked], baseline: str | None, k: int, resamples: int, seed: int
) -> list[BaselineComparison]:
    """Every ranker but the reference (the first of `ranked`) and the baseline, against the
    baseline; `ranked` is :func:`_judged`'s, so no pool is ranked twice."""
    rankers = list(ranked)
    if baseline is None or baseline not in rankers:
        return []
    compared = [baseline, *(name for name in rankers[1:] if name != baseline)]
    precision = against_reference(
        {name: precision_at_k(ranked[name], k) for name in compared}, resamples, seed
    )
    ndcg = against_reference(
        {name: ndcg_at_k(ranked[name], k) for name in compared}, resamples, seed
    )
    return [
        BaselineComparison(name, baseline, *precision[name], *ndcg[name]) for name in compared[1:]
    ]


def ceiling(ranked: Ranked, k: int, resamples: int, seed: int) -> Interval:
    """The best possible P@k inside each candidate's pool: min(k, relevant jobs in it) / k."""
    relevant = np.add.reduceat((ranked.label > 0).astype(np.float64), ranked.starts)
    return bootstrap_mean(np.minimum(relevant, k) / k, resamples, seed)


def relevant_totals(queries: DataFrame, jobs: DataFrame, truth: DataFrame) -> DataFrame:
    """Queries (`candidate_id, own_job_ids`) -> `candidate_id, primary, related`: how many jobs
    of the whole collection are of the candidate's primary occupation (label 2) and of the
    related one (label 1), their own jobs left out. Their sum is the denominator of a pool's
    recall; by grade they give the best DCG any pool could reach (`ideal_dcg_at_k`), which
    pools that differ are judged against."""
    interests = truth.select(
        "candidate_id", F.explode("occupation_relevance").alias("occupation_code", "relevance")
    ).where(F.col("relevance") > 0)
    occupations = jobs.where(F.col("occupation_code").isNotNull()).select(
        "job_id", "occupation_code"
    )

    def by_grade(counted: DataFrame, prefix: str) -> DataFrame:
        """`candidate_id, <prefix>_primary, <prefix>_related` from rows with a `count`."""
        return counted.groupBy("candidate_id").agg(
            *(
                F.sum(F.when(F.col("relevance") == grade, F.col("count"))).alias(f"{prefix}_{name}")
                for name, grade in GRADES.items()
            )
        )

    in_collection = by_grade(
        interests.join(occupations.groupBy("occupation_code").count(), "occupation_code"), "total"
    )
    own_relevant = by_grade(
        queries.select("candidate_id", F.explode(F.array_distinct("own_job_ids")).alias("job_id"))
        .join(occupations, "job_id")
        .join(interests, ["candidate_id", "occupation_code"])
        .withColumn("count", F.lit(1)),
        "own",
    )
    return (
        queries.select("candidate_id")
        .join(in_collection, "candidate_id", "left")
        .join(own_relevant, "candidate_id", "left")
        .select(
            "candidate_id",
            *((_count(f"total_{name}") - _count(f"own_{name}")).alias(name) for name in GRADES),
        )
    )


def _count(column: str) -> Column:
    """A count a left join left null where there was nothing to count: 0."""
    return F.coalesce(column, F.lit(0))
