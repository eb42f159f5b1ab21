"""Intervals, paired tests and Holm's correction."""

import numpy as np
import pytest

from jobrec_core.ranking.statistics import bootstrap_mean, holm, paired_difference


def test_a_bootstrap_interval_holds_the_mean_narrows_with_data_and_repeats():
    rng = np.random.default_rng(0)
    small, large = rng.random(100), rng.random(10_000)
    first = bootstrap_mean(small, 2000, seed=1)
    assert first.low < first.mean < first.high
    assert first == bootstrap_mean(small, 2000, seed=1)  # seeded: a rerun prints the same
    wide, narrow = first.high - first.low, np.subtract(*reversed(_bounds(large)))
    assert narrow < wide / 5


def _bounds(values):
    interval = bootstrap_mean(values, 2000, seed=1)
    return interval.low, interval.high


def test_a_paired_difference_separates_a_real_gain_from_noise():
    rng = np.random.default_rng(3)
    reference = rng.random(500)
    better = paired_difference(reference + 0.05 + rng.normal(0, 0.1, 500), reference, 2000, 7)
    assert better.low > 0 and better.p_value < 0.01
    assert better.wins + better.ties + better.losses == 500 and better.wins > better.losses
    same = paired_difference(reference, reference, 2000, 7)
    assert same.mean == 0 and same.p_value == 1.0 and same.ties == 500
    noise = paired_difference(reference + rng.normal(0, 0.1, 500), reference, 2000, 7)
    assert noise.low < 0 < noise.high and noise.p_value > 0.05


def test_holm_multiplies_the_sorted_p_values_and_keeps_them_monotone():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_no_candidates_or_a_difference_that_is_not_a_number_is_no_evidence():
    """The p-value is NaN, never the smallest the test can give, and Holm keeps it NaN while
    still counting the comparison."""
    empty = paired_difference(np.zeros(0), np.zeros(0), 2000, 1)
    assert np.isnan(empty.p_value) and np.isnan(empty.mean)
    broken = paired_difference(np.array([1.0, np.nan, 2.0]), np.zeros(3), 2000, 1)
    assert np.isnan(broken.p_value)
    adjusted = holm([0.01, float("nan"), 0.02])
    assert adjusted[0] == pytest.approx(0.03) and adjusted[2] == pytest.approx(0.04)
    assert np.isnan(adjusted[1])


def test_an_interval_at_a_stricter_level_is_wider():
    values = np.random.default_rng(2).random(300)
    usual, strict = bootstrap_mean(values, 4000, 1), bootstrap_mean(values, 4000, 1, level=0.99)
    assert strict.low < usual.low < usual.high < strict.high
