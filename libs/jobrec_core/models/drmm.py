"""The configuration and training side of the DRMM (the network itself is
:mod:`jobrec_scoring.network`, which ships with every registered model).

A model's :class:`~jobrec_scoring.network.DrmmSpec` is built here from the run's
configuration, so the scoring package never reads project configuration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from jobrec_scoring.network import Drmm, DrmmSpec

if TYPE_CHECKING:  # a training worker needs the phases and the loss, not the configuration
    from jobrec_core.config import JobrecConfig


def spec_from_config(config: JobrecConfig, vector_size: int) -> DrmmSpec:
    """The network the configuration's selected model version describes."""
    version = config.model.selected
    return DrmmSpec(
        bins=config.histograms.bins,
        histogram=config.histograms.variant,
        mlp_layers=config.model.mlp_layers,
        mlp_width=config.model.mlp_width,
        gating=config.model.gating,
        gate_dim=(1 if config.model.gating == "idf" else vector_size) + version.gate_share,
        extras=tuple(version.extras),
        extras_keep=version.extras_keep,
        two_phase=version.two_phase,
        phase2_keep={str(k): v for k, v in version.phase2_keep.items()},
        examples=version.examples,
        architecture=version.architecture,
        gate_share=version.gate_share,
        field_histograms=version.field_histograms,
    )


def set_phase(model: Drmm, phase: int) -> None:
    """Two-phase training (seed v3, v4): phase 1 trains all but the last layer, phase 2 only
    the last layer. Single-phase models train everything."""
    if phase not in (1, 2):
        raise ValueError(f"phase must be 1 or 2, not {phase}")
    model.phase = phase
    last = {id(p) for p in model.combine.parameters()} if model.combine is not None else set()
    for parameter in model.parameters():
        if not model.spec.two_phase:
            parameter.requires_grad_(True)
        elif phase == 1:
            parameter.requires_grad_(id(parameter) not in last)
        else:
            parameter.requires_grad_(id(parameter) in last)


def phases(spec: DrmmSpec) -> tuple[int, ...]:
    return (1, 2) if spec.two_phase else (1,)


def hinge_loss(positive: torch.Tensor, negative: torch.Tensor, margin: float) -> torch.Tensor:
    """Pairwise hinge loss `max(0, margin - s(q, d+) + s(q, d-))`, averaged (paper §5.1)."""
    return torch.clamp(margin - positive + negative, min=0.0).mean()
