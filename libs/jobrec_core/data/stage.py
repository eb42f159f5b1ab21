"""Stage 0: the dataset's files and their ingestion; the only module of `data/` that reads or
writes tables and files.

* :func:`generate_dataset`: the raw files of a preset (jobs as JSON lines, candidates in the
  paper's TSV, the generator's ground truth), generated in Spark from the reference data and
  the real ads (`data.generate`);
* :func:`ingest_raw`: the raw files -> bronze/silver Delta tables, bad records quarantined with
  a reason within the error budget (`data.ingest`).
"""

from __future__ import annotations

import logging
import math

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig
from jobrec_core.data.generate import (
    CANDIDATE_SCHEMA,
    JOB_SCHEMA,
    GenerationPlan,
    assign_job_occupations,
    format_raw_candidates,
    generate_candidate_blocks,
    generate_job_blocks,
    ground_truth,
    real_ads_to_jobs,
)
from jobrec_core.data.ingest import CANDIDATES_HEADER, validate_candidates, validate_jobs
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
    for job_id, title in ads.select("job_id", "title").collect():
        matched = match_title(title or "", title_index)
        if matched is not None:
            job_occupation[job_id - 1] = matched
    every_real_title = [
        r.title for r in read_real_ads(spark, settings.reference_dir).select("title").collect()
    ]
    titles = split_titles(catalogue, every_real_title, config.titles.split_seed)
    plan = GenerationPlan(
        catalogue, settings, config.run.seed, stopwords, job_occupation, titles.generator
    )
    shared = spark.sparkContext.broadcast(plan)
    locations = RawLocations.of(config)

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
    finally:
        candidates.unpersist()
    shared.unpersist()
    return {
        "jobs": sizes.jobs,
        "real_ads": sizes.real_ads,
        "labelled_real_ads": int(np.count_nonzero(job_occupation[n_generated:] >= 0)),
        "candidates": sizes.candidates,
    }


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


def ingest_raw(spark: SparkSession, config: JobrecConfig) -> list[QualityReport]:
    """Raw jobs and candidates of the configured dataset -> bronze tables and quarantine.

    Quarantined records are written before the budget is checked, so that a failed run leaves
    them for inspection; the bronze table of a source over budget is not replaced. An empty
    input is refused before anything is written.
    """
    raw = RawLocations.of(config)
    quarantine_path = table_path(config, "bronze", "quarantine")
    budget = config.quality.error_budget_fraction
    reports = []
    job_lines = spark.read.text(raw.jobs)
    candidate_lines = read_candidate_lines(spark, raw.candidates)
    _refuse_empty_input(spark, job_lines, raw.jobs, "jobs")
    _refuse_empty_input(spark, candidate_lines, raw.candidates, "candidates")

    jobs = validate_jobs(job_lines, config.ingest)
    write_quarantine(jobs.quarantine, quarantine_path, "jobs")
    log.info("%s", jobs.report.format())
    enforce_budget(jobs.report, budget)
    write_delta(jobs.valid, table_path(config, "bronze", "jobs"))
    reports.append(jobs.report)

    job_ids = read_delta(spark, table_path(config, "bronze", "jobs")).select("job_id")
    candidates = validate_candidates(
        candidate_lines,
        job_ids,
        config.ingest,
        config.cleaning.max_score,
    )
    write_quarantine(candidates.quarantine, quarantine_path, "candidates")
    log.info("%s", candidates.report.format())
    enforce_budget(candidates.report, budget)
    write_delta(candidates.valid, table_path(config, "bronze", "candidates"))
    reports.append(candidates.report)
    return reports
