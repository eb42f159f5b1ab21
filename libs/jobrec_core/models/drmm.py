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


def listwise_loss(
    positive: torch.Tensor, negative: torch.Tensor, lists: torch.Tensor
) -> torch.Tensor:
    """Softmax cross-entropy of each training list, averaged over the lists: `-log(exp(s(q,
    d+)) / (exp(s(q, d+)) + sum_j exp(s(q, d-_j))))`. `lists[i]` is triple i's list (0, 1,
    ... in the batch); the triples of a list share its positive. Unlike a pair's loss, a
    list's spends its gradient on the negatives the model ranks highest, where a top 10 is
    decided."""
    # One slot per triple: no list outnumbers the triples, and the count never has to be
    # read back from a GPU. Slots no triple names weigh nothing. Each list's sums are a
    # product with a (slots, triples) membership matrix, not `index_add`: CUDA adds with
    # atomics, in whatever order the threads arrive, so a GPU run would not repeat itself
    # bit for bit; a matrix product adds in a fixed order. A batch's few hundred triples
    # make the matrix small.
    slots = torch.arange(len(positive), device=positive.device)
    member = (slots[:, None] == lists[None, :]).to(positive.dtype)
    sizes = member.sum(dim=1)
    used = sizes > 0
    best = (member @ positive) / sizes.clamp_min(1.0)  # each list's positive
    top = torch.full_like(positive, float("-inf")).scatter_reduce(
        0, lists, negative.detach(), reduce="amax"
    )
    top = torch.maximum(top, best.detach())  # for a stable log-sum-exp
    total = torch.exp(best - top) + member @ torch.exp(negative - top[lists])
    losses = torch.where(used, top + torch.log(total) - best, torch.zeros_like(total))
    return losses.sum() / used.sum()


def training_loss(
    kind: str,
    positive: torch.Tensor,
    negative: torch.Tensor,
    margin: float,
    lists: torch.Tensor | None = None,
) -> torch.Tensor:
    """The training loss a model version names (`model.versions.*.loss`); `listwise` needs
    each triple's list (`lists`)."""
    if kind == "hinge":
        return hinge_loss(positive, negative, margin)
    if kind == "listwise":
        if lists is None:
            raise ValueError("the listwise loss needs the triples' lists")
        return listwise_loss(positive, negative, lists)
    raise ValueError(f"unknown loss {kind!r}")
