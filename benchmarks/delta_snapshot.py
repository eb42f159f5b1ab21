"""The fixed cost of Delta operations on small tables: the local configuration's
`spark.databricks.delta.snapshotPartitions` against Delta's default of 50.

    .venv/bin/python benchmarks/delta_snapshot.py [--rounds 5] [--rows 1000]

Every time Delta reads a table version it has not seen (a read after a write, a MERGE, a
time-travel read), it rebuilds the table's state from its log in `snapshotPartitions` tasks.
On a cluster 50 spreads a large log over many cores; on 2 cores the 50 tasks of a small log
are mostly scheduling. The pipeline writes and reads dozens of tables per stage, so this is a
fixed cost of nearly every step (docs/BENCHMARKS.md, "Delta's table state in 2 tasks").

One Spark session, the two settings in turns, each round on fresh tables: write, overwrite,
read back, MERGE, read the version before the MERGE. A first round of each setting warms the
JVM and is not counted. Printed: the median seconds of each operation and of the round, and
the Spark jobs a round runs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, config_from_args

SETTING = "spark.databricks.delta.snapshotPartitions"
DELTA_DEFAULT = "50"
OPERATIONS = ("write", "overwrite", "read", "merge", "time travel")


def rows(spark: SparkSession, count: int, offset: int = 0) -> DataFrame:
    return spark.range(offset, offset + count).select(
        F.col("id").cast("int").alias("job_id"),
        F.concat(F.lit("title "), F.col("id").cast("string")).alias("title"),
        (F.col("id") % 10).cast("int").alias("score"),
    )


def one_round(spark: SparkSession, folder: Path, count: int) -> dict[str, float]:
    """Seconds of each operation on a fresh table of `count` rows."""
    path = str(folder)
    seconds: dict[str, float] = {}

    def timed(name: str, operation: Callable[[], object]) -> None:
        start = time.perf_counter()
        operation()
        seconds[name] = time.perf_counter() - start

    timed("write", lambda: rows(spark, count).write.format("delta").save(path))
    timed(
        "overwrite", lambda: rows(spark, count).write.format("delta").mode("overwrite").save(path)
    )
    timed("read", lambda: spark.read.format("delta").load(path).count())
    updates = rows(spark, count // 10, offset=count - count // 20)
    timed(
        "merge",
        lambda: DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(updates.alias("u"), "t.job_id = u.job_id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute(),
    )
    timed(
        "time travel",
        lambda: spark.read.format("delta").option("versionAsOf", 1).load(path).count(),
    )
    seconds["round"] = sum(seconds.values())
    return seconds


def jobs_so_far(spark: SparkSession) -> int:
    """Spark jobs started in this session (job ids are consecutive)."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())


def main(argv: list[str] | None = None) -> int:
    parser = add_common_arguments(
        argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    )
    parser.add_argument("--rounds", type=int, default=5, help="counted rounds per setting")
    parser.add_argument("--rows", type=int, default=1000, help="rows of each table")
    args = parser.parse_args(argv)
    config = config_from_args(args)
    configured = config.spark.conf.get(SETTING, DELTA_DEFAULT)
    spark = get_spark(config)
    settings = {"baseline: Delta's default": DELTA_DEFAULT, "subject: conf/": configured}
    timings: dict[str, list[dict[str, float]]] = {label: [] for label in settings}
    jobs: dict[str, list[int]] = {label: [] for label in settings}
    scratch = Path(tempfile.mkdtemp(prefix="jobrec-delta-bench-"))
    try:
        for round_number in range(args.rounds + 1):
            for label, value in settings.items():
                spark.conf.set(SETTING, value)
                folder = scratch / f"{round_number}-{value}"
                before = jobs_so_far(spark)
                seconds = one_round(spark, folder, args.rows)
                if round_number > 0:  # the first round of each setting warms the JVM
                    timings[label].append(seconds)
                    jobs[label].append(jobs_so_far(spark) - before)
                shutil.rmtree(folder, ignore_errors=True)
            print(f"round {round_number} of {args.rounds} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        spark.conf.set(SETTING, configured)

    print(f"\nDelta on {config.spark.master}, {args.rows:,} rows, median of {args.rounds} rounds")
    header = ["setting", SETTING.rsplit(".", 1)[-1], *OPERATIONS, "round", "jobs"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for label, value in settings.items():
        medians = [
            statistics.median(t[name] for t in timings[label]) for name in (*OPERATIONS, "round")
        ]
        cells = [
            label,
            value,
            *(f"{m:.2f} s" for m in medians),
            str(statistics.median(jobs[label])),
        ]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
