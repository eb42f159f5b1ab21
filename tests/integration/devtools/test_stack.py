"""Every component of the stack, exercised for real (the checks `jobrec demo` reports)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobrec_core.devtools.stack_check import (
    CHECKS,
    StackContext,
    check_ddp,
    check_delta,
    check_elasticsearch,
    check_mlflow,
    check_petastorm,
    format_report,
    run_checks,
)
from tests.helpers import REPO

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ctx(config, spark):
    return StackContext(config, spark)


def test_delta_write_merge_and_time_travel(ctx):
    assert "4 rows after MERGE" in check_delta(ctx)


def test_connector_write_then_bm25_multi_match(ctx, es_node):
    assert "3 docs via connector" in check_elasticsearch(ctx)


def test_mlflow_register_alias_and_load(ctx):
    assert "loaded and predicts identically" in check_mlflow(ctx)


def test_petastorm_streams_into_torch(ctx):
    assert "1000 rows streamed" in check_petastorm(ctx)


def test_ddp_step_with_two_processes(ctx):
    assert "2 processes (gloo)" in check_ddp(ctx)


def test_report_lists_failures_without_raising(ctx, monkeypatch):
    def broken(_ctx):
        raise RuntimeError("boom")

    monkeypatch.setitem(CHECKS, "broken", broken)
    results = run_checks(ctx, ["broken"])
    assert [(r.name, r.ok) for r in results] == [("broken", False)]
    report = format_report(results)
    assert "FAIL broken" in report
    assert "RuntimeError: boom" in report
    assert "0/1 components OK" in report


def test_spark_submit_runs_a_job(state_root):
    """`spark-submit jobs/<stage>.py`, as data engineers run the jobs: the environment's
    spark-defaults.conf (written by setup) puts Delta and the connector on the driver."""
    venv_bin = Path(sys.executable).parent
    spark_submit = venv_bin / "spark-submit"
    # A shell with the environment activated, not this process's settings: the session
    # factory exports PYSPARK_PYTHON, which would let spark-submit find Spark by accident.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_HOME"))}
    env |= {
        "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv_bin.parent),
    }
    result = subprocess.run(
        [
            str(spark_submit),
            str(REPO / "jobs" / "check_stack.py"),
            "--only",
            "delta",
            "--set",
            f"storage.root={state_root / 'spark-submit'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "1/1 components OK" in result.stdout
