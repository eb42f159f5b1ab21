"""Stage 1: candidate cleaning, rule filters then a distributed Word Mover's Distance filter.

For every job of a candidate, the mean Word Mover's similarity (1 / (1 + WMD), on title,
function and keywords) to the candidate's other jobs must be above the threshold, or the job
is dropped as unrelated (§2).

How the work is laid out:

1. every candidate's job pairs are listed and made distinct, so a pair that many candidates
   share is computed once, and the distinct pairs are spread evenly over partitions whatever
   the candidates' sizes;
2. for each distinct pair, cheap bounds of the similarity come from one distance matrix
   (`wmd.wmd_bounds`);
3. a job whose mean upper bound is at most the threshold is dropped, one whose mean lower
   bound is above it is kept: the bounds decide without the exact value;
4. only the pairs of the jobs still undecided are solved exactly, again once per distinct pair;
5. the kept jobs form the cleaned sequence, the rules apply again, and the positive job (the
   highest score; the most recent on a tie) is recorded.

All joins and aggregations run in Spark SQL; Python (`mapInPandas`) only computes distances,
with the word vectors memory-mapped once per worker process.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import CleaningConfig, JobrecConfig
from jobrec_core.embeddings import tokens_column
from jobrec_core.io import local_path
from jobrec_core.wmd import WmdDocument, similarity, unit_vectors, wmd, wmd_bounds

log = logging.getLogger(__name__)

PAIR_SCHEMA = "job_a INT, job_b INT, sim_low DOUBLE, sim_high DOUBLE"


def apply_rules(candidates: DataFrame, rules: CleaningConfig) -> DataFrame:
    """The seed's rules: at least `min_jobs` jobs and a top score of at least `min_top_score`."""
    return candidates.where(
        (F.size("sequence") >= rules.min_jobs)
        & (F.array_max("sequence.score") >= rules.min_top_score)
    )


def wmd_documents(jobs: DataFrame, vocabulary: DataFrame, fields: list[str]) -> DataFrame:
    """`job_id, word_ids`: the in-vocabulary words of the given fields, repeats kept (they are
    the word frequencies of the nBOW). The lookup is a join, not a Python loop per word."""
    words = jobs.select(
        "job_id", F.explode(F.concat(*[F.col(tokens_column(f)) for f in fields])).alias("term")
    )
    found = words.join(F.broadcast(vocabulary), "term")
    collected = found.groupBy("job_id").agg(F.collect_list("word_id").alias("word_ids"))
    return (
        jobs.select("job_id")
        .join(collected, "job_id", "left")
        .select("job_id", F.coalesce("word_ids", F.array().cast("array<int>")).alias("word_ids"))
    )


def candidate_pairs(candidates: DataFrame) -> DataFrame:
    """`candidate_id, job_a, job_b` with job_a < job_b, for every two jobs of a candidate."""
    ids = F.array_distinct(F.col("sequence.job_id"))
    pairs = F.flatten(
        F.transform(
            ids,
            lambda x, i: F.transform(
                F.slice(ids, i + 2, F.size(ids)),
                lambda y: F.struct(F.least(x, y).alias("a"), F.greatest(x, y).alias("b")),
            ),
        )
    )
    return candidates.select("candidate_id", F.explode(pairs).alias("p")).select(
        "candidate_id", F.col("p.a").alias("job_a"), F.col("p.b").alias("job_b")
    )


@lru_cache(maxsize=2)
def _unit_vectors(vectors_file: str) -> np.ndarray:
    """Unit word vectors, loaded (memory-mapped) once per worker process."""
    from gensim.models import KeyedVectors

    return unit_vectors(np.asarray(KeyedVectors.load(vectors_file, mmap="r").vectors))


def pair_similarities(
    frames: Iterable[pd.DataFrame], vectors_file: str, exact: bool
) -> Iterator[pd.DataFrame]:
    """`mapInPandas` body: for `job_a, job_b, ids_a, ids_b`, the similarity's bounds (or its
    exact value, as both bounds, when `exact`)."""
    unit = _unit_vectors(vectors_file)
    for frame in frames:
        low = np.empty(len(frame))
        high = np.empty(len(frame))
        for row, (ids_a, ids_b) in enumerate(zip(frame["ids_a"], frame["ids_b"], strict=True)):
            doc_a = WmdDocument.from_word_ids(ids_a)
            doc_b = WmdDocument.from_word_ids(ids_b)
            if exact:
                distance = wmd(unit, doc_a, doc_b)
                low[row] = high[row] = float(similarity(distance))
            else:
                lower, upper = wmd_bounds(unit, doc_a, doc_b)
                low[row], high[row] = float(similarity(upper)), float(similarity(lower))
        yield pd.DataFrame(
            {"job_a": frame["job_a"], "job_b": frame["job_b"], "sim_low": low, "sim_high": high}
        )


def score_pairs(
    pairs: DataFrame, documents: DataFrame, vectors_file: str, exact: bool, partitions: int
) -> DataFrame:
    """Similarity bounds (or exact values) for distinct `job_a, job_b` pairs."""
    docs_a = documents.select(F.col("job_id").alias("job_a"), F.col("word_ids").alias("ids_a"))
    docs_b = documents.select(F.col("job_id").alias("job_b"), F.col("word_ids").alias("ids_b"))
    work = pairs.join(docs_a, "job_a").join(docs_b, "job_b").repartition(partitions)
    return work.select("job_a", "job_b", "ids_a", "ids_b").mapInPandas(
        lambda frames: pair_similarities(frames, vectors_file, exact), PAIR_SCHEMA
    )


def job_means(pairs: DataFrame, scores: DataFrame) -> DataFrame:
    """`candidate_id, job_id, mean_low, mean_high`: each job's mean similarity bounds to the
    candidate's other jobs."""
    scored = pairs.join(scores, ["job_a", "job_b"])
    both_ways = scored.select(
        "candidate_id", F.col("job_a").alias("job_id"), "sim_low", "sim_high"
    ).unionByName(
        scored.select("candidate_id", F.col("job_b").alias("job_id"), "sim_low", "sim_high")
    )
    return both_ways.groupBy("candidate_id", "job_id").agg(
        F.avg("sim_low").alias("mean_low"), F.avg("sim_high").alias("mean_high")
    )


def decide(means: DataFrame, threshold: float) -> DataFrame:
    """`decision`: keep (the lower bound is above the threshold), drop (the upper bound is not),
    or undecided."""
    return means.withColumn(
        "decision",
        F.when(F.col("mean_low") > threshold, "keep")
        .when(F.col("mean_high") <= threshold, "drop")
        .otherwise("undecided"),
    )


def positive_job(sequence: Column) -> Column:
    """The highest-scored job; on a tie, the most recent (latest in the sequence)."""
    ranked = F.transform(
        sequence,
        lambda e, i: F.struct(
            e["score"].alias("score"), i.alias("pos"), e["job_id"].alias("job_id")
        ),
    )
    return F.array_max(ranked)["job_id"]


@dataclass(frozen=True)
class CleaningOutputs:
    candidates: DataFrame  # candidate_id, sequence, positive_job_id
    similarities: DataFrame  # candidate_id, job_id, mean_low, mean_high, decision


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
    eligible = apply_rules(candidates, rules).cache()
    pairs = candidate_pairs(eligible).cache()
    distinct = pairs.select("job_a", "job_b").distinct()
    first = score_pairs(
        distinct, documents, vectors_file, exact=not prune, partitions=partitions
    ).cache()
    decided = decide(job_means(pairs, first), threshold)
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
        refined = first.join(exact, ["job_a", "job_b"], "left_anti").unionByName(exact)
        decided = decide(job_means(pairs, refined), threshold)
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
    return CleaningOutputs(candidates=cleaned, similarities=decided)


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
        ]
        return "\n".join(["Cleaning funnel", *(f"  {k:<36} {v:>12}" for k, v in rows)])


def run_cleaning(spark: SparkSession, config: JobrecConfig) -> Funnel:
    """bronze candidates -> silver candidates (+ per-job similarities), with the funnel."""
    from jobrec_core import manifest
    from jobrec_core.io import read_delta, table_path, write_delta
    from jobrec_core.quality import split_quarantine, write_quarantine

    embeddings = manifest.current(config, "embeddings")
    jobs = read_delta(spark, embeddings["jobs"])
    from gensim.models import KeyedVectors

    vectors_file = local_path(embeddings["vectors"])
    words = KeyedVectors.load(vectors_file, mmap="r").index_to_key
    vocabulary = spark.createDataFrame(list(enumerate(words)), "word_id INT, term STRING")
    documents = wmd_documents(jobs, vocabulary, config.cleaning.wmd_fields).cache()

    bronze = read_delta(spark, table_path(config, "bronze", "candidates"))
    unknown = (
        bronze.select("candidate_id", F.explode("sequence.job_id").alias("job_id"))
        .join(documents.select("job_id"), "job_id", "left_anti")
        .groupBy("candidate_id")
        .agg(F.min("job_id").alias("unknown_job"))
    )
    marked = bronze.join(unknown, "candidate_id", "left").select(
        "candidate_id",
        "sequence",
        F.to_json(F.struct("candidate_id", "sequence")).alias("record"),
        F.when(F.col("unknown_job").isNotNull(), F.lit("unknown_job_id")).alias("reason"),
        F.format_string("job %d is not in the jobs table", F.col("unknown_job")).alias("detail"),
    )
    valid, quarantine = split_quarantine(marked, "clean_candidates", "record")
    write_quarantine(quarantine, table_path(config, "bronze", "quarantine"), "clean_candidates")

    outputs = clean_candidates(
        spark,
        valid.drop("record"),
        documents,
        vectors_file,
        config.cleaning,
        prune=config.cleaning.wmd_prune,
        partitions=config.spark.shuffle_partitions,
    )
    write_delta(outputs.candidates, table_path(config, "silver", "candidates"))
    write_delta(outputs.similarities, table_path(config, "silver", "job_similarity"))
    similarities = read_delta(spark, table_path(config, "silver", "job_similarity"))
    eligible = apply_rules(valid, config.cleaning)
    pairs = candidate_pairs(eligible)
    funnel = Funnel(
        candidates=bronze.count(),
        quarantined_unknown_jobs=quarantine.count(),
        after_rules=eligible.count(),
        jobs_before_wmd=similarities.count(),
        jobs_removed_by_wmd=similarities.where(F.col("decision") == "drop").count(),
        after_wmd_and_rules=read_delta(spark, table_path(config, "silver", "candidates")).count(),
        pairs=pairs.count(),
        distinct_pairs=pairs.select("job_a", "job_b").distinct().count(),
    )
    manifest.record(
        config,
        "cleaned_candidates",
        {"table": table_path(config, "silver", "candidates"), "embeddings": embeddings["version"]},
    )
    return funnel
