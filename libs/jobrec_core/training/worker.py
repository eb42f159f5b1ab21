"""DRMM training: one worker function, run by any launcher (docs/TRAINING.md).

:func:`train_worker` is what every process runs. It reads its rank from the environment
torchrun sets (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`), so the same function runs under Spark's
`TorchDistributor` (CPU processes with gloo, or one process per GPU with NCCL), under a plain
`torchrun` (`python -m jobrec_core.training.worker PLAN.json`), or alone in the calling process.
Everything it needs is in a :class:`TrainPlan`: plain values, so it pickles and serialises to
JSON for any launcher.

Per epoch: each process streams its shard of the training triples (`jobrec_core.training.batches`),
DDP averages the gradients, every process takes the same number of steps (:class:`InStep`), rank 0
measures dev accuracy, dev MAP and the dev held-out MRR and log-rank score and writes a
checkpoint; every process then reads the same early-stopping decision. Epochs are selected on
the held-out log-rank score (`ranking.metrics.log_rank_score`): each
phase ends with the weights of its best epoch (every process keeps them; the checkpoint too).
A two-phase model keeps phase 1's weights when phase 2 did not improve on them. Seeds depend
on (seed, phase, epoch, rank) alone and every process's optimizer state is the same, so a run
resumed from its checkpoint continues exactly as the uninterrupted run would have.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import torch
import torch.distributed as dist
from torch import nn

from jobrec_core.features.query_vectors import query_vectors_of
from jobrec_core.models.drmm import phases, set_phase, training_loss
from jobrec_core.models.model_io import FINAL_MODEL, save_model
from jobrec_core.platform.logs import setup_logging
from jobrec_core.training.batches import (
    ReaderSettings,
    TripleStream,
    prefetched,
    release_kept,
    row_count,
    training_batches,
)
from jobrec_core.training.checkpoints import Checkpoints, first_phase_of
from jobrec_core.training.plan import EpochRecord, TrainPlan, TrainResult
from jobrec_core.training.scoring import evaluate
from jobrec_scoring.network import Drmm, DrmmInputs, DrmmSpec

log = logging.getLogger(__name__)
T = TypeVar("T")


# The dev measure epochs are selected on (`EpochRecord.dev_log_rank`); part of the training
# key, so that checkpoints selected on another measure are not taken for this one's.
EPOCH_SELECTION = "held-out log rank"
# The rules that shape a multi-process or two-phase training's weights, in the training key too:
# checkpoints written under earlier rules (DDP's `join()`, phase 2 always kept) are not resumed.
STEP_RULE = "every process steps while all have a batch"
PHASE_RULE = "phase 2 kept only if it beats phase 1 on dev"


def best_epoch(dev_scores: list[float], min_gain: float) -> int:
    """Index of the selected epoch: the last one that beat every earlier epoch by more than
    `min_gain` (the first epoch to start with). A NaN score (nothing measured) beats nothing
    and is beaten by any number: were it the first, every comparison with it would be false
    and training would keep epoch 1 whatever followed."""
    best = 0
    for index, score in enumerate(dev_scores):
        unmeasured = math.isnan(dev_scores[best]) and not math.isnan(score)
        if unmeasured or score > dev_scores[best] + min_gain:
            best = index
    return best


def should_stop(dev_scores: list[float], patience: int, min_gain: float) -> bool:
    """Stop once the selected epoch is `patience` epochs old: a noisy dev metric can only make
    training run longer, never stop it on one unlucky epoch (the paper's rule, stop when dev
    accuracy moved less than 0.008, reacted to noise three times that size on the demo)."""
    return len(dev_scores) - 1 - best_epoch(dev_scores, min_gain) >= patience


def epoch_batch_size(rows: int, batch_size: int, min_steps: int, world: int) -> int:
    """The rows a process trains on per step: `batch_size`, or fewer where the training rows
    are too few for each of the `world` processes to take `min_steps` optimisation steps in
    one pass (`training.min_epoch_steps`), but never fewer than one."""
    if min_steps <= 0:
        return batch_size
    return max(1, min(batch_size, rows // (min_steps * world)))


# --- the worker -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Process:
    rank: int
    world: int
    local_rank: int
    device: torch.device
    # Where the processes agree, each step, that all of them still have a batch: a gloo group
    # on the CPU, so that NCCL training does not wait for the GPU to read the answer back.
    steps_group: Any = None

    @property
    def leader(self) -> bool:
        return self.rank == 0


@contextmanager
def deterministic_cuda(use_gpu: bool) -> Iterator[None]:
    """With `use_gpu`, ask CUDA for the same bits on every run until the block ends; set
    before any kernel runs: cuBLAS's fixed workspace (its split-K reductions otherwise depend
    on the stream's workspace), cuDNN's deterministic algorithms and no benchmarking between
    them, and torch's deterministic kernels. `warn_only`: an op with no deterministic kernel
    on the GPU warns, naming itself, instead of failing a training; the listwise loss's
    per-list sums are already a matrix product rather than `index_add`. The settings are the
    process's, so they are put back on exit: with `training.launcher: single` the worker runs
    in the driver, whose later scoring must not pay for them (deterministic mode fills every
    new tensor)."""
    if not use_gpu:
        yield
        return
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
    )
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = saved[2:]


def _process(use_gpu: bool) -> _Process:
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_gpu:
        if not torch.cuda.is_available():
            raise RuntimeError("training.use_gpu is true but torch sees no CUDA device")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world)))
    steps_group = None
    if world > 1:
        if not dist.is_initialized():
            dist.init_process_group("nccl" if use_gpu else "gloo")
        steps_group = dist.new_group(backend="gloo") if use_gpu else dist.group.WORLD
    return _Process(rank, world, local_rank, device, steps_group)


def train_worker(plan: TrainPlan | dict[str, Any]) -> dict[str, Any]:
    """Train as one process of `WORLD_SIZE`; returns `TrainResult.to_dict()` (on every rank).

    A plain function of plain values, so `TorchDistributor.run` can pickle it."""
    if isinstance(plan, dict):
        plan = TrainPlan(**plan)
    with deterministic_cuda(plan.use_gpu):
        process = _process(plan.use_gpu)
        setup_logging()  # after the process group: initialising it resets the warning filters
        try:
            return _train(plan, process).to_dict()
        finally:
            if process.world > 1 and dist.is_initialized():
                dist.destroy_process_group()


def _train(plan: TrainPlan, process: _Process) -> TrainResult:
    spec = DrmmSpec.from_dict(plan.spec)
    torch.manual_seed(plan.seed)
    model = Drmm(spec).to(process.device)
    if spec.gating == "embedding":
        if plan.vectors_file is None:
            raise ValueError("embedding gating needs the plan's vectors_file")
        model.query_vectors = query_vectors_of(plan.vectors_file)
    checkpoints = Checkpoints(Path(plan.checkpoint_dir))
    state = checkpoints.latest()
    phase1_from = None
    if state is None and plan.phase1_from is not None:
        state, phase1_from = first_phase_of(Path(plan.phase1_from), model), plan.phase1_from
    progress = _Progress()
    start_phase, start_epoch, optimizer_state = 1, 1, None
    resumed_from = None
    if state is not None:
        model.load_state_dict(state["model"])
        progress = _Progress.restored(state)
        start_phase, start_epoch = state["next_phase"], state["next_epoch"]
        optimizer_state = state["optimizer"] if start_epoch > 1 else None
        resumed_from = None if phase1_from else state["file"]
        if process.leader:
            log.info(
                "%s %s: phase %d, epoch %d",
                "phase 1 taken from" if phase1_from else "resuming from",
                state["file"],
                start_phase,
                start_epoch,
            )
    rows = row_count(plan.train_files)
    batch_size = epoch_batch_size(rows, plan.batch_size, plan.min_epoch_steps, process.world)
    if batch_size < plan.batch_size and process.leader:
        log.info(
            "batches of %d rows, not %d: %d training rows give each of %d processes at least "
            "%d optimisation steps an epoch (training.min_epoch_steps)",
            batch_size,
            plan.batch_size,
            rows,
            process.world,
            plan.min_epoch_steps,
        )
    plan = replace(plan, batch_size=batch_size)
    tracker = _Tracker(plan) if process.leader else None
    if tracker is not None and phase1_from is not None:
        for step, record in enumerate(progress.history, start=1):
            tracker.log_epoch(record, step)
    for phase in phases(spec):
        if phase < start_phase:
            continue
        set_phase(model, phase)
        optimizer = make_optimizer(plan, model)
        if optimizer_state is not None and phase == start_phase:
            optimizer.load_state_dict(optimizer_state)
        wrapped = _distributed(model, process)
        first = start_epoch if phase == start_phase else 1
        if phase > 1 and first == 1:  # the model holds what the previous phase kept
            progress.earlier_weights = _copy(model.state_dict())
        for epoch in range(first, plan.max_epochs + 1):
            record = _epoch(plan, model, wrapped, optimizer, process, phase, epoch)
            finished = progress.add(model, record, plan)
            if process.leader:
                assert tracker is not None
                tracker.log_epoch(record, len(progress.history))
                next_step = (phase + 1, 1) if finished else (phase, epoch + 1)
                checkpoints.save(model, optimizer, progress.state(), *next_step, phase, epoch)
            _barrier(process)
            if finished:
                break
    release_kept()  # the dev sets: nothing stays behind in an in-process training
    model_file = Path(plan.checkpoint_dir) / FINAL_MODEL
    if process.leader:
        save_model(model, model_file)
    _barrier(process)
    return TrainResult(
        progress.history,
        str(model_file),
        process.world,
        resumed_from,
        progress.stop_reasons,
        progress.selected,
        phase1_from,
        progress.kept_phase,
    )


@dataclass
class _Progress:
    """The epochs so far, why each phase stopped, the epoch each phase kept, the weights of
    the current phase's best epoch and of what the previous phase kept, and which phase the
    final weights come from: the early-stopping state a checkpoint carries."""

    history: list[EpochRecord] = field(default_factory=list)
    stop_reasons: dict[int, str] = field(default_factory=dict)
    selected: dict[int, int] = field(default_factory=dict)
    best_weights: dict[str, torch.Tensor] | None = None
    earlier_weights: dict[str, torch.Tensor] | None = None
    kept_phase: int | None = None

    @staticmethod
    def restored(state: dict[str, Any]) -> _Progress:
        return _Progress(
            [EpochRecord(**r) for r in state["history"]],
            {int(k): v for k, v in state["stop_reasons"].items()},
            {int(k): int(v) for k, v in state.get("selected", {}).items()},
            state.get("best_weights"),
            state.get("earlier_weights"),
            state.get("kept_phase"),
        )

    def state(self) -> dict[str, Any]:
        return {
            "history": [asdict(r) for r in self.history],
            "stop_reasons": {str(k): v for k, v in self.stop_reasons.items()},
            "selected": {str(k): v for k, v in self.selected.items()},
            "best_weights": self.best_weights,
            "earlier_weights": self.earlier_weights,
            "kept_phase": self.kept_phase,
        }

    def add(self, model: Drmm, record: EpochRecord, plan: TrainPlan) -> bool:
        """Record an epoch; True when its phase is finished, and then `model` holds the
        phase's best weights, or the previous phase's unless this phase's best beat them on
        dev by more than `early_stop_min_gain`, the rule between epochs (a second phase that
        only retrains the last layer can end below what the first kept: its first epoch
        already moves the weights away from them)."""
        self.history.append(record)
        epochs = [r for r in self.history if r.phase == record.phase]
        scores = [r.dev_log_rank for r in epochs]
        best = best_epoch(scores, plan.early_stop_min_gain)
        if best == len(scores) - 1:
            self.best_weights = _copy(model.state_dict())
        if should_stop(scores, plan.early_stop_patience, plan.early_stop_min_gain):
            reason = f"dev held-out log rank did not improve for {plan.early_stop_patience} epochs"
        elif record.epoch == plan.max_epochs:
            reason = f"max_epochs ({plan.max_epochs}) reached"
        else:
            return False
        kept = epochs[best]
        reason = (
            f"{reason}; kept epoch {kept.epoch} (dev held-out log-rank score "
            f"{kept.dev_log_rank:.4f}, MRR {kept.dev_mrr:.4f})"
        )
        self.selected[record.phase] = kept.epoch
        self.kept_phase = record.phase
        assert self.best_weights is not None
        weights = self.best_weights
        earlier = self._earlier_kept(record.phase)
        if earlier is not None and self.earlier_weights is not None:
            scores = [earlier.dev_log_rank, kept.dev_log_rank]
            if best_epoch(scores, plan.early_stop_min_gain) == 0:
                weights, self.kept_phase = self.earlier_weights, earlier.phase
                reason += (
                    f"; phase {earlier.phase}'s epoch {earlier.epoch} scored "
                    f"{earlier.dev_log_rank:.4f}, and the model keeps its weights"
                )
        self.stop_reasons[record.phase] = reason
        model.load_state_dict(weights)
        self.best_weights = self.earlier_weights = None
        return True

    def _earlier_kept(self, phase: int) -> EpochRecord | None:
        """The epoch the phase before `phase` kept, if there is one."""
        epoch = self.selected.get(phase - 1)
        return next((r for r in self.history if (r.phase, r.epoch) == (phase - 1, epoch)), None)


def _copy(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in weights.items()}


def _epoch(
    plan: TrainPlan,
    model: Drmm,
    wrapped: nn.Module,
    optimizer: torch.optim.Optimizer,
    process: _Process,
    phase: int,
    epoch: int,
) -> EpochRecord:
    started = time.perf_counter()
    epoch_seed = plan.seed + 1_000 * phase + epoch
    torch.manual_seed(epoch_seed * 7_919 + process.rank)  # dropout masks
    settings = ReaderSettings(
        files=tuple(plan.train_files),
        batch_size=plan.batch_size,
        shuffle=True,
        seed=epoch_seed,
        shard=process.rank,
        shards=process.world,
        shuffle_buffer_rows=plan.shuffle_buffer_rows,
        lists=plan.loss == "listwise",
    )
    # loss sum, correct, triples: kept where the model runs, so a step never waits for the GPU
    # to report them (and NCCL reduces them in place); then the triples left unread
    totals = torch.zeros(4, dtype=torch.float64, device=process.device)
    wrapped.train()
    stream = TripleStream(settings, model.spec, model.query_vectors)
    on_device = training_batches(stream, plan.decode_workers, process.device)
    batches = InStep(prefetched(on_device, plan.prefetch_batches), process.steps_group)
    for size, both, lists in batches:
        loss, positive, negative = train_step(wrapped, optimizer, size, both, plan, lists)
        totals[0] += loss * size
        totals[1] += (positive > negative).sum()
        totals[2] += size
    totals[3] = sum(size for size, _, _ in batches.rest())  # past the shortest shard's end
    if process.world > 1:
        dist.all_reduce(totals)
    train_seconds = time.perf_counter() - started
    loss_sum, correct, triples, left = (float(v) for v in totals)
    if not triples and left:
        raise ValueError(
            f"phase {phase} epoch {epoch}: a process's shard of the training rows is empty "
            f"({left:.0f} rows in the others), so no process could take a step; train with "
            f"fewer processes (training.num_processes) or on more data"
        )
    if left and process.leader:
        log.info(
            "phase %d epoch %d: %d triples of the longer shards left for the next epochs' "
            "shuffles: every process takes as many steps as the shortest shard has batches",
            phase,
            epoch,
            left,
        )
    dev = torch.zeros(4, dtype=torch.float64, device=process.device)  # NCCL: on the GPU
    if process.leader:
        with _all_cores(process):
            measured = evaluate(
                model,
                plan.dev_files,
                plan.map_dev_files,
                plan.held_out_dev_files,
                plan.eval_batch_size,
                plan.k,
                process.device,
                keep=True,
            )
        dev = torch.tensor(
            [measured.accuracy, measured.map, measured.held_out_mrr, measured.held_out_log_rank],
            dtype=torch.float64,
            device=process.device,
        )
    if process.world > 1:
        dist.broadcast(dev, src=0)
    record = EpochRecord(
        phase=phase,
        epoch=epoch,
        train_loss=loss_sum / max(triples, 1.0),
        train_accuracy=correct / max(triples, 1.0),
        dev_accuracy=float(dev[0]),
        dev_map=float(dev[1]),
        dev_mrr=float(dev[2]),
        dev_log_rank=float(dev[3]),
        triples=int(triples),
        seconds=time.perf_counter() - started,
        train_seconds=train_seconds,
    )
    if process.leader:
        log.info(
            "phase %d epoch %d: loss %.4f, train accuracy %.4f, dev accuracy %.4f, dev MAP "
            "%.4f, dev held-out log-rank score %.4f, MRR %.4f (%d triples, %.1f s, "
            "%.0f triples/s)",
            phase,
            epoch,
            record.train_loss,
            record.train_accuracy,
            record.dev_accuracy,
            record.dev_map,
            record.dev_log_rank,
            record.dev_mrr,
            record.triples,
            record.seconds,
            record.triples / max(record.train_seconds, 1e-9),
        )
    return record


class InStep(Generic[T]):
    """The batches of one process's shard while every process of `group` still has one (all
    of them without a group: one process). Each process then takes as many optimisation
    steps as the shortest shard has batches, so that every process applies the same averaged
    gradients through the same optimizer state, and a checkpoint's optimizer state (rank
    0's) is every process's. DDP's `join()` let a process that ran out stop stepping while
    the others went on: the weights were made equal again at the end, but each Adam kept its
    own moments, which then drove the weights apart. Shards differ by a row per row group
    when rows are dealt out, and by about the square root of their number when row groups or
    lists are (a list goes by a hash of its key); each epoch shuffles a shard anew, so its
    tail, :meth:`rest`, is other rows each epoch. The agreement is one small all-reduce a
    step, on the CPU (`_Process.steps_group`)."""

    def __init__(self, batches: Iterable[T], group: Any) -> None:
        self._batches = iter(batches)
        self._group = group
        self._held: list[T] = []  # the batch read when another process had none left

    def __iter__(self) -> Iterator[T]:
        if self._group is None:
            yield from self._batches
            return
        flag = torch.zeros(1, dtype=torch.int32)
        while True:
            batch = next(self._batches, None)
            flag.fill_(0 if batch is None else 1)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self._group)
            if batch is None or not flag.item():
                self._held = [] if batch is None else [batch]
                return
            yield batch

    def rest(self) -> Iterator[T]:
        """The batches left when the shortest shard ended (read from the shard now)."""
        yield from self._held
        yield from self._batches


@contextmanager
def _all_cores(process: _Process) -> Iterator[None]:
    """Rank 0 scores the dev sets while the other processes wait for it: on CPU it may use
    the machine's cores meanwhile (training splits them between the processes)."""
    if process.device.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or threads)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    size: int,
    both: DrmmInputs,
    plan: TrainPlan,
    lists: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One optimisation step on a batch of `size` triples, positives first in `both` (and
    each triple's list, for the listwise loss): the loss (detached) and the positives' and
    negatives' scores. Nothing is read back from the device."""
    scores = model(*both.tensors())
    positive, negative = scores[:size], scores[size:]
    loss = training_loss(plan.loss, positive, negative, plan.hinge_margin, lists)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach(), positive, negative


def make_optimizer(plan: TrainPlan, model: nn.Module) -> torch.optim.Optimizer:
    trainable = [p for p in model.parameters() if p.requires_grad]
    if plan.optimizer == "adam":
        return torch.optim.Adam(trainable, lr=plan.learning_rate)
    if plan.optimizer == "adagrad":
        return torch.optim.Adagrad(trainable, lr=plan.learning_rate)
    return torch.optim.SGD(trainable, lr=plan.learning_rate)


def _distributed(model: Drmm, process: _Process) -> nn.Module:
    """DDP over the parameters this phase trains (built after `set_phase`, since DDP fixes
    its parameter set when it is constructed)."""
    if process.world == 1:
        return model
    device_ids = [process.local_rank] if process.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def _barrier(process: _Process) -> None:
    if process.world > 1:
        dist.barrier()


# --- checkpoints and the saved model ----------------------------------------------------------


# --- live tracking from rank 0 ----------------------------------------------------------------


class _Tracker:
    """Per-epoch metrics to the MLflow run the driver opened (when the plan names one)."""

    def __init__(self, plan: TrainPlan) -> None:
        self.client = None
        self.run_id = plan.run_id
        if plan.tracking_uri and plan.run_id:
            from mlflow.tracking import MlflowClient

            self.client = MlflowClient(tracking_uri=plan.tracking_uri)

    def log_epoch(self, record: EpochRecord, step: int) -> None:
        if self.client is None or self.run_id is None:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        values = {
            "train_loss": record.train_loss,
            "train_accuracy": record.train_accuracy,
            "dev_accuracy": record.dev_accuracy,
            "dev_map": record.dev_map,
            "dev_held_out_mrr": record.dev_mrr,
            "dev_held_out_log_rank": record.dev_log_rank,
            "triples_per_s": record.triples / max(record.train_seconds, 1e-9),
        }
        try:
            self.client.log_batch(
                self.run_id, metrics=[Metric(k, float(v), now, step) for k, v in values.items()]
            )
        except Exception as error:  # tracking must never stop training
            log.warning("could not log epoch %d to MLflow: %s", step, error)


# --- plain torchrun -----------------------------------------------------------------------------


def write_plan(plan: TrainPlan, directory: Path) -> Path:
    """`directory/plan.json` for a torchrun launch; any result of an earlier launch goes."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "plan.json"
    path.write_text(json.dumps(asdict(plan), indent=2), encoding="utf-8")
    result_file(path).unlink(missing_ok=True)
    return path


def result_file(plan_path: Path) -> Path:
    return plan_path.with_name("result.json")


def torchrun_command(plan_path: Path, processes: int, max_restarts: int = 0) -> list[str]:
    """The plain torchrun launch of this module on one machine. With `max_restarts`, torchrun's
    agent restarts every process after one fails (a lost process, a rendezvous or gloo error),
    and the restarted processes resume from the last checkpoint, to the same weights.

    Restarted processes must not share the agent's rendezvous store: in it, gloo's connection
    setup finds the failed attempt's addresses and is refused (pytorch issue 135712), so a
    launch that may restart gives each attempt a store of its own."""
    restartable = ["env", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"] if max_restarts > 0 else []
    return [
        *restartable,
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={processes}",
        f"--max_restarts={max_restarts}",
        "-m",
        "jobrec_core.training.worker",
        str(plan_path),
    ]


def main(argv: list[str] | None = None) -> int:
    """`torchrun --nproc_per_node N -m jobrec_core.training.worker PLAN.json`: rank 0 writes the
    result next to the plan."""
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: torchrun [options] -m jobrec_core.training.worker PLAN.json", file=sys.stderr)
        return 2
    path = Path(arguments[0])
    plan = TrainPlan(**json.loads(path.read_text(encoding="utf-8")))
    result = train_worker(plan)
    if int(os.environ.get("RANK", "0")) == 0:
        result_file(path).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
