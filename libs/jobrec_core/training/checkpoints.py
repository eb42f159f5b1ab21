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
