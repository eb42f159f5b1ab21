"""The paper's rule filters on candidates, as Spark column expressions."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobrec_core.config import CleaningConfig


def apply_rules(candidates: DataFrame, rules: CleaningConfig) -> DataFrame:
    """The paper's rules: at least `min_jobs` jobs and a top score of at least `min_top_score`."""
    return candidates.where(
        (F.size("sequence") >= rules.min_jobs)
        & (F.array_max("sequence.score") >= rules.min_top_score)
    )


def positive_job(sequence: Column) -> Column:
    """The highest-scored job; on a tie, the most recent (latest in the sequence)."""
    ranked = F.transform(
        sequence,
        lambda e, i: F.struct(
            e["score"].alias("score"), i.alias("pos"), e["job_id"].alias("job_id")
        ),
    )
    return F.array_max(ranked)["job_id"]
