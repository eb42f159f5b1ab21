"""Raw files -> bronze Delta tables with a declared schema; bad records -> quarantine.

Raw jobs are JSON lines; raw candidates are the paper's tab-separated `identifier`, `sequence`
lines, the sequence a Python literal (`[{'job_id': 1, 'score': 2}]`) or JSON. Each line is
read as text and validated in Spark SQL (no Python per row), so that a line that cannot be
parsed is kept, with its reason, instead of vanishing in a permissive parser.

Reasons, checked in this order (the first that applies is recorded):

* jobs: `invalid_utf8`, `malformed_record`, `missing_job_id`, `non_integer_job_id`,
  `empty_text`, `invalid_keywords`, `oversized_field`, then `duplicate_job_id` (one id, different
  records: every copy) and `duplicate_record` (an exact copy: all but one).
* candidates: `malformed_line`, `invalid_utf8`, `missing_identifier`,
  `non_integer_identifier`, `oversized_field`, `malformed_sequence`, `missing_job_id`,
  `non_integer_job_id`, `missing_score`, `non_integer_score`, `score_out_of_range`, then
  `duplicate_identifier`, `duplicate_record`, and `unknown_job_id` (a job that is not in
  bronze jobs, including quarantined ones).

A candidate with one bad element is quarantined whole: a corrupt line is not trusted in part.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from jobrec_core.config import IngestConfig
from jobrec_core.platform.quarantine import (
    QualityReport,
    count_reasons,
    first_failure,
    split_quarantine,
)

log = logging.getLogger(__name__)

TEXT_FIELDS = ("title", "function", "requirement_summary", "description")
RAW_JOB_SCHEMA = (
    "job_id STRING, title STRING, function STRING, requirement_summary STRING, "
    "description STRING, keywords STRING, occupation_code STRING"
)
RAW_SEQUENCE_SCHEMA = "ARRAY<STRUCT<job_id: STRING, score: STRING>>"
CANDIDATES_HEADER = "identifier\tsequence"
MAX_JOB_ID = 2_147_483_647


@dataclass(frozen=True)
class IngestResult:
    valid: DataFrame
    quarantine: DataFrame
    report: QualityReport


def validate_jobs(lines: DataFrame, limits: IngestConfig) -> IngestResult:
    """Raw job lines (`value`) -> typed jobs and quarantined lines."""
    parsed = lines.select(
        F.col("value").alias("raw"),
        # A malformed line parses to a struct of nulls; as a map it parses to null.
        F.from_json("value", "MAP<STRING, STRING>").isNull().alias("malformed"),
        F.from_json("value", RAW_JOB_SCHEMA).alias("j"),
    ).select("raw", "malformed", "j.*")
    keywords = F.from_json("keywords", "ARRAY<STRING>")
    job_id_text = F.trim("job_id")
    oversized = F.greatest(*[F.coalesce(F.length(f), F.lit(0)) for f in TEXT_FIELDS])
    reason, detail = first_failure(
        [
            ("invalid_utf8", _not_utf8(F.col("raw")), "bytes that are not UTF-8"),
            ("malformed_record", F.col("malformed"), "not a JSON object"),
            ("missing_job_id", _blank(job_id_text), "job_id is missing or empty"),
            (
                "non_integer_job_id",
                ~_is_positive_int(job_id_text),
                F.concat(F.lit("job_id = "), job_id_text),
            ),
            ("empty_text", _blank(F.col("title")), "title is empty"),
            (
                "invalid_keywords",
                F.col("keywords").isNotNull() & keywords.isNull(),
                "keywords is not a list of strings",
            ),
            (
                "oversized_field",
                (oversized > limits.max_field_chars) | (F.size(keywords) > limits.max_keywords),
                F.format_string(
                    "a field has %d characters or keywords %d entries", oversized, F.size(keywords)
                ),
            ),
        ]
    )
    marked = parsed.withColumn("reason", reason).withColumn("detail", detail)
    typed = marked.select(
        "raw",
        "reason",
        "detail",
        job_id_text.cast("int").alias("job_id"),
        *[F.col(f) for f in TEXT_FIELDS],
        F.coalesce(keywords, F.array().cast("array<string>")).alias("keywords"),
        "occupation_code",
    )
    return _finish(_mark_duplicates(typed, "job_id", "duplicate_job_id"), "jobs")


def validate_candidates(
    lines: DataFrame, job_ids: DataFrame, limits: IngestConfig, max_score: int
) -> IngestResult:
    """Raw candidate lines (`value`) -> `candidate_id, sequence` and quarantined lines.

    `job_ids` (one column `job_id`) are the valid jobs: a sequence naming any other job is
    quarantined as `unknown_job_id`.
    """
    tab = F.instr("value", "\t")
    identifier = F.trim(F.when(tab > 0, F.expr("substring(value, 1, instr(value, '\t') - 1)")))
    sequence_text = F.when(tab > 0, F.expr("substring(value, instr(value, '\t') + 1)"))
    # A Python literal uses single quotes; with them made double it is JSON. JSON passes as is.
    sequence = F.from_json(F.regexp_replace(sequence_text, "'", '"'), RAW_SEQUENCE_SCHEMA)
    frame = lines.select(
        F.col("value").alias("raw"),
        identifier.alias("identifier"),
        sequence_text.alias("sequence_text"),
        sequence.alias("seq"),
    )

    def any_element(predicate: str) -> Column:
        return F.expr(f"exists(seq, x -> {predicate})")

    reason, detail = first_failure(
        [
            ("malformed_line", F.instr("raw", "\t") == 0, "no tab between identifier and sequence"),
            ("invalid_utf8", _not_utf8(F.col("raw")), "bytes that are not UTF-8"),
            ("missing_identifier", _blank(F.col("identifier")), "identifier is empty"),
            (
                "non_integer_identifier",
                ~F.col("identifier").rlike(r"^[0-9]{1,18}$"),
                F.concat(F.lit("identifier = "), F.col("identifier")),
            ),
            (
                "oversized_field",
                F.length("raw") > limits.max_field_chars,
                F.format_string("line of %d characters", F.length("raw")),
            ),
            (
                "malformed_sequence",
                F.col("seq").isNull() | any_element("x IS NULL"),
                "sequence is not a list of {job_id, score}",
            ),
            (
                "oversized_field",
                F.size("seq") > limits.max_sequence_length,
                F.format_string("sequence of %d jobs", F.size("seq")),
            ),
            (
                "missing_job_id",
                any_element("x.job_id IS NULL OR trim(x.job_id) = ''"),
                "an element has no job_id",
            ),
            (
                "non_integer_job_id",
                # The jobs' own check: a larger id would be cast to a null job below.
                F.exists("seq", lambda x: ~_is_positive_int(F.trim(x["job_id"]))),
                f"an element's job_id is not an integer in 1..{MAX_JOB_ID}",
            ),
            (
                "missing_score",
                any_element("x.score IS NULL OR trim(x.score) = ''"),
                "an element has no score",
            ),
            (
                "non_integer_score",
                any_element(r"NOT trim(x.score) RLIKE '^-?[0-9]{1,9}$'"),
                "an element's score is not an integer",
            ),
            (
                "score_out_of_range",
                any_element(f"CAST(trim(x.score) AS INT) NOT BETWEEN 1 AND {max_score}"),
                f"an element's score is outside 1..{max_score}",
            ),
        ]
    )
    typed = (
        frame.withColumn("reason", reason)
        .withColumn("detail", detail)
        .select(
            "raw",
            "reason",
            "detail",
            F.col("identifier").cast("long").alias("candidate_id"),
            F.expr(
                "transform(seq, x -> named_struct('job_id', CAST(trim(x.job_id) AS INT), "
                "'score', CAST(trim(x.score) AS INT)))"
            ).alias("sequence"),
        )
    )
    deduplicated = _mark_duplicates(typed, "candidate_id", "duplicate_identifier")
    return _finish(_mark_unknown_jobs(deduplicated, job_ids), "candidates")


def _mark_duplicates(frame: DataFrame, key: str, conflict_reason: str) -> DataFrame:
    """Among rows that passed every row check: copies of one key with different content are
    all quarantined (`conflict_reason`); exact copies keep one row (`duplicate_record`)."""
    candidates = F.col("reason").isNull()
    by_key = Window.partitionBy(key)
    content = F.xxhash64("raw")
    flagged = frame.withColumn("_hash", F.when(candidates, content)).withColumn(
        "_rank", F.row_number().over(Window.partitionBy(key, "_hash").orderBy("raw"))
    )
    conflict = candidates & (F.min("_hash").over(by_key) != F.max("_hash").over(by_key))
    copy = candidates & (F.col("_rank") > 1)
    return flagged.select(
        *[c for c in frame.columns if c not in ("reason", "detail")],
        F.when(conflict, F.lit(conflict_reason))
        .when(copy, F.lit("duplicate_record"))
        .otherwise(F.col("reason"))
        .alias("reason"),
        F.when(
            conflict,
            F.concat(
                F.lit(f"{key} = "), F.col(key).cast("string"), F.lit(" has different records")
            ),
        )
        .when(copy, F.concat(F.lit("exact copy of another record of "), F.col(key).cast("string")))
        .otherwise(F.col("detail"))
        .alias("detail"),
    )


def _mark_unknown_jobs(frame: DataFrame, job_ids: DataFrame) -> DataFrame:
    """Quarantine (otherwise valid) candidates whose sequence names a job that does not exist.

    A job without an id matches no job, so it is unknown too: the hit is that a candidate has
    unknown elements (`_unknown_count`), not their smallest id, which ignores nulls.
    """
    elements = frame.where(F.col("reason").isNull()).select(
        "candidate_id", F.explode("sequence").alias("e")
    )
    unknown = (
        elements.select("candidate_id", F.col("e.job_id").alias("job_id"))
        .join(F.broadcast(job_ids), "job_id", "left_anti")
        .groupBy("candidate_id")
        .agg(F.count("*").alias("_unknown_count"), F.min("job_id").alias("_unknown"))
    )
    joined = frame.join(unknown, "candidate_id", "left")
    hit = F.col("reason").isNull() & F.col("_unknown_count").isNotNull()
    return joined.select(
        *[c for c in frame.columns if c not in ("reason", "detail")],
        F.when(hit, F.lit("unknown_job_id")).otherwise(F.col("reason")).alias("reason"),
        F.when(hit & F.col("_unknown").isNull(), F.lit("a job without an id is not a known job"))
        .when(hit, F.format_string("job %d is not a known job", F.col("_unknown")))
        .otherwise(F.col("detail"))
        .alias("detail"),
    )


def _finish(marked: DataFrame, source: str) -> IngestResult:
    marked = marked.persist(StorageLevel.MEMORY_AND_DISK)
    valid, quarantine = split_quarantine(marked, source, "raw")
    valid = valid.drop("raw")
    read = marked.count()
    reasons = count_reasons(quarantine)
    report = QualityReport(
        source=source, read=read, valid=read - sum(reasons.values()), quarantined=reasons
    )
    return IngestResult(valid=valid, quarantine=quarantine, report=report)


def _not_utf8(column: Column) -> Column:
    """Spark's text reader keeps a line's bytes as they are; re-encoding through a Java string
    replaces invalid sequences, so the two differ exactly when the line is not UTF-8."""
    return F.encode(column, "UTF-8") != column.cast("binary")


def _blank(column: Column) -> Column:
    return column.isNull() | (F.trim(column) == "")


def _is_positive_int(column: Column) -> Column:
    return (
        column.rlike(r"^[0-9]{1,10}$")
        & (column.cast("long") <= MAX_JOB_ID)
        & (column.cast("long") > 0)
    )
