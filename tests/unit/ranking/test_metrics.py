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
