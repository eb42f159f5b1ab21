"""Intervals, paired tests and Holm's correction; the ground truth's rows and ceiling."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from jobrec_core.evaluation.ground_truth import GroundTruthRow, ground_truth
from jobrec_core.evaluation.held_out import Agreement, agreement, held_out_interest
from jobrec_core.evaluation.statistics import bootstrap_mean, holm, paired_difference


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
    assert bm25.recall == pytest.approx(sum(1 for c in range(200) if c % 10 and c % 20 < 10) / 200)
    assert oracle.versus_reference is not None and oracle.versus_reference.low > 0
    truth = [GroundTruthRow("BM25", 0.5, 0.5, 0.0), GroundTruthRow("Oracle", 0.9, 0.9, 5.0)]
    assert agreement(measured, truth) is None  # two rankers say nothing about an order
    truth.append(GroundTruthRow("Third", 0.1, 0.1, 9.0))
    third = replace(bm25, ranker="Third", mrr=0.01)
    three = replace(measured, rows=[*measured.rows, third])
    measured_agreement = agreement(three, truth)
    assert isinstance(measured_agreement, Agreement) and measured_agreement.rankers == 3
    assert measured_agreement.spearman == pytest.approx(1.0)
    assert measured_agreement.kendall == pytest.approx(1.0)
