"""Every component of the stack, exercised for real (the checks `jobrec demo` reports)."""

import pytest

from jobrec_core.stack_check import (
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
