"""The online endpoint on the tiny preset, over HTTP in this process: the real champion from
the MLflow registry, the configured (hybrid) retriever on the session's Elasticsearch node,
the pipeline in pandas. Its top 10 is the batch path's, and bad requests are 4xx."""

from __future__ import annotations

import http.client
import json
import logging
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import functions as F

from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.serving.endpoint import RecommendServer
from jobrec_core.serving.online import PARTS
from jobrec_core.serving.stage import online_recommender, recommendations_of, run_recommend
from tests.helpers import serving

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(spark, champion) -> Iterator[RecommendServer]:
    config, _ = champion
    with serving(online_recommender(spark, config)) as running:
        yield running


def call(
    server: RecommendServer, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, Any]]:
    """One request on a connection of its own: (status, the JSON answer)."""
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), port, timeout=60)
    try:
        raw = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        connection.request(method, path, body=raw)
        response = connection.getresponse()
        assert response.getheader("Content-Type") == "application/json"
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def interests(spark, config, candidates: list[int]) -> dict[int, list[dict[str, int]]]:
    """Each cleaned candidate's jobs and scores, as a request sends them."""
    rows = (
        read_delta(spark, table_path(config, "silver", "candidates"))
        .where(F.col("candidate_id").isin(candidates))
        .select("candidate_id", "sequence")
        .collect()
    )
    return {
        int(r["candidate_id"]): [
            {"job_id": e["job_id"], "score": e["score"]} for e in r["sequence"]
        ]
        for r in rows
    }


def test_the_online_top_10_is_the_batch_recommendations(
    spark, champion, recommended, server, caplog
):
    config, version = champion
    requests = interests(spark, config, recommended)
    run_recommend(spark, config, recommended)  # the batch path, into gold/recommendations
    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup())
    with caplog.at_level(logging.INFO, logger="jobrec_core.serving.endpoint"):
        answers = {
            candidate: call(server, "POST", "/recommend", {"candidate_id": candidate, "jobs": jobs})
            for candidate, jobs in requests.items()
        }
    assert set(tracker.getJobIdsForGroup()) == jobs_before  # no Spark job answered a request

    columns = ["rank", "job_id", "title", "score", "bm25", "bm25_rank"]
    for candidate, (status, answer) in answers.items():
        assert status == 200
        assert (
            answer["model"]
            == f"{config.mlflow.model_name} version {version} ({config.model.version})"
        )
        assert answer["retriever"] == config.retrieval.retriever == "hybrid"
        assert set(answer["timings_ms"]) == {*PARTS, "total"}
        assert sum(answer["timings_ms"][p] for p in PARTS) <= answer["timings_ms"]["total"]
        online = pd.DataFrame(answer["recommendations"], columns=columns)
        batch = recommendations_of(spark, config, candidate)[columns].reset_index(drop=True)
        assert 0 < len(online) <= config.evaluation.k
        assert online["job_id"].tolist() == batch["job_id"].tolist()
        assert online["rank"].tolist() == batch["rank"].tolist()
        assert online["title"].tolist() == batch["title"].tolist()
        assert online["score"].to_numpy() == pytest.approx(batch["score"].to_numpy(), rel=1e-6)
        assert online["bm25"].to_numpy() == pytest.approx(batch["bm25"].to_numpy(), rel=1e-6)
        assert (
            online["bm25_rank"].fillna(-1).tolist()
            == batch["bm25_rank"].astype("float64").fillna(-1).tolist()
        )
    lines = [r.getMessage() for r in caplog.records if "POST /recommend 200" in r.getMessage()]
    assert len(lines) == len(requests)
    assert all("total" in line and "retrieval" in line for line in lines)


def test_bad_requests_are_4xx_with_a_reason_and_the_server_goes_on(spark, champion, server):
    config, _ = champion
    [known] = [
        int(r["job_id"])
        for r in read_delta(spark, table_path(config, "silver", "jobs"))
        .select("job_id")
        .limit(1)
        .collect()
    ]
    refused = {
        "malformed JSON": (b'{"jobs": [', 400, "not JSON"),
        "empty list": ({"jobs": []}, 400, "non-empty list"),
        "score out of range": ({"jobs": [{"job_id": known, "score": 11}]}, 400, "1 to 10"),
        "unknown job": ({"jobs": [{"job_id": -5, "score": 3}]}, 422, "unknown job ids"),
    }
    for name, (body, status, reason) in refused.items():
        got, answer = call(server, "POST", "/recommend", body)
        assert (got, reason in answer["error"]) == (status, True), name
    assert call(server, "POST", "/recommend", {"jobs": [{"job_id": -5, "score": 3}]})[1][
        "unknown_job_ids"
    ] == [-5]
    assert call(server, "GET", "/recommend")[0] == 405
    assert call(server, "POST", "/health", b"{}")[0] == 405
    assert call(server, "GET", "/nowhere")[0] == 404
    status, health = call(server, "GET", "/health")
    assert status == 200 and health["status"] == "ok" and health["jobs"] > 0
    status, answer = call(server, "POST", "/recommend", {"jobs": [{"job_id": known, "score": 7}]})
    assert status == 200 and answer["recommendations"][0]["rank"] == 1
