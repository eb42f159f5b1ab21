"""Ranking metrics against trec_eval's own code (pytrec_eval) and the seed's examples."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval

from jobrec_core.ranking.metrics import (
    average_precision_at_k,
    diversity,
    first_relevant_rank,
    geometric_mean_rank,
    ideal_dcg_at_k,
    log_rank_score,
    ndcg_at_k,
    precision_at_k,
    rank_within_queries,
    reciprocal_rank,
    top_k,
)

K = 10


def random_runs(seed: int, queries: int = 40, documents: int = 100):
    """Graded labels (0, 1, 2), at most K relevant per query (so AP's denominators agree),
    distinct scores (trec_eval and we break ties differently)."""
    rng = np.random.default_rng(seed)
    query = np.repeat(np.arange(queries), documents)
    document = np.tile(np.arange(documents), queries) + 1000
    score = rng.permutation(len(query)).astype(np.float64)
    label = np.zeros(len(query), dtype=np.int64)
    for q in range(queries):
        chosen = rng.choice(documents, size=rng.integers(0, K + 1), replace=False)
        label[q * documents + chosen] = rng.integers(1, 3, size=len(chosen))
    return query, document, score, label


def trec_eval(query, document, score, label) -> dict[str, dict[str, float]]:
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q, d, s, rel in zip(query, document, score, label, strict=True):
        qrels.setdefault(str(q), {})[str(d)] = int(rel)
        run.setdefault(str(q), {})[str(d)] = float(s)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {f"P.{K}", f"ndcg_cut.{K}", f"map_cut.{K}", "recip_rank"}
    )
    return evaluator.evaluate(run)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_precision_ndcg_and_ap_equal_trec_eval(seed):
    query, document, score, label = random_runs(seed)
    reference = trec_eval(query, document, score, label)
    ranked = rank_within_queries(query, score, label, document)
    names = [str(q) for q in np.unique(query)]
    expected_p = [reference[q][f"P_{K}"] for q in names]
    expected_ndcg = [reference[q][f"ndcg_cut_{K}"] for q in names]
    expected_ap = [reference[q][f"map_cut_{K}"] for q in names]
    np.testing.assert_allclose(precision_at_k(ranked, K), expected_p, atol=1e-9)
    np.testing.assert_allclose(ndcg_at_k(ranked, K), expected_ndcg, atol=1e-9)
    np.testing.assert_allclose(average_precision_at_k(ranked, K), expected_ap, atol=1e-9)
    expected_rr = [reference[q]["recip_rank"] for q in names]  # whole pool: no cut
    np.testing.assert_allclose(reciprocal_rank(ranked, len(query)), expected_rr, atol=1e-9)


def test_ndcg_over_a_collections_ideal_equals_trec_eval_judging_more_than_the_run():
    """trec_eval's ideal is every judged document, ranked or not: with a run that holds only
    part of them, it is the collection's ideal DCG (`ideal_dcg_at_k`)."""
    query, document, score, label = random_runs(4)
    kept = document % 100 < 60  # the run: 60 of each query's 100 documents
    assert (np.bincount(query[~kept], weights=label[~kept] > 0) > 0).any()  # some left out
    qrels: dict[str, dict[str, int]] = {}
    for q, d, rel in zip(query, document, label, strict=True):  # all 100 judged
        qrels.setdefault(str(q), {})[str(d)] = int(rel)
    run: dict[str, dict[str, float]] = {}
    for q, d, s in zip(query[kept], document[kept], score[kept], strict=True):
        run.setdefault(str(q), {})[str(d)] = float(s)
    reference = pytrec_eval.RelevanceEvaluator(qrels, {f"ndcg_cut.{K}"}).evaluate(run)
    counts = {
        gain: np.bincount(query, weights=label == gain, minlength=40).astype(np.int64)
        for gain in (1, 2)
    }
    ranked = rank_within_queries(query[kept], score[kept], label[kept], document[kept])
    expected = [reference[str(q)][f"ndcg_cut_{K}"] for q in range(40)]
    np.testing.assert_allclose(ndcg_at_k(ranked, K, ideal_dcg_at_k(counts, K)), expected, atol=1e-9)


def test_a_pool_missing_the_best_documents_scores_lower_over_the_collections_ideal():
    # One query, three grade-2 and two grade-1 documents in the collection; k = 4.
    ideal = ideal_dcg_at_k({2: np.array([3]), 1: np.array([2])}, 4)
    np.testing.assert_allclose(ideal, [2 * (1 + 1 / np.log2(3) + 0.5) + 1 / np.log2(5)])
    assert ideal_dcg_at_k({2: np.array([0]), 1: np.array([0])}, 4).tolist() == [0.0]
    ranked = rank_within_queries(np.zeros(1), np.ones(1), np.array([1]), np.arange(1))
    assert ndcg_at_k(ranked, 4).tolist() == [1.0]  # within the pool: its own ideal
    assert ndcg_at_k(ranked, 4, ideal)[0] == pytest.approx(1 / ideal[0])


def test_no_rows_are_no_queries_and_every_metric_an_empty_array():
    none = np.array([], dtype=np.int64)
    ranked = rank_within_queries(none, none.astype(np.float64), none, none)
    assert ranked.queries == 0
    for metric in (
        average_precision_at_k,
        precision_at_k,
        ndcg_at_k,
        first_relevant_rank,
        reciprocal_rank,
        log_rank_score,
    ):
        assert metric(ranked, K).shape == (0,), metric.__name__
    assert top_k(ranked, K) == []
    assert ideal_dcg_at_k({2: none, 1: none}, K).shape == (0,)


def test_the_log_rank_counts_every_halving_alike_and_a_miss_just_past_the_cut():
    # Query 0's relevant document is 2nd, query 1's 4th, query 2 has none in the top 4.
    query = np.repeat([0, 1, 2], 4)
    score = np.tile([4.0, 3.0, 2.0, 1.0], 3)
    label = np.array([0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0])
    ranked = rank_within_queries(query, score, label, np.arange(12))
    np.testing.assert_array_equal(first_relevant_rank(ranked, 4), [2, 4, 5])
    np.testing.assert_array_equal(first_relevant_rank(ranked, 3), [2, 4, 4])
    scores = log_rank_score(ranked, 4)
    np.testing.assert_allclose(scores, -np.log([2, 4, 5]))
    assert scores[0] - scores[1] == pytest.approx(np.log(2))  # 4 -> 2 counts as 2 -> 1 would
    np.testing.assert_allclose(reciprocal_rank(ranked, 4), [0.5, 0.25, 0.0])
    assert geometric_mean_rank(scores.mean()) == pytest.approx((2 * 4 * 5) ** (1 / 3))


def test_diversity_on_the_seeds_worked_example():
    # Seed §7.5: three ids in common, so the measure is 10 - 3 = 7.
    drmm = np.array(
        [268249, 268242, 586030, 425455, 415567, 423177, 151136, 564627, 287302, 236996]
    )
    bm25 = np.array(
        [268249, 377566, 585118, 586030, 226761, 425455, 485859, 496419, 241922, 151136]
    )
    assert np.intersect1d(drmm, bm25).size == 4  # the seed's text says 3; the lists share 4
    assert diversity([drmm], [bm25], 10) == 6.0
    assert diversity([drmm, drmm], [drmm, bm25], 10) == 3.0


def test_top_k_follows_the_ranking():
    ranked = rank_within_queries(
        np.array([2, 2, 2, 1]),
        np.array([0.1, 0.9, 0.5, 0.3]),
        np.zeros(4, int),
        np.array([7, 8, 9, 5]),
    )
    assert [t.tolist() for t in top_k(ranked, 2)] == [[5], [8, 9]]
