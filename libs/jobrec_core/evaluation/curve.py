"""The learning curve's points and sizes (the training itself is the training stage's, passed in
by the caller)."""

from __future__ import annotations

from dataclasses import dataclass

PAPER_CURVE = {9000: (0.932, 0.966), 18000: (0.939, 0.968), 27000: (0.945, 0.966)}


@dataclass(frozen=True)
class CurvePoint:
    candidates: int  # training candidates: one paper triple, or one pool's pairs, each
    configured: int  # the size asked for (`training.learning_curve_sizes`)
    dev_accuracy: float | None  # None for a model that reads BM25 (`protocols.ProtocolRow`)
    dev_map: float | None
    dev_mrr: float  # held-out MRR of the epoch kept (selected on the log-rank score)
    epochs: int
    # the model's ground-truth P@k and nDCG@k on the evaluation's ground-truth candidates
    precision: float = float("nan")
    precision_low: float = float("nan")
    precision_high: float = float("nan")
    ndcg: float = float("nan")


# What a learning-curve trainer gives back: (dev accuracy, dev MAP, dev held-out MRR, epochs,
# the trained model's file).
CurveTraining = tuple[float, float, float, int, str]


def curve_sizes(configured: list[int], available: int) -> list[tuple[int, int]]:
    """(candidates used, size asked for): the sizes scaled down together when the largest is
    more than the training split holds (the demo data is smaller than the paper's)."""
    if not configured:
        return []
    largest = max(configured)
    if available >= largest:
        return [(size, size) for size in sorted(configured)]
    return [(max(1, round(size * available / largest)), size) for size in sorted(configured)]
