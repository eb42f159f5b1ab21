"""The ranking pipeline's steps on pandas: the contract, composition, ranks and cut-offs."""

from dataclasses import dataclass
from datetime import UTC, date, datetime

import numpy as np
import pandas as pd
import pytest

from jobrec_core.config import load_config
from jobrec_core.features.profile import PROFILE_ROLE
from jobrec_core.ranking.pipeline import (
    Bm25Retriever,
    Clock,
    Columns,
    Cutoff,
    DocumentText,
    LiveOnly,
    PerQuery,
    Pipeline,
    PoolsPerQuery,
    ProfileRows,
    Reranker,
    ScoreColumns,
    _ranked_hits,
    _ranks,
    by_job_id,
    field_name,
    job_rows,
    pool_rows_of,
    spark_table,
)
from jobrec_core.ranking.scorers import Bm25Scorer, score_column
from jobrec_core.search.connection import EsConnection


@dataclass(frozen=True)
class JobIdScorer:
    """Prefers the higher job id: an order unlike BM25's, to see a re-ranker reorder."""

    name: str = "job id"

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({"job_id"})

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        return frame["job_id"].to_numpy(dtype=np.float64)


def retrieved() -> pd.DataFrame:
    queries = pd.DataFrame(
        {
            "candidate_id": [1, 2],
            "query_terms": [["java", "developer"], ["nurse"]],
            "query_job_share": [[1.0, 0.5], [1.0]],
            "own_job_ids": [[30], []],
            "sequence_job_ids": [[30, 70], []],
            "full_hits": [
                [
                    {"job_id": 30, "score": 9.0},
                    {"job_id": 10, "score": 5.0},
                    {"job_id": 20, "score": 5.0},
                    {"job_id": 40, "score": 1.0},
                ],
                [{"job_id": 50, "score": 3.0}, {"job_id": 60, "score": 2.0}],
            ],
        }
    )
    return _ranked_hits(queries)


def test_retrieval_drops_own_jobs_keeps_bm25_ranks_and_breaks_ties_by_job_id():
    frame = retrieved()
    first = frame[frame["candidate_id"] == 1]
    assert first["job_id"].tolist() == [10, 20, 40]  # 30 is the candidate's own job
    assert first["bm25_rank"].tolist() == [2, 3, 4]  # ranks as the index returned them
    assert first["rank"].tolist() == [1, 2, 3]  # 10 and 20 tie on score: the lower id first
    assert list(frame.columns) == [
        "candidate_id",
        "query_terms",
        "query_job_share",
        "job_id",
        "score",
        "rank",
        "bm25",
        "bm25_rank",
        "own_job_ids",
        "sequence_job_ids",
    ]
    assert first["sequence_job_ids"].tolist() == [[30, 70]] * 3


def test_a_reranker_replaces_score_and_rank_and_the_cutoff_keeps_the_top_k():
    pipeline = Reranker(JobIdScorer()) % 2
    assert isinstance(pipeline, Pipeline) and isinstance(pipeline.steps[-1], Cutoff)
    top = pipeline.transform(retrieved())
    assert top[top["candidate_id"] == 1]["job_id"].tolist() == [40, 20]
    assert top[top["candidate_id"] == 2]["job_id"].tolist() == [60, 50]
    assert top["rank"].tolist() == [1, 2, 1, 2]
    assert "bm25_rank" in top.columns  # what came before is kept


def test_composition_flattens_and_score_columns_keep_only_what_is_asked():
    both = ScoreColumns([Bm25Scorer(), JobIdScorer()], keep=["candidate_id", "job_id"])
    pipeline = Reranker(JobIdScorer()) >> (both % 10)
    assert len(pipeline.steps) == 3
    scored = both.transform(retrieved())
    assert list(scored.columns) == [
        "candidate_id",
        "job_id",
        score_column(Bm25Scorer()),
        score_column(JobIdScorer()),
    ]
    assert scored[score_column(Bm25Scorer())].tolist() == retrieved()["bm25"].tolist()


def test_a_step_on_an_in_memory_table_serves_requests_and_refuses_spark():
    tokens = pd.DataFrame(
        {
            "job_id": np.array([20, 40, 99], dtype=np.int32),
            "doc_tokens": [["a"], ["b", "c"], ["z"]],
            "lead_len": [None] * 3,
        }
    )
    step = DocumentText(tokens)
    ranked = Reranker(JobIdScorer()).transform(retrieved())
    texts = step.transform(ranked)
    # the jobs without a text leave, the others keep their order and gain theirs
    assert texts["job_id"].tolist() == [j for j in ranked["job_id"] if j in (20, 40)]
    assert texts.set_index("job_id")["doc_tokens"].to_dict() == {20: ["a"], 40: ["b", "c"]}
    with pytest.raises(TypeError, match="no Spark form"):
        spark_table(step.tokens)


def test_ranks_order_each_candidate_by_score_then_job_id_missing_scores_last():
    frame = pd.DataFrame(
        {
            "candidate_id": [2, 1, 1, 2, 1, 1],
            "job_id": [7, 30, 10, 5, 20, 40],
            "score": [1.0, 5.0, 5.0, 1.0, np.nan, 9.0],
        },
        index=[10, 11, 12, 13, 14, 15],
    )
    assert _ranks(frame).tolist() == [2, 3, 2, 1, 4, 1]
    assert _ranks(frame.iloc[:0]).tolist() == []


def test_a_table_indexed_by_job_id_gives_the_rows_a_scan_gives():
    tokens = pd.DataFrame(
        {"job_id": np.array([40, 20, 99], dtype=np.int32), "doc_tokens": [["b"], ["a"], ["z"]]},
        index=[5, 6, 7],
    )
    for wanted in ([20, 40, 41], [99, 99], [], [1]):
        pd.testing.assert_frame_equal(job_rows(by_job_id(tokens), wanted), job_rows(tokens, wanted))
    assert job_rows(by_job_id(tokens), [20, 40])["job_id"].tolist() == [40, 20]  # table order
    with pytest.raises(ValueError, match="one row per job_id"):
        by_job_id(pd.concat([tokens, tokens]))


def test_consecutive_query_steps_run_as_one_grouped_pass_in_spark():
    """Spark runs each run of query steps as one `PerQuery` pass: the histograms never leave
    Python between the features and the scores. A lone query step keeps its own form."""
    tokens = pd.DataFrame({"job_id": [1], "doc_tokens": [["a"]]})
    rerank = Reranker(JobIdScorer())
    pipeline = DocumentText(tokens) >> rerank % 3 >> DocumentText(tokens) >> Cutoff(2)
    steps = pipeline.spark_steps
    assert [type(s).__name__ for s in steps] == [
        "DocumentText",
        "PerQuery",
        "DocumentText",
        "Cutoff",
    ]
    assert isinstance(steps[1], PerQuery) and steps[1].steps == (rerank, Cutoff(3))
    # the pandas form is the steps' own, in order
    top = steps[1].transform(retrieved())
    pd.testing.assert_frame_equal(top, (rerank % 3).transform(retrieved()))


def test_a_retriever_hands_its_pools_straight_to_the_query_steps_after_it():
    """A retriever followed by a pass of query steps is one step in Spark, `PoolsPerQuery`:
    the pools go to the pass as searched. A lone query step, or one that joins in Spark,
    keeps the retriever's rows."""
    settings = load_config("local", [], None).retrieval
    retriever = Bm25Retriever(
        EsConnection(("http://localhost:9200",), False, 1.0), "jobs", settings
    )
    rerank = Reranker(JobIdScorer())
    steps = (retriever >> rerank % 3).spark_steps
    assert steps == [PoolsPerQuery(retriever, PerQuery((rerank, Cutoff(3))))]
    assert (retriever >> rerank).spark_steps == [retriever, rerank]
    joined = DocumentText(pd.DataFrame({"job_id": [1], "doc_tokens": [["a"]]}))  # not shipped
    assert [type(s).__name__ for s in (retriever >> joined >> rerank % 3).spark_steps] == [
        "Bm25Retriever",
        "DocumentText",
        "PerQuery",
    ]


def test_query_steps_say_which_columns_leave_them():
    fields = ["`candidate_id` bigint", "`job_id` int", "`score` double", "`rank` int"]
    assert Reranker(JobIdScorer()).spark_fields(fields) == fields
    assert Cutoff(10).spark_fields(fields) == fields
    kept = ScoreColumns([Bm25Scorer(), JobIdScorer()], keep=["job_id", "candidate_id"])
    assert kept.spark_fields(fields) == [
        "`job_id` int",
        "`candidate_id` bigint",
        f"`{score_column(Bm25Scorer())}` DOUBLE",
        f"`{score_column(JobIdScorer())}` DOUBLE",
    ]
    # and the pandas form gives those columns, in that order
    scored = kept.transform(retrieved())
    assert list(scored.columns) == [field_name(f) for f in kept.spark_fields(fields)]
    chosen = Columns(("job_id", "score"))
    assert chosen.spark_fields(fields) == ["`job_id` int", "`score` double"]
    assert list(chosen.transform(retrieved()).columns) == ["job_id", "score"]
    with pytest.raises(ValueError, match="not in the pipeline's rows"):
        Columns(("job_id", "doc_tokens")).spark_fields(fields)


def test_the_recommended_columns_are_the_last_step_of_the_fused_pass():
    """The pass keeps only what a recommendation says: its working columns (the jobs' text,
    the histograms) never go back to Spark."""
    rerank = Reranker(JobIdScorer())
    pipeline = DocumentText(pd.DataFrame({"job_id": [1], "doc_tokens": [["a"]]}))
    steps = (pipeline >> rerank % 3 >> Columns(("candidate_id", "job_id"))).spark_steps
    assert steps[1] == PerQuery((rerank, Cutoff(3), Columns(("candidate_id", "job_id"))))


def test_profile_rows_come_in_the_order_the_grouped_pass_sorts_them_into():
    """Each candidate's own jobs first, then its pool, each by job id, the candidates where
    they were: the order Spark's grouped pass gives the same rows, so that the profile
    features add up to the same bits on either plan."""
    pool = pd.DataFrame(
        {
            "candidate_id": [2, 2, 1, 1],
            "query_terms": [["b"], ["b"], ["a"], ["a"]],
            "query_job_share": [[1.0], [1.0], [1.0], [1.0]],
            "job_id": [40, 12, 30, 11],
            "own_job_ids": [[7, 5], [7, 5], [9], [9]],
        }
    )
    tokens = pd.DataFrame({"job_id": [5, 7, 9, 11, 12, 30, 40], "doc_tokens": [["w"]] * 7})
    graph = pd.DataFrame({"job_id": [5], "neighbours": [[7]], "counts": [[1]], "interested": [1]})
    rows = ProfileRows(by_job_id(tokens), by_job_id(graph)).transform(pool)
    assert rows[["candidate_id", PROFILE_ROLE, "job_id"]].values.tolist() == [
        [2, "own", 5],
        [2, "own", 7],
        [2, "pool", 12],
        [2, "pool", 40],
        [1, "own", 9],
        [1, "pool", 11],
        [1, "pool", 30],
    ]


def test_a_batch_of_pools_becomes_rows_ranked_within_each_pool():
    """`pool_rows_of` (a worker's side of `PoolsPerQuery`): a row per kept hit, the query's
    columns repeated, `rank` its place in its pool; numbers as pandas makes them of Python
    numbers (what the grouped pass reads), NaN where BM25 did not rank a job."""
    pools = pd.DataFrame(
        {
            "candidate_id": [7, 8, 9],
            "query_terms": [np.array(["a", "b"]), np.array(["c"]), np.array(["d"])],
            "query_job_share": [np.array([1.0, 0.5]), np.array([1.0]), np.array([1.0])],
            "own_job_ids": [np.array([3]), np.array([], dtype=int), None],
            "sequence_job_ids": [np.array([3]), np.array([], dtype=int), None],
            "pool_job_id": [np.array([5, 4], dtype=np.int32), None, np.array([6])],
            "pool_score": [np.array([0.5, 0.25]), None, np.array([0.1])],
            "pool_bm25": [np.array([2.5, 1.5], dtype=np.float32), None, np.array([1.0])],
            "pool_bm25_rank": [np.array([1.0, np.nan]), None, np.array([2])],
        }
    )
    rows, counts = pool_rows_of(pools)
    assert counts.tolist() == [2, 0, 1]
    assert rows["candidate_id"].tolist() == [7, 7, 9]
    assert rows["job_id"].tolist() == [5, 4, 6] and rows["job_id"].dtype == np.int64
    assert rows["rank"].tolist() == [1, 2, 1]
    assert rows["bm25"].dtype == np.float64 and rows["bm25"].tolist() == [2.5, 1.5, 1.0]
    assert rows["bm25_rank"].isna().tolist() == [False, True, False]
    assert [list(t) for t in rows["query_terms"]] == [["a", "b"], ["a", "b"], ["d"]]
    assert list(rows.columns) == list(retrieved().columns)
    whole, _ = pool_rows_of(pools.assign(pool_bm25_rank=[np.array([1, 2]), None, [3]]))
    assert whole["bm25_rank"].dtype == np.int64


def test_only_the_ads_live_on_the_clocks_day_stay_in_the_pool():
    """An ad posted after the day or expired by it leaves the pool; the ranks count the rest,
    in the pool's order; undated ads are always live."""
    dates = by_job_id(
        pd.DataFrame(
            {
                "job_id": [10, 20, 40, 50, 60],
                "posted_at": [date(2025, 10, 1), date(2025, 10, 1), None, None, date(2025, 11, 1)],
                "expires_at": [date(2025, 10, 20), date(2025, 10, 10), None, None, None],
            }
        )
    )
    frame = retrieved()
    kept = LiveOnly(dates, Clock(date(2025, 10, 15))).transform(frame)
    assert kept["job_id"].tolist() == [10, 40, 50]  # 20 expired on the 10th, 60 not yet posted
    assert kept["rank"].tolist() == [1, 2, 1]
    assert LiveOnly(dates, Clock(date(2025, 10, 5))).transform(frame)["job_id"].tolist() == [
        10,
        20,
        40,
        50,
    ]
    assert Clock().today() == datetime.now(UTC).date()  # no day: today's, at each call
