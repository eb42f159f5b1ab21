"""The entry points parse what the README and the bundle pass them, and exit with their status."""

from __future__ import annotations

import pytest

from jobrec_core import runtime
from jobrec_core.entrypoints import clean_candidates, evaluate, recommend
from jobrec_core.platform.tracking import JOB_RUN_ID_ENV, job_run_id
from jobrec_core.runtime import entry_point


def test_recommend_takes_a_list_of_candidates_or_everyone():
    parser = recommend.build_parser()
    assert parser.parse_args(["--env", "local"]).candidates is None
    assert parser.parse_args(["--candidates", "17, 42,"]).candidates == [17, 42]
    with pytest.raises(SystemExit):
        parser.parse_args(["--candidates", "17,abc"])


def test_evaluate_takes_a_report_folder_and_overrides():
    args = evaluate.build_parser().parse_args(
        ["--env", "databricks", "--report-dir", "docs", "--set", "evaluation.learning_curve=false"]
    )
    assert (args.env, args.report_dir, args.overrides) == (
        "databricks",
        "docs",
        ["evaluation.learning_curve=false"],
    )


def test_an_entry_point_fails_with_the_status_of_its_job_and_returns_on_success():
    assert entry_point(lambda: 0)() is None
    with pytest.raises(SystemExit) as failed:
        entry_point(lambda: 3)()
    assert failed.value.code == 3


def test_the_job_run_id_a_job_is_given_reaches_its_mlflow_runs(monkeypatch):
    monkeypatch.setenv(JOB_RUN_ID_ENV, "")  # restored after the test
    monkeypatch.setattr(runtime, "setup_logging", lambda: None)
    parser = clean_candidates.build_parser()
    runtime.start_job(parser, ["--env", "local"])
    assert job_run_id() is None  # run by hand: no job run
    # What the bundle passes: `--job-run-id {{job.run_id}}`, resolved by Databricks.
    args, _ = runtime.start_job(parser, ["--env", "local", "--job-run-id", "731"])
    assert args.job_run_id == "731"
    assert job_run_id() == "731"


def test_the_job_run_id_can_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(JOB_RUN_ID_ENV, " 42 ")
    assert job_run_id() == "42"
    monkeypatch.setenv(JOB_RUN_ID_ENV, "  ")
    assert job_run_id() is None
