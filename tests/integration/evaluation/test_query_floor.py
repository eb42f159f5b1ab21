"""The query floor's choice runs on real searches and never touches the evaluation's sample."""

from __future__ import annotations

from jobrec_core.evaluation.query_floor import (
    choose_query_floor,
    floor_table,
    sample_candidates,
)
from jobrec_core.evaluation.stage import evaluation_candidates, held_out_candidates


def test_each_floor_is_paired_against_the_papers_query_on_unused_candidates(
    spark, tiny, tiny_pairs
):
    config = tiny[0]
    # the tiny store's few evaluation candidates, most of them left to the floor's sample
    config = config.model_copy(
        update={
            "evaluation": config.evaluation.model_copy(
                update={
                    "ground_truth_candidates": 10,
                    "held_out_candidates": 10,
                    "retriever_candidates": 10,
                }
            )
        }
    )
    sample = {r["candidate_id"] for r in sample_candidates(spark, config, 30).collect()}
    evaluated = held_out_candidates(spark, config, config.evaluation.ground_truth_candidates)
    region = {r["candidate_id"] for r in evaluation_candidates(spark, config).collect()}
    assert sample and sample <= region
    assert not sample & {r["candidate_id"] for r in evaluated.collect()}

    rows = choose_query_floor(spark, config, [0.0, 0.05, 0.5], 30)  # the same sample
    assert [r.floor for r in rows] == [0.0, 0.05, 0.5]
    assert rows[0].versus_paper is None
    for row in rows:
        assert 0 <= row.mrr <= 1 and 0 <= row.found <= 1 and row.log_rank.mean <= 0
    for row in rows[1:]:
        assert row.versus_paper is not None
        assert row.versus_paper.wins + row.versus_paper.ties + row.versus_paper.losses == len(
            sample
        )
    again = choose_query_floor(spark, config, [0.0, 0.05, 0.5], 30)

    def measured(found):  # floor 0's Holm p is NaN, which equals nothing
        return [(r.floor, r.log_rank, r.mrr, r.found, r.versus_paper) for r in found]

    assert measured(again) == measured(rows)  # reruns agree
    table = floor_table(rows, 30)
    assert table[-1].startswith("  chosen: ")
