"""The run's as-of date, and the views of the dated tables at a date.

A dataset is dated when its ads carry `posted_at` / `expires_at` or its interests an `at`
(`data.ingest`); ingest records the data's last date in the manifest. `run.as_of` names the
date every stage runs as of: `latest` (that last date), `latest-<n>d`, or a date. An ad is
live on day `d` when `posted_at <= d < expires_at` (`expires_at` is the first day it is not;
a null date is open-ended). An interest exists at `d` when `at <= d`.

Undated data has no last date: the as-of day is None and every view returns its input, so the
pipeline computes what it computed before dates existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobrec_core.config import AS_OF, JobrecConfig
from jobrec_core.platform import manifest


@dataclass(frozen=True)
class AsOf:
    """The data's last date and the day the run sees the data as of (both None: undated)."""

    day: date | None
    last_date: date | None

    @property
    def dated(self) -> bool:
        return self.day is not None

    def describe(self) -> str:
        if self.day is None:
            return "undated data: every record counts"
        return f"as of {self.day.isoformat()} (the data's last date: {self.last_date})"


def resolve_as_of(setting: str, last_date: date | None) -> date | None:
    """The day `run.as_of` names for data whose last date is `last_date` (None: undated, and
    so is the answer): `latest`, `latest-<n>d` or a date, never after the last date."""
    if last_date is None:
        return None
    match = AS_OF.fullmatch(setting)
    if match is None:
        raise ValueError(f"run.as_of {setting!r}: expected latest, latest-<n>d or YYYY-MM-DD")
    if match.group("date"):
        day = date.fromisoformat(setting)
        if day > last_date:
            raise ValueError(
                f"run.as_of {setting} is after the data's last date {last_date}: nothing "
                f"exists then yet"
            )
        return day
    return last_date - timedelta(days=int(match.group("days") or 0))


def as_of(config: JobrecConfig) -> AsOf:
    """The run's as-of date for the dataset ingest last recorded (`manifest` entry
    `ingest`: its last date, and whether anything is dated)."""
    try:
        ingested = manifest.current(config, "ingest")
    except LookupError:
        raise LookupError(
            f"no ingest of {config.data.preset!r} recorded: run jobs/ingest.py first"
        ) from None
    if not ingested.get("dated"):
        return AsOf(None, None)
    last = date.fromisoformat(str(ingested["last_date"]))
    return AsOf(resolve_as_of(config.run.as_of, last), last)


# --- ads ------------------------------------------------------------------------------------


def posted_by(day: date) -> Column:
    """Whether an ad (`posted_at`) was posted by `day`: it exists, live or expired."""
    return F.col("posted_at").isNull() | (F.col("posted_at") <= F.lit(day))


def live_on(day: date) -> Column:
    """Whether an ad (`posted_at`, `expires_at`) is live on `day`."""
    return posted_by(day) & (F.col("expires_at").isNull() | (F.col("expires_at") > F.lit(day)))


def live_between(first: date, last: date) -> Column:
    """Whether an ad is live on at least one day from `first` to `last`."""
    return posted_by(last) & (F.col("expires_at").isNull() | (F.col("expires_at") > F.lit(first)))


def posted_between(first: date, last: date) -> Column:
    """Whether an ad was posted from `first` to `last` (an undated ad never was)."""
    return F.col("posted_at").between(F.lit(first), F.lit(last))


def jobs_posted_by(jobs: DataFrame, day: date | None) -> DataFrame:
    """The ads that exist on `day` (every ad when None)."""
    return jobs if day is None else jobs.where(posted_by(day))


def jobs_live_on(jobs: DataFrame, day: date | None) -> DataFrame:
    """The ads live on `day` (every ad when None)."""
    return jobs if day is None else jobs.where(live_on(day))


# --- interest -------------------------------------------------------------------------------


def interest_by(candidates: DataFrame, day: date | None, column: str = "sequence") -> DataFrame:
    """Each candidate's interest shown by `day` (`column`: the `{job_id, score, at}` list,
    in order); a candidate with none by then had not arrived and is left out. Every
    candidate as it is when `day` is None."""
    if day is None:
        return candidates
    shown = F.filter(column, lambda e: e["at"].isNull() | (e["at"] <= F.lit(day)))
    return candidates.withColumn(column, shown).where(F.size(column) > 0)


def interest_between(
    candidates: DataFrame, first: date, last: date, column: str = "sequence"
) -> DataFrame:
    """Each candidate's interest shown from `first` to `last` (dated elements only); those
    with none are left out."""
    shown = F.filter(column, lambda e: e["at"].between(F.lit(first), F.lit(last)))
    return candidates.withColumn(column, shown).where(F.size(column) > 0)
