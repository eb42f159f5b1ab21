"""Stored searches (`RetrievalCheckpoint`) after an outage: the failed ones are searched again
on the rerun and replaced by their answers, the others are not searched again."""

from __future__ import annotations

import pytest

from jobrec_core.platform.quarantine import DataQualityError
from jobrec_core.platform.tables import read_delta
from jobrec_core.search.bm25 import FULL_QUERY, QUERY_HASH, RetrievalCheckpoint, retrieve
from jobrec_core.search.connection import make_client, resolve_connection

pytestmark = pytest.mark.integration

INDEX = "checkpoint_jobs"
WORDS = ["nurse", "driver", "cook", "teacher", "welder"]


@pytest.fixture(scope="module")
def index(config, es_node):
    """One job per word, its title that word."""
    client = make_client(resolve_connection(config))
    client.options(ignore_status=404).indices.delete(index=INDEX)
    client.indices.create(
        index=INDEX,
        settings={"number_of_shards": 1, "number_of_replicas": 0},
        mappings={"properties": {"job_id": {"type": "integer"}, "title": {"type": "text"}}},
    )
    for job, word in enumerate(WORDS, start=1):
        client.index(index=INDEX, id=str(job), document={"job_id": job, "title": word})
    client.indices.refresh(index=INDEX)
    yield INDEX
    client.indices.delete(index=INDEX)


def test_failed_searches_are_searched_again_and_replaced_by_their_answers(
    spark, config, index, tmp_path
):
    config = config.model_copy(
        update={"retrieval": config.retrieval.model_copy(update={"checkpoint_queries": 2})}
    )
    connection = resolve_connection(config)
    queries = spark.createDataFrame(
        [(i, [w]) for i, w in enumerate(WORDS)], "candidate_id LONG, query_terms ARRAY<STRING>"
    )
    searched: list[list[int]] = []
    answering = [1]  # chunks searched in the index before the outage; then a missing index

    def search(rows):
        searched.append(sorted(r.candidate_id for r in rows.select("candidate_id").collect()))
        target = index if len(searched) <= answering[0] else "checkpoint_missing"
        return retrieve(rows, connection, target, config.retrieval, 1, FULL_QUERY)

    path = str(tmp_path / "retrieval")
    checkpoint = RetrievalCheckpoint(config, path, "test_outage")
    with pytest.raises(DataQualityError, match="test_outage: 3 of 5 records"):
        checkpoint(search, queries, queries, "index-a")
    assert searched == [[0, 1], [2, 3], [4]]
    failed = read_delta(spark, path).where("error IS NOT NULL")
    assert sorted(r.candidate_id for r in failed.collect()) == [2, 3, 4]

    # the outage is over: the rerun searches the failed queries only, and stores their answers
    # in place of the failures
    searched.clear()
    answering[0] = 10
    stored = checkpoint(search, queries, queries, "index-a")
    assert searched == [[2, 3], [4]]
    assert checkpoint.resumed == 2 and checkpoint.searched == 5 and checkpoint.failed == 0
    hits = {r.candidate_id: [h.job_id for h in r.full_hits] for r in stored.collect()}
    assert hits == {i: [i + 1] for i in range(len(WORDS))}
    table = read_delta(spark, path)
    assert table.count() == table.select("candidate_id", QUERY_HASH).distinct().count() == 5
    assert table.where("error IS NOT NULL").count() == 0

    searched.clear()
    checkpoint(search, queries, queries, "index-a")
    assert searched == []  # everything answered: nothing searched
