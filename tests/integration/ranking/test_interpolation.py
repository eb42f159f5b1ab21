"""The mix with BM25 in Spark: whole queries, however the rows are batched."""

import numpy as np
import pandas as pd
import pytest

from jobrec_core.ranking.interpolation import zscores
from jobrec_core.ranking.pipeline import ScoreColumns
from jobrec_core.ranking.scorers import Bm25Mix, score_column

pytestmark = pytest.mark.integration

QUERY = np.array([1, 1, 1, 2, 2, 2, 2])
BM25 = np.array([10.0, 30.0, 50.0, 100.0, 300.0, 200.0, 400.0])


class ReversedBm25:
    name = "reversed"
    reads = frozenset({"bm25"})

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        return -frame["bm25"].to_numpy(dtype=np.float64)


def test_a_mixed_scorer_scores_the_same_in_pandas_and_in_spark(spark):
    frame = pd.DataFrame(
        {"candidate_id": QUERY, "job_id": np.arange(len(QUERY)), "bm25": BM25, "x": BM25}
    )
    mix = Bm25Mix(ReversedBm25(), 0.25)
    step = ScoreColumns([mix], keep=["candidate_id", "job_id"])
    local = step.transform(frame)
    # small Arrow batches split the queries: the mix must still see whole queries
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
    try:
        collected: pd.DataFrame = step.transform_spark(
            spark.createDataFrame(frame).repartition(3)
        ).toPandas()
        distributed = collected.sort_values("job_id")
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    column = score_column(mix)
    assert list(distributed.columns) == ["candidate_id", "job_id", column]
    np.testing.assert_allclose(distributed[column].to_numpy(), local[column].to_numpy())
    expected = 0.25 * zscores(QUERY, -BM25) + 0.75 * zscores(QUERY, BM25)
    np.testing.assert_allclose(local[column].to_numpy(), expected)
