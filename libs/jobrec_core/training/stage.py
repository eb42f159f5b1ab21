"""Stage 4 on the driver: inputs from the manifest, one MLflow run, a launcher, the registry.

`jobs/train_drmm.py` calls :func:`run_training`. It

1. resolves the exact inputs: the current Delta snapshot files of `gold/pairs/triples` and
   `gold/pairs/map_sets` per split, and the embeddings/index/pairs versions of the manifest;
2. derives a training key from everything that changes the result (model and training
   settings, the pairs' config hash and table version, the seed). Checkpoints live under it,
   so rerunning a killed job resumes it, in the same MLflow run;
3. launches `training.train_worker` with the configured launcher: Spark's `TorchDistributor`
   (`distributor`), a plain `torchrun` subprocess (`torchrun`), or this process (`single`);
4. logs the learning curve and the model (pyfunc with signature and input example), registers
   it, and records it in the manifest as `model` for `jobs/promote_model.py`.

A failure anywhere ends the MLflow run as FAILED and registers nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from jobrec_core.config import JobrecConfig
from jobrec_core.models.drmm import spec_from_config
from jobrec_core.models.model_io import save_model
from jobrec_core.models.registry import EMBEDDINGS_TAG, SPLIT_RULE_TAG, model_entry
from jobrec_core.models.splits import current_split_rule
from jobrec_core.platform import manifest
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.plots import chart
from jobrec_core.platform.tables import delta_version, read_delta, split_snapshot_files
from jobrec_core.training.plan import EpochRecord, TrainPlan, TrainResult
from jobrec_core.training.promotion import GateFiles
from jobrec_core.training.scoring import tune_bm25_alpha
from jobrec_core.training.tuning import Trial, best_trial
from jobrec_core.training.worker import (
    EPOCH_SELECTION,
    PHASE_RULE,
    STEP_RULE,
    result_file,
    torchrun_command,
    train_worker,
    write_plan,
)
from jobrec_scoring.model import load_model
from jobrec_scoring.network import DrmmSpec

log = logging.getLogger(__name__)

RUN_ID_FILE = "mlflow_run_id"
COMPLETE_FILE = "COMPLETE"


@dataclass(frozen=True)
class TrainingInputs:
    triples: str
    map_sets: str
    files: dict[str, list[str]]  # split -> Parquet file URLs of the current snapshot
    versions: dict[str, str]  # what the model was trained on, as MLflow tags
    vectors_file: str  # the word vectors of that embeddings version (embedding gating)
    tables: tuple[str, ...]  # the Delta tables the files are snapshots of

    def file_counts(self) -> dict[str, int]:
        return {split: len(files) for split, files in self.files.items()}

    def gate_files(self) -> GateFiles:
        """The test splits the promotion gate scores models on."""
        return GateFiles(
            tuple(self.files["test"]),
            tuple(self.files["map_test"]),
            tuple(self.files["held_out_test"]),
        )


@dataclass(frozen=True)
class TrainingOutcome:
    run_id: str
    model_name: str
    version: str | None
    result: TrainResult
    checkpoint_dir: str
    inputs: TrainingInputs  # what it was trained on: its gate scores the same snapshot

    def format(self) -> str:
        lines = [
            f"{'phase':>5}{'epoch':>6}{'loss':>9}{'train acc':>11}{'dev acc':>9}{'dev MAP':>9}"
            f"{'dev MRR':>9}{'dev log-rank':>14}"
        ]
        lines += [
            f"{r.phase:>5}{r.epoch:>6}{r.train_loss:>9.4f}{r.train_accuracy:>11.4f}"
            f"{r.dev_accuracy:>9.4f}{r.dev_map:>9.4f}{r.dev_mrr:>9.4f}{r.dev_log_rank:>14.4f}"
            for r in self.result.history
        ]
        for phase, reason in sorted(self.result.stop_reasons.items()):
            lines.append(f"phase {phase} stopped: {reason}")
        if self.result.phase1_from:
            lines.append(
                f"phase 1 taken from {self.result.phase1_from}: the same network without its "
                "last layer, data, settings and seed"
            )
        if self.result.resumed_from:
            lines.append(f"resumed from {self.result.resumed_from}")
        lines.append(
            f"MLflow run {self.run_id}; registered {self.model_name} version {self.version}"
        )
        return "\n".join(lines)


def training_inputs(spark: SparkSession, config: JobrecConfig) -> TrainingInputs:
    pairs = manifest.current(config, "pairs")
    if "held_out" not in pairs:
        raise RuntimeError(
            "the current pairs have no held-out sets (built before they existed): rerun "
            "jobs/build_pairs.py"
        )
    if "pool_triples" not in pairs:
        raise RuntimeError(
            "the current pairs have no pool pairs or profile features (built before they "
            "existed): rerun jobs/build_pairs.py"
        )
    triples, map_sets = str(pairs["triples"]), str(pairs["map_sets"])
    held_out, pool_triples = str(pairs["held_out"]), str(pairs["pool_triples"])
    files = (
        split_snapshot_files(spark, triples, ("train", "dev", "test"))
        | split_snapshot_files(spark, map_sets, ("map_dev", "map_test"))
        | split_snapshot_files(spark, held_out, ("held_out_dev", "held_out_test"))
        | {"pool": split_snapshot_files(spark, pool_triples, ("pool_train",))["pool_train"]}
    )
    if not files["train"]:
        raise RuntimeError(
            f"{triples} has no training triples: run jobs/build_pairs.py first "
            f"(or check pairs.train in conf/)"
        )
    if not files["held_out_dev"]:
        # epochs are selected on them: without any, every epoch would measure NaN
        raise RuntimeError(
            f"{held_out} has no held-out dev candidates to select epochs on: check "
            f"pairs.dev in conf/ and rerun jobs/build_pairs.py"
        )
    versions = {
        EMBEDDINGS_TAG: str(pairs["embeddings"]),
        SPLIT_RULE_TAG: current_split_rule(config).fingerprint,
        "index": str(pairs["index"]),
        "pairs_config_hash": str(pairs["config_hash"]),
        "triples_table_version": str(delta_version(spark, triples)),
        "pool_triples_table_version": str(delta_version(spark, pool_triples)),
        "map_sets_table_version": str(delta_version(spark, map_sets)),
        "dataset": config.data.preset,
    }
    embeddings = manifest.current(config, "embeddings")
    if embeddings["version"] != pairs["embeddings"]:
        raise RuntimeError(
            f"the pairs were built with embeddings {pairs['embeddings']} but the manifest's "
            f"current embeddings are {embeddings['version']}: rerun jobs/build_pairs.py"
        )
    return TrainingInputs(
        triples,
        map_sets,
        files,
        versions,
        local_path(embeddings["vectors"]),
        (triples, map_sets, held_out, pool_triples),
    )


def training_key(config: JobrecConfig, spec: DrmmSpec, inputs: TrainingInputs) -> str:
    """What changes the trained weights, so that checkpoints are resumed or reused only by a
    training that would repeat them: among how the training runs, the number of processes
    (each one's shard, the batch per process), the loader processes (the order of a shard's
    batches) and the device (GPU kernels round otherwise); not the launcher itself."""
    training = config.training
    processes = 1 if training.launcher == "single" else training.num_processes
    settings = config.training.model_dump(
        include={
            "max_epochs",
            "early_stop_patience",
            "early_stop_min_gain",
            "optimizer",
            "learning_rate",
            "batch_size",
            "hinge_margin",
            "shuffle_buffer_rows",
        }
    )
    material = json.dumps(
        {
            "spec": spec.to_dict(),
            "bm25_mix": config.model.selected.bm25_mix,
            # named only when not the paper's: earlier trainings keep their keys
            **({"loss": loss} if (loss := config.model.selected.loss) != "hinge" else {}),
            **(
                {"min_epoch_steps": config.training.min_epoch_steps}
                if spec.examples == "pool"
                else {}
            ),
            "training": settings,
            # named only when not the local default (one CPU process pair, no loader
            # processes), so that earlier trainings keep their keys
            **(
                {
                    "processes": processes,
                    "decode_workers": training.decode_workers,
                    "gpu": training.use_gpu,
                }
                if (processes, training.decode_workers, training.use_gpu) != (2, 0, False)
                else {}
            ),
            "data": inputs.versions,
            "seed": config.run.seed,
            # what selects the epoch kept: a new measure keeps other weights
            "selected_on": EPOCH_SELECTION,
            **({"steps": STEP_RULE} if processes > 1 else {}),
            **({"phases": PHASE_RULE} if spec.two_phase else {}),
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:12]


def reusable_first_phase(
    config: JobrecConfig, spec: DrmmSpec, inputs: TrainingInputs
) -> str | None:
    """The checkpoints of a finished training that a two-phase model's phase 1 would repeat
    weight for weight, if there are any: the same network without its last layer (the seed's
    v3 and v4 against v1), on the same data, with the same settings and seed. Phase 1 freezes
    that layer at "document score only", whose weights are set, not drawn (`jobrec_scoring.
    network.Drmm`), and every random draw of an epoch is seeded by the epoch, so the two runs
    see the same batches and compute the same scores and gradients."""
    if not spec.two_phase or spec.extras_keep != 1.0:  # extras dropped out in phase 1
        return None
    single = replace(spec, extras=(), two_phase=False, phase2_keep={})
    key = training_key(config, single, inputs)
    folder = Path(local_path(config.path(f"{config.data.preset}/models/checkpoints")))
    finished = [d for d in sorted(folder.glob(f"drmm-*-{key}")) if (d / COMPLETE_FILE).exists()]
    return str(finished[0]) if finished else None


def make_plan(
    config: JobrecConfig, spec: DrmmSpec, inputs: TrainingInputs, checkpoint_dir: str
) -> TrainPlan:
    """The plan of one training: the files (the paper's triples, or the pairs drawn from the
    training pools for `examples: pool`), and every `training.*` setting TrainPlan has a
    field for, by name (but `min_epoch_steps`, for pool pairs only)."""
    settings = {
        plan_field.name: getattr(config.training, plan_field.name)
        for plan_field in fields(TrainPlan)
        if plan_field.name in type(config.training).model_fields
    }
    if spec.examples != "pool":  # the paper's configurations keep the paper's epochs
        settings["min_epoch_steps"] = 0
    return TrainPlan(
        spec=spec.to_dict(),
        train_files=inputs.files["pool" if spec.examples == "pool" else "train"],
        dev_files=inputs.files["dev"],
        map_dev_files=inputs.files["map_dev"],
        held_out_dev_files=inputs.files["held_out_dev"],
        checkpoint_dir=checkpoint_dir,
        seed=config.run.seed,
        k=config.evaluation.k,
        vectors_file=inputs.vectors_file,
        loss=config.model.selected.loss,
        **settings,
    )


def train_unregistered(
    spark: SparkSession, config: JobrecConfig, folder: str, train_files: list[str] | None = None
) -> TrainResult:
    """The configured DRMM trained from scratch (on `train_files`, or the whole training
    split), selected on the usual dev split, and not registered: for the learning curve and
    hyper-parameter trials. Checkpoints go to `models/<folder>`, emptied first."""
    inputs = training_inputs(spark, config)
    spec = spec_from_config(config, config.embeddings.vector_size)
    directory = Path(local_path(config.path(f"{config.data.preset}/models/{folder}")))
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    plan = make_plan(config, spec, inputs, str(directory))
    if train_files is not None:
        plan = replace(plan, train_files=train_files)
    return launch(spark, config, plan)


def train_on_files(
    spark: SparkSession, config: JobrecConfig, train_files: list[str] | None, candidates: int
) -> tuple[float, float, float, int, str]:
    """The learning curve's trainer: `evaluation.curve_model` trained on `train_files` (the
    examples of `candidates` training candidates; None: the whole training split); (dev
    accuracy, dev MAP, dev held-out MRR) of the epoch it kept, the epochs it ran, and the
    model's file. On the whole split, the registered model of that configuration is that
    very training when its training key is the current one, so its recorded result is read
    instead of training it again."""
    config = config.model_copy(
        update={"model": config.model.model_copy(update={"version": config.evaluation.curve_model})}
    )
    result = recorded_result(spark, config) if train_files is None else None
    if result is None:
        result = train_unregistered(spark, config, f"learning_curve/{candidates}", train_files)
    kept = result.selected_record()
    return (
        kept.dev_accuracy,
        kept.dev_map,
        kept.dev_mrr,
        len(result.history),
        result.model_file,
    )


def recorded_result(spark: SparkSession, config: JobrecConfig) -> TrainResult | None:
    """The training result of the manifest's model of the configured version, from its
    MLflow run, when training now would repeat it (the same training key); else None."""
    import mlflow

    from jobrec_core.platform.tracking import configure_mlflow

    entry = manifest.read_manifest(config).get(model_entry(config.model.version))
    spec = spec_from_config(config, config.embeddings.vector_size)
    current = training_key(config, spec, training_inputs(spark, config))
    if entry is None or entry.get("training_key") != current or not entry.get("run_id"):
        return None
    configure_mlflow(config)
    recorded = mlflow.artifacts.load_dict(f"runs:/{entry['run_id']}/training_result.json")
    log.info(
        "the whole training split: registered version %s's training, read back", entry["version"]
    )
    return TrainResult.from_dict(recorded)


def run_tuning(
    spark: SparkSession, trials: Sequence[tuple[tuple[str, ...], JobrecConfig]]
) -> list[Trial]:
    """Each (overrides, configuration) trained from scratch and scored on dev
    (`training.tuning`); the trials are logged to one MLflow run, `tune_drmm`."""
    import mlflow

    from jobrec_core.platform.tracking import configure_mlflow, log_stage_inputs

    measured = []
    for number, (overrides, config) in enumerate(trials, start=1):
        log.info("tuning: trial %d/%d: %s", number, len(trials), " ".join(overrides) or "as is")
        result = train_unregistered(spark, config, f"tuning/trial-{number}")
        kept = result.selected_record()
        measured.append(
            Trial(
                overrides,
                kept.dev_log_rank,
                kept.dev_mrr,
                kept.dev_accuracy,
                kept.dev_map,
                len(result.history),
            )
        )
    configure_mlflow(trials[0][1])
    with mlflow.start_run(run_name="tune_drmm"):
        mlflow.set_tag("stage", "tune_drmm")
        log_stage_inputs(spark, trials[0][1], training_inputs(spark, trials[0][1]).tables)
        for step, trial in enumerate(measured, start=1):
            mlflow.log_metric("trial_dev_held_out_log_rank", trial.dev_log_rank, step=step)
            mlflow.log_metric("trial_dev_held_out_mrr", trial.dev_mrr, step=step)
        mlflow.log_dict({"trials": [asdict(t) for t in measured]}, "trials.json")
        mlflow.set_tag("chosen", " ".join(best_trial(measured).overrides))
    return measured


def launch(spark: SparkSession, config: JobrecConfig, plan: TrainPlan) -> TrainResult:
    """Run `train_worker` under the configured launcher, then, for a configuration with
    `bm25_mix`, choose the model's weight against BM25 (:func:`tune_mix`); rank 0's result."""
    result = _run_workers(spark, config, plan)
    tune_mix(config, result, plan.held_out_dev_files)
    return result


def tune_mix(config: JobrecConfig, result: TrainResult, held_out_dev: list[str]) -> None:
    """With `model.versions.<v>.bm25_mix`: the weight `bm25_alpha` of the trained model
    against BM25 in its rankings (`ranking.interpolation`), the one of `ALPHA_GRID` with the
    best held-out log-rank score on the dev candidates when its paired gain over the model alone is
    significant (the gate's bootstrap, `promotion.bootstrap_resamples`), written into the
    model file's spec (so every ranking of the model mixes alike) and logged to the active
    MLflow run, if any."""
    if not config.model.selected.bm25_mix:
        return
    import mlflow

    model = load_model(result.model_file)
    alpha, tried = tune_bm25_alpha(
        model,
        held_out_dev,
        config.training.eval_batch_size,
        config.promotion.bootstrap_resamples,
        config.run.seed,
    )
    model.spec = replace(model.spec, bm25_alpha=alpha)
    save_model(model, Path(result.model_file))
    log.info(
        "mix with BM25: alpha %.2f, dev held-out log-rank score %.4f (the model alone: %.4f)",
        alpha,
        tried.get(alpha, float("nan")),
        tried.get(1.0, float("nan")),
    )
    if mlflow.active_run() is not None:
        mlflow.log_metric("dev_bm25_alpha", alpha)
        mlflow.log_dict({str(weight): score for weight, score in tried.items()}, "bm25_mix.json")


def _run_workers(spark: SparkSession, config: JobrecConfig, plan: TrainPlan) -> TrainResult:
    """Run `train_worker` under the configured launcher; returns rank 0's result."""
    training = config.training
    if training.launcher == "single":
        return TrainResult.from_dict(train_worker(plan))
    if training.launcher == "torchrun":
        return _torchrun(plan, training.num_processes, training.max_restarts)
    from pyspark.ml.torch.distributor import TorchDistributor

    local_mode = (spark.sparkContext.master or "").startswith("local")
    distributor = TorchDistributor(
        num_processes=training.num_processes, local_mode=local_mode, use_gpu=training.use_gpu
    )
    log.info(
        "TorchDistributor: %d processes (%s, %s)",
        training.num_processes,
        "GPU" if training.use_gpu else "CPU",
        "on the driver" if local_mode else "on the executors",
    )
    output = distributor.run(train_worker, asdict(plan))
    if output is None:
        raise RuntimeError("TorchDistributor returned no result from rank 0")
    return TrainResult.from_dict(output)


def _torchrun(plan: TrainPlan, processes: int, max_restarts: int) -> TrainResult:
    plan_path = write_plan(plan, Path(plan.checkpoint_dir))
    command = torchrun_command(plan_path, processes, max_restarts)
    log.info("torchrun: %s", " ".join(command))
    subprocess.run(command, check=True)
    return TrainResult.from_dict(json.loads(result_file(plan_path).read_text(encoding="utf-8")))


def run_training(spark: SparkSession, config: JobrecConfig, fresh: bool = False) -> TrainingOutcome:
    """See the module docstring."""
    import mlflow

    from jobrec_core.models.registry import input_example, log_drmm
    from jobrec_core.platform.tracking import (
        CONFIGURATION_TAG,
        configure_mlflow,
        log_stage_inputs,
    )

    inputs = training_inputs(spark, config)
    spec = spec_from_config(config, config.embeddings.vector_size)
    key = training_key(config, spec, inputs)
    checkpoint_dir = Path(
        local_path(
            config.path(
                f"{config.data.preset}/models/checkpoints/drmm-{config.model.version}-{key}"
            )
        )
    )
    if fresh or (checkpoint_dir / COMPLETE_FILE).exists():
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    configure_mlflow(config)
    run_id_file = checkpoint_dir / RUN_ID_FILE
    resume_run = run_id_file.read_text().strip() if run_id_file.exists() else None
    log.info(
        "train_drmm %s: files per split %s, checkpoints in %s",
        config.model.version,
        inputs.file_counts(),
        checkpoint_dir,
    )
    with mlflow.start_run(
        run_id=resume_run, run_name=None if resume_run else f"train_drmm {config.model.version}"
    ) as run:
        run_id_file.write_text(run.info.run_id)
        if resume_run is None:
            mlflow.set_tags(
                {
                    "stage": "train_drmm",
                    CONFIGURATION_TAG: config.model.version,
                    "training_key": key,
                    **inputs.versions,
                }
            )
            mlflow.log_params(_flat("model", config.model.model_dump(exclude={"versions"})))
            mlflow.log_params(_flat("spec", spec.to_dict()))
            mlflow.log_params(_flat("training", config.training.model_dump()))
            mlflow.log_dict(manifest.read_manifest(config), "manifest.json")
        # Again when resumed: a retry in another job run tags that run.
        log_stage_inputs(spark, config, inputs.tables)
        plan = replace(
            make_plan(config, spec, inputs, str(checkpoint_dir)),
            tracking_uri=mlflow.get_tracking_uri(),
            run_id=run.info.run_id,
            phase1_from=None if fresh else reusable_first_phase(config, spec, inputs),
        )
        result = launch(spark, config, plan)
        mlflow.log_figure(learning_curve(result.history), "learning_curve.png")
        mlflow.log_dict(result.to_dict(), "training_result.json")
        model = load_model(result.model_file)
        example = input_example(
            read_delta(spark, inputs.map_sets).where("split = 'map_dev'").limit(2).toPandas(), model
        )
        version = log_drmm(model, Path(result.model_file), example, config.mlflow.model_name)
        (checkpoint_dir / COMPLETE_FILE).write_text(run.info.run_id)
    entry = {
        "name": config.mlflow.model_name,
        "version": version,
        "run_id": run.info.run_id,
        "training_key": key,
        **inputs.versions,
    }
    # `model`: the last one trained, for promotion; `model_<v>`: the last of each
    # configuration, for the evaluation's side-by-side table.
    manifest.record(config, "model", entry)
    manifest.record(config, model_entry(config.model.version), entry)
    return TrainingOutcome(
        run.info.run_id, config.mlflow.model_name, version, result, str(checkpoint_dir), inputs
    )


def learning_curve(history: list[EpochRecord]) -> Any:
    """Train accuracy, dev accuracy, dev MAP and dev held-out MRR per epoch (phases one after
    the other; the log-rank score that selects is on another scale, in the epoch table)."""
    with chart((7, 4), "DRMM learning curve", (0, 1)) as (figure, axis):
        steps = list(range(1, len(history) + 1))
        for key, label in (
            ("train_accuracy", "train accuracy"),
            ("dev_accuracy", "dev accuracy"),
            ("dev_map", "dev MAP"),
            ("dev_mrr", "dev held-out MRR"),
        ):
            axis.plot(steps, [getattr(r, key) for r in history], marker="o", label=label)
        for position, (before, after) in enumerate(pairwise(history), start=1):
            if after.phase != before.phase:
                axis.axvline(position + 0.5, color="grey", linestyle="--", linewidth=1)
        axis.set_xlabel("epoch")
    return figure


def _flat(prefix: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        f"{prefix}.{k}": json.dumps(v) if isinstance(v, (list, dict, tuple)) else v
        for k, v in values.items()
    }


def gate_files(spark: SparkSession, config: JobrecConfig) -> GateFiles:
    """The test splits the promotion gate scores models on."""
    return training_inputs(spark, config).gate_files()
