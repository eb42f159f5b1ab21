"""Experiment 5's statistics on hand-made pools: recall, pipelines, held-out selection."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from jobrec_core.config import load_config
from jobrec_core.evaluation.report import EvaluationReport
from jobrec_core.evaluation.retrievers import (
    KNN_RANKER,
    Selection,
    choose_knn,
    compare_retrievers,
    judged_pool,
    mix_name,
    select,
    with_knn,
)
from jobrec_core.evaluation.stage import measured_retrievers
from jobrec_core.features.neighbours import InterestMemory, ivf_index
from jobrec_core.ranking.metrics import ndcg_at_k
from jobrec_core.ranking.scorers import RETRIEVAL_ORDER, score_column_of
from jobrec_core.results import metrics
from jobrec_core.search.dense import Retriever

CHAMPION = "DRMM v5"


def pool(rows: list[tuple[int, int, int, float, float]]) -> pd.DataFrame:
    """(candidate, job, label, retrieval score, champion score) rows."""
    frame = pd.DataFrame(
        rows,
        columns=[
            "candidate_id",
            "job_id",
            "label",
            score_column_of(RETRIEVAL_ORDER),
            score_column_of(CHAMPION),
        ],
    )
    return frame


def test_recall_pipelines_and_the_held_out_choice():
    candidates = np.array([1, 2])
    bm25 = pool([(1, 10, 0, 3, 1), (1, 11, 1, 2, 2), (2, 20, 0, 1, 0)])
    # the hybrid pool finds one more relevant job for each candidate; candidate 2's own
    # order puts it first
    hybrid = pool([(1, 10, 0, 3, 1), (1, 11, 1, 2, 2), (1, 12, 1, 1, 3), (2, 21, 1, 5, 5)])
    judged = {
        "bm25": judged_pool(bm25, [RETRIEVAL_ORDER, CHAMPION], candidates),
        "hybrid": judged_pool(hybrid, [RETRIEVAL_ORDER, CHAMPION], candidates),
    }
    assert judged["hybrid"].relevant_in_pool.tolist() == [2.0, 1.0]
    # held out: found by both pools for 1 (rank 2 then 1), only by hybrid for 2
    held_bm25 = pool([(1, 30, 0, 2, 2), (1, 31, 1, 1, 1), (2, 40, 0, 1, 1)])
    held_hybrid = pool([(1, 31, 1, 2, 2), (2, 41, 1, 1, 1)])
    held_out = {
        "bm25": judged_pool(held_bm25, [RETRIEVAL_ORDER, CHAMPION], candidates),
        "hybrid": judged_pool(held_hybrid, [RETRIEVAL_ORDER, CHAMPION], candidates),
    }
    compared = compare_retrievers(
        judged,
        [CHAMPION],
        {1: np.array([4, 2])},
        1,
        200,
        0,
        held_out,
        pool_size=100,
        served_retriever="bm25",
    )
    recall = {p.retriever: p.recall.mean for p in compared.pools}
    assert recall == {"bm25": (1 / 4 + 0 / 2) / 2, "hybrid": (2 / 4 + 1 / 2) / 2}
    hybrid_pool = compared.pools[1]
    assert hybrid_pool.versus_bm25 is not None and hybrid_pool.versus_bm25.mean > 0
    assert [p.held_out_found for p in compared.pools] == [0.5, 1.0]
    assert compared.reference == f"bm25 >> {CHAMPION}"
    rows = {p.name: p for p in compared.pipelines}
    assert list(rows) == ["bm25", f"bm25 >> {CHAMPION}", "hybrid", f"hybrid >> {CHAMPION}"]
    assert rows[f"bm25 >> {CHAMPION}"].versus_reference is None
    # P@1: bm25 own order picks 10 (irrelevant) for 1, 20 for 2; the champion 11 for 1
    assert rows["bm25"].precision.mean == 0.0
    assert rows[f"bm25 >> {CHAMPION}"].precision.mean == 0.5
    assert rows[f"hybrid >> {CHAMPION}"].precision.mean == 1.0
    # held-out MRR: bm25 >> champion 1/2 for 1 (31 scored 1 < 30's 2), 0 for 2
    mrr = {name: row.held_out_mrr.mean for name, row in rows.items() if row.held_out_mrr}
    assert mrr[f"bm25 >> {CHAMPION}"] == 0.25 and mrr[f"hybrid >> {CHAMPION}"] == 1.0
    # the log-rank score, what selects: rank 2, and 2's job just past the pool of 100
    log_rank = {n: row.held_out_log_rank.mean for n, row in rows.items() if row.held_out_log_rank}
    assert log_rank[f"bm25 >> {CHAMPION}"] == pytest.approx(-(np.log(2) + np.log(101)) / 2)
    assert log_rank[f"hybrid >> {CHAMPION}"] == 0.0
    # two candidates are no evidence: the served pipeline stands, though hybrid's mean is higher
    assert compared.selection == Selection(f"bm25 >> {CHAMPION}", f"bm25 >> {CHAMPION}")
    assert compared.candidates == 2 and compared.held_out_candidates == 2
    text = "\n".join(EvaluationReport(1, {}, retrievers=compared).format().splitlines())
    assert f"selected by the held-out log rank: bm25 >> {CHAMPION} (served: no other" in text


def test_the_served_pipeline_stands_unless_another_is_significantly_above_it():
    """Selection as the model gate decides: a higher mean by a hair does not displace the
    served pipeline; a clear gain does, and of several such the highest mean is chosen."""
    rng = np.random.default_rng(7)
    served = -np.log(rng.integers(1, 60, 400).astype(np.float64))
    near_tie = served + 0.002 + np.where(np.arange(400) % 2, 0.5, -0.5)  # a hair above
    assert near_tie.mean() > served.mean()
    scores = {"bm25 >> M": near_tie, "hybrid >> M": served}
    assert select(scores, "hybrid >> M", 500, 0) == Selection("hybrid >> M", "hybrid >> M")
    clear, clearer = served + 0.3, served + 0.5
    chosen = select(scores | {"dense >> M": clear, "dense": clearer}, "hybrid >> M", 500, 0)
    assert chosen is not None and (chosen.pipeline, chosen.served) == ("dense", "hybrid >> M")
    assert chosen.gain is not None and chosen.gain.mean == pytest.approx(0.5)
    assert chosen.gain.low > 0 and chosen.p_holm < 0.05
    text = EvaluationReport(10, {}).format()  # no comparison, no line
    assert "selected by" not in text


def test_selection_names_only_a_servable_pipeline_and_says_by_how_much():
    """60 held-out queries: the champion finds the held-out job first in the hybrid pool and
    50th in BM25's; the hybrid pool's own order finds it first too, and the kNN mix of BM25's
    pool as well, but recommendations serve neither a retriever's own order nor kNN, so
    selection names `hybrid >> champion`, with its gain over the served BM25 pipeline. Served
    from the hybrid pool, it stands."""
    ids = np.arange(1, 61)
    rankers = [RETRIEVAL_ORDER, CHAMPION, KNN_RANKER, mix_name(CHAMPION)]

    def held(champion_rank: int, own_rank: int, knn_rank: int) -> pd.DataFrame:
        """Jobs 1-99 in their order, job 0 (the held-out one) placed at each ranker's rank."""

        def score(rank: int) -> np.ndarray:
            return np.where(jobs == 0, 0.5 - rank, -jobs.astype(np.float64))

        jobs = np.tile(np.arange(100), len(ids))
        frame = pd.DataFrame({"candidate_id": np.repeat(ids, 100), "job_id": jobs})
        frame["label"] = (jobs == 0).astype(np.int64)
        frame[score_column_of(RETRIEVAL_ORDER)] = score(own_rank)
        frame[score_column_of(CHAMPION)] = score(champion_rank)
        frame[score_column_of(KNN_RANKER)] = 0.0
        frame[score_column_of(mix_name(CHAMPION))] = score(knn_rank)
        return frame

    judged = {
        "bm25": judged_pool(held(50, 50, 1), rankers, ids),
        "hybrid": judged_pool(held(1, 1, 1), rankers, ids),
    }
    relevant = {1: np.ones(60, dtype=np.int64)}
    reranked = [CHAMPION, KNN_RANKER, mix_name(CHAMPION)]
    compared = compare_retrievers(
        judged, reranked, relevant, 10, 200, 0, judged, served_retriever="bm25"
    )
    selection = compared.selection
    assert selection is not None
    assert (selection.pipeline, selection.served) == (
        f"hybrid >> {CHAMPION}",
        f"bm25 >> {CHAMPION}",
    )
    assert selection.gain is not None and selection.gain.mean == pytest.approx(np.log(50))
    line = next(
        line
        for line in EvaluationReport(10, {}, retrievers=compared).format().splitlines()
        if "selected by" in line
    )
    assert line.startswith(f"  selected by the held-out log rank: hybrid >> {CHAMPION}, log-rank ")
    assert f"above the served bm25 >> {CHAMPION} (Holm-corrected p 0.0" in line
    from_hybrid = compare_retrievers(
        judged, reranked, relevant, 10, 200, 0, judged, served_retriever="hybrid"
    )
    assert from_hybrid.selection == Selection(f"hybrid >> {CHAMPION}", f"hybrid >> {CHAMPION}")


def test_experiment_5_always_measures_the_served_retriever():
    def measured(retrievers: list[str], served: str) -> list[Retriever]:
        config = load_config(
            "local",
            [f"evaluation.retrievers=[{', '.join(retrievers)}]", f"retrieval.retriever={served}"],
        )
        return measured_retrievers(config)

    assert measured(["bm25", "dense"], "hybrid") == ["bm25", "dense", "hybrid"]
    assert measured(["hybrid", "bm25"], "hybrid") == ["bm25", "hybrid"]
    assert measured([], "dense") == ["bm25", "dense"]
    assert measured(["dense"], "bm25") == ["bm25", "dense"]


def test_without_a_champion_the_pools_own_orders_are_compared_and_the_served_one_selected():
    """No model passed the gate: recommend serves the hybrid pool in its own order, so the
    comparison measures the pools' own orders against BM25's, and selection names the served
    retriever alone."""
    candidates = np.array([1, 2])
    bm25 = pool([(1, 10, 0, 3, 0), (1, 11, 1, 2, 0), (2, 20, 0, 1, 0)])
    hybrid = pool([(1, 11, 1, 3, 0), (1, 10, 0, 2, 0), (2, 21, 1, 5, 0)])
    judged = {
        name: judged_pool(frame, [RETRIEVAL_ORDER], candidates)
        for name, frame in (("bm25", bm25), ("hybrid", hybrid))
    }
    compared = compare_retrievers(
        judged, [], {1: np.array([1, 1])}, 1, 200, 0, judged, served_retriever="hybrid"
    )
    rows = {p.name: p for p in compared.pipelines}
    assert list(rows) == ["bm25", "hybrid"] and compared.reference == "bm25"
    assert rows["bm25"].precision.mean == 0.0 and rows["hybrid"].precision.mean == 1.0
    assert rows["hybrid"].versus_reference is not None and rows["bm25"].versus_reference is None
    assert compared.selection == Selection("hybrid", "hybrid")
    text = EvaluationReport(1, {}, retrievers=compared).format()
    assert "in its own order alone, as served while no model has passed the gate" in text
    assert "selected by the held-out log rank: hybrid (served: no other" in text


def test_the_comparison_needs_the_served_pool():
    candidates = np.array([1])
    judged = {
        "bm25": judged_pool(pool([(1, 10, 1, 1, 1)]), [RETRIEVAL_ORDER, CHAMPION], candidates)
    }
    with pytest.raises(ValueError, match="the hybrid pool, the served one"):
        compare_retrievers(
            judged, [CHAMPION], {1: np.array([1])}, 10, 100, 0, served_retriever="hybrid"
        )


def test_a_candidate_whose_pool_came_back_empty_still_counts():
    candidates = np.array([1, 2])
    judged = judged_pool(pool([(1, 10, 1, 1, 1)]), [RETRIEVAL_ORDER, CHAMPION], candidates)
    assert judged.relevant_in_pool.tolist() == [1.0, 0.0]
    assert judged.ranked[CHAMPION].queries == 2


def test_a_pool_that_misses_the_relevant_jobs_scores_a_lower_ndcg_not_a_higher_one():
    """The collection holds ten primary-occupation jobs (2) and one related (1) for the
    candidate: BM25's pool holds the ten, the dense pool only the related one, first. Within
    its own pool the dense one would reach nDCG 1.0 as BM25's does; over the collection's
    ideal it scores far lower."""
    candidates = np.array([1])
    bm25 = pool([(1, job, 2, 20 - job, 0) for job in range(10)])
    dense = pool([(1, 50, 1, 1, 1), (1, 51, 0, 0, 0)])
    judged = {
        "bm25": judged_pool(bm25, [RETRIEVAL_ORDER, CHAMPION], candidates),
        "dense": judged_pool(dense, [RETRIEVAL_ORDER, CHAMPION], candidates),
    }
    assert ndcg_at_k(judged["dense"].ranked[RETRIEVAL_ORDER], 10).tolist() == [1.0]
    relevant = {2: np.array([10]), 1: np.array([1])}
    compared = compare_retrievers(judged, [CHAMPION], relevant, 10, 100, 0, served_retriever="bm25")
    ndcg = {p.name: p.ndcg.mean for p in compared.pipelines}
    assert ndcg["bm25"] == pytest.approx(1.0)
    ideal = 2 * np.sum(1 / np.log2(np.arange(10) + 2))
    assert ndcg["dense"] == pytest.approx(1 / ideal) and ndcg["dense"] < ndcg["bm25"]
    assert compared.pools[1].recall.mean == pytest.approx(1 / 11)


def test_no_candidates_give_nan_rows_not_an_error():
    none = np.array([], dtype=np.int64)
    empty = pool([])
    judged = {
        name: judged_pool(empty, [RETRIEVAL_ORDER, CHAMPION], none) for name in ("bm25", "dense")
    }
    compared = compare_retrievers(
        judged, [CHAMPION], {2: none, 1: none}, 10, 100, 0, judged, served_retriever="dense"
    )
    assert compared.candidates == 0 and compared.held_out_candidates == 0
    assert all(np.isnan(p.recall.mean) and np.isnan(p.held_out_found) for p in compared.pools)
    assert all(np.isnan(p.precision.mean) and np.isnan(p.ndcg.mean) for p in compared.pipelines)
    assert compared.selection is None  # nothing measured, nothing to select
    assert (
        "5. Retrievers: 0 ground-truth candidates"
        in EvaluationReport(10, {}, retrievers=compared).format()
    )


def test_knn_is_chosen_in_the_seeds_order_and_mixed_only_on_a_real_gain():
    """Past candidates like the dev ones all liked job 5; the champion puts it second."""
    direction = np.array([1.0, 0.0], dtype=np.float32)
    memory = InterestMemory.of(
        pd.DataFrame(
            {
                "candidate_id": [100, 101, 102],
                "query_vector": [direction, direction, direction],
                "job_ids": [[5], [5, 9], [5]],
            }
        )
    )
    index = ivf_index(memory, probes=1)
    dev_ids = np.repeat(np.arange(1, 7), 3)
    dev = pd.DataFrame(
        {
            "candidate_id": dev_ids,
            "job_id": np.tile([4, 5, 6], 6),
            "label": np.tile([0, 1, 0], 6),
            score_column_of(CHAMPION): np.tile([3.0, 2.0, 1.0], 6),
        }
    )
    vectors = pd.DataFrame({"candidate_id": np.arange(1, 7), "query_vector": [direction] * 6})
    choice = choose_knn(memory, index, dev, vectors, CHAMPION, [2, 1], 100, 200, 0)
    assert choice.k == 1  # the votes alone rank job 5 first with either k: the smaller
    assert choice.log_rank_by_k == {1: 0.0, 2: 0.0}
    assert choice.log_rank_by_alpha[1.0] == pytest.approx(-np.log(2))
    assert choice.alpha == 0.6 and choice.lam == 0.4
    scored = with_knn(dev, vectors, memory, index, CHAMPION, choice)
    first = scored[scored["candidate_id"] == 1]
    assert first[score_column_of(KNN_RANKER)].tolist() == [0.0, 1.0, 0.0]
    mixed = first[score_column_of(mix_name(CHAMPION))].to_numpy()
    assert mixed.argmax() == 1  # job 5 first once mixed
    # no dev pool: nothing chosen, the champion alone
    empty = choose_knn(memory, index, dev.iloc[:0], vectors, CHAMPION, [4, 2], 100, 200, 0)
    assert (empty.k, empty.alpha, empty.dev_candidates) == (2, 1.0, 0)


def test_the_comparison_prints_and_logs_under_names_mlflow_accepts():
    candidates = np.array([1])
    frame = pool([(1, 10, 1, 1, 1)])
    frame[score_column_of(KNN_RANKER)] = 0.0
    frame[score_column_of(mix_name(CHAMPION))] = 1.0
    rankers = [RETRIEVAL_ORDER, CHAMPION, KNN_RANKER, mix_name(CHAMPION)]
    judged = {"bm25": judged_pool(frame, rankers, candidates)}
    compared = compare_retrievers(
        judged,
        [CHAMPION, KNN_RANKER, mix_name(CHAMPION)],
        {1: np.array([1])},
        1,
        100,
        0,
        served_retriever="bm25",
    )
    report = EvaluationReport(1, {}, retrievers=compared)
    assert "bm25 >> DRMM v5 + kNN" in report.format()
    names = metrics(report)
    assert "retrievers.bm25_drmm_v5_knn.p_at_1" in names
    assert all(re.fullmatch(r"[\w\-. :/]+", name) for name in names)
