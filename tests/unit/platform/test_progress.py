"""The progress lines of long steps: durations, the time left, the line, the reporting thread."""

from __future__ import annotations

import logging
import threading
import time
from itertools import pairwise

import pytest

from jobrec_core.platform.progress import (
    Pace,
    SparkProgress,
    StageTasks,
    eta_seconds,
    format_duration,
    periodic_log,
)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.04, "0.0s"), (4.25, "4.2s"), (9.96, "10s"), (42.4, "42s"), (59.6, "1m00s"),
     (185, "3m05s"), (3599.4, "59m59s"), (3600, "1h00m"), (3725, "1h02m")],
)  # fmt: skip
def test_durations_are_as_precise_as_a_reader_needs(seconds, shown):
    assert format_duration(seconds) == shown


def test_the_time_left_is_the_rest_at_the_pace_so_far():
    assert eta_seconds(done=25, total=100, elapsed=10) == pytest.approx(30)
    assert eta_seconds(done=100, total=100, elapsed=10) == 0
    assert eta_seconds(done=0, total=100, elapsed=10) is None  # no pace yet
    assert eta_seconds(done=5, total=100, elapsed=0) is None


def test_the_pace_counts_from_when_the_work_was_first_seen():
    pace = Pace()
    # First seen at 100 s with 40 of 100 done: no pace yet, not 40 done in 100 s.
    assert pace.remaining((3,), done=40, total=100, now=100) is None
    # 20 more in the next 10 s: the other 40 take 20 s.
    assert pace.remaining((3,), done=60, total=100, now=110) == pytest.approx(20)
    # Another stage has its own pace.
    assert pace.remaining((4,), done=0, total=10, now=110) is None


def test_a_line_says_the_running_stages_partitions_the_jobs_done_and_the_time():
    progress = SparkProgress((StageTasks(14, 200, 37), StageTasks(15, 1000, 3)), finished_jobs=4)
    assert progress.key == (14, 15)
    assert progress.describe("cleaning", elapsed=130, remaining=220.4) == (
        "cleaning: 40 of 1,200 partitions done in stage 14, 15 (4 Spark jobs done); "
        "2m10s elapsed, about 3m40s left in this stage"
    )
    assert SparkProgress((StageTasks(0, 8, 0),), finished_jobs=0).describe(
        "cleaning", elapsed=5, remaining=None
    ) == ("cleaning: 0 of 8 partitions done in stage 0; 5.0s elapsed")


def test_between_stages_a_line_says_none_is_running():
    assert SparkProgress((), finished_jobs=1).describe("pairs", elapsed=42, remaining=None) == (
        "pairs: no stage running (1 Spark job done); 42s elapsed"
    )


def _reporters() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "jobrec-progress" and t.is_alive()]


def test_lines_come_while_the_block_runs_and_the_thread_stops_with_it(caplog):
    caplog.set_level(logging.INFO, logger="jobrec_core.platform.progress")
    calls = []

    def describe(elapsed: float) -> str | None:
        calls.append(elapsed)
        if len(calls) == 2:
            raise RuntimeError("the status tracker is gone")  # skipped, never raised
        return None if len(calls) == 3 else f"line {len(calls)}"

    with periodic_log(describe, every_s=0.02):
        while len(calls) < 5:
            time.sleep(0.01)
    count = len(calls)
    time.sleep(0.1)
    assert len(calls) == count  # nothing after the block
    assert not _reporters()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:2] == ["line 1", "line 4"]
    assert all(later > earlier for earlier, later in pairwise(calls))


def test_the_thread_stops_when_the_block_fails():
    with pytest.raises(ValueError), periodic_log(lambda elapsed: None, every_s=0.01):
        raise ValueError("the work failed")
    assert not _reporters()
