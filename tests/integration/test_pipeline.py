"""`jobrec run` on the tiny preset: every stage in order through the real components, each
recorded with its wall time and peak memory; a rerun runs nothing again, and `--from` runs
again from the named step on. (Resuming after a failure is tested without Spark in
tests/unit/pipeline.)"""

from __future__ import annotations

import json
import logging
import sys

import pytest

from jobrec_core.cli import main
from jobrec_core.config import load_config
from jobrec_core.pipeline import state_file
from jobrec_core.platform import manifest
from tests.helpers import QUICK_TITLES, REPO, state_overrides


@pytest.fixture
def logs_to_the_real_stderr():
    """`main` points the log handler at the captured stderr; put it back afterwards, so later
    log lines do not go to a closed capture."""
    yield
    logging.basicConfig(level=logging.INFO, stream=sys.__stderr__, force=True)


def test_one_command_runs_every_stage_and_resumes_after_the_last_one(
    spark,
    es_node,
    state_root,
    tiny,
    tiny_titles,
    tmp_path,
    capsys,
    logs_to_the_real_stderr,
):
    # The tiny fixtures' MLflow store, so that the titles step finds their normaliser (the
    # same settings and reference data) and uses it again, as a rerun of `jobrec run` would:
    # training one is tests/integration/titles' part. Its own experiment and model name keep
    # its runs and versions out of the other tests' way.
    fixtures_mlflow = tiny[0].mlflow
    settings = [
        *state_overrides(tmp_path),
        f"mlflow.tracking_uri={fixtures_mlflow.tracking_uri}",
        f"mlflow.artifact_root={fixtures_mlflow.artifact_root}",
        "mlflow.experiment=jobrec_pipeline",
        "mlflow.model_name=jobrec_drmm_pipeline",
        f"elasticsearch.local.workdir={state_root / 'es'}",  # the session's node
        "elasticsearch.index_alias=jobs_pipeline",  # not the alias other tests search
        "evaluation.models=[v1]",
        "evaluation.learning_curve=false",
        "evaluation.baselines=[BM25]",
        "evaluation.retrievers=[bm25]",
        "evaluation.ground_truth_candidates=40",
        "evaluation.held_out_candidates=40",
        "evaluation.retriever_candidates=40",
        "histograms.lead_fields=[title]",
        # the tiny v1 faces only BM25's order at the gate; if it loses, the retriever's own
        # order is recommended
        "promotion.min_gain_over_retriever=-9",
        "evaluation.report_appendices=[]",  # not the demo's: docs/results/seed.md
        *QUICK_TITLES,
    ]
    arguments = ["run", "--preset", "tiny", *(f"--set={s}" for s in settings)]
    config = load_config("local", [*settings, "data.preset=tiny"], REPO / "conf")
    path = state_file(config)

    assert main(arguments) == 0
    printed = capsys.readouterr().out
    steps = ["generate", "ingest", "embeddings", "titles", "clean", "index", "build_pairs"]
    steps += ["train_v1"]
    steps += ["evaluate", "recommend"]
    first = json.loads(path.read_text())["completed"]
    assert [r["name"] for r in first] == steps
    assert all(r["seconds"] > 0 and r["peak_rss_bytes"] > 0 for r in first)
    assert "tiny: every step done" in printed
    assert "P@10" in printed  # the evaluation's table
    assert "peak GiB" in printed
    assert manifest.current(config, "titles")["version"] == tiny_titles[0].version
    assert "Elasticsearch node" in printed  # each step's CPU, the node's apart

    assert main(arguments) == 0  # everything is recorded: nothing runs again
    assert json.loads(path.read_text())["completed"] == first

    assert main([*arguments, "--from", "recommend"]) == 0
    again = json.loads(path.read_text())["completed"]
    assert again[:-1] == first[:-1]
    assert again[-1]["name"] == "recommend"
    assert again[-1]["finished"] >= first[-1]["finished"]

    section_folder = tmp_path / "results"
    snapshot = ["snapshot", *(f"--set={s}" for s in [*settings, "data.preset=tiny"])]
    assert main([*snapshot, "--to", str(section_folder)]) == 0
    section = (section_folder / "tiny.md").read_text()
    assert section.startswith("## The tiny preset: a committed snapshot")
    assert "`jobrec run --env local` computed these tables" in section
    assert "`jobrec snapshot --env local` copied them" in section
    assert "train_v1" in section and "peak GiB" in section  # the steps' records
    assert "P@10" in section  # the evaluation's tables
    assert "](results/tiny/ground_truth.png)" in section
    assert (section_folder / "tiny" / "ground_truth.png").stat().st_size > 0
