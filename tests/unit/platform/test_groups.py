"""The rows of a group reach a grouped pass in one order, whatever order the shuffle gave."""

from __future__ import annotations

import numpy as np
import pandas as pd

from jobrec_core.platform.spark import rows_in_order


def test_each_groups_rows_are_sorted_and_the_groups_stay_in_place():
    rows = pd.DataFrame(
        {
            "candidate_id": [7, 7, 7, 3, 3],
            "role": ["pool", "own", "pool", "pool", "pool"],
            "job_id": [30, 30, 10, 5, 2],
            "vector": [np.array([1.0]), np.array([2.0]), np.array([3.0]), None, None],
        }
    )
    ordered = rows_in_order(rows, np.array([3, 2]), ["role", "job_id"])
    assert ordered["candidate_id"].tolist() == [7, 7, 7, 3, 3]
    assert list(zip(ordered["role"], ordered["job_id"], strict=True)) == [
        ("own", 30),
        ("pool", 10),
        ("pool", 30),
        ("pool", 2),
        ("pool", 5),
    ]
    assert [v[0] for v in ordered["vector"][:3]] == [2.0, 3.0, 1.0]  # rows move whole
    assert ordered.index.tolist() == list(range(5))


def test_any_arrival_order_gives_the_same_frame():
    rng = np.random.default_rng(3)
    rows = pd.DataFrame({"job_id": np.arange(40), "score": rng.random(40)})
    counts = np.array([25, 15])
    first = rows_in_order(rows, counts, ["job_id"])
    shuffled = pd.concat(
        [
            rows.iloc[:25].sample(frac=1, random_state=1),
            rows.iloc[25:].sample(frac=1, random_state=2),
        ]
    )
    pd.testing.assert_frame_equal(rows_in_order(shuffled, counts, ["job_id"]), first)


def test_no_order_leaves_the_rows_as_they_came():
    rows = pd.DataFrame({"job_id": [3, 1, 2]})
    assert rows_in_order(rows, np.array([3]), []) is rows
