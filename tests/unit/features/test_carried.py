"""Evidence carried from similar older ads to new ones: the neighbours by text, and the
behaviour features a pool job nobody else wanted takes from them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobrec_core.features.behaviour import BEHAVIOUR_VECTORS
from jobrec_core.features.carried import (
    CARRIED_FROM,
    CARRIED_WEIGHTS,
    carried_means,
    carried_neighbours,
)
from jobrec_core.features.histograms import Vocabulary
from jobrec_core.features.profile import PROFILE_ROLE, profile_features


def test_each_job_carries_the_seen_jobs_most_like_it_never_itself():
    ids = np.array([1, 2, 3, 4, 5])
    vectors = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.7, 0.7], [0, 0]], dtype=np.float32)
    exposed = np.array([True, True, True, False, True])  # 4 is new; 5 has no text
    table = carried_neighbours(ids, vectors, exposed, k=2).set_index("job_id")
    # 1: never itself, and not 3, orthogonal to it (a cosine of 0 carries nothing)
    assert table.loc[1, CARRIED_FROM].tolist() == [2]
    assert table.loc[4, CARRIED_FROM][0] == 2 and len(table.loc[4, CARRIED_FROM]) == 2
    assert 4 not in np.concatenate(table[CARRIED_FROM].to_list())  # nobody carries a new ad
    assert table.loc[5, CARRIED_FROM].size == 0  # no text to compare
    for weights in table[CARRIED_WEIGHTS]:
        if weights.size:
            assert weights.sum() == pytest.approx(1.0) and np.all(weights > 0)
    assert carried_neighbours(ids, vectors, exposed, k=0)[CARRIED_FROM].map(len).sum() == 0


def test_carried_means_weigh_the_neighbours_scores():
    means = carried_means(
        [np.array([7, 8]), np.array([9]), np.array([], dtype=np.int64)],
        [np.array([0.25, 0.75]), np.array([1.0]), np.array([])],
        np.array([8, 7]),  # 9 was not scored: it counts 0
        np.array([4.0, 2.0]),
    )
    assert means.tolist() == pytest.approx([0.25 * 2.0 + 0.75 * 4.0, 0.0, 0.0])


def test_a_pool_job_nobody_else_wanted_carries_its_neighbours_co_interest():
    """Job 13 was posted this morning: no link, nobody interested. Its neighbour by text, 12,
    shares candidates with job 20, as the candidate's own jobs 10 and 11 do; 13 carries 12's
    co-interest, computed for this candidate as 12's own is. Without carried rows it has
    none."""
    words = np.array(["nurse", "patient", "care"])
    vocabulary = Vocabulary(words, np.eye(3, dtype=np.float32), np.ones(3, dtype=np.float32))
    none = np.array([], dtype=np.int64)

    def links(*pairs: int) -> np.ndarray:
        return np.array(pairs, dtype=np.int64)

    rows = pd.DataFrame(
        {
            "candidate_id": [1] * 5,
            PROFILE_ROLE: ["carried", "own", "own", "pool", "pool"],
            "job_id": [12, 10, 11, 12, 13],
            "doc_tokens": [None, *[np.array(["nurse", "care"], dtype=object)] * 4],
            "neighbours": [links(20), links(20), links(20), links(20), none],
            "counts": [links(4), links(3), links(2), links(4), none],
            "interested": [6, 5, 3, 6, 0],
            "sequence_job_ids": [None, None, None, links(10, 11), links(10, 11)],
            BEHAVIOUR_VECTORS: [None] * 5,
            CARRIED_FROM: [links(11), links(12), links(12), links(11), links(12)],
            CARRIED_WEIGHTS: [np.array([1.0])] * 5,
        }
    )
    features = profile_features(rows, vocabulary, ("co_interest",))
    twelve, thirteen = features["co_interest"]
    assert twelve > 0 and thirteen == pytest.approx(twelve)
    without = profile_features(rows[rows[PROFILE_ROLE] != "carried"], vocabulary, ("co_interest",))
    assert without["co_interest"][1] == 0.0
