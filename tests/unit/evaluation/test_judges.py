"""The evaluation's judges on per-candidate rows: the ground truth's rows, ceiling and real-ad
slice; the held-out interest and its agreement with the ground truth."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from jobrec_core.evaluation.ground_truth import ground_truth
from jobrec_core.evaluation.held_out import Agreement, agreement, held_out_interest
from jobrec_core.evaluation.protocols import with_empty_pools


def test_ground_truth_measures_each_ranker_against_the_reference_and_the_ceiling():
    rows = []
    for candidate in range(300):
        for job in range(20):
            relevant = int(job < 5)  # five relevant jobs in every pool
            rows.append(
                {
                    "candidate_id": candidate,
                    "job_id": job,
                    "label": relevant,
                    "score_bm25": float((job * 7 + candidate) % 20),  # an arbitrary order
                    "score_oracle": float(relevant),
                }
            )
    measured = ground_truth(pd.DataFrame(rows), ["BM25", "Oracle"], 10, 1000, 5)
    assert measured.candidates == 300
    assert measured.ceiling.mean == pytest.approx(0.5)  # 5 relevant of 10 at best
    bm25, oracle = measured.rows
    assert bm25.versus_reference is None and np.isnan(bm25.p_holm)
    assert oracle.precision == pytest.approx(0.5) and oracle.ndcg == pytest.approx(1.0)
    assert oracle.precision_low <= 0.5 <= oracle.precision_high
    versus = oracle.versus_reference
    assert versus is not None and versus.low > 0 and oracle.p_holm < 0.01
    assert measured.real_ad_rows == [] and measured.real_ad_candidates == 0


def test_every_ranker_but_the_reference_is_also_compared_with_the_strong_baseline():
    rows = [
        {
            "candidate_id": candidate,
            "job_id": job,
            "label": int(job < 5),
            "score_bm25": float((job * 7 + candidate) % 20),
            # right for odd candidates, the worst order for even ones
            "score_profile": float(job < 5) if candidate % 2 else float(job),
            "score_oracle": float(job < 5),
        }
        for candidate in range(200)
        for job in range(20)
    ]
    measured = ground_truth(
        pd.DataFrame(rows), ["BM25", "profile", "Oracle"], 10, 500, 5, "profile"
    )
    [oracle] = measured.versus_baseline  # neither the reference nor the baseline itself
    assert oracle.ranker == "Oracle" and oracle.baseline == "profile"
    assert oracle.precision.mean == pytest.approx(0.25)  # +0.5 for half the candidates
    assert oracle.precision.low > 0 and oracle.precision_p < 0.01
    assert oracle.ndcg.mean == pytest.approx(0.5) and oracle.ndcg.low > 0
    assert (
        ground_truth(pd.DataFrame(rows), ["BM25", "Oracle"], 10, 500, 5, "x").versus_baseline == []
    )


def test_the_real_ad_slice_keeps_the_candidates_with_a_relevant_real_ad():
    rows = []
    for candidate in range(100):
        for job in range(20):
            relevant = int(job < 5)
            rows.append(
                {
                    "candidate_id": candidate,
                    "job_id": job,
                    "label": relevant,
                    # every third candidate's first job is a real ad; the others' real ads
                    # are irrelevant ones
                    "real_ad": (job == 0) if candidate % 3 == 0 else (job == 19),
                    "score_bm25": float((job * 7 + candidate) % 20),
                    "score_oracle": float(relevant),
                }
            )
    measured = ground_truth(pd.DataFrame(rows), ["BM25", "Oracle"], 10, 500, 5)
    assert measured.candidates == 100
    assert measured.real_ad_candidates == 34  # candidates 0, 3, ..., 99
    assert [row.ranker for row in measured.real_ad_rows] == ["BM25", "Oracle"]
    assert measured.real_ad_rows[1].precision == pytest.approx(0.5)


def test_held_out_interest_finds_where_each_ranker_puts_the_held_out_job():
    rows = []
    for candidate in range(200):
        held_out = candidate % 20 if candidate % 10 else -1  # every tenth: not in the pool
        for job in range(20):
            rows.append(
                {
                    "candidate_id": candidate,
                    "job_id": job,
                    "label": int(job == held_out),
                    "score_bm25": float(-job),  # job 0 first
                    "score_oracle": float(job == held_out),
                }
            )
    measured = held_out_interest(pd.DataFrame(rows), ["BM25", "Oracle"], 10, 20, 1000, 3)
    assert measured.candidates == 200 and measured.found == pytest.approx(0.9)
    bm25, oracle = measured.rows
    assert oracle.mrr == pytest.approx(0.9) and oracle.recall == pytest.approx(0.9)
    # a held-out job outside the pool of 20 counts as ranked 21st, just past it
    assert oracle.log_rank == pytest.approx(-0.1 * np.log(21))
    assert bm25.recall == pytest.approx(sum(1 for c in range(200) if c % 10 and c % 20 < 10) / 200)
    assert oracle.versus_reference is not None and oracle.versus_reference.low > 0
    truth = {"BM25": 0.5, "Oracle": 0.9}  # ground-truth P@10 by ranker
    assert agreement(measured, truth) is None  # two rankers say nothing about an order
    truth["Third"] = 0.1
    third = replace(bm25, ranker="Third", log_rank=-5.0)
    three = replace(measured, rows=[*measured.rows, third])
    measured_agreement = agreement(three, truth)
    assert isinstance(measured_agreement, Agreement) and measured_agreement.rankers == 3
    assert measured_agreement.spearman == pytest.approx(1.0)
    assert measured_agreement.kendall == pytest.approx(1.0)


def test_a_candidate_whose_pool_came_back_empty_counts_as_finding_nothing():
    """Experiments 3 and 4 measure every candidate asked for (`with_empty_pools`): one whose
    pool is empty ranks nothing, lowers every ranker's P@10 and held-out figures alike, and
    is left out of the diversity, which it would otherwise count as nine changed jobs."""
    rows = [
        {
            "candidate_id": candidate,
            "job_id": job,
            "label": int(job < 5),
            "score_bm25": float((job * 7 + candidate) % 20),
            "score_oracle": float(job < 5),
        }
        for candidate in range(100)
        for job in range(20)
    ]
    scored = pd.DataFrame(rows)
    asked = np.arange(101)  # candidate 100's pool came back empty
    rankers = ["BM25", "Oracle"]
    whole = ground_truth(scored, rankers, 10, 500, 5)
    measured = ground_truth(with_empty_pools(scored, asked, rankers), rankers, 10, 500, 5)
    assert (whole.candidates, measured.candidates) == (100, 101)
    oracle = measured.rows[1]
    assert oracle.precision == pytest.approx(0.5 * 100 / 101)
    assert oracle.ndcg == pytest.approx(100 / 101) and measured.ceiling.mean < 0.5
    assert oracle.diversity == whole.rows[1].diversity and measured.rows[0].diversity == 0.0
    versus = oracle.versus_reference
    assert versus is not None and versus.wins + versus.ties + versus.losses == 101
    held = held_out_interest(with_empty_pools(scored, asked, rankers), rankers, 10, 20, 500, 3)
    assert held.candidates == 101 and held.found == pytest.approx(100 / 101)
    assert with_empty_pools(scored, np.arange(100), rankers) is scored  # nothing missing
    real = with_empty_pools(scored.assign(real_ad=scored["job_id"] == 0), asked, rankers)
    assert real["real_ad"].dtype == bool and not real["real_ad"].iloc[-1]
