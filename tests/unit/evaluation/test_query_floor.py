"""The floor chosen from the paired table, and the command's floors."""

from __future__ import annotations

import argparse

import pytest

from jobrec_core.entrypoints.choose_query_floor import floors_of
from jobrec_core.evaluation.query_floor import FloorRow, chosen_floor
from jobrec_core.ranking.statistics import Interval, PairedDifference


def row(floor: float, score: float, low: float | None) -> FloorRow:
    """A floor's row with log-rank score `score`, its gain over floor 0 from `low`."""
    versus = None if low is None else PairedDifference(score - 0.05, low, low + 0.02, 0.01, 1, 0, 0)
    p_holm = float("nan") if low is None else 0.01
    return FloorRow(floor, Interval(score, score - 0.01, score + 0.01), 0.3, 0.5, versus, p_holm)


def test_the_best_floor_significantly_above_the_papers_query_is_chosen():
    rows = [
        row(0, 0.05, None),
        row(0.02, 0.06, 0.001),
        row(0.05, 0.07, 0.002),
        row(0.1, 0.08, -0.001),
    ]
    assert chosen_floor(rows) == 0.05  # 0.1 is higher, but not significantly above floor 0


def test_without_a_significant_gain_the_papers_query_stays():
    assert chosen_floor([row(0, 0.05, None), row(0.05, 0.06, -0.002)]) == 0.0
    assert chosen_floor([row(0, 0.05, None)]) == 0.0


def test_a_gain_that_does_not_survive_holms_correction_is_not_chosen():
    rows = [row(0, 0.05, None), row(0.05, 0.07, 0.001)]
    rows[1] = FloorRow(0.05, rows[1].log_rank, 0.3, 0.5, rows[1].versus_paper, 0.2)
    assert chosen_floor(rows) == 0.0


def test_among_equal_scores_the_lower_floor_wins():
    assert chosen_floor([row(0, 0.05, None), row(0.05, 0.07, 0.01), row(0.08, 0.07, 0.01)]) == 0.05


def test_floors_start_with_the_papers_query():
    assert floors_of("0,0.05,0.1") == [0.0, 0.05, 0.1]
    for bad in ("0.05,0", "0,x", "0,1.5", "0,0.05,0.05"):
        with pytest.raises(argparse.ArgumentTypeError):
            floors_of(bad)
