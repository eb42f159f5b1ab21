"""The distributed Word Mover's Distance filter: job documents as nBOWs, the candidate's job
pairs, centroid bounds first, the exact WMD only where the bounds cannot decide, and the jobs
whose mean similarity to the candidate's other jobs is below the threshold."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.text.tokens import tokens_column
from jobrec_core.text.vectors import keyed_vectors, worker_cached
from jobrec_core.text.wmd import (
    DocumentBatch,
    VectorTable,
    WmdDocument,
    centroid,
    centroid_bounds,
    similarity,
    wmd_pairs,
)

PAIR_SCHEMA = "job_a INT, job_b INT, sim_low DOUBLE, sim_high DOUBLE"


DOCUMENT_SCHEMA = (
    "job_id INT, ids ARRAY<INT>, weights ARRAY<DOUBLE>, centroid ARRAY<DOUBLE>, sq_norm DOUBLE"
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


def _vector_table(vectors_file: str) -> VectorTable:
    """The word vectors' table, built once per worker process."""
    return worker_cached(
        "vector_table",
        vectors_file,
        lambda: VectorTable.from_vectors(np.asarray(keyed_vectors(vectors_file).vectors)),
    )


def nbow_documents(frames: Iterable[pd.DataFrame], vectors_file: str) -> Iterator[pd.DataFrame]:
    """`mapInPandas` body, once per job: the nBOW (unique ids, weights) and its centroid."""
    table = _vector_table(vectors_file)
    for frame in frames:
        docs = [
            WmdDocument.from_word_ids(np.asarray(ids, dtype=np.int64)) for ids in frame["word_ids"]
        ]
        centroids = [centroid(table, doc) for doc in docs]
        yield pd.DataFrame(
            {
                "job_id": frame["job_id"],
                "ids": [doc.ids.astype(np.int32) for doc in docs],
                "weights": [doc.weights for doc in docs],
                "centroid": [c for c, _ in centroids],
                "sq_norm": [n for _, n in centroids],
            }
        )


def bound_similarities(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """`mapInPandas` body: similarity bounds from centroids, vectorised over each batch."""
    for frame in frames:
        if frame.empty:
            continue
        lower, upper = centroid_bounds(
            np.stack(frame["centroid_a"].to_numpy()),
            frame["sq_norm_a"].to_numpy(),
            np.stack(frame["centroid_b"].to_numpy()),
            frame["sq_norm_b"].to_numpy(),
        )
        yield pd.DataFrame(
            {
                "job_a": frame["job_a"],
                "job_b": frame["job_b"],
                "sim_low": similarity(upper),
                "sim_high": similarity(lower),
            }
        )


def exact_similarities(
    batches: Iterable[pa.RecordBatch], vectors_file: str
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: exact similarities (as both bounds) of `job_a, job_b` pairs. The
    documents go to the compiled solver as the flat arrays Arrow holds, with no Python object
    per pair (pandas would build four numpy arrays per pair, which costs more than the WMD)."""
    table = _vector_table(vectors_file)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        documents = DocumentBatch.concat(
            DocumentBatch.from_arrow(batch.column("ids_a"), batch.column("weights_a")),
            DocumentBatch.from_arrow(batch.column("ids_b"), batch.column("weights_b")),
        )
        first = np.arange(batch.num_rows, dtype=np.int64)
        values = pa.array(similarity(wmd_pairs(table, documents, first, first + batch.num_rows)))
        yield pa.RecordBatch.from_arrays(
            [batch.column("job_a"), batch.column("job_b"), values, values],
            names=["job_a", "job_b", "sim_low", "sim_high"],
        )


def score_pairs(
    pairs: DataFrame, documents: DataFrame, vectors_file: str, exact: bool, partitions: int
) -> DataFrame:
    """Similarity bounds (centroids) or exact values for distinct `job_a, job_b` pairs."""
    columns = ["ids", "weights"] if exact else ["centroid", "sq_norm"]

    def side(suffix: str) -> DataFrame:
        return documents.select(
            F.col("job_id").alias(f"job_{suffix}"),
            *[F.col(c).alias(f"{c}_{suffix}") for c in columns],
        )

    work = pairs.join(side("a"), "job_a").join(side("b"), "job_b").repartition(partitions)
    if exact:
        return work.mapInArrow(
            lambda batches: exact_similarities(batches, vectors_file), PAIR_SCHEMA
        )
    return work.mapInPandas(bound_similarities, PAIR_SCHEMA)


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


def removal_decisions(means: DataFrame, threshold: float) -> DataFrame:
    """`decision`: keep (the lower bound is above the threshold), drop (the upper bound is not),
    or undecided."""
    return means.withColumn(
        "decision",
        F.when(F.col("mean_low") > threshold, "keep")
        .when(F.col("mean_high") <= threshold, "drop")
        .otherwise("undecided"),
    )
