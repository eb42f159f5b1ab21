"""Hyper-parameters chosen on the dev split by the held-out-interest metric.

A grid is a list of `key=value1,value2` settings (`--grid training.learning_rate=0.002,0.005`);
every combination is one trial, trained from scratch on the training triples and scored by the
dev held-out log-rank score of the epoch it keeps (the same measure early stopping selects
epochs on, `ranking.metrics.log_rank_score`, docs/TRAINING.md). The dev split chooses; the
test split stays for the promotion gate, and the evaluation's candidates are in neither. Pure
functions here; `training.stage.run_tuning` trains the trials.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class Trial:
    overrides: tuple[str, ...]  # `key=value` settings, as `--set` takes them
    dev_log_rank: float  # held-out log-rank score on dev of the epoch kept: what chooses
    dev_mrr: float  # the held-out MRR and the paper's dev figures of that epoch, for the record
    dev_accuracy: float
    dev_map: float
    epochs: int


def expand_grid(grid: list[str]) -> list[tuple[str, ...]]:
    """`key=v1,v2` entries -> every combination as `key=value` overrides, the first entry
    varying slowest."""
    axes = []
    for entry in grid:
        key, separator, values = entry.partition("=")
        options = [value.strip() for value in values.split(",") if value.strip()]
        if not separator or not key.strip() or not options:
            raise ValueError(f"grid entry {entry!r}: expected key=value1,value2,...")
        axes.append([f"{key.strip()}={value}" for value in options])
    return list(itertools.product(*axes))


def best_trial(trials: list[Trial]) -> Trial:
    """The highest dev held-out log-rank score; on a tie, the earlier trial (the grid's
    order)."""
    if not trials:
        raise ValueError("no trials to choose from")
    return max(trials, key=lambda trial: trial.dev_log_rank)  # max keeps the first of equals


def format_trials(trials: list[Trial]) -> str:
    best = best_trial(trials)
    lines = [
        f"  {'dev log-rank':>12}{'dev MRR':>8}{'dev acc':>9}{'dev MAP':>9}{'epochs':>8}  settings"
    ]
    for trial in sorted(trials, key=lambda t: -t.dev_log_rank):
        mark = "*" if trial is best else " "
        lines.append(
            f"{mark} {trial.dev_log_rank:>12.4f}{trial.dev_mrr:>8.4f}{trial.dev_accuracy:>9.4f}"
            f"{trial.dev_map:>9.4f}"
            f"{trial.epochs:>8}  {' '.join(trial.overrides) or '(the configuration as is)'}"
        )
    chosen = " ".join(f"--set {o}" for o in best.overrides)
    lines.append(f"chosen on dev held-out log rank: {chosen or 'the configuration as is'}")
    return "\n".join(lines)
