"""Bad input: quarantined with a reason, counted, and fatal only past an error budget.

A validation step marks each record with a `reason` (null when the record is fine) and a
`detail`. :func:`split_quarantine` separates the two; :func:`write_quarantine` stores the bad
records, with the raw record as received, in one quarantine table per dataset, replacing
only the rows of that source so a rerun never duplicates them; :func:`enforce_budget` fails
the job with the counts per reason when too large a share of a source was bad.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.platform.tables import read_delta, write_delta

MAX_RECORD_CHARS = 10_000
QUARANTINE_COLUMNS = ("source", "reason", "detail", "record", "quarantined_at")


class DataQualityError(RuntimeError):
    """Too many bad records: the job stops rather than publish a partial table."""


@dataclass(frozen=True)
class QualityReport:
    source: str
    read: int
    valid: int
    quarantined: dict[str, int] = field(default_factory=dict)

    @property
    def bad(self) -> int:
        return sum(self.quarantined.values())

    @property
    def bad_fraction(self) -> float:
        return self.bad / self.read if self.read else 0.0

    def format(self) -> str:
        lines = [
            f"{self.source}: {self.read:,} read, {self.valid:,} valid, {self.bad:,} quarantined"
        ]
        for reason, count in sorted(self.quarantined.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {reason:<24} {count:>10,}")
        return "\n".join(lines)


def first_failure(checks: list[tuple[str, Column, Column | str]]) -> tuple[Column, Column]:
    """(reason, detail) columns: the first check whose condition holds, else nulls.

    `checks` are (reason, condition, detail) in priority order; a null condition counts as
    false, so checks may assume the earlier ones passed.
    """
    reason: Column = F.lit(None).cast("string")
    detail: Column = F.lit(None).cast("string")
    for name, condition, text in reversed(checks):
        hit = F.coalesce(condition, F.lit(False))
        reason = F.when(hit, F.lit(name)).otherwise(reason)
        detail = F.when(hit, text if isinstance(text, Column) else F.lit(text)).otherwise(detail)
    return reason, detail


def split_quarantine(marked: DataFrame, source: str, record: str) -> tuple[DataFrame, DataFrame]:
    """(valid rows, quarantine rows) of a DataFrame with `reason` and `detail` columns."""
    valid = marked.where(F.col("reason").isNull()).drop("reason", "detail")
    bad = marked.where(F.col("reason").isNotNull()).select(
        F.lit(source).alias("source"),
        "reason",
        "detail",
        F.substring(F.col(record), 1, MAX_RECORD_CHARS).alias("record"),
        F.current_timestamp().alias("quarantined_at"),
    )
    return valid, bad


def count_reasons(quarantine: DataFrame) -> dict[str, int]:
    return {
        row["reason"]: int(row["count"]) for row in quarantine.groupBy("reason").count().collect()
    }


def write_quarantine(quarantine: DataFrame, path: str, source: str) -> None:
    write_delta(quarantine, path, replace_where=f"source = '{source}'", partition_by=["source"])


def has_quarantined(spark: SparkSession, path: str, source: str) -> bool:
    """Whether the quarantine table holds rows of `source` (False when there is no table)."""
    try:
        return bool(read_delta(spark, path).where(F.col("source") == source).limit(1).count())
    except AnalysisException:
        return False


def enforce_budget(report: QualityReport, budget_fraction: float) -> None:
    if report.bad_fraction > budget_fraction:
        raise DataQualityError(
            f"{report.source}: {report.bad:,} of {report.read:,} records "
            f"({report.bad_fraction:.2%}) are bad, over the error budget of "
            f"{budget_fraction:.2%} (quality.error_budget_fraction). The bad records are in "
            f"the quarantine table with their reasons.\n{report.format()}"
        )
