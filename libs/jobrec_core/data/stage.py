"""Stage 0: the dataset's files and their ingestion; the only module of `data/` that reads or
writes tables and files.

* :func:`generate_dataset`: the raw files of a preset (jobs as JSON lines, candidates in the
  paper's TSV, the generator's ground truth), generated in Spark from the reference data and
  the real ads (`data.generate`);
* :func:`ingest_raw`: the raw files -> bronze/silver Delta tables, bad records quarantined with
  a reason within the error budget (`data.ingest`).
"""

from __future__ import annotations

import json
import logging
import math
import re
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig
from jobrec_core.data.generate import (
    CANDIDATE_SCHEMA,
    JOB_SCHEMA,
    GenerationPlan,
    ad_calendar,
    assign_job_occupations,
    format_raw_candidates,
    generate_candidate_blocks,
    generate_job_blocks,
    ground_truth,
    real_ads_to_jobs,
)
from jobrec_core.data.ingest import CANDIDATES_HEADER, validate_candidates, validate_jobs
from jobrec_core.platform import manifest
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.quarantine import (
    DataQualityError,
    QualityReport,
    enforce_budget,
    write_quarantine,
)
from jobrec_core.platform.tables import RawLocations, read_delta, table_path, write_delta
from jobrec_core.taxonomy.onet import load_catalogue, match_title
from jobrec_core.taxonomy.real_ads import read_real_ads
from jobrec_core.taxonomy.titles import split_titles
from jobrec_core.text.tokens import load_stopwords

log = logging.getLogger(__name__)


def generate_dataset(spark: SparkSession, config: JobrecConfig) -> dict[str, int]:
    """Write the raw jobs (JSON lines), raw candidates (the paper's TSV with Python-literal
    sequences) and the candidates' ground truth (Delta) of the configured preset."""
    settings = config.data
    sizes = settings.sizes()
    n_generated = sizes.generated_jobs
    catalogue = load_catalogue(settings.reference_dir)
    stopwords = load_stopwords(tuple(config.text.stopword_languages))
    job_occupation = np.full(sizes.jobs, -1, dtype=np.int32)
    job_occupation[:n_generated] = assign_job_occupations(
        n_generated, catalogue, settings.occupation_popularity_sigma, config.run.seed
    )
    ads = read_real_ads(spark, settings.reference_dir, sizes.real_ads, first_job_id=n_generated + 1)
    title_index = catalogue.title_index()
    published = []
    for job_id, title, published_at in (
        ads.select("job_id", "title", "publishedAt").orderBy("job_id").collect()
    ):
        matched = match_title(title or "", title_index)
        if matched is not None:
            job_occupation[job_id - 1] = matched
        published.append(published_at or "")
    every_real_title = [
        r.title for r in read_real_ads(spark, settings.reference_dir).select("title").collect()
    ]
    titles = split_titles(catalogue, every_real_title, config.titles.split_seed)
    calendar = ad_calendar(
        job_occupation, np.array(published, dtype=object), settings, len(catalogue), config.run.seed
    )
    plan = GenerationPlan(
        catalogue, settings, config.run.seed, stopwords, job_occupation, titles.generator, calendar
    )
    shared = spark.sparkContext.broadcast(plan)
    locations = RawLocations.of(config)
    write_export(locations.export, settings.timeline.end_date if calendar is not None else None)

    log.info("generating %d jobs (%d real ads) into %s", sizes.jobs, sizes.real_ads, locations.jobs)
    job_blocks = math.ceil(n_generated / settings.jobs_per_task)
    generated = (
        spark.range(job_blocks, numPartitions=max(job_blocks, 1))
        .withColumnRenamed("id", "block")
        .mapInPandas(lambda frames: generate_job_blocks(frames, shared.value), JOB_SCHEMA)
    )
    real = ads.mapInPandas(
        lambda frames: real_ads_to_jobs(frames, shared.value, title_index), JOB_SCHEMA
    )
    generated.unionByName(real).write.mode("overwrite").json(locations.jobs)

    log.info("generating %d candidates into %s", sizes.candidates, locations.candidates)
    candidate_blocks = math.ceil(sizes.candidates / settings.candidates_per_task)
    candidates = (
        spark.range(candidate_blocks, numPartitions=candidate_blocks)
        .mapInArrow(
            lambda batches: generate_candidate_blocks(batches, shared.value), CANDIDATE_SCHEMA
        )
        .persist(StorageLevel.DISK_ONLY)
    )
    try:
        format_raw_candidates(candidates).write.mode("overwrite").option("sep", "\t").option(
            "header", "true"
        ).csv(locations.candidates)
        write_delta(ground_truth(candidates), locations.ground_truth)
        # on a timeline, those who showed no interest by its last day are not written
        written = sizes.candidates if calendar is None else candidates.count()
    finally:
        candidates.unpersist()
    shared.unpersist()
    return {
        "jobs": sizes.jobs,
        "real_ads": sizes.real_ads,
        "labelled_real_ads": int(np.count_nonzero(job_occupation[n_generated:] >= 0)),
        "candidates": written,
    }


def write_export(path: str, last_date: str | None) -> None:
    """The export's own record of its last date (`raw/export.json`), which ingest reads
    (`data_last_date`): nothing in a dated export is dated after it. An undated export has
    none, and any earlier one is removed."""
    target = Path(local_path(path))
    if last_date is None:
        target.unlink(missing_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"last_date": last_date}) + "\n", encoding="utf-8")


def read_candidate_lines(spark: SparkSession, path: str) -> DataFrame:
    """The lines of the raw candidate files, without headers and blank lines."""
    return spark.read.text(path).where(
        (F.col("value") != CANDIDATES_HEADER) & (F.trim("value") != "")
    )


def _refuse_empty_input(spark: SparkSession, lines: DataFrame, path: str, source: str) -> None:
    """Raise :class:`DataQualityError` when `lines` (those read from `path`) hold no record.

    Nothing read is nothing bad, so an empty input passes any error budget and would replace
    good bronze tables with empty ones: it is refused, before anything is written.
    """
    if not lines.isEmpty():
        return
    # Only on failure: a second pass over files that hold no record is cheap.
    skipped = spark.read.text(path).count()
    lines_skipped = f" ({skipped:,} header or blank lines skipped)" if skipped else ""
    raise DataQualityError(
        f"{source}: no records in {path}{lines_skipped}; nothing was written. Check that the "
        f"path is right and that the files were delivered in full."
    )


def data_last_date(config: JobrecConfig) -> tuple[date, str]:
    """The data's last date and where it comes from: `ingest.last_date` when set, else the
    `last_date` of the export's `raw/export.json` (the generator writes one), else today
    (UTC). A record dated after it is quarantined.

    An `export.json` that exists but says no date is refused: a wrong last date would
    quarantine good records, or let records from the future in.
    """
    if config.ingest.last_date is not None:
        return date.fromisoformat(config.ingest.last_date), "ingest.last_date"
    export = Path(local_path(RawLocations.of(config).export))
    if export.is_file():
        try:
            text = json.loads(export.read_text(encoding="utf-8"))["last_date"]
            if not isinstance(text, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                raise ValueError(f"{text!r} is not a date written YYYY-MM-DD")
            return date.fromisoformat(text), str(export)
        except (ValueError, KeyError, TypeError) as error:
            raise DataQualityError(
                f'{export}: expected {{"last_date": "YYYY-MM-DD"}}, the data\'s last date '
                f"({type(error).__name__}: {error}); nothing was written. Fix the file, or set "
                f"ingest.last_date."
            ) from error
    return datetime.now(UTC).date(), f"today (UTC): no ingest.last_date and no {export}"


def ingest_raw(spark: SparkSession, config: JobrecConfig) -> list[QualityReport]:
    """Raw jobs and candidates of the configured dataset -> bronze tables and quarantine.

    Quarantined records are written before the budget is checked, so that a failed run leaves
    them for inspection; the bronze table of a source over budget is not replaced. An empty
    input is refused before anything is written. The manifest's `ingest` entry records the
    data's last date (:func:`data_last_date`) and whether any valid record is dated.
    """
    raw = RawLocations.of(config)
    quarantine_path = table_path(config, "bronze", "quarantine")
    budget = config.quality.error_budget_fraction
    reports = []
    last_date, source = data_last_date(config)
    log.info("the data's last date: %s, from %s", last_date.isoformat(), source)
    job_lines = spark.read.text(raw.jobs)
    candidate_lines = read_candidate_lines(spark, raw.candidates)
    _refuse_empty_input(spark, job_lines, raw.jobs, "jobs")
    _refuse_empty_input(spark, candidate_lines, raw.candidates, "candidates")

    jobs = validate_jobs(job_lines, config.ingest, last_date)
    write_quarantine(jobs.quarantine, quarantine_path, "jobs")
    log.info("%s", jobs.report.format())
    enforce_budget(jobs.report, budget)
    write_delta(jobs.valid, table_path(config, "bronze", "jobs"))
    reports.append(jobs.report)

    bronze_jobs = read_delta(spark, table_path(config, "bronze", "jobs"))
    candidates = validate_candidates(
        candidate_lines,
        bronze_jobs.select("job_id", "posted_at", "expires_at"),
        config.ingest,
        config.cleaning.max_score,
        last_date,
    )
    write_quarantine(candidates.quarantine, quarantine_path, "candidates")
    log.info("%s", candidates.report.format())
    enforce_budget(candidates.report, budget)
    write_delta(candidates.valid, table_path(config, "bronze", "candidates"))
    reports.append(candidates.report)

    bronze_candidates = read_delta(spark, table_path(config, "bronze", "candidates"))
    dated = not (
        bronze_jobs.where(
            F.col("posted_at").isNotNull() | F.col("expires_at").isNotNull()
        ).isEmpty()
        and bronze_candidates.where(F.exists("sequence", lambda e: e["at"].isNotNull())).isEmpty()
    )
    manifest.record(config, "ingest", {"last_date": last_date.isoformat(), "dated": dated})
    log.info("ingest recorded in the manifest: last date %s, dated %s", last_date, dated)
    return reports
