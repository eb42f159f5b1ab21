"""The whole pipeline on one preset as one command that resumes (`jobrec run`).

The steps, in order: generate, ingest, embeddings, titles, clean, index, build_pairs, one
training and promotion per model of `evaluation.models` (the paper's configurations, then
ours), evaluate, recommend. Each is the stage function its job runs, so `jobrec run` does
what the jobs do one after another (and the demo does the same steps).

**Resuming.** After each step, a state file records it: its wall time, the peak memory of
the process tree (the driver, the JVM, Spark's Python workers, the training processes) and
when it ended. Running the same command again skips the recorded steps and starts at the first
one that is not recorded, the one that failed. Every step replaces what it writes, so a step
killed halfway runs again from its start (training continues from its last checkpoint). The
state holds the configuration's fingerprint: under a configuration that computes anything
differently, nothing is skipped. Settings of how it runs (`RUNTIME_SETTINGS`: Spark's
resources, the node's address, timeouts) may change between a failure and its rerun. A step
whose outputs depend on the command's arguments as well records them (`step_arguments`:
recommend's `--candidates`), and runs again, with every later step, under others.
`--from STEP` runs again from that step; `--fresh` forgets the state. The demo and the stage
jobs, which rewrite the same outputs outside the state, forget the step they rewrite and
every later one (`forget_step`, `JOB_STEPS`).

The state file is `<storage.root>/<preset>/reports/pipeline/state.json`, written whole and
then renamed into place, so a kill never leaves half a record.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from pyspark.sql import SparkSession

from jobrec_core.config import JobrecConfig
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.progress import format_duration
from jobrec_core.platform.resources import GIB, CpuTime, TreeMemory, most_first
from jobrec_core.platform.tables import table_path

log = logging.getLogger(__name__)

STAGES_BEFORE_TRAINING = (
    "generate",
    "ingest",
    "embeddings",
    "titles",
    "clean",
    "index",
    "build_pairs",
)
SHOWN_CANDIDATES = 3  # candidates whose jobs and recommendations are printed in full
TRAININGS = "train"  # every `train_<version>` step's place in the pipeline (`forget_from`)

# The step of `jobrec run` whose outputs each stage job (a module of `jobrec_core.entrypoints`)
# rewrites: when the job starts, that step and every later one leave the recorded state of the
# preset (`runtime.start_job`), so that a rerun does not reuse outputs the job replaced, perhaps
# under another configuration. `train_drmm` rewrites its version's training; `promote_model`
# moves the champion, which evaluate and recommend read (the trainings' own gate decisions
# stay what they were, as they were recorded: retraining every model would not change them).
# The other jobs rewrite none:
# check_stack its own tables and index, tune_drmm registers nothing, the rest write reports.
JOB_STEPS = {
    "generate_data": "generate",
    "ingest": "ingest",
    "train_embeddings": "embeddings",
    "train_titles": "titles",
    "normalise_titles": "titles",
    "clean_candidates": "clean",
    "index_jobs": "index",
    "build_pairs": "build_pairs",
    "train_drmm": "train_{version}",
    "promote_model": "evaluate",
    "evaluate": "evaluate",
    "recommend": "recommend",
}


@dataclass(frozen=True)
class Step:
    """One step: a name to resume by, and the stage call, which returns what to print."""

    name: str
    run: Callable[[], str]


@dataclass(frozen=True)
class StepRecord:
    name: str
    seconds: float
    peak_rss_bytes: int
    finished: str  # ISO time, UTC
    # CPU seconds by kind of process (`platform.resources.CpuTime`): where the step's cores
    # went. Empty in a state recorded before it was kept.
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    # The command's arguments the step's outputs depend on (`step_arguments`): under others
    # the step is not done. Empty in a state recorded before they were kept.
    arguments: dict[str, int] = field(default_factory=dict)


@dataclass
class PipelineState:
    """What a run on one preset has completed, under which configuration."""

    fingerprint: str
    completed: list[StepRecord] = field(default_factory=list)

    def done(self, name: str, arguments: Mapping[str, int] | None = None) -> bool:
        """Whether step `name` is recorded, run with these `arguments` (`step_arguments`)."""
        wanted = dict(arguments or {})
        return any(r.name == name and r.arguments == wanted for r in self.completed)

    def to_json(self) -> str:
        return json.dumps(
            {"fingerprint": self.fingerprint, "completed": [asdict(r) for r in self.completed]},
            indent=2,
        )

    @staticmethod
    def from_json(text: str) -> PipelineState:
        values = json.loads(text)
        known = {f.name for f in fields(StepRecord)}  # a later version's additions are left out
        return PipelineState(
            values["fingerprint"],
            [
                StepRecord(**{k: v for k, v in r.items() if k in known})
                for r in values.get("completed", [])
            ],
        )


# Settings that say how the pipeline runs, not what it computes or where its outputs live:
# changing them (more memory after a failure, a longer timeout, smaller bulk requests) keeps
# the completed steps. Where outputs live (the MLflow registry, the node's folder, the index
# alias) stays in the fingerprint: a step recorded against another registry or node must run.
RUNTIME_SETTINGS = (
    "storage",  # the state file lives under it: another root has its own state anyway
    "spark.master",
    "spark.app_name",
    "spark.jars_dir",
    "elasticsearch.auth",
    "elasticsearch.verify_certs",
    "elasticsearch.request_timeout_s",
    "elasticsearch.local.heap",
    "elasticsearch.local.port",
    "elasticsearch.local.start_timeout_s",
    "indexing.write_partitions",
    "indexing.batch_entries",
    "indexing.batch_bytes",
    "indexing.bulk_retries",
    "indexing.bulk_retry_wait_s",
    "indexing.write_attempts",
    "indexing.attempt_backoff_s",
    "indexing.health_timeout_s",
    "indexing.force_merge_segments",  # the same hits and scores (exact kNN, no deletes)
    "retrieval.msearch_batch",
    "retrieval.max_concurrent_searches",
    "retrieval.timeout_s",
    "retrieval.max_retries",
    "retrieval.backoff_s",
    "retrieval.checkpoint_queries",
    "retrieval.bound_budget",  # one pass or two: the same answers (search.bounded)
    "retrieval.scored_in_search",  # the kNN jobs' BM25 in the search or apart: the same scores
    "retrieval.bound_window",
    "retrieval.screen",  # build_pairs' screen: the same candidates kept (search.bounded)
    "retrieval.screen_budget",
    "histograms.worker_tables_max_jobs",  # tables joined or shipped: the same rows, to the bit
    "evaluation.report_appendices",  # what the report appends, not what it computes
    "training.launcher",
    "training.prefetch_batches",
    "titles.log_every",
)
RUNTIME_SPARK_CONF = (
    "spark.driver.memory",
    "spark.executor.memory",
    "spark.driver.maxResultSize",
    "spark.driver.extraJavaOptions",  # the collector, the JVM's flags: the same results
)


def fingerprint(config: JobrecConfig) -> str:
    """A hash of every setting but `RUNTIME_SETTINGS` (and Spark's memory settings): under
    another fingerprint, nothing recorded can be reused."""
    values = config.model_dump(mode="json")
    for setting in RUNTIME_SETTINGS:
        *parents, leaf = setting.split(".")
        section = values
        for parent in parents:
            section = section[parent]
        del section[leaf]
    for key in RUNTIME_SPARK_CONF:
        values["spark"]["conf"].pop(key, None)
    resolved = json.dumps(values, sort_keys=True)
    return hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:16]


def state_file(config: JobrecConfig) -> Path:
    return Path(local_path(table_path(config, "reports", "pipeline"))) / "state.json"


def load_state(path: Path, config_fingerprint: str) -> PipelineState:
    """The recorded state, or an empty one when there is none or it belongs to another
    configuration (said in the log, so a rerun that starts over is never a surprise)."""
    state = _recorded(path)
    if state is None:
        return PipelineState(config_fingerprint)
    if state.fingerprint != config_fingerprint:
        log.warning(
            "%s was recorded under another configuration (%s, now %s): every step runs",
            path,
            state.fingerprint,
            config_fingerprint,
        )
        return PipelineState(config_fingerprint)
    return state


def _recorded(path: Path) -> PipelineState | None:
    """The state recorded in `path`; None when there is none, or when it is unreadable (said
    in the log: every step runs)."""
    if not path.is_file():
        return None
    try:
        return PipelineState.from_json(path.read_text(encoding="utf-8"))
    except (ValueError, KeyError, TypeError) as error:
        log.warning("%s is unreadable (%s): every step runs", path, error)
        return None


def save_state(path: Path, state: PipelineState) -> None:
    """Written to a file of its own, flushed to disk, then renamed over the state: a kill or
    a crash leaves the old state or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial_name = tempfile.mkstemp(dir=path.parent, prefix=".state-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as partial_file:
            partial_file.write(state.to_json())
            partial_file.flush()
            os.fsync(partial_file.fileno())
        os.replace(partial_name, path)
    except BaseException:
        Path(partial_name).unlink(missing_ok=True)
        raise


def forget_step(config: JobrecConfig, name: str) -> None:
    """Drop step `name` and every later one from the state `jobrec run` recorded for this
    preset, saved as `save_state` saves it: the demo and the stage jobs are about to rewrite
    their outputs, perhaps under another configuration, so a rerun must not reuse them. The
    state keeps its own fingerprint (a run under it must still skip the earlier steps); none,
    or one `load_state` would discard anyway, is left alone."""
    path = state_file(config)
    state = _recorded(path)
    if state is None:
        return
    kept = forget_from(state, name)
    if len(kept.completed) < len(state.completed):
        save_state(path, kept)
        forgotten = [r.name for r in state.completed[len(kept.completed) :]]
        log.info("%s: %s will run again in `jobrec run`", path, ", ".join(forgotten))


def forget_job(config: JobrecConfig, job: str) -> None:
    """`forget_step` for the step the stage job `job` rewrites (`JOB_STEPS`); none for the
    others."""
    step = JOB_STEPS.get(job)
    if step is not None:
        forget_step(config, step.format(version=config.model.version))


def pipeline_steps(
    spark: SparkSession, config: JobrecConfig, candidates: int, label: str
) -> list[Step]:
    """Every step on the configured preset; `candidates` held-out candidates get
    recommendations, and `label` names the command in the published report."""
    from jobrec_core.cleaning.stage import run_cleaning
    from jobrec_core.data.report import dataset_report
    from jobrec_core.data.stage import generate_dataset, ingest_raw
    from jobrec_core.embeddings.stage import build_embeddings
    from jobrec_core.evaluation.stage import held_out_candidates, run_evaluation
    from jobrec_core.features.occupations import format_mapping
    from jobrec_core.indexing.stage import index_builder, run_indexing
    from jobrec_core.pairs.stage import run_build_pairs
    from jobrec_core.results import publish
    from jobrec_core.serving.stage import run_recommend, show_candidate
    from jobrec_core.titles.stage import (
        normalise_job_titles,
        occupation_names,
        train_title_normaliser,
    )
    from jobrec_core.training.promotion import promote
    from jobrec_core.training.stage import run_training, train_on_files

    def generate() -> str:
        counts = generate_dataset(spark, config)
        summary = ", ".join(f"{key} {value:,}" for key, value in counts.items())
        return f"generated {config.data.preset!r}: {summary}"

    def ingest() -> str:
        lines = [report.format() for report in ingest_raw(spark, config)]
        return "\n".join([*lines, "", dataset_report(spark, config)])

    def embeddings() -> str:
        built = build_embeddings(spark, config)
        return (
            f"embeddings {built.version.name}: {built.vocabulary:,} words, "
            f"{built.terms:,} IDF terms"
        )

    def titles() -> str:
        trained = train_title_normaliser(spark, config)
        return (
            f"title normaliser v{trained.version} ({trained.taxonomy:,} taxonomy titles, "
            f"{config.titles.steps:,} steps, {format_duration(trained.seconds)})\n"
            f"{trained.table}\n\n"
            f"{format_mapping(normalise_job_titles(spark, config), occupation_names(config))}"
        )

    def train(version: str) -> str:
        versioned = config.model_copy(
            update={"model": config.model.model_copy(update={"version": version})}
        )
        trained = run_training(spark, versioned)
        # the run's gates share the family's significance level (`promotion.family_alpha`)
        gates = len(config.evaluation.models)
        decision = promote(versioned, str(trained.version), trained.inputs.gate_files(), gates)
        return f"DRMM {version}\n{trained.format()}\n{decision.format()}"

    def evaluate() -> str:
        evaluation = run_evaluation(
            spark, config, partial(train_on_files, spark, config), index_builder(spark, config)
        )
        written, _ = publish(config, evaluation, None, label)
        return f"{evaluation.format()}\nreport: {written}"

    def recommend() -> str:
        sample = [
            int(r["candidate_id"]) for r in held_out_candidates(spark, config, candidates).collect()
        ]
        parts = [run_recommend(spark, config, sample).format()]
        parts += [show_candidate(spark, config, c) for c in sample[:SHOWN_CANDIDATES]]
        return "\n\n".join(parts)

    runs: dict[str, Callable[[], str]] = {
        "generate": generate,
        "ingest": ingest,
        "embeddings": embeddings,
        "titles": titles,
        "clean": lambda: run_cleaning(spark, config).format(),
        "index": lambda: run_indexing(spark, config).format(),
        "build_pairs": lambda: run_build_pairs(spark, config).format(),
        **{f"train_{v}": partial(train, v) for v in config.evaluation.models},
        "evaluate": evaluate,
        "recommend": recommend,
    }
    return [Step(name, runs[name]) for name in step_names(config)]


def step_arguments(candidates: int) -> dict[str, dict[str, int]]:
    """By step, the arguments of :func:`pipeline_steps` its outputs depend on beyond the
    configuration (recorded with it; `run_steps`): recommend's sample of candidates."""
    return {"recommend": {"candidates": candidates}}


class PipelineError(RuntimeError):
    """A step failed; the state keeps every step before it."""


def run_steps(
    steps: list[Step],
    state: PipelineState | None,
    path: Path | None,
    emit: Callable[[str], None] = print,
    services: Mapping[str, int] | None = None,
    arguments: Mapping[str, Mapping[str, int]] | None = None,
) -> list[StepRecord]:
    """Run the steps that `state` has not recorded, in order, recording each in it as it ends
    and saving it to `path` (`state` None: run all, record nothing). `arguments` gives, by
    step, what its outputs depend on beyond the configuration (`step_arguments`): a step
    recorded under others runs again. `services` names the processes that work beside the
    pipeline's own (the local Elasticsearch node): peak memory leaves them out, so that a
    step's figure does not depend on who started them, and their CPU seconds are counted
    under their names. Returns the records of the steps run now."""
    named = dict(services or {})
    given = arguments or {}
    ran: list[StepRecord] = []
    for number, step in enumerate(steps, start=1):
        step_args = dict(given.get(step.name, {}))
        if state is not None and state.done(step.name, step_args):
            log.info(
                "step %d/%d %s: done in an earlier run, skipped", number, len(steps), step.name
            )
            continue
        if state is not None:
            # Recorded under other arguments, it runs again, and so does every later step (on
            # its new outputs): their records go first, saved before the step rewrites them.
            restarted = restart_from(state, [s.name for s in steps], step.name)
            if len(restarted.completed) < len(state.completed):
                state.completed = restarted.completed
                if path is not None:
                    save_state(path, state)
        log.info("step %d/%d %s: starting", number, len(steps), step.name)
        started = time.perf_counter()
        with (
            TreeMemory(exclude=frozenset(named.values())) as memory,
            CpuTime(services=named) as cpu,
        ):
            try:
                output = step.run()
            except Exception as error:
                seconds = time.perf_counter() - started
                raise PipelineError(
                    f"step {step.name} failed after {format_duration(seconds)}: {error}"
                ) from error
        record = StepRecord(
            step.name,
            time.perf_counter() - started,
            memory.peak_bytes,
            datetime.now(UTC).isoformat(timespec="seconds"),
            {kind: round(seconds, 2) for kind, seconds in cpu.seconds.items()},
            step_args,
        )
        emit(f"\n{output}")
        log.info(
            "step %d/%d %s: done in %s, peak memory %.2f GiB, CPU %s",
            number,
            len(steps),
            step.name,
            format_duration(record.seconds),
            record.peak_rss_bytes / GIB,
            format_cpu(record.cpu_seconds),
        )
        ran.append(record)
        if state is not None:
            state.completed.append(record)
            if path is not None:
                save_state(path, state)
    return ran


def step_names(config: JobrecConfig) -> list[str]:
    """The names of :func:`pipeline_steps`' steps, in order, without building them."""
    trainings = [f"train_{version}" for version in config.evaluation.models]
    return [*STAGES_BEFORE_TRAINING, *trainings, "evaluate", "recommend"]


def restart_from(state: PipelineState, names: list[str], name: str) -> PipelineState:
    """The state without `name` and every step after it: they run again."""
    if name not in names:
        raise ValueError(f"no step {name!r}; the steps are: {', '.join(names)}")
    later = set(names[names.index(name) :])
    return PipelineState(state.fingerprint, [r for r in state.completed if r.name not in later])


def forget_from(state: PipelineState, name: str) -> PipelineState:
    """The state without step `name` and every step recorded after it, the earlier records
    kept in order. By the steps' places in the pipeline, not by a configuration's step
    names: the state may have been recorded under other `evaluation.models` (a training this
    run does not know drops the steps after the trainings); a step this version does not
    know counts as the last."""
    order = [*STAGES_BEFORE_TRAINING, TRAININGS, "evaluate", "recommend"]

    def place(step: str) -> int:
        kind = TRAININGS if step.startswith(f"{TRAININGS}_") else step
        return order.index(kind) if kind in order else len(order)

    start = place(name)
    for index, record in enumerate(state.completed):
        here = place(record.name)
        if record.name == name or here > start:
            return PipelineState(state.fingerprint, state.completed[:index])
    return state


def format_cpu(seconds: Mapping[str, float]) -> str:
    """CPU seconds by kind of process, as `total s (kind s, ...)`; empty when not recorded."""
    if not seconds:
        return ""
    kinds = ", ".join(f"{kind} {spent:.0f}" for kind, spent in seconds.items())
    return f"{sum(seconds.values()):.0f} s ({kinds})"


def format_records(records: list[StepRecord]) -> str:
    """The steps' wall time, peak memory and, where recorded, CPU seconds, as a table (the
    same table as before CPU was recorded, for a state that has none)."""
    recorded = [r for r in records if r.cpu_seconds]
    lines = [f"{'step':<16}{'wall':>10}{'peak GiB':>10}" + ("  CPU" if recorded else "")]
    lines += [
        f"{r.name:<16}{format_duration(r.seconds):>10}{r.peak_rss_bytes / GIB:>10.2f}  "
        f"{format_cpu(r.cpu_seconds)}".rstrip()
        for r in records
    ]
    total = f"{'total':<16}{format_duration(sum(r.seconds for r in records)):>10}"
    if recorded:
        spent: dict[str, float] = {}
        for record in recorded:
            for kind, seconds in record.cpu_seconds.items():
                spent[kind] = spent.get(kind, 0.0) + seconds
        of = "" if len(recorded) == len(records) else f", of {len(recorded)} steps"
        total += f"{'':>10}  {format_cpu(most_first(spent))}{of}"
    lines.append(total)
    return "\n".join(lines)
