"""The dense and hybrid requests and the client-side fusion (no node needed)."""

from __future__ import annotations

import pytest

from jobrec_core.config import load_config
from jobrec_core.search.bm25 import scored_jobs, with_scores_of
from jobrec_core.search.dense import (
    VECTOR_FIELD,
    knn_body,
    reciprocal_rank_fusion,
    rescore_body,
)


def test_fusion_sums_reciprocal_ranks_and_breaks_ties_by_job_id():
    fused = reciprocal_rank_fusion([[10, 20, 30], [30, 40]], k=60, top=10)
    scores = dict(fused)
    assert scores[30] == pytest.approx(1 / 63 + 1 / 61)  # in both lists
    assert scores[10] == pytest.approx(1 / 61)
    assert [job for job, _ in fused] == [30, 10, 20, 40]
    # equal sums (first of one list, first of the other): the lower job id first
    assert [job for job, _ in reciprocal_rank_fusion([[5], [3]], 60, 10)] == [3, 5]
    assert len(reciprocal_rank_fusion([[1, 2, 3], [4, 5, 6]], 60, top=4)) == 4
    assert reciprocal_rank_fusion([[], []], 60, 10) == []


def test_knn_request_is_exact_size_and_asks_no_source():
    body = knn_body([0.5, -0.5], 110)
    assert body["knn"]["field"] == VECTOR_FIELD
    assert body["knn"]["k"] == body["knn"]["num_candidates"] == body["size"] == 110
    assert body["knn"]["query_vector"] == [0.5, -0.5]
    assert body["stored_fields"] == "_none_" and body["docvalue_fields"] == ["job_id"]


def test_rescoring_is_the_paper_query_restricted_to_the_pool():
    settings = load_config("local").retrieval
    body = rescore_body("nurse ward", [7, 3], settings)
    query = body["query"]["bool"]
    assert query["filter"] == [{"ids": {"values": ["7", "3"]}}]
    assert query["should"][0]["multi_match"]["query"] == "nurse ward"
    assert body["size"] == 2


def test_scores_beside_the_hits_ride_in_a_bucket_of_the_same_request():
    body = with_scores_of({"query": {"match_all": {}}, "size": 3}, [7, 3])
    assert body["query"] == {"match_all": {}} and body["size"] == 3  # the search is unchanged
    bucket = next(iter(body["aggs"].values()))
    assert bucket["filter"] == {"ids": {"values": ["7", "3"]}}
    assert next(iter(bucket["aggs"].values()))["top_hits"]["size"] == 2
    name = next(iter(body["aggs"]))
    hit = {"fields": {"job_id": [7]}, "_score": 1.5}
    answer = {"aggregations": {name: {"hits": {"hits": {"hits": [hit]}}}}}
    assert scored_jobs(answer) == {7: 1.5}
    assert scored_jobs({"hits": {"hits": []}}) is None  # an answer without the bucket
