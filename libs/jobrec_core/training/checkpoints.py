"""Per-epoch checkpoints of a training run: resumed from after a failure, pruned to the last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from jobrec_core.models.model_io import atomic_save
from jobrec_scoring.network import Drmm

CHECKPOINT_GLOB = "epoch-*.pt"


class Checkpoints:
    """`epoch-PPP-EEEE.pt` files in one folder per training configuration; each written
    whole, then renamed into place, so a killed run leaves only complete checkpoints."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def files(self) -> list[Path]:
        return sorted(self.directory.glob(CHECKPOINT_GLOB))

    def latest(self) -> dict[str, Any] | None:
        files = self.files()
        if not files:
            return None
        state = torch.load(files[-1], map_location="cpu", weights_only=False)
        state["file"] = str(files[-1])
        return dict(state)

    def save(
        self,
        model: Drmm,
        optimizer: torch.optim.Optimizer,
        progress: dict[str, Any],
        next_phase: int,
        next_epoch: int,
        phase: int,
        epoch: int,
    ) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / f"epoch-{phase:03d}-{epoch:04d}.pt"
        atomic_save(
            {
                "spec": model.spec.to_dict(),
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                **progress,  # history, stop reasons, selected epochs, the best weights so far
                "next_phase": next_phase,
                "next_epoch": next_epoch,
            },
            target,
        )
        for older in self.files()[:-1]:
            older.unlink(missing_ok=True)
        return target


def first_phase_of(directory: Path, model: Drmm) -> dict[str, Any]:
    """The last checkpoint of the finished single-phase training in `directory`, as two-phase
    `model`'s finished phase 1: its weights, `model`'s own last layer (which phase 1 leaves
    as initialised), its epochs and their early-stopping record; ready to start phase 2."""
    state = Checkpoints(directory).latest()
    if state is None or state["next_phase"] != 2 or state["next_epoch"] != 1:
        raise ValueError(f"{directory} holds no finished single-phase training")
    own = model.state_dict()
    last = model.combine.state_dict() if model.combine is not None else {}  # phase 2's layer
    unknown = sorted(set(state["model"]) - set(own))
    missing = sorted(set(own) - set(state["model"]))
    if unknown or set(missing) != {f"combine.{name}" for name in last}:
        raise ValueError(
            f"{directory}'s network is not this one without its last layer "
            f"(unknown {unknown}, missing {missing})"
        )
    return {**state, "model": {**own, **state["model"]}}
