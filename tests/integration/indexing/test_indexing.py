"""Stage 2 for real: Spark writes through the ES-Hadoop connector into the local node."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig, load_config
from jobrec_core.features.occupations import TITLE_CONFIDENCE, TITLE_OCCUPATION
from jobrec_core.indexing.stage import build_index, force_merge, run_indexing, segment_count
from jobrec_core.platform import manifest
from jobrec_core.platform.quarantine import DataQualityError
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.search.bm25 import multi_match_query, search_all
from jobrec_core.search.connection import (
    EsConnectionError,
    connector_options,
    make_client,
    resolve_connection,
    wait_for_primaries,
)
from jobrec_core.search.dense import VECTOR_FIELD, knn_body, rescore_body
from jobrec_core.search.index_versions import (
    IndexBuildError,
    list_versions,
    rollback,
    swap_alias,
)
from jobrec_core.search.local_node import LocalElasticsearch
from jobrec_core.text.tokens import tokens_column
from jobrec_core.timeline.asof import as_of, jobs_live_on, jobs_posted_by
from tests.helpers import REPO, state_overrides

pytestmark = pytest.mark.integration

FIELDS = ("title", "function", "requirement_summary", "keywords", "description")
# Hand-written job ads, already cleaned (lowercase words, no stop words), and queries whose
# best job a recruiter would agree on.
HAND_WRITTEN_JOBS = [
    (1, "python developer", "information technology", "degree computer science",
     "python django flask rest api", "develop web applications python backend services"),
    (2, "registered nurse", "healthcare", "nursing license bls certification",
     "patient care medication wards", "provide patient care hospital ward shifts"),
    (3, "truck driver", "transportation logistics", "commercial driving license",
     "cdl freight delivery", "drive heavy truck deliver freight regional routes"),
    (4, "accountant", "finance", "degree accounting cpa",
     "bookkeeping tax audit excel", "prepare financial statements tax returns"),
    (5, "data engineer", "information technology", "degree computer science",
     "python spark sql airflow", "build data pipelines spark warehouse"),
    (6, "chef", "hospitality", "culinary school experience",
     "cooking kitchen menu", "prepare meals restaurant kitchen team"),
    (7, "λογιστής", "οικονομικά", "πτυχίο λογιστικής",
     "λογιστική φορολογία", "τήρηση βιβλίων φορολογικές δηλώσεις"),
]  # fmt: skip
QUERIES = [
    ("python flask backend developer", 1),
    ("spark pipelines airflow python", 5),
    ("patient care nurse", 2),
    ("freight cdl driver", 3),
    ("tax audit accountant", 4),
    ("kitchen menu cooking", 6),
    ("λογιστική φορολογία", 7),
]
SCHEMA = "job_id INT, " + ", ".join(f"{f} STRING" for f in FIELDS)


def config_for(base: JobrecConfig, *overrides: str) -> JobrecConfig:
    """`base` (its state folders and node) with other settings."""
    return load_config(
        "local",
        [
            f"storage.root={base.storage.root}",
            f"elasticsearch.local.workdir={base.elasticsearch.local.workdir}",
            f"data.preset={base.data.preset}",
            "spark.shuffle_partitions=4",
            *overrides,
        ],
        REPO / "conf",
    )


def build(spark, config, documents, source=None):
    connection = resolve_connection(config)
    return build_index(
        spark,
        config,
        make_client(connection),
        connector_options(connection),
        documents,
        source or {"test": True},
    )


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def client(es_node, config):
    return make_client(resolve_connection(config))


@pytest.fixture(scope="module")
def indexed(tiny, tiny_indexed):
    """The tiny preset's jobs indexed once by the stage itself."""
    return tiny[0], tiny_indexed


def live_jobs(spark, config):
    """The tiny preset's ads live on the run's as-of date: what the `jobs` alias serves."""
    return jobs_live_on(read_delta(spark, table_path(config, "silver", "jobs")), as_of(config).day)


def test_dated_jobs_get_a_version_of_the_ads_live_and_one_of_every_ad_posted(
    spark, indexed, client
):
    """The live ads behind `jobs`, every ad posted by the as-of date behind `jobs_history`,
    each version of its own (BM25's statistics are its ads' alone)."""
    config, result = indexed
    day = as_of(config).day
    silver = read_delta(spark, table_path(config, "silver", "jobs"))
    posted = jobs_posted_by(silver, day)
    history = result.history
    assert history is not None and history.alias == "jobs_history"
    assert result.indexed == live_jobs(spark, config).count() < history.indexed
    assert history.indexed == posted.count() < silver.count()
    assert client.count(index="jobs_history")["count"] == history.indexed
    recorded = manifest.current(config, "index")
    assert (recorded["index"], recorded["history_index"]) == (result.index, history.index)
    assert day is not None and recorded["as_of"] == day.isoformat()


def test_every_job_carries_its_normalised_title_occupation(spark, indexed, client):
    config, result = indexed
    silver = live_jobs(spark, config)
    expected = {
        r.job_id: r[TITLE_OCCUPATION] for r in silver.select("job_id", TITLE_OCCUPATION).collect()
    }
    hits = client.search(index=result.index, size=10_000, source=[TITLE_OCCUPATION])["hits"]["hits"]
    assert {int(h["_id"]): h["_source"].get(TITLE_OCCUPATION) for h in hits} == expected
    code = next(c for c in expected.values() if c)
    found = client.search(index=result.index, query={"term": {TITLE_OCCUPATION: code}}, size=10_000)
    assert found["hits"]["total"]["value"] == sum(c == code for c in expected.values())


def test_every_job_is_indexed_once_under_the_alias(spark, indexed, client):
    config, result = indexed
    silver = live_jobs(spark, config)
    expected = {r.job_id for r in silver.select("job_id").collect()}
    assert result.indexed == result.source_documents == len(expected)
    assert client.count(index="jobs")["count"] == len(expected)
    ids = {
        int(h["_id"])
        for h in client.search(index="jobs", size=10_000, source=False)["hits"]["hits"]
    }
    assert ids == expected
    assert result.quarantined == {}


def test_mapping_settings_and_metadata(indexed, client):
    config, result = indexed
    body = client.indices.get(index=result.index)[result.index]
    mappings, settings = body["mappings"], body["settings"]["index"]
    assert mappings["dynamic"] == "strict"
    assert set(mappings["properties"]) == {
        "job_id",
        *FIELDS,
        VECTOR_FIELD,
        TITLE_OCCUPATION,
        TITLE_CONFIDENCE,
    }
    assert mappings["properties"][TITLE_OCCUPATION] == {"type": "keyword"}
    vector = mappings["properties"][VECTOR_FIELD]
    assert vector["dims"] == config.embeddings.vector_size and vector["similarity"] == "cosine"
    assert vector["index_options"]["type"] == "flat"  # exact kNN: the same on every build
    assert all(mappings["properties"][f]["similarity"] == "jobrec_bm25" for f in FIELDS)
    assert settings["similarity"]["jobrec_bm25"] == {"type": "BM25", "k1": "1.2", "b": "0.75"}
    # the build settings were restored
    assert settings["refresh_interval"] == config.indexing.refresh_interval
    assert settings["number_of_replicas"] == str(config.elasticsearch.replicas)
    assert settings["translog"]["durability"] == "request"
    meta = mappings["_meta"]["jobrec"]
    assert meta["complete"] is True
    assert meta["documents"] == result.indexed
    assert meta["source"]["dataset"] == "tiny"
    embeddings = manifest.current(config, "embeddings")["version"]
    assert meta["source"]["vectors_embeddings"] == embeddings


def test_every_job_has_its_vector_and_the_knn_search_finds_it_first(indexed, client):
    config, result = indexed
    with_vectors = client.count(index=result.index, query={"exists": {"field": VECTOR_FIELD}})
    assert with_vectors["count"] == result.indexed  # every tiny job has words with vectors
    stored = client.search(index=result.index, size=3, source=[VECTOR_FIELD], sort=["job_id"])
    for hit in stored["hits"]["hits"]:
        vector = np.asarray(hit["_source"][VECTOR_FIELD])
        assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-4)
        found = search_all(client, result.index, [vector], config.retrieval, knn_body)[0]
        assert found.hits is not None and len(found.hits) == config.retrieval.top_k
        best, score = found.hits[0]
        assert best == int(hit["_id"]) and score == pytest.approx(1.0)  # (1 + cosine) / 2


def test_indexed_terms_are_the_cleaned_tokens(spark, indexed, client):
    config, result = indexed
    row = (
        live_jobs(spark, config)
        .where(F.size(tokens_column("title")) >= 2)
        .orderBy("job_id")
        .first()
    )
    assert row is not None
    vectors = client.termvectors(index=result.index, id=str(row.job_id), fields=["title"])
    terms = set(vectors["term_vectors"]["title"]["terms"])
    assert terms == set(row[tokens_column("title")])


def test_rerun_swaps_the_alias_atomically_and_keeps_configured_versions(spark, indexed, client):
    """Two more runs: searchers always see the full count, old versions go past the limit."""
    config, first = indexed
    seen: list[int] = []
    stop = threading.Event()

    def search_while_building() -> None:
        while not stop.is_set():
            seen.append(client.count(index="jobs")["count"])
            time.sleep(0.02)

    watcher = threading.Thread(target=search_while_building)
    watcher.start()
    try:
        second = run_indexing(spark, config)
        third = run_indexing(spark, config)
    finally:
        stop.set()
        watcher.join()
    assert set(seen) == {first.indexed}, "a searcher saw a half-built index"
    assert second.indexed == third.indexed == first.indexed
    assert second.previous == [first.index]
    assert third.previous == [second.index]
    assert list(client.indices.get_alias(name="jobs")) == [third.index]
    versions = [(v.name, v.complete, v.aliased) for v in list_versions(client, "jobs")]
    # keep_versions = 2: the first build is gone
    assert versions == [(third.index, True, True), (second.index, True, False)]
    assert third.removed == [first.index]

    # a kept version can serve again at once
    assert rollback(client, "jobs") == ([third.index], second.index)
    assert list(client.indices.get_alias(name="jobs")) == [second.index]
    with pytest.raises(IndexBuildError, match="not a complete version"):
        rollback(client, "jobs", to=first.index)


def test_after_a_rollback_the_next_build_keeps_the_version_it_replaced(spark, config, client):
    """The alias was rolled back from a bad version to the one before; the next build's
    pruning keeps the version its swap moved the alias away from (the rollback target),
    though two newer ones are kept too (keep_versions = 2)."""
    config = config_for(config, "elasticsearch.index_alias=rolljobs")
    documents = spark.createDataFrame(HAND_WRITTEN_JOBS[:2], SCHEMA)
    good, bad = build(spark, config, documents), build(spark, config, documents)
    assert rollback(client, "rolljobs") == ([bad.index], good.index)
    nxt = build(spark, config, documents)
    assert nxt.previous == [good.index] and nxt.removed == []
    kept = [(v.name, v.aliased) for v in list_versions(client, "rolljobs")]
    assert kept == [(nxt.index, True), (bad.index, False), (good.index, False)]
    # Rolling back now goes to the version the build replaced, not to the newer bad one.
    assert rollback(client, "rolljobs") == ([nxt.index], good.index)
    swap_alias(client, "rolljobs", nxt.index)
    last = build(spark, config, documents)
    assert sorted(last.removed) == sorted([bad.index, good.index])
    assert [v.name for v in list_versions(client, "rolljobs")] == [last.index, nxt.index]


def test_a_version_whose_replicas_cannot_be_assigned_serves_with_a_warning(
    spark, config, client, caplog
):
    """One node cannot hold a replica: the index stays yellow. Past the health timeout the
    build warns and moves the alias; only red fails it."""
    config = config_for(
        config,
        "elasticsearch.index_alias=yellowjobs",
        "elasticsearch.replicas=1",
        "indexing.health_timeout_s=1",
    )
    documents = spark.createDataFrame(HAND_WRITTEN_JOBS[:2], SCHEMA)
    with caplog.at_level(logging.WARNING, logger="jobrec_core.indexing.stage"):
        result = build(spark, config, documents)
    try:
        assert result.indexed == 2
        assert client.cluster.health(index=result.index)["status"] == "yellow"
        assert f"{result.index} is yellow: replicas are not all allocated yet" in caplog.text
        assert list(client.indices.get_alias(name="yellowjobs")) == [result.index]
    finally:
        # the session's node is shared: a yellow index would turn the whole cluster yellow
        # for every later test
        client.indices.delete(index=result.index)


def test_a_failure_to_prune_after_the_swap_is_a_warning(spark, config, client, caplog):
    """Once the alias has moved the new version serves: an index that the pruning cannot
    read (named like a version, with a `_meta` it does not understand) leaves the build
    successful, with a warning."""
    config = config_for(config, "elasticsearch.index_alias=oddjobs")
    stray = "oddjobs_v0-by-hand"
    client.indices.create(index=stray, mappings={"_meta": {"jobrec": "not a mapping"}})
    documents = spark.createDataFrame(HAND_WRITTEN_JOBS[:2], SCHEMA)
    try:
        with caplog.at_level(logging.WARNING, logger="jobrec_core.indexing.stage"):
            result = build(spark, config, documents)
    finally:
        client.indices.delete(index=stray)
    assert result.indexed == 2 and result.removed == []
    assert "could not remove old versions of oddjobs" in caplog.text
    assert list(client.indices.get_alias(name="oddjobs")) == [result.index]


@pytest.fixture(scope="module")
def hand_written(spark, tiny, es_node):
    """The hand-written jobs indexed under their own alias."""
    config = config_for(tiny[0], "elasticsearch.index_alias=handjobs")
    documents = spark.createDataFrame(HAND_WRITTEN_JOBS, SCHEMA)
    return config, build(spark, config, documents)


def test_a_version_merged_by_the_build_serves_from_one_segment(hand_written, client):
    config, result = hand_written
    assert config.indexing.force_merge_segments == 1  # conf/base.yaml
    assert result.segments == segment_count(client, "handjobs") == 1


def test_merging_segments_leaves_the_hits_and_their_scores(client):
    """`indexing.force_merge_segments` is a runtime setting because a merge changes no answer:
    BM25's statistics are the shard's, whatever its segments (and no document is deleted)."""
    index = "merge_probe"
    client.options(ignore_status=404).indices.delete(index=index)
    client.indices.create(index=index, settings={"number_of_shards": 1, "number_of_replicas": 0})
    for job, title, *_ in HAND_WRITTEN_JOBS:  # a refresh after each: a segment each
        client.index(index=index, id=str(job), document={"title": title}, refresh=True)
    query = {"match": {"title": "python data developer driver"}}

    def hits() -> list[tuple[str, float]]:
        found = client.search(index=index, query=query)["hits"]["hits"]
        return [(hit["_id"], hit["_score"]) for hit in found]

    written, before = hits(), segment_count(client, index)
    force_merge(client, index, 0)  # 0: as written
    assert segment_count(client, index) == before > 1
    force_merge(client, index, 1)
    assert segment_count(client, index) == 1
    assert hits() == written and len(written) == 3
    client.indices.delete(index=index)


@pytest.mark.parametrize(("query", "expected"), QUERIES)
def test_paper_query_ranks_the_expected_job_first(hand_written, client, query, expected):
    config, _ = hand_written
    response = client.search(
        index="handjobs", query=multi_match_query(query, config.retrieval), size=3
    )
    hits = response["hits"]["hits"]
    assert int(hits[0]["_id"]) == expected, [(h["_id"], h["_score"]) for h in hits]
    if len(hits) > 1:
        assert hits[0]["_score"] > hits[1]["_score"]


def test_jobs_scored_beside_the_hits_score_as_a_request_restricted_to_them(hand_written, client):
    """The hybrid pool's kNN jobs get their BM25 scores inside the BM25 search itself
    (`also_score`): the same floats as the paper's query restricted to those jobs, which the
    pools used before; a job that shares no word with the query is left out (0)."""
    config, _ = hand_written
    settings = config.retrieval.model_copy(update={"top_k": 1, "tie_margin": 0})
    text, jobs = "python spark developer", [job for job, *_ in HAND_WRITTEN_JOBS]
    [result] = search_all(client, "handjobs", [text], settings, also_score=[jobs])
    restricted = rescore_body(text, jobs, settings)
    answer = client.search(index="handjobs", query=restricted["query"], size=len(jobs))
    scores = {int(h["_id"]): h["_score"] for h in answer["hits"]["hits"]}
    assert result.hits is not None and len(result.hits) == 1
    assert result.scored == {job: score for job, score in scores.items() if score > 0}
    assert len(result.scored) > 1 and set(scores) == set(jobs)
    apart = settings.model_copy(update={"scored_in_search": len(jobs) - 1})  # too many asked
    [alone] = search_all(client, "handjobs", [text], apart, also_score=[jobs])
    assert alone.scored is None and alone.hits == result.hits


def test_equal_scores_come_back_in_job_id_order(spark, tiny, es_node):
    """Ties are ordered by job id, not by the index's segment layout, so two builds of the
    same jobs give the same hit lists (and the same negatives and top-k cut)."""
    config = config_for(tiny[0], "elasticsearch.index_alias=tiejobs")
    twin = HAND_WRITTEN_JOBS[0][1:]
    documents = spark.createDataFrame([(i, *twin) for i in (30, 10, 20)], SCHEMA)
    build(spark, config, documents)
    client = make_client(resolve_connection(config))
    [result] = search_all(client, "tiejobs", ["python developer"], config.retrieval)
    assert result.hits is not None
    assert [job for job, _ in result.hits] == [10, 20, 30]
    scores = {score for _, score in result.hits}
    assert len(scores) == 1 and scores.pop() > 0


def test_a_tie_longer_than_the_margin_is_asked_again_and_cut_by_job_id(spark, tiny, es_node):
    """Five equal scores, a cut at 2 and hits asked 2 + 1 at a time: the node's first three
    follow its segment layout; the client asks again until it sees the whole tie."""
    config = config_for(
        tiny[0],
        "elasticsearch.index_alias=longtie",
        "retrieval.top_k=2",
        "retrieval.tie_margin=1",
    )
    twin = HAND_WRITTEN_JOBS[0][1:]
    documents = spark.createDataFrame([(i, *twin) for i in (50, 40, 30, 20, 10)], SCHEMA)
    build(spark, config, documents)
    client = make_client(resolve_connection(config))
    [result] = search_all(client, "longtie", ["python developer"], config.retrieval)
    assert result.hits is not None and [job for job, _ in result.hits] == [10, 20]


def test_refused_documents_are_quarantined_with_the_error(spark, tiny, es_node, client):
    config = config_for(
        tiny[0], "elasticsearch.index_alias=badjobs", "quality.error_budget_fraction=0.5"
    )
    rows = [(str(r[0]), *r[1:]) for r in HAND_WRITTEN_JOBS] + [
        ("x1", "bad id", "", "", "", ""),
        ("x2", "another bad id", "", "", "", ""),
    ]
    documents = spark.createDataFrame(rows, SCHEMA.replace("job_id INT", "job_id STRING"))
    result = build(spark, config, documents)
    assert result.indexed == len(HAND_WRITTEN_JOBS)
    assert result.quarantined == {"document_parsing_exception": 2}
    quarantine = read_delta(spark, table_path(config, "bronze", "quarantine")).where(
        "source = 'index_jobs'"
    )
    records = sorted(r.record for r in quarantine.collect())
    assert [r[:15] for r in records] == ['{"job_id":"x1",', '{"job_id":"x2",']
    assert all("failed to parse field [job_id]" in r.detail for r in quarantine.collect())

    # over the budget: the job fails clearly and the alias stays where it was
    strict = config_for(config, "elasticsearch.index_alias=badjobs")
    with pytest.raises(DataQualityError, match="index_jobs: 2 of 9 records"):
        build(spark, strict, documents)
    assert list(client.indices.get_alias(name="badjobs")) == [result.index]


def test_credentials_reach_the_cluster_but_never_the_logs_or_the_spark_ui(
    spark, tiny, es_node, monkeypatch, caplog
):
    canary = "canary-api-key-7f3a"
    monkeypatch.setenv("JOBREC_ES_API_KEY", canary)
    config = config_for(tiny[0], "elasticsearch.index_alias=credjobs")
    caplog.set_level(logging.DEBUG)
    documents = spark.createDataFrame(HAND_WRITTEN_JOBS[:2], SCHEMA)
    result = build(spark, config, documents)
    assert result.indexed == 2
    assert canary not in caplog.text
    store = spark._jsparkSession.sharedState().statusStore()
    executions = store.executionsList()
    plans = [executions.apply(i).physicalPlanDescription() for i in range(executions.size())]
    writes = [p for p in plans if "es.resource=credjobs_v" in p]
    assert writes, "the connector write is not in the SQL executions"
    assert all("es.net.http.header.authorization=*********(redacted)" in p for p in writes)
    assert not any(canary in p for p in plans)
    assert not any(canary in value for _, value in spark.sparkContext.getConf().getAll())


# --- faults: a node of its own, stopped in the middle of a write -----------------------------


@pytest.fixture(scope="module")
def fault_node(tmp_path_factory):
    root = tmp_path_factory.mktemp("fault")
    config = load_config("local", [*state_overrides(root), "data.preset=tiny"], REPO / "conf")
    node = LocalElasticsearch(config.elasticsearch.local)
    node.start()
    yield config, node
    node.stop(purge=True)


@pytest.fixture(scope="module")
def many_documents(spark):
    """Enough documents (60k, small batches) for a write to last several seconds."""
    words = F.array(*[F.lit(w) for w in ("alpha", "beta", "gamma", "delta", "omega")])
    text = F.concat_ws(
        " ", F.transform(F.sequence(F.lit(1), F.lit(40)), lambda i: words[(F.col("id") + i) % 5])
    )
    return spark.range(60_000).select(
        F.col("id").cast("int").alias("job_id"), *[text.alias(f) for f in FIELDS]
    )


def indexing_total(client, alias) -> int:
    try:
        stats = client.indices.stats(index=f"{alias}_v*", metric="indexing")
        return int(stats["_all"]["primaries"].get("indexing", {}).get("index_total", 0))
    except Exception:
        return -1


def start_build(spark, config, documents) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = build(spark, config, documents)
        except Exception as error:
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_node_stopped_mid_write_fails_clearly_and_a_rerun_has_the_exact_count(
    spark, fault_node, many_documents
):
    base, node = fault_node
    config = config_for(
        base,
        "indexing.write_attempts=1",
        "indexing.batch_entries=200",
        "indexing.write_partitions=2",
    )
    client = make_client(resolve_connection(config))
    thread, outcome = start_build(spark, config, many_documents)
    wait_until(lambda: indexing_total(client, "jobs") > 0, 120, "the write to start")
    node.stop()
    thread.join(timeout=300)
    error = outcome.get("error")
    assert isinstance(error, IndexBuildError), outcome
    assert "failed after 1 attempts" in str(error) and "alias still points" in str(error)

    node.start()
    rerun = build(spark, config, many_documents)
    assert rerun.indexed == 60_000
    assert client.count(index="jobs")["count"] == 60_000
    # the failed build was removed; only the complete one is left
    assert [v.name for v in list_versions(client, "jobs")] == [rerun.index]


def test_a_node_restart_during_the_write_is_retried_within_the_run(
    spark, fault_node, many_documents
):
    base, node = fault_node
    config = config_for(
        base,
        "indexing.write_attempts=3",
        "indexing.attempt_backoff_s=1",
        "indexing.batch_entries=200",
        "indexing.write_partitions=2",
    )
    client = make_client(resolve_connection(config))
    before = indexing_total(client, "jobs")
    thread, outcome = start_build(spark, config, many_documents)
    wait_until(lambda: indexing_total(client, "jobs") > before, 120, "the write to start")
    node.stop()
    node.start()  # on the same port
    thread.join(timeout=300)
    result = outcome.get("result")
    assert result is not None, outcome
    assert result.attempts >= 2
    assert result.indexed == 60_000
    assert client.count(index="jobs")["count"] == 60_000


def test_an_index_that_cannot_be_allocated_fails_with_the_clusters_reason(client):
    client.indices.create(
        index="unplaceable",
        settings={"number_of_replicas": 0, "index.routing.allocation.require._name": "nowhere"},
    )
    try:
        with pytest.raises(EsConnectionError, match=r"not assigned after 2s.*nowhere"):
            wait_for_primaries(client, "unplaceable", timeout_s=2)
    finally:
        client.indices.delete(index="unplaceable")
