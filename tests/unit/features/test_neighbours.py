"""kNN-augmented scoring's memory, neighbours and votes (faiss' IVF index, no Spark)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobrec_core.features.neighbours import (
    InterestMemory,
    ivf_index,
    nearest,
    neighbour_votes,
)


def unit(rows: list[list[float]]) -> list[np.ndarray]:
    return [np.asarray(r, dtype=np.float32) / np.linalg.norm(r) for r in rows]


@pytest.fixture
def memory() -> InterestMemory:
    return InterestMemory.of(
        pd.DataFrame(
            {
                "candidate_id": [30, 10, 20, 40],
                "query_vector": [*unit([[0, 1], [1, 0], [1, 0.2]]), None],
                "job_ids": [[7], [1, 2], [2, 3], [9]],
            }
        )
    )


def test_the_memory_is_kept_by_id_without_candidates_lacking_a_vector(memory):
    assert memory.candidate_ids.tolist() == [10, 20, 30]
    assert memory.job_starts.tolist() == [0, 2, 4, 5]
    assert memory.job_ids.tolist() == [1, 2, 2, 3, 7]
    assert memory.vectors.dtype == np.float32 and memory.vectors.shape == (3, 2)


def test_a_candidate_is_never_its_own_neighbour_and_votes_are_similarity_over_k(memory):
    index = ivf_index(memory, probes=4)
    queries = np.array([10, 99])  # 10 is in the memory; 99 is not
    vectors = np.stack(unit([[1, 0], [1, -0.1]]))
    members, similarity = nearest(memory, index, queries, vectors, k=2)
    assert memory.candidate_ids[members[0][members[0] >= 0]].tolist() == [20, 30]
    assert memory.candidate_ids[members[1]].tolist() == [10, 20]
    assert similarity[0, 0] == pytest.approx(float(unit([[1, 0.2]])[0][0]), abs=1e-5)
    pool_candidates = np.array([10, 10, 10, 99, 99, 99])
    pool_jobs = np.array([2, 3, 7, 1, 2, 5])
    votes = neighbour_votes(memory, members, similarity, 2, queries, pool_candidates, pool_jobs)
    s = similarity
    expected = [s[0, 0] / 2, s[0, 0] / 2, s[0, 1] / 2, s[1, 0] / 2, (s[1, 0] + s[1, 1]) / 2, 0]
    np.testing.assert_allclose(votes, expected)
    # with k = 1 only the nearest votes
    one = neighbour_votes(memory, members, similarity, 1, queries, pool_candidates, pool_jobs)
    np.testing.assert_allclose(one, [s[0, 0], s[0, 0], 0, s[1, 0], s[1, 0], 0])
