"""A retriever's pools in Spark: exploded into rows in Spark, or by the query steps' worker
(`PoolsPerQuery`), the same rows and the same ranked output."""

import numpy as np
import pandas as pd
import pytest

from jobrec_core.ranking.pipeline import (
    POOLS_SCHEMA,
    RANKED_SCHEMA,
    Cutoff,
    PerQuery,
    Reranker,
    _pool_rows,
    _pools,
    pool_rows_of,
)

pytestmark = pytest.mark.integration

HITS = "ARRAY<STRUCT<job_id: INT, score: FLOAT, bm25: FLOAT, bm25_rank: INT>>"


class Bm25AndRankScorer:
    """Reads the hits' columns as the features do: BM25, and its rank where there is one."""

    name = "bm25 and rank"
    reads = frozenset({"bm25", "bm25_rank"})

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        rank = frame["bm25_rank"].to_numpy(dtype=np.float64)
        return frame["bm25"].to_numpy(dtype=np.float64) - np.nan_to_num(rank, nan=50.0) / 7.0


def hit(job: int, score: float, bm25: float, rank: int | None) -> dict:
    return {"job_id": job, "score": score, "bm25": bm25, "bm25_rank": rank}


@pytest.fixture(scope="module")
def searched(spark):
    """Stored searches and their queries: own jobs among the hits, a kNN-only job (no BM25
    rank), an empty pool, a failed search and a query nobody searched."""
    retrieved = spark.createDataFrame(
        [
            (1, [hit(30, 0.9, 9.5, 1), hit(10, 0.8, 5.0, 2), hit(20, 0.7, 0.0, None)], None),
            (2, [hit(50, 0.5, 3.25, 1), hit(60, 0.5, 2.0, 2), hit(40, 0.1, 1.0, 3)], None),
            (3, [], None),
            (4, None, "timed out"),
            (5, [hit(70, 0.3, 4.0, 2), hit(80, 0.2, 3.0, 1)], None),
        ],
        f"candidate_id LONG, full_hits {HITS}, error STRING",
    )
    queries = spark.createDataFrame(
        [
            (i, terms, [1.0] * len(terms), own, own[::-1])
            for i, terms, own in [
                (1, ["java", "developer"], [30]),
                (2, ["nurse"], []),
                (3, ["cook"], [5]),
                (4, ["pilot"], []),
                (5, ["driver", "truck"], [90, 70]),
                (6, ["unsearched"], []),
            ]
        ],
        "candidate_id LONG, query_terms ARRAY<STRING>, query_job_share ARRAY<FLOAT>, "
        "own_job_ids ARRAY<INT>, sequence_job_ids ARRAY<INT>",
    )
    return _pools(retrieved, queries, lambda h, _position: (h["bm25"], h["bm25_rank"]))


def test_pools_become_the_same_rows_in_spark_and_in_a_worker(spark, searched):
    exploded = _pool_rows(searched)

    def fields(frame):
        return [(f.name, f.dataType.simpleString()) for f in frame.schema]

    assert fields(searched) == fields(spark.createDataFrame([], POOLS_SCHEMA))
    assert fields(exploded) == fields(spark.createDataFrame([], RANKED_SCHEMA))
    in_spark = pd.DataFrame(exploded.toPandas()).sort_values(["candidate_id", "rank"])
    in_worker, counts = pool_rows_of(pd.DataFrame(searched.toPandas()).sort_values("candidate_id"))
    assert counts.tolist() == [2, 3, 0, 1]  # own jobs left out; the failed search has no pool
    assert in_worker["job_id"].tolist() == [10, 20, 50, 60, 40, 80]
    assert in_worker["rank"].tolist() == [1, 2, 1, 2, 3, 1]
    assert in_worker["bm25_rank"].isna().tolist() == [False, True, False, False, False, False]
    in_spark = in_spark.reset_index(drop=True)
    for column in in_worker.columns:
        if in_worker[column].dtype == object:  # arrays
            assert [list(v) for v in in_worker[column]] == [list(v) for v in in_spark[column]]
        else:
            expected = in_spark[column].astype(in_worker[column].dtype)
            pd.testing.assert_series_equal(in_worker[column], expected, check_exact=True)


@pytest.mark.parametrize("queries_per_batch", [1, 3])
def test_the_steps_rank_the_pools_to_the_bit_as_after_the_grouped_rows(
    spark, searched, queries_per_batch
):
    steps = PerQuery((Reranker(Bm25AndRankScorer()), Cutoff(2)))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(queries_per_batch))
    try:
        grouped = pd.DataFrame(steps.transform_spark(_pool_rows(searched)).toPandas())
        pooled = pd.DataFrame(steps.transform_pools_spark(searched.repartition(2)).toPandas())
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert list(pooled.columns) == list(grouped.columns)
    order = ["candidate_id", "rank"]
    grouped = grouped.sort_values(order).reset_index(drop=True)
    pooled = pooled.sort_values(order).reset_index(drop=True)
    assert pooled["job_id"].tolist() == [10, 20, 50, 60, 80]
    pd.testing.assert_frame_equal(pooled, grouped, check_exact=True)
