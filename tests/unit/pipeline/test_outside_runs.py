"""The demo and the stage jobs rewrite what `jobrec run` records: they forget, in the recorded
state of the preset, the step they rewrite and every later one, and keep the earlier ones."""

from __future__ import annotations

import pkgutil
from contextlib import nullcontext

import pytest

from jobrec_core import cli, entrypoints, pipeline, runtime
from jobrec_core.config import load_config
from jobrec_core.entrypoints import build_pairs, train_drmm
from jobrec_core.pipeline import (
    JOB_STEPS,
    STAGES_BEFORE_TRAINING,
    PipelineState,
    StepRecord,
    forget_from,
    forget_step,
    load_state,
    save_state,
    state_file,
)

# The jobs that rewrite none of the steps' outputs: the stack check's own tables and index,
# tuning (registers nothing), reports beside the run's.
JOBS_WITHOUT_STEP = {"check_stack", "tune_drmm", "choose_query_floor", "evaluate_cleaning"}
RECORDED = [
    *STAGES_BEFORE_TRAINING,
    "train_v1",
    "train_v5",
    "evaluate",
    "recommend",
]


def state_of(names: list[str]) -> PipelineState:
    return PipelineState("recorded", [StepRecord(n, 1.0, 1, "2026-01-01") for n in names])


def names(state: PipelineState) -> list[str]:
    return [record.name for record in state.completed]


@pytest.fixture
def preset_config(tmp_path):
    """The tiny preset's configuration in this test's own folder (not the session's
    `config`, whose state other tests share)."""
    return load_config("local", [f"storage.root={tmp_path}", "data.preset=tiny"])


def test_every_entry_point_says_which_step_it_rewrites_or_that_it_rewrites_none():
    modules = {m.name for m in pkgutil.iter_modules(entrypoints.__path__)}
    assert modules == set(JOB_STEPS) | JOBS_WITHOUT_STEP
    assert not set(JOB_STEPS) & JOBS_WITHOUT_STEP
    known = set(RECORDED)
    assert {step.format(version="v1") for step in JOB_STEPS.values()} <= known


@pytest.mark.parametrize(
    ("step", "kept"),
    [
        ("generate", []),
        ("clean", RECORDED[:4]),
        ("train_v5", RECORDED[:8]),  # train_v1 comes before it
        ("train_v9", RECORDED[:9]),  # not a training of that run: from the step after them
        ("recommend", RECORDED[:10]),
    ],
)
def test_a_step_and_every_later_one_are_forgotten(step, kept):
    assert names(forget_from(state_of(RECORDED), step)) == kept


def test_forgetting_goes_by_the_pipeline_order_not_by_what_was_recorded():
    partial = state_of(RECORDED[:5])  # stopped after clean
    assert names(forget_from(partial, "evaluate")) == RECORDED[:5]
    assert names(forget_from(partial, "index")) == RECORDED[:5]
    assert names(forget_from(state_of(["generate", "renamed"]), "ingest")) == ["generate"]


def test_the_recorded_state_is_rewritten_with_its_own_fingerprint(preset_config):
    path = state_file(preset_config)
    forget_step(preset_config, "generate")
    assert not path.exists()  # no run recorded: nothing to forget, nothing written
    save_state(path, state_of(RECORDED))
    forget_step(preset_config, "index")
    saved = load_state(path, "recorded")  # another configuration's: still its own
    assert names(saved) == RECORDED[:5]
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]  # no temporary file
    path.write_text("{cut by a crash")
    forget_step(preset_config, "index")
    assert path.read_text() == "{cut by a crash"  # left alone: `load_state` discards it


def start(monkeypatch, module, argv: list[str]) -> None:
    """The start of the stage job `module` as its console script makes it, the job named as
    `entry_point` names it; the stage itself is not run."""
    monkeypatch.setattr(runtime, "setup_logging", lambda: None)
    with runtime.stage_job(runtime.job_name(module.main)):
        runtime.start_job(module.build_parser(), argv)


def test_a_stage_job_forgets_its_step_and_the_later_ones(monkeypatch, preset_config, tmp_path):
    path = state_file(preset_config)
    save_state(path, state_of(RECORDED))
    # Under another configuration than the run's: the outputs are rewritten all the same.
    overrides = [f"storage.root={tmp_path}", "data.preset=tiny", "run.seed=7"]
    start(monkeypatch, build_pairs, [arg for o in overrides for arg in ("--set", o)])
    assert names(load_state(path, "recorded")) == RECORDED[:6]

    save_state(path, state_of(RECORDED))
    start(monkeypatch, train_drmm, ["--set", overrides[0], "--set", overrides[1],
                                    "--set", "model.version=v5"])  # fmt: skip
    assert names(load_state(path, "recorded")) == RECORDED[:8]


def test_a_job_called_as_a_function_forgets_nothing(monkeypatch, preset_config, tmp_path):
    """Only the console scripts and `jobs/*.py` (`entry_point`) name the job."""
    save_state(state_file(preset_config), state_of(RECORDED))
    monkeypatch.setattr(runtime, "setup_logging", lambda: None)
    runtime.start_job(build_pairs.build_parser(), ["--set", f"storage.root={tmp_path}",
                                                   "--set", "data.preset=tiny"])  # fmt: skip
    assert names(load_state(state_file(preset_config), "recorded")) == RECORDED


def test_the_demo_forgets_every_step_before_it_runs_them(monkeypatch, preset_config, spark):
    from jobrec_core.devtools import stack_check
    from jobrec_core.platform import spark as sessions

    path = state_file(preset_config)
    save_state(path, state_of(RECORDED))
    monkeypatch.setattr(cli, "_local_node", lambda config, keep: nullcontext())
    monkeypatch.setattr(cli, "_node_services", lambda config: {})
    # the session the tests share, not one reconfigured for this test's folder
    monkeypatch.setattr(sessions, "get_spark", lambda config: spark)
    monkeypatch.setattr(stack_check, "run_checks", lambda context: [])
    monkeypatch.setattr(stack_check, "format_report", lambda results: "")
    seen: list[list[str]] = []

    def run_steps(steps, state, state_path, services):
        seen.append(names(load_state(path, "recorded")))  # what a crash here would leave

    monkeypatch.setattr(pipeline, "run_steps", run_steps)
    assert cli._demo(preset_config, keep_es=False) == 0
    assert seen == [[]]


class _Formats:
    def format(self) -> str:
        return ""


def test_recommending_one_candidate_again_forgets_the_runs_recommend_step(
    monkeypatch, preset_config, spark
):
    from jobrec_core.platform import spark as sessions
    from jobrec_core.serving import stage as serving

    path = state_file(preset_config)
    save_state(path, state_of(RECORDED))
    monkeypatch.setattr(cli, "_local_node", lambda config: nullcontext())
    monkeypatch.setattr(sessions, "get_spark", lambda config: spark)
    monkeypatch.setattr(serving, "run_recommend", lambda session, config, ids: _Formats())
    monkeypatch.setattr(serving, "show_candidate", lambda session, config, candidate: "")
    assert cli._recommend(preset_config, 17, refresh=True) == 0
    assert names(load_state(path, "recorded")) == RECORDED[:-1]
