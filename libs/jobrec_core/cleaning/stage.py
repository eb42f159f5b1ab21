"""Stage 1: candidate cleaning, rule filters then a distributed Word Mover's Distance filter.

For every job of a candidate, the mean Word Mover's similarity (1 / (1 + WMD), on title,
function and keywords) to the candidate's other jobs must be above the threshold, or the job
is dropped as unrelated (§2).

How the work is laid out:

1. every candidate's job pairs are listed and made distinct, so a pair that many candidates
   share is computed once, and the distinct pairs are spread evenly over partitions whatever
   the candidates' sizes;
2. for each distinct pair, cheap bounds of the similarity come from the two documents'
   centroids alone (`wmd.centroid_bounds`), vectorised over thousands of pairs at a time;
3. a job whose mean upper bound is at most the threshold is dropped, one whose mean lower
   bound is above it is kept: the bounds decide without the exact value;
4. only the pairs of the jobs still undecided are solved exactly, again once per distinct pair;
5. the kept jobs form the cleaned sequence, the rules apply again, and the positive job (the
   highest score; the most recent on a tie) is recorded.

Only the interest shown by the run's as-of date counts (`timeline.asof`): a candidate is
cleaned as they stood then, and one who had shown none yet is not a candidate.

All joins and aggregations run in Spark SQL; Python (`mapInPandas`, `mapInArrow`) only
computes distances, with the word vectors memory-mapped once per worker process.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.cleaning.rules import apply_rules, positive_job
from jobrec_core.cleaning.wmd_filter import (
    DOCUMENT_SCHEMA,
    candidate_pairs,
    job_means,
    nbow_documents,
    removal_decisions,
    score_pairs,
    wmd_documents,
)
from jobrec_core.config import CleaningConfig, JobrecConfig
from jobrec_core.platform import manifest
from jobrec_core.platform.progress import spark_progress
from jobrec_core.platform.quarantine import (
    QualityReport,
    count_reasons,
    enforce_budget,
    split_quarantine,
    write_quarantine,
)
from jobrec_core.platform.tables import (
    RawLocations,
    local_path,
    read_delta,
    table_path,
    write_delta,
)
from jobrec_core.text.vectors import keyed_vectors
from jobrec_core.timeline.asof import as_of, interest_by

log = logging.getLogger(__name__)

QUARANTINE_SOURCE = "clean_candidates"


@dataclass(frozen=True)
class CleaningOutputs:
    candidates: DataFrame  # candidate_id, sequence, positive_job_id
    similarities: DataFrame  # candidate_id, job_id, mean_low, mean_high, decision
    eligible: DataFrame  # the candidates that passed the rules (cached)
    pairs: DataFrame  # candidate_id, job_a, job_b of the eligible candidates (cached)
    distinct_pairs: DataFrame  # job_a, job_b: each pair once (cached)
    exact_pairs: DataFrame  # the distinct pairs whose WMD was solved exactly


def clean_candidates(
    spark: SparkSession,
    candidates: DataFrame,
    documents: DataFrame,
    vectors_file: str,
    rules: CleaningConfig,
    prune: bool,
    partitions: int,
) -> CleaningOutputs:
    """Rules, WMD filter, rules again (if configured), positive job."""
    threshold = rules.wmd_similarity_threshold
    documents = documents.mapInPandas(
        lambda frames: nbow_documents(frames, vectors_file), DOCUMENT_SCHEMA
    ).cache()
    eligible = apply_rules(candidates, rules).cache()
    pairs = candidate_pairs(eligible).cache()
    distinct = pairs.select("job_a", "job_b").distinct().cache()
    exact_pairs = distinct
    first = score_pairs(
        distinct, documents, vectors_file, exact=not prune, partitions=partitions
    ).cache()
    decided = removal_decisions(job_means(pairs, first), threshold)
    if prune:
        undecided = decided.where(F.col("decision") == "undecided").select("candidate_id", "job_id")
        needs_exact = (
            pairs.join(
                undecided.withColumnRenamed("job_id", "job_a"),
                ["candidate_id", "job_a"],
                "left_semi",
            )
            .unionByName(
                pairs.join(
                    undecided.withColumnRenamed("job_id", "job_b"),
                    ["candidate_id", "job_b"],
                    "left_semi",
                )
            )
            .select("job_a", "job_b")
            .join(
                first.where(F.col("sim_low") < F.col("sim_high")), ["job_a", "job_b"], "left_semi"
            )
            .distinct()
        )
        exact = score_pairs(needs_exact, documents, vectors_file, exact=True, partitions=partitions)
        exact_pairs = needs_exact
        refined = first.join(exact, ["job_a", "job_b"], "left_anti").unionByName(exact)
        decided = removal_decisions(job_means(pairs, refined), threshold)
    # Read twice: for the cleaned sequences and as the similarity table.
    decided = decided.cache()
    kept = decided.where(F.col("decision") != "drop").select("candidate_id", "job_id")
    elements = eligible.select("candidate_id", F.posexplode("sequence").alias("pos", "e"))
    cleaned = (
        elements.join(
            kept,
            (elements["candidate_id"] == kept["candidate_id"])
            & (F.col("e.job_id") == kept["job_id"]),
            "left_semi",
        )
        .groupBy("candidate_id")
        .agg(F.array_sort(F.collect_list(F.struct("pos", "e"))).alias("items"))
        .select("candidate_id", F.transform("items", lambda x: x["e"]).alias("sequence"))
    )
    if rules.reapply_rules_after_wmd:
        cleaned = apply_rules(cleaned, rules)
    cleaned = cleaned.withColumn("positive_job_id", positive_job(F.col("sequence")))
    return CleaningOutputs(cleaned, decided, eligible, pairs, distinct, exact_pairs)


@dataclass(frozen=True)
class Funnel:
    candidates: int
    quarantined_unknown_jobs: int
    after_rules: int
    jobs_before_wmd: int
    jobs_removed_by_wmd: int
    after_wmd_and_rules: int
    pairs: int
    distinct_pairs: int
    exact_pairs: int

    def format(self) -> str:
        removed = self.jobs_removed_by_wmd / max(self.jobs_before_wmd, 1)
        rows = [
            ("candidates (bronze)", f"{self.candidates:,}"),
            ("quarantined: unknown jobs", f"{self.quarantined_unknown_jobs:,}"),
            ("pass the rules", f"{self.after_rules:,}"),
            ("their jobs", f"{self.jobs_before_wmd:,}"),
            ("jobs removed by the WMD filter", f"{self.jobs_removed_by_wmd:,}  ({removed:.1%})"),
            ("candidates after WMD + rules again", f"{self.after_wmd_and_rules:,}"),
            ("job pairs (distinct)", f"{self.pairs:,}  ({self.distinct_pairs:,})"),
            ("distinct pairs solved exactly", f"{self.exact_pairs:,}"),
            ("distinct pairs decided by bounds", f"{self.distinct_pairs - self.exact_pairs:,}"),
        ]
        return "\n".join(["Cleaning funnel", *(f"  {k:<36} {v:>12}" for k, v in rows)])


def run_cleaning(spark: SparkSession, config: JobrecConfig) -> Funnel:
    """bronze candidates -> silver candidates (+ per-job similarities), with the funnel."""
    from jobrec_core.platform.tracking import log_stage_run

    embeddings = manifest.current(config, "embeddings")
    vectors_file, documents = job_documents(spark, config)

    timeline = as_of(config)
    log.info("clean_candidates: %s", timeline.describe())
    bronze = interest_by(
        read_delta(spark, table_path(config, "bronze", "candidates")), timeline.day
    )
    # A job without an id (bronze written before ingestion refused such ids) matches no job,
    # so it is unknown too: the hit is having unknown jobs, not their smallest id.
    unknown = (
        bronze.select("candidate_id", F.explode("sequence.job_id").alias("job_id"))
        .join(documents.select("job_id"), "job_id", "left_anti")
        .groupBy("candidate_id")
        .agg(F.count("*").alias("unknown_jobs"), F.min("job_id").alias("unknown_job"))
    )
    marked = bronze.join(unknown, "candidate_id", "left").select(
        "candidate_id",
        "sequence",
        F.to_json(F.struct("candidate_id", "sequence")).alias("record"),
        F.when(F.col("unknown_jobs").isNotNull(), F.lit("unknown_job_id")).alias("reason"),
        F.when(F.col("unknown_job").isNull(), F.lit("a job without an id is not in the jobs table"))
        .otherwise(F.format_string("job %d is not in the jobs table", F.col("unknown_job")))
        .alias("detail"),
    )
    valid, quarantine = split_quarantine(marked, QUARANTINE_SOURCE, "record")
    quarantine_path = table_path(config, "bronze", "quarantine")
    # Written before the budget is checked, so that a failed run leaves them for inspection.
    write_quarantine(quarantine, quarantine_path, QUARANTINE_SOURCE)
    quarantined = count_reasons(
        read_delta(spark, quarantine_path).where(F.col("source") == QUARANTINE_SOURCE)
    )
    read = bronze.count()
    report = QualityReport(QUARANTINE_SOURCE, read, read - sum(quarantined.values()), quarantined)
    log.info("%s", report.format())
    enforce_budget(report, config.quality.error_budget_fraction)

    outputs = clean_candidates(
        spark,
        valid.drop("record"),
        documents,
        vectors_file,
        config.cleaning,
        prune=config.cleaning.wmd_prune,
        partitions=config.spark.shuffle_partitions,
    )
    # One action computes the whole filter: the documents, the pairs, both scoring passes.
    with spark_progress(spark, "clean_candidates: rules and WMD filter (silver/candidates)"):
        write_delta(outputs.candidates, table_path(config, "silver", "candidates"))
    write_delta(outputs.similarities, table_path(config, "silver", "job_similarity"))
    similarities = read_delta(spark, table_path(config, "silver", "job_similarity"))
    pairs = outputs.pairs
    funnel = Funnel(
        candidates=report.read,
        quarantined_unknown_jobs=report.quarantined.get("unknown_job_id", 0),
        after_rules=outputs.eligible.count(),
        jobs_before_wmd=similarities.count(),
        jobs_removed_by_wmd=similarities.where(F.col("decision") == "drop").count(),
        after_wmd_and_rules=read_delta(spark, table_path(config, "silver", "candidates")).count(),
        pairs=pairs.count(),
        distinct_pairs=outputs.distinct_pairs.count(),
        exact_pairs=outputs.exact_pairs.count(),
    )
    manifest.record(
        config,
        "cleaned_candidates",
        {"table": table_path(config, "silver", "candidates"), "embeddings": embeddings["version"]},
    )
    log_stage_run(
        spark,
        config,
        "clean_candidates",
        [table_path(config, "bronze", "candidates"), str(embeddings["jobs"])],
        {name: float(value) for name, value in asdict(funnel).items()},
        {"embeddings_version": str(embeddings["version"])},
    )
    return funnel


def noise_filter_curve(
    similarities: DataFrame, noise: DataFrame, thresholds: list[float]
) -> list[dict[str, float]]:
    """Precision and recall of the jobs the filter removes, against the injected noise.

    `similarities`: `candidate_id, job_id, mean_low, mean_high` with exact means (cleaning run
    with `wmd_prune: false`); `noise`: `candidate_id, job_id` of the ground truth's noise jobs.
    A job is removed at threshold t when its mean similarity is not above t.
    """
    labelled = similarities.join(
        noise.withColumn("is_noise", F.lit(True)), ["candidate_id", "job_id"], "left"
    ).select(
        F.col("mean_low").alias("similarity"),
        F.coalesce("is_noise", F.lit(False)).alias("is_noise"),
    )
    rows = labelled.agg(
        *[
            F.sum(F.when((F.col("similarity") <= t) & F.col("is_noise"), 1).otherwise(0)).alias(
                f"tp{i}"
            )
            for i, t in enumerate(thresholds)
        ],
        *[
            F.sum(F.when(F.col("similarity") <= t, 1).otherwise(0)).alias(f"removed{i}")
            for i, t in enumerate(thresholds)
        ],
        F.sum(F.col("is_noise").cast("int")).alias("noise"),
        F.count("*").alias("jobs"),
    ).first()
    assert rows is not None
    curve = []
    for i, threshold in enumerate(thresholds):
        removed, hits = int(rows[f"removed{i}"]), int(rows[f"tp{i}"])
        curve.append(
            {
                "threshold": threshold,
                "removed": removed,
                "precision": hits / removed if removed else 1.0,
                "recall": hits / rows["noise"] if rows["noise"] else 0.0,
                "noise_jobs": int(rows["noise"]),
                "jobs": int(rows["jobs"]),
            }
        )
    return curve


def evaluate_noise_filter(
    spark: SparkSession, config: JobrecConfig, thresholds: list[float]
) -> list[dict[str, float]]:
    """Exact mean similarities of every job of the candidates passing the rules, scored
    against the ground truth's noise jobs at each threshold."""
    vectors_file, documents = job_documents(spark, config)
    candidates = interest_by(
        read_delta(spark, table_path(config, "bronze", "candidates")), as_of(config).day
    )
    outputs = clean_candidates(
        spark,
        candidates,
        documents,
        vectors_file,
        config.cleaning,
        prune=False,
        partitions=config.spark.shuffle_partitions,
    )
    truth = read_delta(spark, RawLocations.of(config).ground_truth)
    noise = truth.select("candidate_id", F.explode("noise_job_ids").alias("job_id"))
    with spark_progress(spark, "evaluate_cleaning: exact WMD filter against the noise"):
        return noise_filter_curve(outputs.similarities, noise, thresholds)


def plot_noise_filter_curve(
    curve: list[dict[str, float]], paper_threshold: float, folder: Path, dataset: str
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    thresholds = [p["threshold"] for p in curve]
    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(thresholds, [p["precision"] for p in curve], label="precision")
    axis.plot(thresholds, [p["recall"] for p in curve], label="recall")
    axis.axvline(paper_threshold, color="grey", linestyle="--", label=f"paper's {paper_threshold}")
    axis.set(
        xlabel="threshold (a job is removed when its mean similarity is not above it)",
        title=f"WMD filter vs injected noise ('{dataset}')",
    )
    axis.legend()
    figure.tight_layout()
    path = folder / f"wmd_filter_{dataset}.png"
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def job_documents(spark: SparkSession, config: JobrecConfig) -> tuple[str, DataFrame]:
    """(vectors file, WMD documents of the jobs) of the embeddings in the manifest."""
    embeddings = manifest.current(config, "embeddings")
    vectors_file = local_path(embeddings["vectors"])
    words = keyed_vectors(vectors_file).index_to_key
    vocabulary = spark.createDataFrame(list(enumerate(words)), "word_id INT, term STRING")
    jobs = read_delta(spark, embeddings["jobs"])
    return vectors_file, wmd_documents(jobs, vocabulary, config.cleaning.wmd_fields)
