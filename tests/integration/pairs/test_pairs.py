"""Stage 3 on the tiny preset: queries, retrieval from the real index, triples, MAP sets."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import pytest
from gensim.models import KeyedVectors
from pyspark.sql import Column
from pyspark.sql import functions as F

from jobrec_core.config import load_config
from jobrec_core.evaluation.stage import evaluation_candidates
from jobrec_core.models.splits import SplitRule
from jobrec_core.pairs.splits import (
    assign_splits,
    map_documents,
    pool_sample,
    select_triples,
    split_sizes,
)
from jobrec_core.pairs.stage import QUARANTINE_SOURCE, run_build_pairs
from jobrec_core.platform.manifest import current
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.platform.tracking import stage_runs
from jobrec_core.search.bm25 import (
    FULL_QUERY,
    RetrievalCheckpoint,
    quarantine_failed_searches,
    retrieve,
    search_all,
    serving_index,
)
from jobrec_core.search.connection import make_client, resolve_connection
from jobrec_core.text.wmd import unit_vectors
from jobrec_core.timeline.asof import as_of
from tests.helpers import reference_histogram

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def built(tiny, tiny_pairs):
    return tiny[0], tiny_pairs


def tables(spark, config):
    entry = current(config, "pairs")
    return (
        read_delta(spark, entry["triples"]),
        read_delta(spark, entry["map_sets"]),
        read_delta(spark, entry["retrieval"]),
    )


def positive_found() -> Column:
    """Whether the full query found the positive; false too where the screen left it
    unsearched (null hits: `retrieval.screen`)."""
    found = F.exists("full_hits", lambda h: h["job_id"] == F.col("positive_job_id"))
    return F.coalesce(found, F.lit(False))


def test_funnel_and_manifest(spark, built):
    config, funnel = built
    assert funnel.outcomes["kept"] > 0
    assert funnel.evaluation > 0 and funnel.not_searched == 0  # the tiny preset: no limit
    assert funnel.candidates == (
        sum(funnel.outcomes.values())
        + funnel.empty_query
        + funnel.search_failed
        + funnel.evaluation
        + funnel.not_searched
    )
    entry = current(config, "pairs")
    assert entry["index"].startswith("jobs_history_v")  # dated: every ad posted by then
    run = stage_runs(config, "build_pairs", limit=1)[0]
    assert run.data.metrics["outcome.kept"] == funnel.outcomes["kept"]
    assert run.data.tags["index"] == entry["index"]
    assert run.inputs is not None and len(run.inputs.dataset_inputs) == 2
    assert entry["embeddings"] == current(config, "embeddings")["version"]
    assert entry["bins"] == config.histograms.bins
    triples, map_sets, _ = tables(spark, config)
    assert triples.count() == sum(funnel.splits[s] for s in ("train", "dev", "test"))
    assert map_sets.count() == sum(n for s, n in funnel.pool_rows.items() if s.startswith("map_"))


def test_held_out_sets_label_the_positive_in_the_pool_without_the_other_own_jobs(spark, built):
    config, funnel = built
    entry = current(config, "pairs")
    held_out = read_delta(spark, entry["held_out"])
    sources = (
        read_delta(spark, entry["triples"])
        .select("candidate_id", "split")
        .unionByName(read_delta(spark, entry["map_sets"]).select("candidate_id", "split"))
        .distinct()
    )
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    pools = (
        held_out.groupBy("candidate_id", "split")
        .agg(F.sort_array(F.collect_list(F.struct("bm25_rank", "job_id", "label"))).alias("pool"))
        .join(sources.withColumnRenamed("split", "source"), "candidate_id")
        .join(candidates.select("candidate_id", "sequence", "positive_job_id"), "candidate_id")
        .collect()
    )
    assert pools
    assert {(row.split, row.source) for row in pools} <= {
        ("held_out_dev", "dev"),
        ("held_out_dev", "map_dev"),
        ("held_out_test", "test"),
        ("held_out_test", "map_test"),
    }
    assert funnel.splits["held_out_test"] == sum(1 for row in pools if row.split == "held_out_test")
    for row in pools:
        jobs = [d.job_id for d in row.pool]
        assert [d.bm25_rank for d in row.pool] == list(range(1, len(jobs) + 1))
        assert [d.job_id for d in row.pool if d.label == 1] == [row.positive_job_id]
        others = {e.job_id for e in row.sequence} - {row.positive_job_id}
        assert not others & set(jobs)
    assert held_out.where(F.size("hist") == 0).count() == 0


def test_pool_pairs_oppose_the_held_out_job_to_jobs_of_the_same_pool(spark, built):
    config, _ = built
    assert config.pairs.pool_lists == 2
    entry = current(config, "pairs")
    pairs: pd.DataFrame = read_delta(spark, entry["pool_triples"]).toPandas()
    assert len(pairs) and set(pairs["split"]) == {"pool_train"}
    per_list = pairs.groupby(["candidate_id", "pos_job_id"]).size()
    assert per_list.max() == config.pairs.pool_negatives

    def frame(path: str) -> pd.DataFrame:
        return read_delta(spark, path).toPandas()

    first = frame(table_path(config, "silver", "queries")).set_index("candidate_id")
    first_hits = frame(entry["retrieval"]).set_index("candidate_id")
    # the further lists: keyed by their list id while searched, by the candidate here
    more = frame(table_path(config, "silver", "training_lists"))
    more_hits = frame(table_path(config, "silver", "retrieval_lists")).set_index("candidate_id")
    more_lists = more.set_index(["owner_id", "positive_job_id"])
    candidates = frame(table_path(config, "silver", "candidates"))
    scores = {
        row.candidate_id: {e["job_id"]: e["score"] for e in row.sequence}
        for row in candidates.itertuples()
    }
    in_first = (
        pairs["pos_job_id"].to_numpy()
        == first.loc[pairs["candidate_id"], "positive_job_id"].to_numpy()
    )
    assert in_first.any() and (~in_first).any()
    assert pairs[~in_first].groupby("candidate_id")["pos_job_id"].nunique().max() == 1
    for row in pairs.sample(n=min(len(pairs), 200), random_state=0).itertuples():
        # both documents come from the one query that built the pool, with its BM25 scores
        if row.pos_job_id == first.loc[row.candidate_id, "positive_job_id"]:
            query, hits = first.loc[row.candidate_id], first_hits.loc[row.candidate_id]
        else:
            query = more_lists.loc[(row.candidate_id, row.pos_job_id)]
            hits = more_hits.loc[query["candidate_id"]]
            own = scores[row.candidate_id]
            positive = first.loc[row.candidate_id, "positive_job_id"]
            assert own[row.pos_job_id] <= own[positive]  # the highest-scored jobs first
        found = {h["job_id"]: h["score"] for h in hits["full_hits"]}
        assert row.pos_bm25 == found[row.pos_job_id] and row.neg_bm25 == found[row.neg_job_id]
        assert row.neg_job_id not in set(query["own_job_ids"])
        assert row.pos_job_id in set(query["own_job_ids"])  # held out of its query, not dropped
    assert pairs["neg_co_interest"].notna().all()


def test_profile_features_are_bounded_and_stored_everywhere(spark, built):
    config, _ = built
    entry = current(config, "pairs")
    pools: pd.DataFrame = read_delta(spark, entry["held_out"]).toPandas()
    for name in ("profile_tfidf", "profile_w2v"):
        assert pools[name].between(-1.0001, 1.0001).all()
    assert (pools["profile_tfidf"] > 0).mean() > 0.5
    assert (pools["co_interest"] >= 0).all()
    triples: pd.DataFrame = (
        read_delta(spark, entry["triples"]).select("pos_profile_tfidf").toPandas()
    )
    assert triples["pos_profile_tfidf"].notna().all()


def test_every_job_has_a_graph_row_and_a_new_one_carries_exposed_ads_like_it(spark, built):
    """The interest graph as of the run's date holds a row for every job, and a job the
    graph knows at most one candidate of names the ads most like it by text, among those
    posted long enough before the as-of date to have drawn interest (features.carried)."""
    config, _ = built
    graph: pd.DataFrame = read_delta(spark, current(config, "co_interest")["table"]).toPandas()
    jobs = read_delta(spark, table_path(config, "silver", "jobs")).select("job_id", "posted_at")
    posted = {row.job_id: row.posted_at for row in jobs.collect()}
    assert set(graph["job_id"]) == set(posted)
    sparse = graph[graph["interested"] <= 1]
    carrying = sparse[sparse["carried_from"].map(len) > 0]
    assert len(carrying) > 0.5 * len(sparse)
    assert (graph.loc[graph["interested"] > 1, "carried_from"].map(len) == 0).all()
    day = as_of(config).day
    for row in carrying.head(200).itertuples():
        assert row.job_id not in set(row.carried_from)
        assert all(posted[j] <= day for j in row.carried_from)  # exposed by the as-of date
        assert abs(sum(row.carried_weights) - 1.0) < 1e-5


def test_positive_is_in_the_top_100_and_negative_is_not_an_own_job(spark, built):
    config, _ = built
    triples, _, retrieval = tables(spark, config)
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    rows = (
        triples.join(retrieval, "candidate_id")
        .join(candidates.select("candidate_id", "sequence"), "candidate_id")
        .collect()
    )
    assert rows
    for row in rows:
        full = {h.job_id: h.score for h in row.full_hits}
        assert len(full) <= config.retrieval.top_k
        assert full[row.pos_job_id] == pytest.approx(row.pos_bm25)
        negatives = {h.job_id: h.score for h in row.negative_hits}
        assert negatives[row.neg_job_id] == pytest.approx(row.neg_bm25)
        assert row.neg_job_id not in {e.job_id for e in row.sequence}
        assert len(row.query_terms) <= config.queries.max_terms
        assert len(row.pos_hist) == len(row.query_terms) * (config.histograms.bins + 1)


def test_candidates_whose_positive_was_not_retrieved_are_dropped(spark, built):
    config, funnel = built
    triples, map_sets, retrieval = tables(spark, config)
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    missed = (
        retrieval.join(candidates, "candidate_id").where(~positive_found()).select("candidate_id")
    )
    assert missed.count() == funnel.outcomes.get("positive_not_retrieved", 0)
    used = triples.select("candidate_id").union(map_sets.select("candidate_id"))
    assert used.join(missed, "candidate_id").count() == 0


def test_histograms_equal_a_direct_computation(spark, built):
    config, _ = built
    triples, _, _ = tables(spark, config)
    embeddings = current(config, "embeddings")
    keyed = KeyedVectors.load(local_path(embeddings["vectors"]), mmap="r")
    jobs = read_delta(spark, embeddings["jobs"])

    def text(fields):
        joined = F.concat(*[F.col(f"{f}_tokens") for f in fields])
        return F.slice(joined, 1, config.histograms.doc_max_terms)

    assert config.histograms.lead_fields == ["title"]
    documents, titles = {}, {}
    for r in jobs.select(
        "job_id", text(config.histograms.doc_fields).alias("doc"), text(["title"]).alias("title")
    ).collect():
        documents[r.job_id], titles[r.job_id] = r.doc, r.title
    bins = config.histograms.bins

    def vectors(words):
        return np.array(
            [
                unit_vectors(keyed[w][None, :])[0]
                if w in keyed.key_to_index
                else np.zeros(keyed.vector_size)
                for w in words
            ]
        )

    for row in triples.orderBy("candidate_id").limit(4).collect():
        query = list(row.query_terms)
        for job_id, stored, lead in (
            (row.pos_job_id, row.pos_hist, row.pos_lead_hist),
            (row.neg_job_id, row.neg_hist, row.neg_lead_hist),
        ):
            for text_of, histogram in ((documents, stored), (titles, lead)):
                doc = list(text_of[job_id])
                expected = reference_histogram(vectors(query), query, vectors(doc), doc, bins)
                np.testing.assert_array_equal(
                    np.array(histogram).reshape(len(query), bins + 1), expected
                )


def test_map_sets_hold_the_seeds_fifty_and_fifty(spark, built):
    config, _ = built
    _, map_sets, retrieval = tables(spark, config)
    per_candidate = map_sets.groupBy("candidate_id").agg(
        F.sum("label").alias("positives"), F.count("*").alias("documents")
    )
    # the full query's hits but the candidate's other own jobs, which the MAP sets leave out
    queries = read_delta(spark, table_path(config, "silver", "queries"))
    others = F.filter("own_job_ids", lambda job: job != F.col("positive_job_id"))
    found = retrieval.join(queries, "candidate_id").select(
        "candidate_id",
        F.size(F.filter("full_hits", lambda h: ~F.array_contains(others, h["job_id"]))).alias(
            "found"
        ),
    )
    for row in per_candidate.join(found, "candidate_id").collect():
        assert row.positives == min(config.pairs.map_positives, row.found)
        assert row.documents <= config.pairs.map_positives + config.pairs.map_negatives
    assert map_sets.groupBy("candidate_id", "job_id").count().where("count > 1").count() == 0
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    own = (
        candidates.select("candidate_id", "positive_job_id", F.explode("sequence").alias("e"))
        .where(F.col("e.job_id") != F.col("positive_job_id"))
        .select("candidate_id", F.col("e.job_id").alias("job_id"))
    )
    assert map_sets.join(own, ["candidate_id", "job_id"]).count() == 0


def test_map_sets_leave_out_the_other_own_jobs_and_count_ranks_among_the_rest(spark):
    hit = "struct<job_id:bigint,score:double>"
    selected = spark.createDataFrame(
        [
            (
                1,
                "map_dev",
                ["a"],
                [1.0],
                [5, 7, 9],
                9,
                [(5, 9.0), (7, 8.0), (9, 7.0), (3, 6.0)],
                [(7, 4.0), (4, 3.0), (9, 2.0), (2, 1.0)],
            )
        ],
        f"candidate_id long, split string, query_terms array<string>, "
        f"query_job_share array<float>, own_job_ids array<bigint>, positive_job_id bigint, "
        f"full_hits array<{hit}>, negative_hits array<{hit}>",
    )
    rows = map_documents(selected, 2, 2).orderBy("label", "bm25_rank").collect()
    # 5 and 7 built the queries; 9 is the held-out positive, which may be found
    assert [(r.job_id, r.label, r.bm25_rank) for r in rows] == [
        (4, 0, 1),
        (2, 0, 2),
        (9, 1, 1),
        (3, 1, 2),
    ]


def test_pool_sample_draws_its_negatives_besides_the_held_out_job(spark):
    pools = spark.createDataFrame(
        [(c, j, int(j == 0)) for c in range(40) for j in range(6)],
        "candidate_id long, job_id long, label int",
    )
    sampled: pd.DataFrame = pool_sample(pools, 3, seed=11).toPandas()
    per_pool = sampled.groupby("candidate_id")["label"].agg(["sum", "size"])
    assert (per_pool["sum"] == 1).all() and (per_pool["size"] == 4).all()
    without_positive = pools.where(F.col("candidate_id") != 0).where(F.col("job_id") != 0)
    assert pool_sample(without_positive, 3, seed=11).count() == 0


def test_splits_are_disjoint_and_deterministic(spark, built):
    config, _ = built
    triples, map_sets, _ = tables(spark, config)
    rows = (
        triples.select("split", "candidate_id")
        .union(map_sets.select("split", "candidate_id"))
        .groupBy("split")
        .agg(F.collect_set("candidate_id").alias("ids"))
    )
    by_split = {r.split: set(r.ids) for r in rows.collect()}
    names = list(by_split)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not by_split[a] & by_split[b], (a, b)
    assert not set().union(*by_split.values()) & {
        r.candidate_id for r in evaluation_candidates(spark, config).collect()
    }


def test_a_candidates_split_depends_on_its_id_and_the_seed_alone(spark):
    """Rebuilding the pairs from other candidates never moves one into another split: a
    candidate is in its region's split or, past the region's size, in none."""
    settings = load_config("local").pairs
    rule = SplitRule.of(settings, 7)
    sizes = split_sizes(settings)

    def splits(ids: Iterable[int], rule: SplitRule = rule, sizes=sizes) -> dict[int, str]:
        kept = spark.createDataFrame([(i,) for i in ids], "candidate_id LONG")
        return {r.candidate_id: r.split for r in assign_splits(kept, rule, sizes).collect()}

    first = splits(range(2000))
    assert first == splits(range(2000))
    assert first != splits(range(2000), SplitRule.of(settings, 8))
    assert None in first.values()  # the evaluations' region: never a split
    fewer_and_others = splits([*range(0, 2000, 3), *range(5000, 6000)])
    assert all(first[i] == s for i, s in fewer_and_others.items() if i < 2000)
    capped = splits(range(2000), sizes=dict.fromkeys(sizes, 20))
    assert all(s is None or first[i] == s for i, s in capped.items())
    counts = {name: sum(1 for s in capped.values() if s == name) for name in sizes}
    assert counts == dict.fromkeys(sizes, 20)


def test_rerun_gives_the_same_rows(spark, built):
    config, funnel = built
    columns = ["candidate_id", "split", "pos_job_id", "neg_job_id", "pos_hist", "neg_hist"]

    pool_columns = ["candidate_id", "neg_job_id", "neg_profile_tfidf", "neg_co_interest"]

    def rows():
        pool = read_delta(spark, current(config, "pairs")["pool_triples"])
        return {
            tuple(tuple(v) if isinstance(v, list) else v for v in r)
            for r in tables(spark, config)[0].select(*columns).collect()
        } | {tuple(r) for r in pool.select(*pool_columns).collect()}

    before = rows()
    again = run_build_pairs(spark, config)
    after = rows()
    assert again.outcomes == funnel.outcomes
    assert before == after


def test_queries_that_keep_failing_are_quarantined(spark, tiny, tiny_indexed):
    config = load_config(
        "local",
        [
            f"storage.root={tiny[0].storage.root}",
            f"elasticsearch.local.workdir={tiny[0].elasticsearch.local.workdir}",
            "data.preset=tiny",
            "retrieval.max_retries=1",
            "retrieval.backoff_s=0",
        ],
    )
    queries = spark.createDataFrame(
        [(1, ["nurse"], ["nurse"]), (2, ["driver"], ["driver"])],
        "candidate_id LONG, query_terms ARRAY<STRING>, negative_terms ARRAY<STRING>",
    )
    connection = resolve_connection(config)
    retrieved = retrieve(queries, connection, "no_such_index", config.retrieval, 2).cache()
    errors = {r.candidate_id: r.error for r in retrieved.collect()}
    assert set(errors) == {1, 2}
    assert all("index_not_found_exception" in e for e in errors.values())
    assert quarantine_failed_searches(config, queries, retrieved, QUARANTINE_SOURCE) == 2
    quarantine = read_delta(spark, table_path(config, "bronze", "quarantine")).where(
        F.col("source") == QUARANTINE_SOURCE
    )
    assert {r.reason for r in quarantine.collect()} == {"search_failed"}
    assert quarantine.count() == 2
    # the working index answers the same queries
    good = retrieve(queries, connection, "jobs", config.retrieval, 2).collect()
    assert all(r.error is None and r.full_hits for r in good)
    assert make_client(connection).indices.exists_alias(name="jobs")


def test_stored_searches_resume_where_a_stopped_run_stopped(spark, tiny, tiny_indexed, tmp_path):
    """`RetrievalCheckpoint` commits `retrieval.checkpoint_queries` searches at a time: a run
    that fails after its first commit searches only the rest on the rerun; a changed query
    and another index version are searched again."""
    config = load_config(
        "local",
        [
            f"storage.root={tiny[0].storage.root}",
            f"elasticsearch.local.workdir={tiny[0].elasticsearch.local.workdir}",
            "data.preset=tiny",
            "retrieval.checkpoint_queries=2",
        ],
    )
    connection = resolve_connection(config)
    words = ["nurse", "driver", "cook", "teacher", "welder"]
    queries = spark.createDataFrame(
        [(i, [w]) for i, w in enumerate(words)], "candidate_id LONG, query_terms ARRAY<STRING>"
    )
    searched: list[list[int]] = []
    fail_after = [1]  # chunks the search answers before it fails, as a stopped run would

    def search(rows):
        if len(searched) >= fail_after[0]:
            raise RuntimeError("stopped")
        searched.append(sorted(r.candidate_id for r in rows.select("candidate_id").collect()))
        return retrieve(rows, connection, "jobs", config.retrieval, 2, FULL_QUERY)

    path = str(tmp_path / "retrieval")
    checkpoint = RetrievalCheckpoint(config, path, "test_resume")
    with pytest.raises(RuntimeError, match="stopped"):
        checkpoint(search, queries, queries, "index-a")
    assert searched == [[0, 1]]

    fail_after[0] = 10
    stored = checkpoint(search, queries, queries, "index-a")
    assert searched == [[0, 1], [2, 3], [4]]
    assert checkpoint.resumed == 2 and checkpoint.searched == 5
    expected = {
        r.candidate_id: r.full_hits
        for r in retrieve(queries, connection, "jobs", config.retrieval, 2, FULL_QUERY).collect()
    }
    assert {r.candidate_id: r.full_hits for r in stored.collect()} == expected

    searched.clear()
    checkpoint(search, queries, queries, "index-a")
    assert searched == []  # everything stored: nothing searched

    changed = queries.withColumn(
        "query_terms",
        F.when(F.col("candidate_id") == 3, F.array(F.lit("chef"))).otherwise(F.col("query_terms")),
    )
    stored = checkpoint(search, changed, changed, "index-a")
    assert searched == [[3]]
    assert stored.count() == 5  # the old answer to candidate 3's old query is not returned

    searched.clear()
    checkpoint(search, queries, queries, "index-b")
    assert searched == [[0, 1], [2, 3], [4]]


def test_two_pass_searches_answer_as_one_pass_searches_do(spark, built):
    """`retrieval.bound_budget` > 0 (`search.bounded`): the same top-k lists, scores
    included, on the tiny index's real queries; a small window makes some queries fall back
    to one pass."""
    config, _ = built
    texts = [
        " ".join(r.query_terms)
        for r in read_delta(spark, table_path(config, "silver", "queries"))
        .where(F.size("query_terms") > 0)
        .orderBy("candidate_id")
        .limit(150)
        .collect()
    ]
    client = make_client(resolve_connection(config))
    index = serving_index(client, config.elasticsearch.index_alias)
    one_pass = search_all(
        client, index, texts, config.retrieval.model_copy(update={"bound_budget": 0.0})
    )
    for budget, window in ((8.0, 300), (30.0, 110)):
        settings = config.retrieval.model_copy(
            update={"bound_budget": budget, "bound_window": window}
        )
        assert search_all(client, index, texts, settings) == one_pass
    assert all(r.hits for r in one_pass)


def test_the_screen_skips_only_searches_that_could_not_keep_a_candidate(spark, built):
    """`retrieval.screen` (`search.bm25.screened_out`): a row is left unsearched
    only when the search without the screen did not find its positive; every other row gets
    the same hits, so build_pairs keeps the same candidates."""
    config, _ = built
    queries = read_delta(spark, table_path(config, "silver", "queries")).where(
        F.size("query_terms") > 0
    )
    client = make_client(resolve_connection(config))
    index = serving_index(client, config.elasticsearch.index_alias)
    screened, stored = (
        retrieve(
            queries,
            resolve_connection(config),
            index,
            config.retrieval.model_copy(update={"screen": screen}),
            2,
            found="positive_job_id",
        )
        for screen in (True, False)
    )
    rows = (
        screened.alias("s")
        .join(stored.alias("o"), "candidate_id")
        .join(queries.select("candidate_id", "positive_job_id"), "candidate_id")
        .select(
            "candidate_id",
            "positive_job_id",
            "s.full_hits",
            "s.negative_hits",
            F.col("o.full_hits").alias("stored_full"),
            F.col("o.negative_hits").alias("stored_negative"),
        )
        .collect()
    )
    assert len(rows) == queries.count()
    skipped = [r for r in rows if r.full_hits is None]
    assert skipped, "the screen decided nothing: the test does not exercise it"
    for row in skipped:
        assert row.positive_job_id not in {h.job_id for h in row.stored_full}
        assert row.negative_hits is None
    for row in rows:
        if row.full_hits is not None:
            assert (row.full_hits, row.negative_hits) == (row.stored_full, row.stored_negative)
    outcomes = {
        name: {r.candidate_id: r.outcome for r in select_triples(queries, table, 7).collect()}
        for name, table in (("screened", screened), ("stored", stored))
    }
    assert outcomes["screened"] == outcomes["stored"]


def test_the_less_informative_query_is_searched_only_when_the_full_query_found_the_positive(
    spark, built
):
    config, funnel = built
    _, _, retrieval = tables(spark, config)
    queries = read_delta(spark, table_path(config, "silver", "queries"))
    rows = retrieval.join(queries.select("candidate_id", "positive_job_id"), "candidate_id")
    found = positive_found()
    assert rows.where(found & F.col("negative_hits").isNull()).count() == 0
    missed = rows.where(~found)
    assert missed.count() == funnel.outcomes.get("positive_not_retrieved", 0) > 0
    assert missed.where(F.col("negative_hits").isNotNull()).count() == 0
