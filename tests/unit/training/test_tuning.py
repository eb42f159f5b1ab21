"""Hyper-parameter grids and the choice by the dev held-out log rank."""

from __future__ import annotations

import pytest

from jobrec_core.entrypoints import tune_drmm
from jobrec_core.training.tuning import Trial, best_trial, expand_grid, format_trials


def test_a_grid_expands_to_every_combination_first_entry_slowest():
    grid = ["training.learning_rate=0.002,0.005", "training.batch_size=32, 64"]
    assert expand_grid(grid) == [
        ("training.learning_rate=0.002", "training.batch_size=32"),
        ("training.learning_rate=0.002", "training.batch_size=64"),
        ("training.learning_rate=0.005", "training.batch_size=32"),
        ("training.learning_rate=0.005", "training.batch_size=64"),
    ]
    assert expand_grid([]) == [()]  # no grid: the configuration as is


@pytest.mark.parametrize("entry", ["training.learning_rate", "=0.1", "training.batch_size=,"])
def test_a_malformed_grid_entry_is_refused(entry):
    with pytest.raises(ValueError, match="expected key=value1,value2"):
        expand_grid([entry])


def test_the_best_trial_is_the_highest_dev_log_rank_and_the_earlier_on_a_tie():
    first = Trial(("a=1",), -1.2, 0.50, 0.90, 0.95, 5)
    # worse on the MRR and the paper's figures: ignored
    second = Trial(("a=2",), -1.0, 0.40, 0.80, 0.70, 6)
    third = Trial(("a=3",), -1.0, 0.60, 0.95, 0.99, 7)
    assert best_trial([first, second, third]) is second
    table = format_trials([first, second, third])
    assert table.splitlines()[1].startswith("*") and "a=2" in table.splitlines()[1]
    assert table.endswith("chosen on dev held-out log rank: --set a=2")


def test_tune_drmm_refuses_a_malformed_grid_before_starting_spark(capsys):
    assert tune_drmm.main(["--grid", "training.learning_rate"]) == 2
    assert "expected key=value1,value2" in capsys.readouterr().err
