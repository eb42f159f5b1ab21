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
    held_out_dev_files: list[str]
    checkpoint_dir: str
    seed: int
    max_epochs: int
    early_stop_patience: int
    early_stop_min_gain: float
    optimizer: str
    learning_rate: float
    batch_size: int
    hinge_margin: float
    shuffle_buffer_rows: int
    eval_batch_size: int
    k: int
    use_gpu: bool = False
    loss: str = "hinge"  # the model version's (`model.versions.*.loss`)
    # smaller batches where the training rows would give a process fewer steps an epoch
    # (`training.min_epoch_steps`; 0: `batch_size` always, the paper's configurations)
    min_epoch_steps: int = 0
    prefetch_batches: int = 0  # decoded ahead by a background thread (0: none)
    decode_workers: int = 0  # loader processes that read and decode the triples (0: none)
    vectors_file: str | None = None  # the embeddings' word vectors, for embedding gating
    tracking_uri: str | None = None
    run_id: str | None = None
    # the checkpoints of a finished training that this two-phase one's phase 1 would repeat
    # weight for weight (`training.stage.reusable_first_phase`): started from, not repeated
    phase1_from: str | None = None


@dataclass
class EpochRecord:
    phase: int
    epoch: int  # from 1 within the phase
    train_loss: float
    train_accuracy: float
    dev_accuracy: float
    dev_map: float
    dev_mrr: float  # held-out-interest MRR on the dev candidates, for the record
    # mean log-rank score of the dev candidates' held-out jobs: what epochs are selected on
    dev_log_rank: float
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
    selected: dict[int, int] = field(default_factory=dict)  # phase -> the epoch it kept
    phase1_from: str | None = None  # the finished training phase 1 was taken from
    # the phase the final weights come from: the last, unless it did not beat the one before
    # on dev (`training.worker._Progress.add`)
    kept_phase: int | None = None

    def selected_record(self) -> EpochRecord:
        """The epoch the final model's weights come from (the kept phase's selected one)."""
        phase = self.kept_phase or max(r.phase for r in self.history)
        epoch = self.selected.get(phase, max(r.epoch for r in self.history if r.phase == phase))
        return next(r for r in self.history if (r.phase, r.epoch) == (phase, epoch))

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["stop_reasons"] = {str(k): v for k, v in self.stop_reasons.items()}
        values["selected"] = {str(k): v for k, v in self.selected.items()}
        return values

    @staticmethod
    def from_dict(values: dict[str, Any]) -> TrainResult:
        return TrainResult(
            history=[EpochRecord(**r) for r in values["history"]],
            model_file=values["model_file"],
            world_size=values["world_size"],
            resumed_from=values.get("resumed_from"),
            stop_reasons={int(k): v for k, v in values.get("stop_reasons", {}).items()},
            selected={int(k): int(v) for k, v in values.get("selected", {}).items()},
            phase1_from=values.get("phase1_from"),
            kept_phase=values.get("kept_phase"),
        )
