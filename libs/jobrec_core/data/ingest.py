"""Raw files -> bronze Delta tables with a declared schema; bad records -> quarantine.

Raw jobs are JSON lines; raw candidates are the paper's tab-separated `identifier`, `sequence`
lines, the sequence a Python literal (`[{'job_id': 1, 'score': 2}]`) or JSON. Each line is
read as text and validated in Spark SQL (no Python per row), so that a line that cannot be
parsed is kept, with its reason, instead of vanishing in a permissive parser.

Dates are optional: a job may carry `posted_at` and `expires_at` (the first day it is no
longer live), a sequence element `at` (the day of the interest), each written YYYY-MM-DD.
Undated data ingests as it did before dates existed, its date columns null.

Reasons, checked in this order (the first that applies is recorded):

* jobs: `invalid_utf8`, `malformed_record`, `missing_job_id`, `non_integer_job_id`,
  `empty_text`, `invalid_keywords`, `invalid_date`, `oversized_field`, `expires_before_posted`,
  `date_after_last_date` (posted after the data's last date), then `duplicate_job_id` (one id,
  different records: every copy) and `duplicate_record` (an exact copy: all but one).
* candidates: `malformed_line`, `invalid_utf8`, `missing_identifier`,
  `non_integer_identifier`, `oversized_field`, `malformed_sequence`, `missing_job_id`,
  `non_integer_job_id`, `missing_score`, `non_integer_score`, `score_out_of_range`,
  `invalid_date`, `missing_date` (some elements dated, others not), `date_after_last_date`,
  `time_goes_backwards`, then `duplicate_identifier`, `duplicate_record`, `unknown_job_id` (a
  job that is not in bronze jobs, including quarantined ones) and `interest_outside_ad_life`
  (an interest dated before its job was posted, or on or after it expired).

A candidate with one bad element is quarantined whole: a corrupt line is not trusted in part.

Spark's `from_json` is lenient: it parses the first JSON value of a text and ignores what
follows (`[...] xyz` parses), takes a lone object for a one-element array, and turns a
nested value of a STRING field into its JSON text (`[["a"], "b"]` parses as ARRAY<STRING>).
So the structure is checked too, on the text with its string literals removed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date

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
    "description STRING, keywords STRING, occupation_code STRING, "
    "posted_at STRING, expires_at STRING"
)
RAW_SEQUENCE_SCHEMA = "ARRAY<STRUCT<job_id: STRING, score: STRING, at: STRING>>"
CANDIDATES_HEADER = "identifier\tsequence"
MAX_JOB_ID = 2_147_483_647
# A JSON string literal, escapes included (unrolled and possessive: no backtracking, and no
# recursion per character, which overflows Java's regex stack on long strings).
JSON_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
# What a list of flat values leaves once its strings are removed: one pair of brackets.
FLAT_LIST = r"^\s*\[[^\[\]]*\]\s*$"
# What a list of strings leaves: brackets, commas and blanks.
LIST_OF_STRINGS = r"^\s*\[[\s,]*\]\s*$"
DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


@dataclass(frozen=True)
class IngestResult:
    valid: DataFrame
    quarantine: DataFrame
    report: QualityReport


def validate_jobs(lines: DataFrame, limits: IngestConfig, last_date: date) -> IngestResult:
    """Raw job lines (`value`) -> typed jobs and quarantined lines.

    `last_date` is the data's last date: an ad posted after it is quarantined (one that
    expires after it is normal: ads close in the future).
    """
    parsed = lines.select(
        F.col("value").alias("raw"),
        # A malformed line parses to a struct of nulls; as a map it parses to null.
        F.from_json("value", "MAP<STRING, STRING>").isNull().alias("malformed"),
        F.from_json("value", RAW_JOB_SCHEMA).alias("j"),
    ).select("raw", "malformed", "j.*")
    keywords = F.from_json("keywords", "ARRAY<STRING>")
    # A nested list, object or number is turned into text by `from_json`: only strings,
    # brackets, commas and blanks make a list of strings.
    keywords_flat = F.regexp_replace("keywords", JSON_STRING, "").rlike(LIST_OF_STRINGS)
    job_id_text = F.trim("job_id")
    oversized = F.greatest(*[F.coalesce(F.length(f), F.lit(0)) for f in TEXT_FIELDS])
    posted, expires = F.expr(_date_sql("posted_at")), F.expr(_date_sql("expires_at"))
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
                F.col("keywords").isNotNull() & (keywords.isNull() | ~keywords_flat),
                "keywords is not a list of strings",
            ),
            (
                "invalid_date",
                _bad_date(F.col("posted_at"), posted) | _bad_date(F.col("expires_at"), expires),
                F.when(
                    _bad_date(F.col("posted_at"), posted),
                    F.concat(F.lit("posted_at is not a date written YYYY-MM-DD: "), "posted_at"),
                ).otherwise(
                    F.concat(F.lit("expires_at is not a date written YYYY-MM-DD: "), "expires_at")
                ),
            ),
            (
                "oversized_field",
                (oversized > limits.max_field_chars) | (F.size(keywords) > limits.max_keywords),
                F.format_string(
                    "a field has %d characters or keywords %d entries", oversized, F.size(keywords)
                ),
            ),
            (
                "expires_before_posted",
                expires <= posted,
                F.format_string(
                    "expires_at %s is not after posted_at %s: an ad is live at least one day",
                    expires.cast("string"),
                    posted.cast("string"),
                ),
            ),
            (
                "date_after_last_date",
                posted > F.lit(last_date),
                F.format_string(
                    "posted_at %s is after the data's last date %s",
                    posted.cast("string"),
                    F.lit(last_date.isoformat()),
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
        posted.alias("posted_at"),
        expires.alias("expires_at"),
    )
    return _finish(_mark_duplicates(typed, "job_id", "duplicate_job_id"), "jobs")


def validate_candidates(
    lines: DataFrame, jobs: DataFrame, limits: IngestConfig, max_score: int, last_date: date
) -> IngestResult:
    """Raw candidate lines (`value`) -> `candidate_id, sequence` and quarantined lines.

    `jobs` (`job_id, posted_at, expires_at`) are the valid jobs: a sequence naming any other
    job is quarantined as `unknown_job_id`, one showing interest in a job outside its life
    (before `posted_at`, or on or after `expires_at`; null: open-ended) as
    `interest_outside_ad_life`. `last_date` is the data's last date: no interest is after it.
    """
    tabs = F.length("value") - F.length(F.regexp_replace("value", "\t", ""))
    identifier = F.trim(F.when(tabs > 0, F.expr("substring(value, 1, instr(value, '\t') - 1)")))
    sequence_text = F.when(tabs > 0, F.expr("substring(value, instr(value, '\t') + 1)"))
    # A Python literal uses single quotes; with them made double it is JSON. JSON passes as is.
    sequence_json = F.regexp_replace(sequence_text, "'", '"')
    frame = lines.select(
        F.col("value").alias("raw"),
        tabs.alias("tabs"),
        identifier.alias("identifier"),
        F.from_json(sequence_json, RAW_SEQUENCE_SCHEMA).alias("seq"),
        # `from_json` reads the first JSON value and ignores what follows it, and takes a lone
        # object for a list of one: the text must be one list of objects and nothing more.
        F.regexp_replace(sequence_json, JSON_STRING, "").rlike(FLAT_LIST).alias("one_list"),
    ).withColumn("dates", F.expr(f"transform(seq, x -> {_date_sql('x.at')})"))

    def any_element(predicate: str) -> Column:
        return F.expr(f"exists(seq, x -> {predicate})")

    dated = F.expr("size(filter(dates, d -> d IS NOT NULL))")
    # Whether a date is before the previous element's: a fold that carries the previous date.
    backwards = F.expr(
        "aggregate(dates, named_struct('previous', CAST(NULL AS DATE), 'back', false), "
        "(acc, d) -> named_struct('previous', d, 'back', acc.back OR coalesce(d < acc.previous, "
        "false)), acc -> acc.back)"
    )
    last = F.lit(last_date)
    reason, detail = first_failure(
        [
            (
                "malformed_line",
                F.col("tabs") != 1,
                F.when(F.col("tabs") == 0, "no tab between identifier and sequence").otherwise(
                    F.format_string("%d tab-separated columns, expected 2", F.col("tabs") + 1)
                ),
            ),
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
                F.col("seq").isNull() | ~F.col("one_list") | any_element("x IS NULL"),
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
            (
                "invalid_date",
                any_element(f"trim(x.at) != '' AND ({_date_sql('x.at')}) IS NULL"),
                "an element's at is not a date written YYYY-MM-DD",
            ),
            (
                "missing_date",
                (dated > 0) & (dated < F.size("seq")),
                F.format_string("%d of %d elements have a date (at)", dated, F.size("seq")),
            ),
            (
                "date_after_last_date",
                F.exists("dates", lambda d: d > last),
                F.format_string(
                    "an element is dated %s, after the data's last date %s",
                    F.array_max("dates").cast("string"),
                    F.lit(last_date.isoformat()),
                ),
            ),
            (
                "time_goes_backwards",
                backwards,
                "an element's date is before the previous element's",
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
                f"'score', CAST(trim(x.score) AS INT), 'at', {_date_sql('x.at')}))"
            ).alias("sequence"),
        )
    )
    deduplicated = _mark_duplicates(typed, "candidate_id", "duplicate_identifier")
    return _finish(_check_against_jobs(deduplicated, jobs), "candidates")


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


def _check_against_jobs(frame: DataFrame, jobs: DataFrame) -> DataFrame:
    """Quarantine (otherwise valid) candidates whose sequence names a job that does not exist
    (`unknown_job_id`), else that shows interest in a job outside its life
    (`interest_outside_ad_life`: dated before `posted_at`, or on or after `expires_at`).

    A job without an id matches no job, so it is unknown too: the hit is that a candidate has
    unknown elements (`_unknown_count`), not their smallest id, which ignores nulls. Only the
    offending elements are shuffled; the jobs' join is a broadcast.
    """
    elements = frame.where(F.col("reason").isNull()).select(
        "candidate_id", F.posexplode("sequence").alias("position", "e")
    )
    known = jobs.select("job_id", "posted_at", "expires_at", F.lit(True).alias("_known"))
    joined_jobs = elements.select(
        "candidate_id", "position", F.col("e.job_id").alias("job_id"), F.col("e.at").alias("at")
    ).join(F.broadcast(known), "job_id", "left")
    unknown = F.col("_known").isNull()
    outside = ~unknown & ((F.col("at") < F.col("posted_at")) | (F.col("at") >= F.col("expires_at")))
    offenders = (
        joined_jobs.where(unknown | F.coalesce(outside, F.lit(False)))
        .groupBy("candidate_id")
        .agg(
            F.count(F.when(unknown, 1)).alias("_unknown_count"),
            F.min(F.when(unknown, F.col("job_id"))).alias("_unknown"),
            # the first element outside its ad's life
            F.min(
                F.when(outside, F.struct("position", "job_id", "at", "posted_at", "expires_at"))
            ).alias("_outside"),
        )
    )
    joined = frame.join(offenders, "candidate_id", "left")
    valid = F.col("reason").isNull()
    hit_unknown = valid & (F.col("_unknown_count") > 0)
    hit_outside = valid & F.col("_outside").isNotNull()

    def day(field: str) -> Column:
        return F.coalesce(F.col(f"_outside.{field}").cast("string"), F.lit("none"))

    return joined.select(
        *[c for c in frame.columns if c not in ("reason", "detail")],
        F.when(hit_unknown, F.lit("unknown_job_id"))
        .when(hit_outside, F.lit("interest_outside_ad_life"))
        .otherwise(F.col("reason"))
        .alias("reason"),
        F.when(
            hit_unknown & F.col("_unknown").isNull(),
            F.lit("a job without an id is not a known job"),
        )
        .when(hit_unknown, F.format_string("job %d is not a known job", F.col("_unknown")))
        .when(
            hit_outside,
            F.format_string(
                "interest in job %d on %s, outside its life (posted_at %s, expires_at %s)",
                F.col("_outside.job_id"),
                day("at"),
                day("posted_at"),
                day("expires_at"),
            ),
        )
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


def _date_sql(text: str) -> str:
    """SQL for the date that the SQL text expression `text` writes YYYY-MM-DD (blanks
    around it allowed), else null. `try_cast`, unlike `to_date`, gives null for an impossible
    date (2025-02-30) whatever the ANSI and parser settings."""
    return f"CASE WHEN trim({text}) RLIKE '{DATE_TEXT}' THEN try_cast(trim({text}) AS DATE) END"


def _bad_date(text: Column, parsed: Column) -> Column:
    """A date field that is present and not blank, yet not a date written YYYY-MM-DD."""
    return ~_blank(text) & parsed.isNull()


def _blank(column: Column) -> Column:
    return column.isNull() | (F.trim(column) == "")


def _is_positive_int(column: Column) -> Column:
    return (
        column.rlike(r"^[0-9]{1,10}$")
        & (column.cast("long") <= MAX_JOB_ID)
        & (column.cast("long") > 0)
    )
