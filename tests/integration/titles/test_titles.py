"""Stage 1c on the real stack: the title normaliser trained, scored, logged and registered in
MLflow and loaded back through its pyfunc, and the tiny preset's silver jobs
normalised in Spark."""

from __future__ import annotations

import mlflow
import pandas as pd
from pyspark.sql import functions as F

from jobrec_core.features.occupations import TITLE_CONFIDENCE, TITLE_OCCUPATION, format_mapping
from jobrec_core.models.titles import load_title_normaliser
from jobrec_core.platform import manifest
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.platform.tracking import configure_mlflow, registry_client
from jobrec_core.titles.sets import TEST_SETS
from jobrec_core.titles.stage import (
    FINGERPRINT_TAG,
    normalise_job_titles,
    normaliser_fingerprint,
    occupation_names,
    train_title_normaliser,
)


def test_the_normaliser_is_scored_registered_and_champion(tiny, tiny_titles):
    config = tiny[0]
    trained, _ = tiny_titles
    assert set(trained.scores) == set(TEST_SETS)
    assert all(
        s.size > 0 and all(0 <= x <= 1 for x in (s.model, s.nearest, s.baseline))
        for s in trained.scores.values()
    )
    assert trained.scores["extra_words"].baseline == 1.0  # seed 001: by construction
    text = trained.report.read_text()
    assert "Typos" in text and "n-gram (jobrec)" in text and "seed 001's lookup" in text
    assert trained.table in text and "The chosen lookup, on the validation sets" in text
    champion = registry_client(config).get_model_version_by_alias(
        config.titles.model_name, config.mlflow.champion_alias
    )
    assert str(champion.version) == trained.version
    assert manifest.current(config, "titles")["version"] == trained.version


def test_the_same_settings_and_reference_data_use_the_registered_normaliser_again(
    spark, tiny, tiny_titles
):
    config = tiny[0]
    trained, _ = tiny_titles
    again = train_title_normaliser(spark, config)
    assert again.version == trained.version and again.scores == trained.scores
    other = config.model_copy(
        update={"titles": config.titles.model_copy(update={"steps": config.titles.steps + 1})}
    )
    assert normaliser_fingerprint(other) != normaliser_fingerprint(config)
    assert normaliser_fingerprint(config) == trained_fingerprint(config, trained.version)


def trained_fingerprint(config, version):
    client = registry_client(config)
    return client.get_model_version(config.titles.model_name, version).tags[FINGERPRINT_TAG]


def test_the_registered_pyfunc_normalises_as_the_normaliser_does(tiny, tiny_titles):
    config = tiny[0]
    configure_mlflow(config)
    uri = str(manifest.current(config, "titles")["model"])
    titles = pd.DataFrame({"title": ["Senior Java Developer (Remote)", "Line Cook", "", None]})
    served = mlflow.pyfunc.load_model(uri).predict(titles)
    direct = load_title_normaliser(uri).normalise(titles["title"].tolist())
    pd.testing.assert_frame_equal(served.reset_index(drop=True), direct)
    assert (
        served["occupation"].iloc[:2].notna().all() and served["occupation"].iloc[2:].isna().all()
    )


def test_every_job_title_gets_an_occupation_and_a_rerun_gives_the_same(spark, tiny, tiny_titles):
    config = tiny[0]
    _, mapping = tiny_titles
    jobs = read_delta(spark, table_path(config, "silver", "jobs"))
    assert {TITLE_OCCUPATION, TITLE_CONFIDENCE} <= set(jobs.columns)
    titled = jobs.where(F.trim(F.coalesce("title", F.lit(""))) != "")
    assert titled.where(F.col(TITLE_OCCUPATION).isNull()).count() == 0
    assert (
        jobs.where((F.col(TITLE_CONFIDENCE) < -1.001) | (F.col(TITLE_CONFIDENCE) > 1.001)).count()
        == 0
    )
    assert mapping.jobs == jobs.count()
    assert 0 < mapping.real_ads_labelled <= mapping.real_ads
    assert 0 < mapping.generated_agreeing <= mapping.generated
    assert "real ads" in format_mapping(mapping, occupation_names(config))

    before = {r["job_id"]: (r[TITLE_OCCUPATION], r[TITLE_CONFIDENCE]) for r in jobs.collect()}
    again = normalise_job_titles(spark, config)
    after = read_delta(spark, table_path(config, "silver", "jobs"))
    assert after.columns == jobs.columns  # the columns are replaced, not added twice
    assert {
        r["job_id"]: (r[TITLE_OCCUPATION], r[TITLE_CONFIDENCE]) for r in after.collect()
    } == before
    assert again == mapping


def test_the_data_report_shows_how_the_titles_map(spark, tiny, tiny_titles, tmp_path):
    from jobrec_core.data.report import dataset_report

    report = dataset_report(spark, tiny[0], tmp_path)
    assert "Normalised titles" in report and "real ads" in report
