"""Evaluation and recommendations on the tiny preset, end to end: a real champion in the MLflow
registry, real BM25 retrieval from the session's Elasticsearch node, histograms and DRMM
scores in Spark, Delta outputs."""

from __future__ import annotations

import logging
import runpy
import sys
from functools import partial

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.evaluation.protocols import BM25, WMD
from jobrec_core.evaluation.stage import held_out_candidates, measured_retrievers, run_evaluation
from jobrec_core.models.registry import load_champion
from jobrec_core.platform import manifest
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.ranking.factory import (
    queries_of,
    ranking_inputs,
    rerank_pipeline,
    retriever_step,
)
from jobrec_core.ranking.pipeline import Pipeline, PoolsPerQuery, WorkerTable
from jobrec_core.ranking.scorers import ProfileTfidfScorer, drmm_scorer
from jobrec_core.results import publish
from jobrec_core.serving.stage import run_recommend, served_ranker, show_candidate
from jobrec_core.training.stage import train_on_files
from tests.helpers import REPO

pytestmark = pytest.mark.integration


def test_recommend_writes_the_top_k_and_reruns_replace_them(spark, champion, recommended):
    config, version = champion
    chosen = recommended
    first = run_recommend(spark, config, [*chosen, 999_999_999])
    assert first.unknown_ids == [999_999_999]
    assert first.model == f"{config.mlflow.model_name} version {version} ({config.model.version})"
    table = read_delta(spark, table_path(config, "gold", "recommendations"))
    rows = pd.DataFrame(table.toPandas())
    assert set(rows["candidate_id"]) == set(chosen)
    k = config.evaluation.k
    own = {
        int(r["candidate_id"]): set(r["jobs"])
        for r in read_delta(spark, table_path(config, "silver", "candidates"))
        .select("candidate_id", F.col("sequence.job_id").alias("jobs"))
        .where(F.col("candidate_id").isin(chosen))
        .collect()
    }
    for candidate, group in rows.groupby("candidate_id"):
        group = group.sort_values("rank")
        assert group["rank"].tolist() == list(range(1, len(group) + 1)) and len(group) <= k
        assert group["score"].is_monotonic_decreasing
        assert not set(group["job_id"]) & own[candidate]  # never a job they already know
        assert group["title"].notna().all() and (group["bm25"] >= 0).all()
        # BM25's rank where BM25's own list has the job; null for one only the kNN list found
        assert (group["bm25_rank"].dropna() <= 100).all()

    again = run_recommend(spark, config, chosen[:2])  # replaces only these two candidates
    assert again.rows == len(rows[rows["candidate_id"].isin(chosen[:2])])
    after = pd.DataFrame(
        read_delta(spark, table_path(config, "gold", "recommendations")).toPandas()
    )
    assert len(after) == len(rows) and not after.duplicated(["candidate_id", "rank"]).any()

    shown = show_candidate(spark, config, chosen[0])
    best = rows[(rows["candidate_id"] == chosen[0]) & (rows["rank"] == 1)]["title"].iloc[0]
    assert f"Candidate {chosen[0]}" in shown and best in shown and f"version {version}" in shown
    assert f"retriever {config.retrieval.retriever}" in first.format()


@pytest.mark.parametrize("retriever", ["bm25", "hybrid", "dense"])
def test_the_same_pipeline_ranks_alike_on_pandas_and_on_spark(spark, champion, retriever):
    """One request on the driver (pandas) and a batch in Spark give the same top k, whichever
    retriever fills the pool."""
    config, _ = champion
    config = config.model_copy(
        update={"retrieval": config.retrieval.model_copy(update={"retriever": retriever})}
    )
    inputs = ranking_inputs(spark, config)
    queries = queries_of(config, inputs, held_out_candidates(spark, config, 3))
    scorer = drmm_scorer(spark, "champion", load_champion(config).model)
    pipeline = rerank_pipeline(config, inputs, scorer)
    columns = ["candidate_id", "rank", "job_id", "bm25_rank", "bm25"]
    batch = pd.DataFrame(pipeline.transform_spark(queries).select(*columns).toPandas())
    one_by_one = pd.concat(
        [
            pipeline.transform(pd.DataFrame([row]))
            for row in pd.DataFrame(queries.toPandas()).to_dict("records")
        ]
    )[columns]
    ordered = ["candidate_id", "rank"]

    def comparable(frame: pd.DataFrame) -> pd.DataFrame:
        # BM25's rank is null for a job only the kNN list found
        frame = frame.assign(bm25_rank=frame["bm25_rank"].astype("float64").fillna(-1))
        return frame.sort_values(ordered).reset_index(drop=True).astype("float64")

    pd.testing.assert_frame_equal(comparable(batch), comparable(one_by_one), rtol=1e-6)
    assert 0 < batch.groupby("candidate_id").size().max() <= config.evaluation.k
    assert (batch["bm25"] >= 0).all()  # every pool job has its BM25 for the same query


def test_without_a_champion_the_pool_is_served_in_the_retrievers_order(spark, champion):
    """While no model has passed the gate (here: a model name nothing was registered under),
    the served ranker is the retriever itself, in Spark and in pandas alike: each pool's
    first k jobs, in the pool's own order, labelled as such."""
    config, _ = champion
    config = config.model_copy(
        update={"mlflow": config.mlflow.model_copy(update={"model_name": "jobrec_no_champion"})}
    )
    served = served_ranker(spark, config)
    assert served.label == f"{config.retrieval.retriever} order (no champion)"
    inputs = ranking_inputs(spark, config)
    queries = queries_of(config, inputs, held_out_candidates(spark, config, 3))
    rows = pd.DataFrame(queries.toPandas())
    pipeline = rerank_pipeline(config, inputs, served.scorer)
    columns = ["candidate_id", "rank", "job_id"]
    batch = pd.DataFrame(pipeline.transform_spark(queries).select(*columns).toPandas())
    one_by_one = pd.concat([pipeline.transform(rows.iloc[[i]]) for i in range(len(rows))])
    pools = retriever_step(config, inputs).transform(rows)
    expected = pools[pools["rank"] <= config.evaluation.k][columns]
    for served_rows in (batch, one_by_one[columns]):
        pd.testing.assert_frame_equal(
            served_rows.sort_values(columns[:2]).reset_index(drop=True).astype("int64"),
            expected.sort_values(columns[:2]).reset_index(drop=True).astype("int64"),
        )


def test_job_tables_shipped_to_the_workers_rank_to_the_bit_as_the_joins_do(spark, champion):
    """The tiny index is under `histograms.worker_tables_max_jobs`: the jobs' text and graph
    are shipped to the workers and looked up in the features' pass, not joined in Spark, and
    that pass takes the pools as searched (`PoolsPerQuery`), not their rows grouped again.
    The same rows come out of all three plans, with the same scores to the last bit."""
    config, _ = champion
    shipped = ranking_inputs(spark, config)
    assert isinstance(shipped.tokens, WorkerTable) and isinstance(shipped.graph, WorkerTable)
    histograms = config.histograms.model_copy(update={"worker_tables_max_jobs": 0})
    joined = ranking_inputs(spark, config.model_copy(update={"histograms": histograms}))
    assert isinstance(joined.tokens, DataFrame) and isinstance(joined.graph, DataFrame)
    queries = queries_of(config, shipped, held_out_candidates(spark, config, 20)).cache()
    scorer = drmm_scorer(spark, "champion", load_champion(config).model)
    pooled = rerank_pipeline(config, shipped, scorer).spark_steps
    assert [type(step).__name__ for step in pooled] == ["PoolsPerQuery"]
    assert isinstance(pooled[0], PoolsPerQuery)
    grouped = [pooled[0].retriever, pooled[0].per_query]  # the pool rows grouped in Spark
    plans = [
        pooled,
        grouped,
        rerank_pipeline(config, joined, scorer).spark_steps,
    ]
    # the champion, v1, reads no profile feature: its own jobs are not even looked up
    names = [type(step).__name__ for step in plans[2]]
    assert names == ["PoolRetriever", "DocumentText", "PerQuery"]
    profiled = rerank_pipeline(config, joined, ProfileTfidfScorer()).spark_steps
    assert [type(step).__name__ for step in profiled][2] == "ProfileRows"
    results = []
    for plan in plans:
        ranked = Pipeline(tuple(plan)).transform_spark(queries)
        ranked = ranked.select("candidate_id", "rank", "job_id", "score")
        results.append(pd.DataFrame(ranked.toPandas()).sort_values(["candidate_id", "rank"]))
    assert len(results[0]) > 0
    for other in results[1:]:
        pd.testing.assert_frame_equal(
            results[0].reset_index(drop=True), other.reset_index(drop=True), check_exact=True
        )
    queries.unpersist()


@pytest.fixture(scope="module")
def evaluated(spark, champion, tmp_path_factory):
    """The evaluation of the module's champion, published to files and MLflow once:
    (report, RESULTS.md, the MLflow run id, the report folder)."""
    config, _ = champion
    report = run_evaluation(spark, config, partial(train_on_files, spark, config))
    folder = tmp_path_factory.mktemp("evaluation")
    results, run_id = publish(config, report, str(folder), "pytest")
    return report, results, run_id, folder


def test_evaluation_measures_every_ranker_and_publishes_the_report(champion, evaluated):
    config, version = champion
    report, results, run_id, folder = evaluated
    rankers = [row.ranker for row in report.protocol]
    assert rankers[:2] == [BM25, WMD] and "DRMM v1" in rankers
    assert report.models["DRMM v1"] == version
    assert set(report.skipped) == {f"DRMM {v}" for v in config.evaluation.models} - {"DRMM v1"}
    bm25 = report.protocol[0]
    assert bm25.map == 1.0 and bm25.diversity == 0.0 and bm25.accuracy is None
    for row in report.protocol[1:]:
        assert row.accuracy is not None and 0 <= row.accuracy <= 1
        assert 0 <= row.map <= 1 and 0 <= row.diversity <= config.evaluation.k
    splits = manifest.current(config, "pairs")["splits"]
    assert report.queries["triples"] == splits["test"]
    assert [p.configured for p in report.curve] == sorted(config.training.learning_curve_sizes)
    assert [p.candidates for p in report.curve] == sorted(p.candidates for p in report.curve)
    assert report.curve[-1].candidates == splits["train"]
    # each curve model is judged on the ground truth, outside the rankers' table
    assert all(0 <= p.precision_low <= p.precision <= p.precision_high <= 1 for p in report.curve)
    assert 0 < report.queries["ground_truth"] <= 40
    truth = {row.ranker: row for row in report.ground_truth}
    untrained = [BM25, WMD, "profile-tfidf", "co-interest"]
    assert set(truth) == {*untrained, "DRMM v1"} and truth[BM25].diversity == 0.0
    assert all(0 <= row.precision <= 1 and 0 <= row.ndcg <= 1 for row in truth.values())
    assert [row.ranker for row in report.held_out] == [*untrained, "DRMM v1"]
    assert 0 < report.queries["held_out"] <= 40 and 0 < report.held_out_found <= 1
    found = report.held_out_found
    assert all(0 <= row.mrr <= found and 0 <= row.recall <= found for row in report.held_out)
    assert report.agreement is not None and report.agreement.rankers == 5
    # experiment 5: the retrievers, the BM25 pools reused from experiments 3 and 4
    compared = report.retrievers
    assert compared is not None and compared.reference == "bm25 >> DRMM v1"
    assert [p.retriever for p in compared.pools] == measured_retrievers(config)
    assert compared.candidates == report.queries["ground_truth"]
    assert compared.held_out_candidates == report.queries["held_out"]
    bm25_pool = compared.pools[0]
    assert bm25_pool.ceiling.mean == pytest.approx(report.ceiling.mean)
    assert bm25_pool.held_out_found == pytest.approx(report.held_out_found)
    pipelines = {p.name: p for p in compared.pipelines}
    assert pipelines["bm25"].precision.mean == pytest.approx(truth[BM25].precision)
    assert pipelines["bm25 >> DRMM v1"].precision.mean == pytest.approx(truth["DRMM v1"].precision)
    assert all(0 <= p.recall.mean <= 1 for p in compared.pools)
    # selection keeps the served pipeline unless another is significantly above it
    assert compared.selection is not None
    assert compared.selection.served == f"{config.retrieval.retriever} >> DRMM v1"
    assert compared.selection.pipeline in pipelines
    # the kNN votes, alone and mixed with the champion, on every pool; k and λ chosen on dev
    assert compared.knn is not None and compared.knn.k in (2, 8)
    assert 0 <= compared.knn.lam <= 1 and compared.knn.memory > 0
    for retriever in measured_retrievers(config):
        assert {f"{retriever} >> kNN", f"{retriever} >> DRMM v1 + kNN"} <= set(pipelines)

    text = results.read_text()
    assert "0.966" in text and "learning_curve_sizes.png" in text
    assert (folder / "ground_truth.png").stat().st_size > 0
    logged = MlflowClient(config.mlflow.tracking_uri).get_run(run_id).data.metrics
    assert logged["protocol.drmm_v1.map"] == pytest.approx(
        next(r.map for r in report.protocol if r.ranker == "DRMM v1")
    )


def run_notebook(name: str, arguments: list[str], monkeypatch) -> None:
    """A notebook of notebooks/ as a local script, in this process (it reuses the session's
    Spark), the way `.venv/bin/python notebooks/<name>` runs it."""
    path = REPO / "notebooks" / name
    assert path.read_text().startswith("# Databricks notebook source\n")
    monkeypatch.setattr(sys, "argv", [str(path), *arguments])
    # The notebook sets up logging to this test's captured stderr: keep that from the rest.
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    runpy.run_path(str(path), run_name="__main__")


def test_the_notebooks_run_on_the_tiny_preset(
    spark, champion, evaluated, tiny_overrides, tmp_path, capsys, monkeypatch
):
    config, version = champion
    [candidate] = [int(r["candidate_id"]) for r in held_out_candidates(spark, config, 1).collect()]
    common = ["--env", "local", "--conf-dir", str(REPO / "conf"), "--figures", str(tmp_path)]
    for override in tiny_overrides:
        common += ["--set", override]

    run_notebook("01_data_exploration.py", [*common, "--examples", "2"], monkeypatch)
    out = capsys.readouterr().out
    assert "Dataset 'tiny'" in out and "Rows per table" in out and "wm_similarity" in out
    assert "pairs/triples" in out and "Quarantined records" in out

    run_notebook("02_pipeline_results.py", common, monkeypatch)
    out = capsys.readouterr().out
    assert f"run {evaluated[2]}" in out and "protocol" in out and "ground_truth" in out
    assert f"Versions of {config.mlflow.model_name}" in out and "champion" in out

    run_notebook(
        "03_recommendation_explorer.py", [*common, "--candidate", str(candidate)], monkeypatch
    )
    out = capsys.readouterr().out
    assert f"Candidate {candidate}" in out and f"version {version}" in out and "bm25_rank" in out

    figures = {p.name for p in tmp_path.glob("*.png")}
    assert {
        "data_profile.png",
        "v1_learning_curve.png",
        f"candidate_{candidate}_ranks.png",
    } <= figures
    assert {"evaluation_ground_truth.png", "evaluation_learning_curve_sizes.png"} <= figures
