"""`jobrec run` resumes: a failed step leaves the steps before it recorded, the rerun starts
at the failed one, and a configuration that computes differently starts over."""

import json

import pytest

from jobrec_core.config import load_config
from jobrec_core.pipeline import (
    PipelineError,
    PipelineState,
    Step,
    fingerprint,
    format_records,
    load_state,
    pipeline_steps,
    restart_from,
    run_steps,
    save_state,
    step_arguments,
    step_names,
)
from jobrec_core.platform.resources import TreeMemory


def steps_counting(calls: list[str], failing: set[str]) -> list[Step]:
    def step(name: str) -> Step:
        def run() -> str:
            calls.append(name)
            if name in failing:
                raise RuntimeError(f"{name} broke")
            return f"{name} output"

        return Step(name, run)

    return [step(name) for name in ("generate", "ingest", "index", "evaluate")]


def test_a_rerun_starts_at_the_step_that_failed(tmp_path):
    path = tmp_path / "state.json"
    state = PipelineState("abc")
    calls: list[str] = []
    with pytest.raises(PipelineError, match=r"step index failed .*index broke"):
        run_steps(steps_counting(calls, {"index"}), state, path, emit=lambda _: None)
    assert calls == ["generate", "ingest", "index"]
    saved = load_state(path, "abc")
    assert [r.name for r in saved.completed] == ["generate", "ingest"]

    calls.clear()
    printed: list[str] = []
    ran = run_steps(steps_counting(calls, set()), saved, path, emit=printed.append)
    assert calls == ["index", "evaluate"]
    assert [r.name for r in ran] == ["index", "evaluate"]
    assert printed == ["\nindex output", "\nevaluate output"]
    done = load_state(path, "abc")
    assert [r.name for r in done.completed] == ["generate", "ingest", "index", "evaluate"]
    assert all(r.seconds >= 0 and r.peak_rss_bytes > 0 for r in done.completed)
    assert all("driver" in r.cpu_seconds for r in done.completed)  # this process ran them
    table = format_records(done.completed)
    assert "total" in table
    assert "driver" in table  # the steps' CPU, and their total's


def test_other_arguments_rerun_their_step_and_only_the_later_ones(tmp_path):
    """`jobrec run --candidates 10000` after a finished run: recommend's sample changed, the
    expensive steps before it did not."""
    path = tmp_path / "state.json"
    state, calls = PipelineState("abc"), list[str]()
    steps = steps_counting(calls, set())  # generate, ingest, index, evaluate
    run_steps(steps, state, path, emit=lambda _: None, arguments={"index": {"candidates": 3}})
    assert load_state(path, "abc").completed[2].arguments == {"candidates": 3}

    calls.clear()
    again = {"index": {"candidates": 10000}}
    run_steps(steps, load_state(path, "abc"), path, emit=lambda _: None, arguments=again)
    assert calls == ["index", "evaluate"]  # the step under other arguments, and the later one
    saved = load_state(path, "abc")
    assert [r.name for r in saved.completed] == ["generate", "ingest", "index", "evaluate"]
    assert saved.completed[2].arguments == {"candidates": 10000}

    calls.clear()
    run_steps(steps, saved, path, emit=lambda _: None, arguments=again)
    assert calls == []  # the same arguments: done


def test_recommend_records_its_sample_size():
    assert step_arguments(10000) == {"recommend": {"candidates": 10000}}


def test_a_state_of_another_configuration_is_not_reused(tmp_path):
    path = tmp_path / "state.json"
    record = {"name": "generate", "seconds": 1.0, "peak_rss_bytes": 1, "finished": "2026-11-25"}
    path.write_text(json.dumps({"fingerprint": "old", "completed": [record]}))
    assert load_state(path, "old").done("generate")
    assert load_state(path, "old").completed[0].cpu_seconds == {}  # recorded before CPU was
    assert load_state(path, "new").completed == []


def test_without_a_state_every_step_runs_and_nothing_is_written(tmp_path):
    calls: list[str] = []
    run_steps(steps_counting(calls, set()), None, None, emit=lambda _: None)
    assert calls == ["generate", "ingest", "index", "evaluate"]
    assert list(tmp_path.iterdir()) == []


def test_from_a_step_forgets_it_and_every_later_one():
    state = PipelineState("abc")
    calls: list[str] = []
    run_steps(steps_counting(calls, set()), state, None, emit=lambda _: None)
    names = [step.name for step in steps_counting([], set())]
    again = restart_from(state, names, "index")
    assert [r.name for r in again.completed] == ["generate", "ingest"]
    with pytest.raises(ValueError, match="no step 'train'; the steps are: generate, ingest"):
        restart_from(state, names, "train")


def test_the_step_names_are_those_of_the_steps_built():
    config = load_config("local", ["evaluation.models=[v1, v5]"], None)
    built = pipeline_steps(None, config, 3, "test")  # type: ignore[arg-type]
    assert [step.name for step in built] == step_names(config)
    assert step_names(config)[-4:] == ["train_v1", "train_v5", "evaluate", "recommend"]


def test_an_unreadable_state_is_reported_and_every_step_runs(tmp_path, caplog):
    path = tmp_path / "state.json"
    path.write_text('{"fingerprint": "abc", "completed": [{"name": "gen')  # cut by a crash
    assert load_state(path, "abc").completed == []
    assert "unreadable" in caplog.text
    save_state(path, PipelineState("abc"))
    assert load_state(path, "abc").completed == []
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left


def test_how_it_runs_keeps_the_fingerprint_what_it_computes_changes_it(tmp_path):
    base = load_config("local", [], None)
    assert fingerprint(base) == fingerprint(
        load_config(
            "local",
            ["elasticsearch.request_timeout_s=300", "training.launcher=torchrun"],
            None,
        )
    )
    memory = base.spark.conf | {
        "spark.driver.memory": "12g",
        "spark.driver.extraJavaOptions": "-XX:+UseG1GC",
    }
    more_memory = base.model_copy(update={"spark": base.spark.model_copy(update={"conf": memory})})
    assert fingerprint(base) == fingerprint(more_memory)
    # where outputs live is part of it: a model registered elsewhere must be trained again
    assert fingerprint(base) != fingerprint(load_config("local", ["mlflow.model_name=x"], None))
    assert fingerprint(base) != fingerprint(load_config("local", ["run.seed=7"], None))
    assert fingerprint(base) != fingerprint(load_config("local", ["pairs.train=10"], None))


def test_tree_memory_sees_this_process():
    with TreeMemory(interval_s=0.01) as memory:
        block = bytearray(64 * 1024 * 1024)
        memory.sample()
    assert memory.peak_bytes > len(block)


def test_tree_memory_leaves_out_the_processes_it_is_told_to():
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; b = bytearray(200 << 20); time.sleep(30)"]
    )
    try:
        import time

        time.sleep(1.5)
        with TreeMemory() as counted:
            counted.sample()
        with TreeMemory(exclude=frozenset({child.pid})) as left_out:
            left_out.sample()
        assert counted.peak_bytes - left_out.peak_bytes > 150 << 20
    finally:
        child.kill()
        child.wait()
