"""No recommendation ever holds an expired ad: the index holds the ads live on the day it was
built for, and a later day's recommendations, batch and online, leave out those that closed
since (the batch run counts them)."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest
from pyspark.sql import functions as F

from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.serving.online import Interest, RecommendRequest
from jobrec_core.serving.stage import online_recommender, run_recommend
from jobrec_core.timeline.asof import as_of, live_on

pytestmark = pytest.mark.integration


def test_a_later_day_leaves_out_the_ads_expired_since_the_index_was_built(
    spark, champion, recommended
):
    config, _ = champion
    built_for = as_of(config).day
    assert built_for is not None  # the tiny preset is dated
    later = built_for + timedelta(days=10)
    at_later = config.model_copy(
        update={"run": config.run.model_copy(update={"as_of": later.isoformat()})}
    )
    jobs = read_delta(spark, table_path(config, "silver", "jobs"))
    expired = {r["job_id"] for r in jobs.where(~live_on(later)).select("job_id").collect()}
    indexed_live = jobs.where(live_on(built_for))
    assert indexed_live.where(~live_on(later)).count() > 0  # ads the index holds that closed

    report = run_recommend(spark, at_later, recommended)
    rows = pd.DataFrame(
        read_delta(spark, table_path(config, "gold", "recommendations"))
        .where(F.col("candidate_id").isin(recommended))
        .toPandas()
    )
    assert len(rows) > 0 and not set(rows["job_id"]) & expired
    assert report.expired_recommended == 0 and report.expired_excluded > 0
    assert report.as_of == later.isoformat() and "expired ads left out" in report.format()

    recommender = online_recommender(spark, at_later)  # serving.clock: as_of (local)
    sequences = (
        read_delta(spark, table_path(config, "silver", "candidates"))
        .where(F.col("candidate_id").isin(recommended))
        .collect()
    )
    for row in sequences:
        request = RecommendRequest(
            tuple(Interest(e["job_id"], e["score"]) for e in row["sequence"]),
            int(row["candidate_id"]),
        )
        answer = recommender.recommend(request)
        assert answer.recommendations and not {r.job_id for r in answer.recommendations} & expired


def test_by_the_wall_clock_every_generated_ad_has_closed(spark, champion, recommended):
    """`serving.clock: wall`: the generated ads' dates end in 2025, so today nothing of theirs
    is live, and nothing is recommended."""
    config, _ = champion
    walled = config.model_copy(
        update={"serving": config.serving.model_copy(update={"clock": "wall"})}
    )
    recommender = online_recommender(spark, walled)
    row = (
        read_delta(spark, table_path(config, "silver", "candidates"))
        .where(F.col("candidate_id") == recommended[0])
        .first()
    )
    assert row is not None
    request = RecommendRequest(tuple(Interest(e["job_id"], e["score"]) for e in row["sequence"]))
    assert recommender.recommend(request).recommendations == []
