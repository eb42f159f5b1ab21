"""Rules of the training worker that keep every process and every resume on one path:
processes of unequal shards take the same steps (over a real gloo group), a two-phase model
keeps phase 1's weights when phase 2 ends no better on dev, and a GPU process asks CUDA for
deterministic kernels."""

from __future__ import annotations

import os
import socket
from dataclasses import replace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from jobrec_core.training import worker
from jobrec_core.training.plan import EpochRecord, TrainPlan, TrainResult
from jobrec_core.training.worker import InStep, _Progress
from jobrec_scoring.network import Drmm, DrmmSpec


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _steps(rank: int, port: int, shards: list[int], answers: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=len(shards))
    try:
        batches = InStep(iter(range(shards[rank])), dist.group.WORLD)
        stepped = list(batches)
        answers[rank] = (stepped, list(batches.rest()))
    finally:
        dist.destroy_process_group()


def test_processes_take_as_many_steps_as_the_shortest_shard_has_batches():
    shards = [5, 3]
    with mp.Manager() as manager:
        answers = manager.dict()
        mp.spawn(_steps, args=(_free_port(), shards, answers), nprocs=len(shards))
        assert dict(answers) == {0: ([0, 1, 2], [3, 4]), 1: ([0, 1, 2], [])}


def test_one_process_steps_through_its_whole_shard():
    batches = InStep(iter(range(4)), None)
    assert list(batches) == [0, 1, 2, 3] and list(batches.rest()) == []


PLAN = TrainPlan(
    spec={},
    train_files=[],
    dev_files=[],
    map_dev_files=[],
    held_out_dev_files=[],
    checkpoint_dir="",
    seed=0,
    max_epochs=10,
    early_stop_patience=1,
    early_stop_min_gain=0.0,
    optimizer="adam",
    learning_rate=0.01,
    batch_size=4,
    hinge_margin=1.0,
    shuffle_buffer_rows=10,
    eval_batch_size=4,
    k=10,
)


def _record(phase: int, epoch: int, score: float) -> EpochRecord:
    return EpochRecord(phase, epoch, 1.0, 0.5, 0.5, 0.5, 0.5, score, 10, 1.0, 1.0)


def _two_phase_run(phase2_scores: list[float]) -> tuple[_Progress, Drmm, Drmm, Drmm]:
    """Phase 1 keeps epoch 1 (score -1.0); phase 2 scores `phase2_scores`, its last layer
    moved each epoch. Returns the progress, the model and its phase-1 and phase-2 weights."""
    spec = DrmmSpec(4, "ch", 2, 3, "idf", 1, extras=("bm25",), two_phase=True)
    model = Drmm(spec)
    progress = _Progress()
    assert not progress.add(model, _record(1, 1, -1.0), PLAN)
    assert progress.add(model, _record(1, 2, -1.5), PLAN)
    phase1 = Drmm(model.spec)
    phase1.load_state_dict(model.state_dict())
    progress.earlier_weights = {k: v.clone() for k, v in model.state_dict().items()}
    best = None
    for epoch, score in enumerate(phase2_scores, start=1):
        assert model.combine is not None
        with torch.no_grad():
            model.combine.weight.add_(1.0)  # phase 2 trains the last layer alone
        if best is None or score > best[0]:
            best = (score, Drmm(model.spec))
            best[1].load_state_dict(model.state_dict())
        finished = progress.add(model, _record(2, epoch, score), PLAN)
        assert finished == (epoch == len(phase2_scores))
    assert best is not None
    return progress, model, phase1, best[1]


def _same(one: Drmm, other: Drmm) -> bool:
    return all(torch.equal(v, other.state_dict()[k]) for k, v in one.state_dict().items())


def test_phase_2_is_kept_when_it_scores_higher_than_phase_1():
    progress, model, _, phase2 = _two_phase_run([-0.9, -0.8, -0.85])
    assert _same(model, phase2) and progress.kept_phase == 2
    assert progress.selected == {1: 1, 2: 2}


def test_phase_1_is_kept_when_phase_2_ends_no_better():
    progress, model, phase1, _ = _two_phase_run([-1.2, -1.1, -1.3])
    assert _same(model, phase1) and progress.kept_phase == 1
    assert "phase 1's epoch 1 scored -1.0000" in progress.stop_reasons[2]
    result = TrainResult(progress.history, "", 1, None, {}, progress.selected, None, 1)
    assert (result.selected_record().phase, result.selected_record().epoch) == (1, 1)
    assert TrainResult.from_dict(result.to_dict()) == result
    single = replace(result, kept_phase=None)
    assert single.selected_record().phase == 2  # an older result: the last phase's


def test_a_gpu_worker_asks_for_deterministic_kernels_before_any_runs_and_puts_them_back(
    monkeypatch,
):
    """`train_worker` on a GPU: CUDA's determinism is on before the process picks its device
    and throughout training, and the process's settings are back as they were afterwards
    (the `single` launcher trains in the driver). A workspace size the user chose is kept.
    The settings need no GPU to be read back, so `torch.cuda` is stood in for here."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    seen: dict[str, bool] = {}

    def deterministic() -> bool:
        return (
            torch.are_deterministic_algorithms_enabled()
            and torch.is_deterministic_algorithms_warn_only_enabled()
            and torch.backends.cudnn.deterministic
            and not torch.backends.cudnn.benchmark
        )

    def set_device(rank: int) -> None:
        seen["device"] = deterministic()

    def train(plan: TrainPlan, process: object) -> None:
        seen["training"] = deterministic()
        raise RuntimeError("stop here")

    before = deterministic()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    monkeypatch.setattr(worker, "_train", train)
    with pytest.raises(RuntimeError, match="stop here"):
        worker.train_worker(replace(PLAN, use_gpu=True))
    assert seen == {"device": True, "training": True}
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert deterministic() == before and not torch.are_deterministic_algorithms_enabled()
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    with worker.deterministic_cuda(True):
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    with worker.deterministic_cuda(False):  # a CPU training leaves everything as it is
        assert not torch.are_deterministic_algorithms_enabled()
