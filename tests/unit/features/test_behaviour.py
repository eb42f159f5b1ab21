"""The behaviour vectors (`features.behaviour`): the folds, the truncated SVD, the vectors'
independence from their own fold's candidates, and the similarity the models read."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from jobrec_core.features.behaviour import (
    BEHAVIOUR_FOLDS,
    behaviour_similarity,
    behaviour_vectors,
    candidate_folds,
    top_singular_vectors,
)


def _interests(seed: int, candidates: int = 600, jobs: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """(candidate, job) pairs from a few kinds of candidate, each wanting jobs of its kind."""
    rng = np.random.default_rng(seed)
    kinds = rng.integers(0, 4, candidates)
    pairs = [
        (candidate, kind * (jobs // 4) + job)
        for candidate, kind in enumerate(kinds)
        for job in rng.choice(jobs // 4, 3, replace=False)
    ]
    ids = np.array(pairs)
    return ids[:, 0] + 1000, ids[:, 1]


def test_the_folds_are_balanced_stable_and_not_cycling_with_consecutive_ids():
    ids = np.arange(40_000)
    folds = candidate_folds(ids)
    assert set(np.unique(folds)) == set(range(BEHAVIOUR_FOLDS))
    counts = np.bincount(folds)
    assert counts.min() > 0.95 * len(ids) / BEHAVIOUR_FOLDS
    # a candidate's fold depends on its id only, wherever it is in the batch
    np.testing.assert_array_equal(candidate_folds(ids[::-1]), folds[::-1])
    assert not np.array_equal(folds[:8], np.arange(8) % BEHAVIOUR_FOLDS)


def test_the_top_singular_values_and_vectors_match_a_dense_svd():
    rng = np.random.default_rng(3)
    low_rank = rng.standard_normal((300, 6)) @ rng.standard_normal((6, 120)) * 3
    matrix = sp.csr_matrix(low_rank + 0.01 * rng.standard_normal((300, 120)))
    values, vectors = top_singular_vectors(matrix, 6, seed=1)
    _, exact, rows = np.linalg.svd(matrix.toarray())
    np.testing.assert_allclose(values, exact[:6], rtol=1e-6)
    # the same directions, up to sign
    np.testing.assert_allclose(np.abs(np.sum(vectors * rows[:6].T, axis=0)), 1.0, atol=1e-6)


def test_the_fit_over_row_blocks_matches_the_fit_over_the_whole_matrix():
    # the seed preset's 7.4M candidates are fitted a block of rows at a time (the dense
    # products of the whole matrix killed the driver); a matrix within one block is fitted
    # exactly as the whole, and uneven blocks agree to rounding
    candidates, jobs = _interests(4)
    matrix = sp.csr_matrix(
        (np.ones(len(jobs)), (candidates - candidates.min(), jobs)),
        shape=(candidates.max() - candidates.min() + 1, jobs.max() + 1),
    )
    whole_values, whole_vectors = top_singular_vectors(matrix, 6, seed=5)
    one_values, one_vectors = top_singular_vectors(matrix, 6, seed=5, rows_per_block=600)
    np.testing.assert_array_equal(one_values, whole_values)
    np.testing.assert_array_equal(one_vectors, whole_vectors)
    blocked_values, blocked_vectors = top_singular_vectors(matrix, 6, seed=5, rows_per_block=37)
    np.testing.assert_allclose(blocked_values, whole_values, rtol=1e-9)
    np.testing.assert_allclose(np.abs(blocked_vectors), np.abs(whole_vectors), atol=1e-8)


def test_a_matrix_of_lower_rank_gives_fewer_dimensions_and_an_empty_one_none():
    matrix = sp.csr_matrix(np.outer(np.arange(1, 11), np.arange(1, 6)).astype(float))
    values, vectors = top_singular_vectors(matrix, 4, seed=0)
    assert values.shape == (1,) and vectors.shape == (5, 1)
    values, vectors = top_singular_vectors(sp.csr_matrix((10, 5)), 4, seed=0)
    assert values.shape == (0,) and vectors.shape == (5, 0)


def test_jobs_wanted_by_the_same_candidates_get_close_vectors():
    candidates, jobs = _interests(seed=5)
    ids, vectors = behaviour_vectors(candidates, jobs, dimensions=4, seed=0)
    assert vectors.shape == (80, BEHAVIOUR_FOLDS * 4) and vectors.dtype == np.float32
    fold0 = vectors[:, :4]
    similarity = fold0 @ fold0.T
    kind = ids // 20
    same = kind[:, None] == kind[None, :]
    assert similarity[same].mean() > 0.9 > 0.1 > np.abs(similarity[~same]).mean()


def test_a_folds_vectors_do_not_depend_on_its_own_candidates():
    candidates, jobs = _interests(seed=7)
    _, vectors = behaviour_vectors(candidates, jobs, dimensions=4, seed=0)
    folds = candidate_folds(candidates)
    # fold 0's candidates now want other jobs: only fold 0's slice stays as it was
    moved = np.where(folds == 0, (jobs + 7) % 80, jobs)
    _, changed = behaviour_vectors(candidates, moved, dimensions=4, seed=0)
    np.testing.assert_array_equal(changed[:, :4], vectors[:, :4])
    assert not np.allclose(changed[:, 4:], vectors[:, 4:])


def test_the_vectors_are_reproducible_and_independent_of_the_pairs_order():
    candidates, jobs = _interests(seed=9)
    ids, vectors = behaviour_vectors(candidates, jobs, dimensions=4, seed=2)
    order = np.random.default_rng(0).permutation(len(jobs))
    doubled = np.concatenate([order, order[:50]])  # a repeated interest counts once
    again_ids, again = behaviour_vectors(candidates[doubled], jobs[doubled], 4, seed=2)
    np.testing.assert_array_equal(again_ids, ids)
    np.testing.assert_allclose(again, vectors, atol=1e-6)


def _folded(*slices: tuple[float, float]) -> np.ndarray:
    """A job's vector from its 2-d slice of each fold, the other folds zero."""
    vector = np.zeros(BEHAVIOUR_FOLDS * 2, np.float32)
    vector[: 2 * len(slices)] = np.ravel(slices)
    return vector


def test_the_similarity_reads_the_candidates_fold_and_weights_its_own_jobs():
    own = [_folded((1, 0), (1, 0)), _folded((0, 0), (0, 1))]
    pool = [_folded((0, 1), (0, 1)), _folded((1, 0), (1, 0)), np.array([], np.float32)]
    # fold 0: the profile is the first own job's (1, 0); a job without vectors scores 0
    np.testing.assert_allclose(behaviour_similarity(own, pool, 0), [0, 1, 0])
    # fold 1: (1, 0) and (0, 1) weighted 1:3, a profile along (1, 3)
    scores = behaviour_similarity(own, pool, 1, np.array([1.0, 3.0]))
    np.testing.assert_allclose(scores, np.array([3, 1, 0]) / np.sqrt(10), rtol=1e-6)


def test_the_similarity_is_zero_without_vectors_and_refuses_mismatched_inputs():
    empty = np.array([], np.float32)
    pool = [np.ones(8, np.float32)]
    assert behaviour_similarity([empty], pool, 0).tolist() == [0.0]
    assert behaviour_similarity([], pool, 0).tolist() == [0.0]
    with pytest.raises(ValueError, match="2 weights for 1 own jobs"):
        behaviour_similarity([np.ones(8, np.float32)], pool, 0, np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="different lengths"):
        behaviour_similarity([np.ones(8, np.float32), np.ones(4, np.float32)], pool, 0)
