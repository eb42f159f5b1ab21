"""Stage 1 on real Spark: tokenisation, embeddings, the WMD filter and the funnel."""

import json
import logging
from pathlib import Path

import mlflow.data
import numpy as np
import pytest
from delta.tables import DeltaTable
from gensim.models import KeyedVectors
from pyspark.sql import functions as F

from jobrec_core.cleaning.stage import clean_candidates, run_cleaning
from jobrec_core.embeddings.stage import build_embeddings
from jobrec_core.platform.manifest import current
from jobrec_core.platform.quarantine import DataQualityError
from jobrec_core.platform.tables import delta_version, read_delta, table_path
from jobrec_core.platform.tracking import JOB_RUN_ID_ENV, JOB_RUN_ID_TAG, stage_runs
from jobrec_core.text.tokens import (
    JOB_TEXT_FIELDS,
    clean_tokens,
    load_stopwords,
    tokenize_jobs,
    tokens_column,
)
from jobrec_core.timeline.asof import as_of, interest_by, jobs_posted_by

pytestmark = pytest.mark.integration


def test_spark_tokens_equal_python_tokens(spark, tiny):
    config, _, _ = tiny
    stopwords = load_stopwords()
    jobs = read_delta(spark, table_path(config, "bronze", "jobs")).orderBy("job_id").limit(400)
    for row in tokenize_jobs(jobs, stopwords).collect():
        for field in JOB_TEXT_FIELDS:
            text = " ".join(row[field]) if field == "keywords" else row[field]
            assert row[tokens_column(field)] == clean_tokens(text, stopwords), (row.job_id, field)


def test_embeddings_are_versioned_reproducible_and_tracked(
    spark, tiny, tiny_embeddings, monkeypatch
):
    config, _, _ = tiny
    assert current(config, "embeddings")["version"] == tiny_embeddings.version.name
    first = KeyedVectors.load(tiny_embeddings.version.vectors_file, mmap="r")
    assert first.vector_size == config.embeddings.vector_size
    monkeypatch.setenv(JOB_RUN_ID_ENV, "731")  # as `--job-run-id {{job.run_id}}` sets it
    again = build_embeddings(spark, config)
    assert again.version == tiny_embeddings.version
    second = KeyedVectors.load(again.version.vectors_file)
    assert first.index_to_key == second.index_to_key
    assert np.array_equal(np.asarray(first.vectors), second.vectors)
    # The stage's MLflow run names the job run and the Delta snapshot it read.
    run = stage_runs(config, "train_embeddings", limit=1)[0]
    assert run.data.tags[JOB_RUN_ID_TAG] == "731"
    bronze = table_path(config, "bronze", "jobs")
    assert run.inputs is not None
    [logged] = run.inputs.dataset_inputs
    assert logged.dataset.name == f"bronze/jobs@v{delta_version(spark, bronze)}"
    assert logged.dataset.source_type == "delta_table"
    assert json.loads(logged.dataset.source)["path"] == bronze
    assert logged.dataset.schema is not None
    columns = json.loads(logged.dataset.schema)["mlflow_colspec"]
    assert [c["name"] for c in columns] == read_delta(spark, bronze).columns
    assert {(t.key, t.value) for t in logged.tags} == {("mlflow.data.context", "input")}
    source = mlflow.data.get_source(logged)  # the snapshot can be read back
    assert source.load().count() == read_delta(spark, bronze).count()


def test_idf_is_log_n_over_df(spark, tiny, tiny_embeddings):
    """Over the ads posted by the run's as-of date: a later ad's words weigh nothing yet."""
    config, _, _ = tiny
    every = read_delta(spark, table_path(config, "silver", "jobs"))
    jobs = jobs_posted_by(every, as_of(config).day)
    total = jobs.count()
    assert 0 < total < every.count() and tiny_embeddings.jobs == total
    idf = {
        r.term: (r.df, r.idf)
        for r in read_delta(spark, tiny_embeddings.version.idf_table).collect()
    }
    words = F.array_distinct(F.concat(*[tokens_column(f) for f in JOB_TEXT_FIELDS]))
    for term in ("nurse", "software", "manager"):
        df = jobs.where(F.array_contains(words, term)).count()
        assert idf[term] == (df, pytest.approx(np.log(total / df)))


@pytest.fixture
def controlled(tmp_path, spark):
    """Four jobs whose words have chosen vectors: three about nursing, one about welding."""
    keyed = KeyedVectors(3)
    words = ["nurse", "patient", "care", "welder", "steel"]
    vectors = [[1, 0, 0], [0.9, 0.1, 0], [0.95, 0, 0.05], [0, 1, 0], [0, 0.9, 0.1]]
    keyed.add_vectors(words, np.array(vectors, dtype=np.float32))
    path = str(tmp_path / "vectors.kv")
    keyed.save(path, sep_limit=0)
    ids = keyed.key_to_index
    documents = spark.createDataFrame(
        [
            (1, [ids["nurse"], ids["care"]]),
            (2, [ids["patient"], ids["nurse"]]),
            (3, [ids["care"], ids["patient"]]),
            (4, [ids["welder"], ids["steel"]]),
        ],
        "job_id INT, word_ids ARRAY<INT>",
    )
    candidates = spark.createDataFrame(
        [
            (100, [(1, 5), (2, 3), (3, 4), (4, 2)]),  # the welding job is noise
            (101, [(1, 4), (2, 4), (4, 1)]),  # two jobs left after the filter
            (102, [(1, 2), (2, 3), (3, 3)]),  # no score of 4 or more
            (103, [(1, 5), (2, 5), (3, 1)]),  # tie on the top score
        ],
        "candidate_id BIGINT, sequence ARRAY<STRUCT<job_id: INT, score: INT>>",
    )
    return path, documents, candidates


@pytest.mark.parametrize("prune", [True, False])
def test_wmd_filter_drops_the_unrelated_job(spark, tiny, controlled, prune):
    config, _, _ = tiny
    path, documents, candidates = controlled
    rules = config.cleaning.model_copy(update={"wmd_similarity_threshold": 0.6})
    outputs = clean_candidates(spark, candidates, documents, path, rules, prune, partitions=2)
    cleaned = {r.candidate_id: r for r in outputs.candidates.collect()}
    assert sorted(cleaned) == [100, 103]
    assert [(e.job_id, e.score) for e in cleaned[100].sequence] == [(1, 5), (2, 3), (3, 4)]
    assert cleaned[100].positive_job_id == 1
    assert cleaned[103].positive_job_id == 2  # the most recent of the top scores
    decisions = {(r.candidate_id, r.job_id): r.decision for r in outputs.similarities.collect()}
    assert decisions[(100, 4)] == decisions[(101, 4)] == "drop"
    assert decisions[(100, 1)] == "keep"


STRAY_SCHEMA = "candidate_id BIGINT, sequence ARRAY<STRUCT<job_id: INT, score: INT>>"


def test_stage_quarantines_candidates_with_unknown_jobs(spark, tiny, tiny_embeddings, caplog):
    config, _, _ = tiny
    caplog.set_level(logging.INFO, logger="jobrec_core.platform.progress")
    bronze = table_path(config, "bronze", "candidates")
    table = DeltaTable.forPath(spark, bronze)
    before = delta_version(spark, bronze)
    count = interest_by(read_delta(spark, bronze), as_of(config).day).count()  # by the as-of date
    stray = spark.createDataFrame(
        [
            (999_999_999, [(1, 5), (2_000_000, 4), (3, 4)]),  # the jobs table changed since
            # An id too large for an INT, as ingestion wrote it before it refused such ids.
            (999_999_998, [(1, 5), (None, 4)]),
        ],
        STRAY_SCHEMA,
    )
    stray.write.format("delta").mode("append").save(bronze)
    try:
        funnel = run_cleaning(spark, config)
    finally:
        table.restoreToVersion(before)
    quarantine = read_delta(spark, table_path(config, "bronze", "quarantine"))
    rows = quarantine.where("source = 'clean_candidates'").orderBy("detail").collect()
    assert [(r.reason, r.detail) for r in rows] == [
        ("unknown_job_id", "a job without an id is not in the jobs table"),
        ("unknown_job_id", "job 2000000 is not in the jobs table"),
    ]
    assert funnel.quarantined_unknown_jobs == 2
    assert funnel.candidates == count + 2
    assert funnel.after_wmd_and_rules <= funnel.after_rules < funnel.candidates
    assert funnel.exact_pairs == funnel.distinct_pairs <= funnel.pairs  # no pruning by default
    silver = read_delta(spark, table_path(config, "silver", "candidates")).collect()
    assert len(silver) == funnel.after_wmd_and_rules
    step = "clean_candidates: rules and WMD filter (silver/candidates)"
    logged = [r.getMessage() for r in caplog.records]
    assert f"{step} ..." in logged
    assert any(line.startswith(f"{step}: done in ") for line in logged)
    # The stage's MLflow run: its funnel as metrics, the bronze snapshot it read.
    run = stage_runs(config, "clean_candidates", limit=1)[0]
    assert run.data.metrics["quarantined_unknown_jobs"] == 2.0
    assert run.data.metrics["after_wmd_and_rules"] == funnel.after_wmd_and_rules
    assert run.inputs is not None
    names = {i.dataset.name for i in run.inputs.dataset_inputs}
    assert f"bronze/candidates@v{before + 1}" in names
    for row in silver:
        assert len(row.sequence) >= config.cleaning.min_jobs
        assert row.positive_job_id in {e.job_id for e in row.sequence}


def test_stage_over_the_error_budget_fails_before_writing_silver(spark, tiny, tiny_embeddings):
    config, _, _ = tiny
    strict = config.model_copy(
        update={"quality": config.quality.model_copy(update={"error_budget_fraction": 0.0})}
    )
    bronze = table_path(config, "bronze", "candidates")
    silver = table_path(config, "silver", "candidates")
    table = DeltaTable.forPath(spark, bronze)
    before = delta_version(spark, bronze)
    silver_before = delta_version(spark, silver) if Path(silver).exists() else None
    stray = spark.createDataFrame([(999_999_999, [(1, 5), (2_000_000, 4)])], STRAY_SCHEMA)
    stray.write.format("delta").mode("append").save(bronze)
    try:
        with pytest.raises(
            DataQualityError, match=r"clean_candidates: 1 of [0-9,]+ records .* error budget"
        ) as error:
            run_cleaning(spark, strict)
    finally:
        table.restoreToVersion(before)
    assert "unknown_job_id" in str(error.value)
    quarantine = read_delta(spark, table_path(config, "bronze", "quarantine"))
    assert quarantine.where("source = 'clean_candidates'").count() == 1  # left for inspection
    assert (delta_version(spark, silver) if Path(silver).exists() else None) == silver_before
