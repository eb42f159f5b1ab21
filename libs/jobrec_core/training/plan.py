"""What a training process is given and what it gives back: JSON-able records, so that
TorchDistributor, torchrun and a single process all pass them the same way."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TrainPlan:
    """What a training process needs; JSON-able (see the module docstring)."""

    spec: dict[str, Any]
    train_files: list[str]
    dev_files: list[str]
    map_dev_files: list[str]
    checkpoint_dir: str
    seed: int
    max_epochs: int
    early_stop_delta: float
    optimizer: str
    learning_rate: float
    batch_size: int
    hinge_margin: float
    shuffle_buffer_rows: int
    eval_batch_size: int
    k: int
    use_gpu: bool = False
    vectors_file: str | None = None  # the embeddings' word vectors, for embedding gating
    tracking_uri: str | None = None
    run_id: str | None = None


@dataclass
class EpochRecord:
    phase: int
    epoch: int  # from 1 within the phase
    train_loss: float
    train_accuracy: float
    dev_accuracy: float
    dev_map: float
    triples: int
    seconds: float  # the whole epoch, dev evaluation included
    train_seconds: float  # the training pass alone: what triples/s is measured over


@dataclass
class TrainResult:
    history: list[EpochRecord]
    model_file: str
    world_size: int
    resumed_from: str | None = None
    stop_reasons: dict[int, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["stop_reasons"] = {str(k): v for k, v in self.stop_reasons.items()}
        return values

    @staticmethod
    def from_dict(values: dict[str, Any]) -> TrainResult:
        return TrainResult(
            history=[EpochRecord(**r) for r in values["history"]],
            model_file=values["model_file"],
            world_size=values["world_size"],
            resumed_from=values.get("resumed_from"),
            stop_reasons={int(k): v for k, v in values.get("stop_reasons", {}).items()},
        )
