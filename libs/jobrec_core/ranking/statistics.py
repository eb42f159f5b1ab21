"""Claims as statistics: confidence intervals and paired tests over per-candidate results.

Every ranker is measured on the same candidates, so a comparison is paired: the difference of
two rankers' metric for each candidate. Its mean gets a percentile bootstrap interval
(resampling candidates) and a two-sided p-value from a sign-flip randomisation test (under the
null hypothesis each candidate's difference is as likely to have the other sign). p-values of
several rankers compared with one reference are Holm-corrected. All of it is numpy over
(resamples x candidates) matrices, seeded, so a rerun prints the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
# The Holm-corrected p below which a challenger displaces what a choice keeps by default (the
# paper's query floor, the served pipeline); the model gate has its own family level.
SIGNIFICANCE = 0.05


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float


@dataclass(frozen=True)
class PairedDifference:
    """`ours - reference` over candidates: the mean, its interval, the p-value, and how many
    candidates each side wins."""

    mean: float
    low: float
    high: float
    p_value: float
    wins: int
    ties: int
    losses: int


def mean_or_nan(values: np.ndarray) -> float:
    """The mean; NaN without any value (numpy's mean of nothing is NaN with a warning)."""
    return float(np.mean(values)) if len(values) else float("nan")


def bootstrap_mean(values: np.ndarray, resamples: int, seed: int, level: float = LEVEL) -> Interval:
    """The mean and its percentile-bootstrap interval at `level` (95%), candidates
    resampled."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (resamples, len(values)))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(values.mean()), float(low), float(high))


def paired_difference(
    ours: np.ndarray, reference: np.ndarray, resamples: int, seed: int, level: float = LEVEL
) -> PairedDifference:
    """Bootstrap interval at `level` and sign-flip randomisation p-value of the mean paired
    difference. Without candidates, or with a difference that is not a number, there is no
    evidence either way: the p-value is NaN, which no test below any level passes."""
    differences = np.asarray(ours, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    interval = bootstrap_mean(differences, resamples, seed, level)
    p_value = float("nan")
    if len(differences) and np.isfinite(differences).all():
        rng = np.random.default_rng(seed + 1)
        signs = rng.integers(0, 2, (resamples, len(differences))) * 2 - 1
        flipped = np.abs((signs * differences).mean(axis=1))
        observed = abs(differences.mean())
        # Counting the observed arrangement itself keeps p above zero (an exact-test
        # convention).
        p_value = float((1 + np.sum(flipped >= observed - 1e-12)) / (resamples + 1))
    return PairedDifference(
        interval.mean,
        interval.low,
        interval.high,
        p_value,
        wins=int(np.sum(differences > 0)),
        ties=int(np.sum(differences == 0)),
        losses=int(np.sum(differences < 0)),
    )


def significantly_above(difference: PairedDifference | None, p_holm: float) -> bool:
    """Whether a paired difference shows a gain, not noise: its interval above zero and its
    Holm-corrected p below :data:`SIGNIFICANCE` (False for NaN: no evidence)."""
    return difference is not None and difference.low > 0 and p_holm < SIGNIFICANCE


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment: the i-th smallest p times (m - i), kept monotone, at most 1.
    A NaN p-value (no evidence, :func:`paired_difference`) stays NaN and counts in m, as the
    comparison it stands for was made."""
    order = np.argsort(p_values, kind="stable")  # NaN last
    adjusted = np.full(len(p_values), np.nan)
    running = 0.0
    for position, index in enumerate(order):
        if np.isnan(p_values[index]):
            break
        running = max(running, min(1.0, (len(p_values) - position) * p_values[index]))
        adjusted[index] = running
    return adjusted.tolist()


def against_reference(
    per_ranker: dict[str, np.ndarray], resamples: int, seed: int
) -> dict[str, tuple[PairedDifference, float]]:
    """Each ranker after the first (the reference) against it, per candidate: the paired
    difference and its Holm-corrected p-value across the rankers compared."""
    names = list(per_ranker)
    reference = per_ranker[names[0]]
    differences = {
        name: paired_difference(per_ranker[name], reference, resamples, seed) for name in names[1:]
    }
    adjusted = holm([d.p_value for d in differences.values()])
    return {
        name: (difference, p)
        for (name, difference), p in zip(differences.items(), adjusted, strict=True)
    }
