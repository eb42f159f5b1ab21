"""Progress of a Spark step on real Spark: its lines while the jobs run, and nothing left behind."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator

import pandas as pd
import pytest

from jobrec_core.platform.progress import spark_progress

pytestmark = pytest.mark.integration


def _slow(batches: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for batch in batches:
        time.sleep(0.5)
        yield batch


def _reporters() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "jobrec-progress" and t.is_alive()]


def test_a_step_reports_its_partitions_while_it_runs_and_stops_cleanly(spark, caplog):
    caplog.set_level(logging.INFO, logger="jobrec_core.platform.progress")
    frame = spark.range(0, 64, numPartitions=8).mapInPandas(_slow, "id LONG")
    with spark_progress(spark, "slow step", every_s=0.2):
        total = frame.groupBy().sum("id").first()[0]
    assert total == sum(range(64))  # the result is the result
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "slow step ..."
    progress = [line for line in lines if " of 8 partitions done in stage " in line]
    assert progress, lines
    assert lines[-1].startswith("slow step: done in ")
    assert not _reporters()
    assert len(spark.sparkContext.getJobTags()) == 0  # the tag is gone


def test_a_failing_step_says_so_and_leaves_nothing_behind(spark, caplog):
    caplog.set_level(logging.INFO, logger="jobrec_core.platform.progress")
    with pytest.raises(Exception, match="ZeroDivisionError"), spark_progress(spark, "bad step"):
        spark.range(0, 4, numPartitions=2).selectExpr("id").rdd.map(lambda r: 1 // 0).count()
    assert caplog.records[-1].getMessage().startswith("bad step: failed after ")
    assert not _reporters()
    assert len(spark.sparkContext.getJobTags()) == 0  # the tag is gone
