"""Where tables live and how they are written.

Tables are Delta folders under `storage.root/<dataset>/<layer>/<name>`: the dataset is the
data preset (tiny, demo, seed) so that datasets of several sizes live side by side, and the
layers are the usual raw (files as delivered), bronze (typed, validated), silver (cleaned)
and gold (model inputs and outputs). Every write replaces what it owns, so a rerun leaves
the same table as the first run, never duplicates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession

from jobrec_core.config import JobrecConfig
from jobrec_core.platform.paths import local_path

Layer = Literal["raw", "bronze", "silver", "gold", "reports"]


def table_path(config: JobrecConfig, layer: Layer, name: str) -> str:
    return config.path(f"{config.data.preset}/{layer}/{name}")


@dataclass(frozen=True)
class RawLocations:
    """The files as delivered: jobs (JSON lines), candidates (the paper's TSV), the export's
    description (`export.json`: `{"last_date": "YYYY-MM-DD"}`, the data's last date), and
    for generated data the candidates' ground truth (Delta)."""

    jobs: str
    candidates: str
    ground_truth: str
    export: str

    @staticmethod
    def of(config: JobrecConfig) -> RawLocations:
        return RawLocations(
            jobs=table_path(config, "raw", "jobs"),
            candidates=table_path(config, "raw", "candidates"),
            ground_truth=table_path(config, "raw", "ground_truth_candidates"),
            export=table_path(config, "raw", "export.json"),
        )


def write_delta(
    df: DataFrame,
    path: str,
    replace_where: str | None = None,
    partition_by: list[str] | None = None,
    note: str | None = None,
) -> None:
    """Overwrite a Delta table, or only the rows matching `replace_where` (idempotent reruns).
    `note` goes into the commit's `userMetadata` (:func:`last_note`)."""
    writer = df.write.format("delta").mode("overwrite")
    if replace_where is not None:
        writer = writer.option("replaceWhere", replace_where)
    else:
        writer = writer.option("overwriteSchema", "true")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if note is not None:
        writer = writer.option("userMetadata", note)
    writer.save(path)


def append_delta(df: DataFrame, path: str, note: str | None = None) -> None:
    """Append to a Delta table in one commit (all of `df` or none of it), with `note` in the
    commit's `userMetadata`."""
    writer = df.write.format("delta").mode("append")
    if note is not None:
        writer = writer.option("userMetadata", note)
    writer.save(path)


def last_note(spark: SparkSession, path: str) -> str | None:
    """The `userMetadata` of the table's latest commit; None without a table or a note."""
    from delta.tables import DeltaTable

    if not is_delta_table(spark, path):
        return None
    row = DeltaTable.forPath(spark, path).history(1).select("userMetadata").first()
    return None if row is None else row["userMetadata"]


def read_delta(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    """The Delta table at `path`: its latest version, or `version` (what a derived artifact
    recorded it was built from)."""
    reader = spark.read.format("delta")
    return (reader if version is None else reader.option("versionAsOf", version)).load(path)


def is_delta_table(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table exists at `path` (a first run, or no ground truth for real data)."""
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, path))


def delta_version(spark: SparkSession, path: str) -> int:
    """The current version of a Delta table (what a derived artifact was built from)."""
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, path).history(1).select("version").first()
    assert row is not None
    return int(row["version"])


def content_fingerprint(frame: DataFrame) -> str:
    """The rows of `frame`, order-free: their count and the sum of their 64-bit hashes.
    Rewriting a table with the same rows gives a new Delta version but the same fingerprint,
    so what is derived from it can keep its name across reruns."""
    from pyspark.sql import functions as F

    row = frame.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.xxhash64(*frame.columns).cast("decimal(38,0)")).alias("hashes"),
    ).first()
    assert row is not None
    return f"{row['rows']}-{row['hashes'] or 0}"


def snapshot_files(spark: Any, table: str, split: str) -> list[str]:
    """URLs of the Parquet files of the table's current Delta snapshot in one split."""
    return split_snapshot_files(spark, table, (split,))[split]


def split_snapshot_files(spark: Any, table: str, splits: Sequence[str]) -> dict[str, list[str]]:
    """Per split, the URLs of the Parquet files of the table's current Delta snapshot: one
    listing of the snapshot for all of them, since each listing plans a Spark query (half a
    second on 2 cores, whatever the table's size)."""
    files = [local_path(f) for f in read_delta(spark, table).inputFiles()]
    return {
        split: sorted(_file_url(f) for f in files if f"/split={split}/" in f) for split in splits
    }


def _file_url(path: str) -> str:
    return path if "://" in path else "file://" + path
