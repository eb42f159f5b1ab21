"""Ground truth: each ranker's top k judged against the generator's latent interests.

A job of the candidate's primary occupation is relevance 2, of the related one 1, any other 0
(`with_relevance`). The labels only judge: they are joined after every ranker has scored.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.evaluation.protocols import BM25, ranked_by
from jobrec_core.ranking.metrics import diversity, ndcg_at_k, precision_at_k, top_k
from jobrec_core.ranking.scorers import score_column_of

PAPER_PRECISION = {BM25: 0.84, "DRMM v1": 0.82}  # P@10 judged by hand, 100 candidates


@dataclass(frozen=True)
class GroundTruthRow:
    ranker: str
    precision: float
    ndcg: float
    diversity: float


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


def ground_truth_rows(scored: pd.DataFrame, rankers: list[str], k: int) -> list[GroundTruthRow]:
    """P@k, nDCG@k and diversity against the first ranker's top k (BM25), per ranker, from
    labelled rows with one score column per ranker."""
    reference_top = top_k(ranked_by(scored, score_column_of(rankers[0])), k)
    rows = []
    for name in rankers:
        ranked = ranked_by(scored, score_column_of(name))
        rows.append(
            GroundTruthRow(
                name,
                float(precision_at_k(ranked, k).mean()),
                float(ndcg_at_k(ranked, k).mean()),
                diversity(top_k(ranked, k), reference_top, k),
            )
        )
    return rows
