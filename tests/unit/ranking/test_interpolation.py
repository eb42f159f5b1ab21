"""The z-normalised mix of a re-ranker with BM25: per-query standardisation, the weight's two
ends, and the weight chosen on held-out pools."""

import numpy as np
import pytest

from jobrec_core.ranking.interpolation import ALPHA_GRID, best_alpha, interpolate, zscores

QUERY = np.array([1, 1, 1, 2, 2, 2, 2])
SCORE = np.array([0.1, 0.3, 0.2, 5.0, 1.0, 3.0, 2.0])
BM25 = np.array([10.0, 30.0, 50.0, 100.0, 300.0, 200.0, 400.0])


def test_zscores_standardise_each_query_on_its_own():
    z = zscores(QUERY, BM25)
    for query in (1, 2):
        part = z[query == QUERY]
        assert part.mean() == pytest.approx(0.0, abs=1e-12)
        assert part.std() == pytest.approx(1.0)
    # a query whose values are all equal says nothing: zeros, not NaN
    assert zscores(np.array([3, 3]), np.array([2.0, 2.0])).tolist() == [0.0, 0.0]
    assert len(zscores(np.zeros(0, dtype=int), np.zeros(0))) == 0


def test_zscores_give_the_same_bits_in_any_row_order():
    """An online request keeps its pool's order, the grouped pass sorts by job: the mix must
    not move in its last bits between them, though a float sum depends on its order."""
    rng = np.random.default_rng(4)
    query = rng.integers(0, 5, 400)
    values = rng.standard_normal(400) * 10.0 ** rng.integers(-8, 9, 400)
    values[::7] = values[3]  # ties
    z = zscores(query, values)
    for _ in range(5):
        order = rng.permutation(400)
        assert zscores(query[order], values[order]).tobytes() == z[order].tobytes()


def test_the_ends_of_the_weight_are_the_model_alone_and_bm25_alone():
    for alpha, ordered_by in ((1.0, SCORE), (0.0, BM25)):
        mixed = interpolate(QUERY, SCORE, BM25, alpha)
        for query in (1, 2):
            rows = query == QUERY
            assert np.argsort(mixed[rows]).tolist() == np.argsort(ordered_by[rows]).tolist()
    with pytest.raises(ValueError, match="alpha"):
        interpolate(QUERY, SCORE, BM25, 1.5)


def test_best_alpha_follows_whichever_side_finds_the_held_out_jobs():
    rng = np.random.default_rng(3)
    query = np.repeat(np.arange(40), 20)
    document = np.tile(np.arange(20), 40)
    label = (document == rng.integers(0, 20, size=40).repeat(20)).astype(int)
    noise = rng.normal(size=len(query))
    informed = label * 3.0 + rng.normal(size=len(query)) * 0.1
    # BM25 knows, the model is noise: BM25 decides (the model's weight as high as leaves
    # every held-out job first, no higher)
    alpha, tried = best_alpha(query, noise, informed, label, document, 200, 0)
    # (the mean log-rank score: 0 when every held-out job is first)
    assert set(tried) == set(ALPHA_GRID) and tried[0.0] == pytest.approx(0.0)
    assert tried[alpha] == pytest.approx(0.0) and tried[1.0] < -1.0
    assert all(value < 0.0 for weight, value in tried.items() if weight > alpha)
    # the model knows: the highest weight among the best (a tie goes to the model)
    alpha, tried = best_alpha(query, informed, noise, label, document, 200, 0)
    assert alpha == 1.0 and tried[1.0] == pytest.approx(0.0)
    assert best_alpha(query[:0], noise[:0], noise[:0], label[:0], document[:0], 200, 0) == (
        1.0,
        {},
    )


def test_a_mix_that_beats_the_model_alone_by_noise_is_not_chosen():
    rng = np.random.default_rng(10)
    query = np.repeat(np.arange(60), 20)
    document = np.tile(np.arange(20), 60)
    label = (document == rng.integers(0, 20, size=60).repeat(20)).astype(int)
    score = label * 0.8 + rng.normal(size=len(query))  # a model that knows something
    bm25 = rng.normal(size=len(query))  # and a BM25 that knows nothing
    alpha, tried = best_alpha(query, score, bm25, label, document, 500, 0)
    # 0.65 looks best by chance (-1.344 against -1.357); the model alone is kept all the same
    assert max(tried, key=tried.__getitem__) == 0.65 and tried[0.65] > tried[1.0]
    assert alpha == 1.0


def test_a_pool_without_its_held_out_job_scores_it_just_past_the_pool():
    """Query 0 holds its held-out job (2nd in both orders), query 1 does not: a miss counts
    as rank pool_size + 1 for every weight, whatever the other queries' rows."""
    query = np.repeat([0, 1], 3)
    document = np.arange(6)
    label = np.array([0, 1, 0, 0, 0, 0])
    score = np.array([3.0, 2.0, 1.0, 3.0, 2.0, 1.0])
    alpha, tried = best_alpha(query, score, score, label, document, 200, 0, pool_size=100)
    expected = -(np.log(2) + np.log(101)) / 2
    assert alpha == 1.0 and all(value == pytest.approx(expected) for value in tried.values())
