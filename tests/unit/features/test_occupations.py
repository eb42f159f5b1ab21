"""The normalised-occupation feature."""

from __future__ import annotations

import numpy as np

from jobrec_core.features.occupations import occupation_agreement


def test_agreement_is_the_weighted_share_of_own_jobs_in_the_pool_jobs_occupation():
    own = np.array(["a", "a", "b", None], dtype=object)
    weights = np.array([1.0, 1.0, 2.0, 5.0])  # the job without an occupation counts for none
    pool = np.array(["a", "b", "c", None], dtype=object)
    assert occupation_agreement(own, weights, pool).tolist() == [0.5, 0.5, 0.0, 0.0]


def test_agreement_without_own_occupations_is_zero():
    assert occupation_agreement(
        np.array([], dtype=object), np.array([]), np.array(["a"])
    ).tolist() == [0.0]
    none = np.array([None], dtype=object)
    assert occupation_agreement(none, np.array([1.0]), np.array(["a"])).tolist() == [0.0]
