"""Progress of long steps, logged while they run.

A stage's long step is one Spark action (a Delta write, a count) that can run for many minutes
without a line of output. :func:`spark_progress` tags the Spark jobs that the block starts, and a
daemon thread on the driver reads their running stages from Spark's status tracker every few
seconds: how many of the stage's partitions are done, the time elapsed, and the time left at the
pace seen so far. It collects nothing and runs nothing on the executors, so the tables a step
writes are the same with or without it. The lines go through `logging`, to stderr locally and to
the driver's log on a cluster.

A job tag, not a job group: tags are per thread, like groups, so another task's jobs on a shared
job cluster are not counted; unlike a group, a tag leaves the runtime's own group (which
Databricks uses to cancel a run) in place. Where the session has no `SparkContext` (Spark
Connect), the lines say only that the step is still running.

:func:`periodic_log` is the thread alone, for progress read from elsewhere (the Elasticsearch
index's document count while the connector writes).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark import SparkContext
from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Seconds between two progress lines (read at each call, so that a test can shorten it).
INTERVAL_S = 15.0


def format_duration(seconds: float) -> str:
    """`4.2s`, `42s`, `3m05s`, `1h02m`: as precise as a person reading a log needs."""
    if round(seconds, 1) < 10:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def eta_seconds(done: float, total: float, elapsed: float) -> float | None:
    """The time the rest of `total` takes at the pace of `done` in `elapsed` seconds; None
    before anything is done (no pace yet)."""
    if done <= 0 or elapsed <= 0:
        return None
    return max(total - done, 0) * elapsed / done


class Pace:
    """The time left of a piece of work, at the pace seen since it was first observed.

    The reporter sees a stage only once it polls, possibly after some of its partitions are
    done: counting from that first observation (not from zero at the block's start) keeps the
    estimate honest for a stage that started before it was seen."""

    def __init__(self) -> None:
        self._first: dict[Hashable, tuple[float, float]] = {}

    def remaining(self, key: Hashable, done: float, total: float, now: float) -> float | None:
        seen_at, done_then = self._first.setdefault(key, (now, done))
        return eta_seconds(done - done_then, total - done_then, now - seen_at)


@dataclass(frozen=True)
class StageTasks:
    stage_id: int
    tasks: int
    completed: int


@dataclass(frozen=True)
class SparkProgress:
    """A block's Spark jobs at one moment: the stages running now and the jobs finished."""

    running: tuple[StageTasks, ...]
    finished_jobs: int

    @property
    def key(self) -> tuple[int, ...]:
        """The running stages, what one pace is measured over."""
        return tuple(stage.stage_id for stage in self.running)

    @property
    def done(self) -> int:
        return sum(stage.completed for stage in self.running)

    @property
    def total(self) -> int:
        return sum(stage.tasks for stage in self.running)

    def describe(self, label: str, elapsed: float, remaining: float | None) -> str:
        jobs = self.finished_jobs
        finished = f" ({jobs} Spark job{'s' if jobs != 1 else ''} done)" if jobs else ""
        timing = f"{format_duration(elapsed)} elapsed"
        if not self.running:
            return f"{label}: no stage running{finished}; {timing}"
        stages = ", ".join(str(stage_id) for stage_id in self.key)
        line = (
            f"{label}: {self.done:,} of {self.total:,} partitions done in stage "
            f"{stages}{finished}; {timing}"
        )
        if remaining is not None:
            line += f", about {format_duration(remaining)} left in this stage"
        return line


@contextmanager
def periodic_log(
    describe: Callable[[float], str | None],
    every_s: float | None = None,
    logger: logging.Logger = log,
) -> Iterator[None]:
    """While the block runs, log `describe(seconds since the start)` every `every_s` seconds
    (default :data:`INTERVAL_S`) from a daemon thread. A `describe` that returns None or fails
    logs nothing that time: a progress line must never fail the work it reports on."""
    interval = INTERVAL_S if every_s is None else every_s
    stop = threading.Event()
    started = time.monotonic()

    def report() -> None:
        while not stop.wait(interval):
            try:
                line = describe(time.monotonic() - started)
            except Exception as error:  # py4j or the cluster may fail mid-poll
                logger.debug("progress not available: %s", error)
                continue
            if line is not None:
                logger.info("%s", line)

    thread = threading.Thread(target=report, name="jobrec-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=interval + 5)


@contextmanager
def spark_progress(spark: SparkSession, label: str, every_s: float | None = None) -> Iterator[None]:
    """Log `label` when the block starts, its Spark jobs' progress while it runs (see the
    module) and how long it took when it ends."""
    context = _spark_context(spark)
    tag = f"jobrec-progress-{uuid.uuid4().hex}"
    pace = Pace()

    def describe(elapsed: float) -> str:
        if context is None:
            return f"{label}: running; {format_duration(elapsed)} elapsed"
        progress = spark_jobs_progress(context, tag)
        remaining = pace.remaining(progress.key, progress.done, progress.total, elapsed)
        return progress.describe(label, elapsed, remaining)

    log.info("%s ...", label)
    started = time.monotonic()
    if context is not None:
        context.addJobTag(tag)
    try:
        with periodic_log(describe, every_s):
            yield
    except BaseException:
        log.warning("%s: failed after %s", label, format_duration(time.monotonic() - started))
        raise
    finally:
        if context is not None:
            context.removeJobTag(tag)
    log.info("%s: done in %s", label, format_duration(time.monotonic() - started))


def spark_jobs_progress(context: SparkContext, tag: str) -> SparkProgress:
    """The running stages and the finished jobs among the jobs tagged `tag`, from the status
    tracker (the driver's own bookkeeping: no job runs to answer)."""
    tracker = context.statusTracker()
    # PySpark's StatusTracker has no getJobIdsForTag; the JVM's has (Spark 3.5).
    job_ids = list(context._jsc.sc().statusTracker().getJobIdsForTag(tag))
    active = set(tracker.getActiveStageIds())
    finished, running = 0, {}
    for job_id in job_ids:
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        if job.status in ("SUCCEEDED", "FAILED"):
            finished += 1
            continue
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id) if stage_id in active else None
            if stage is not None:
                running[stage_id] = StageTasks(stage_id, stage.numTasks, stage.numCompletedTasks)
    return SparkProgress(tuple(running[s] for s in sorted(running)), finished)


def _spark_context(spark: SparkSession) -> SparkContext | None:
    """The session's `SparkContext`, or None under Spark Connect, which has none."""
    try:
        return spark.sparkContext
    except Exception:
        return None
