"""Pure parts of the evaluation: sizes, BM25's MAP-set order, accuracy from scored rows, the
report's tables and metric names, and the WMD re-ranker against gensim itself."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from gensim.models import KeyedVectors

from jobrec_core.evaluation.curve import CurvePoint, curve_sizes
from jobrec_core.evaluation.ground_truth import GroundTruthRow
from jobrec_core.evaluation.protocols import (
    PAPER_PROTOCOL,
    ProtocolRow,
    bm25_map_order,
    paper_protocol,
    triple_accuracy,
)
from jobrec_core.evaluation.report import READS_BM25_NOTE, EvaluationReport
from jobrec_core.ranking.metrics import average_precision_at_k, rank_within_queries
from jobrec_core.ranking.scorers import Bm25Scorer, WmdScorer, score_column, score_column_of
from jobrec_core.ranking.statistics import PairedDifference
from jobrec_core.results import (
    markdown,
    metrics,
    read_appendices,
    snapshot_section,
    write_report,
)


def test_curve_sizes_keep_the_seeds_proportions_when_the_data_is_smaller():
    seed = [9000, 18000, 27000]
    assert curve_sizes(seed, 50_000) == [(9000, 9000), (18000, 18000), (27000, 27000)]
    assert curve_sizes([27000, 9000, 18000], 2700) == [(900, 9000), (1800, 18000), (2700, 27000)]
    assert curve_sizes(seed, 110)[-1] == (110, 27000)  # no rounding down of the whole split
    assert curve_sizes([], 100) == []


def test_bm25_order_of_a_map_set_puts_its_top_50_first_and_scores_map_1():
    label = np.array([0, 1, 0, 1, 1])
    rank = np.array([1, 3, 2, 1, 2])  # negatives' ranks are in the other query's list
    order = bm25_map_order(label, rank)
    ranked = rank_within_queries(np.zeros(5), order, label, np.arange(5))
    assert ranked.document.tolist() == [3, 4, 1, 0, 2]
    assert average_precision_at_k(ranked, 10)[0] == 1.0


def test_triple_accuracy_pairs_the_two_rows_of_each_triple():
    scored = pd.DataFrame(
        {
            "candidate_id": [1, 1, 2, 2, 3, 3],
            "label": [1, 0, 0, 1, 1, 0],
            "score_x": [0.9, 0.1, 0.5, 0.4, 0.3, 0.3],  # right, wrong, tie (wrong)
        }
    )
    assert triple_accuracy(scored, "score_x") == pytest.approx(1 / 3)


def test_the_papers_protocol_without_triples_or_map_sets_gives_nan_rows():
    column = score_column_of("DRMM v1")
    no_triples = pd.DataFrame({"candidate_id": [], "label": [], column: []})
    no_map = pd.DataFrame(
        {"candidate_id": [], "job_id": [], "label": [], "bm25_rank": [], column: []}
    )
    assert np.isnan(triple_accuracy(no_triples, column))
    rows, queries = paper_protocol(no_triples, no_map, ["DRMM v1"], 10)
    assert queries == {"triples": 0, "map": 0}
    assert [row.ranker for row in rows] == ["BM25", "DRMM v1"]
    assert rows[0].accuracy is None
    for row in rows:
        assert row.map is not None and np.isnan(row.map) and np.isnan(row.diversity)
    assert rows[1].accuracy is not None and np.isnan(rows[1].accuracy)


def test_a_ranker_reading_bm25_gets_no_accuracy_or_map_but_its_diversity():
    """Its test triples' and MAP sets' negatives carry the less informative query's BM25:
    a ranker that reads it would find the positive by construction."""
    names = ["DRMM v1", "DRMM v2"]
    triples = pd.DataFrame({"candidate_id": [1, 1], "label": [1, 0]})
    map_sets = pd.DataFrame(
        {"candidate_id": [1, 1, 1], "job_id": [7, 8, 9], "label": [1, 0, 0], "bm25_rank": [1, 1, 2]}
    )
    for scored in (triples, map_sets):
        for name in names:
            scored[score_column_of(name)] = np.linspace(1.0, 0.0, len(scored))
    rows, _ = paper_protocol(triples, map_sets, names, 10, frozenset({"DRMM v2"}))
    v1, v2 = rows[1], rows[2]
    assert (v1.accuracy, v1.map) == (1.0, 1.0)
    assert (v2.accuracy, v2.map) == (None, None) and v2.diversity == v1.diversity
    reading = report()
    reading.protocol.append(v2)
    reading.curve = [CurvePoint(900, 9000, None, None, 0.3, 4)]
    text = reading.format()
    assert text.count(READS_BM25_NOTE) == 2  # the protocol's table and the learning curve's
    assert "DRMM v2" in text and "protocol.drmm_v2.map" not in metrics(reading)
    assert "protocol.drmm_v2.diversity" in metrics(reading)


def report() -> EvaluationReport:
    return EvaluationReport(
        k=10,
        models={"DRMM v1": "4"},
        skipped={"DRMM v2": "never trained"},
        protocol=[
            ProtocolRow("BM25", None, 1.0, 0.0),
            ProtocolRow("DRMM v1", 0.9, 0.95, 4.5),
        ],
        queries={"triples": 100, "map": 100, "ground_truth": 50},
        curve=[CurvePoint(900, 9000, 0.8, 0.9, 0.3, 4)],
        ground_truth=[GroundTruthRow("BM25", 0.6, 0.65, 0.0)],
    )


def test_report_prints_ours_next_to_the_seeds_figures():
    text = report().format()
    v1 = PAPER_PROTOCOL["DRMM v1"]
    assert f"0.900 ({v1['accuracy']:.3f})" in text and f"4.50 ({v1['diversity']:.2f})" in text
    assert "DRMM v2: not evaluated: never trained" in text
    assert "0.800 (0.932)" in text  # learning curve at the seed's 9k
    assert "0.600 (0.840)" in text  # BM25's P@10
    assert "```\nspark-submit jobs/evaluate.py --env local\n```" in markdown(
        report(), "spark-submit jobs/evaluate.py --env local", {"dataset": "tiny"}
    )


def test_findings_say_whether_a_reranker_beats_bm25_significantly():
    judged = report()
    worse = PairedDifference(-0.05, -0.08, -0.02, 0.001, 10, 20, 20)
    judged.ground_truth.append(
        GroundTruthRow("DRMM v1", 0.55, 0.6, 6.0, versus_reference=worse, p_holm=0.002)
    )
    text = markdown(judged, "jobrec demo", {})
    assert "the best MAP@10 of the rankers that do not read BM25 is DRMM v1's (0.950)" in text
    assert "DRMM v1 (P@10 0.550), is worse than BM25's own order, significantly" in text
    assert "-0.050" in text and "[-0.080, -0.020]" in text  # the paired table
    noise = PairedDifference(0.01, -0.02, 0.04, 0.4, 20, 10, 20)
    judged.ground_truth[-1] = GroundTruthRow(
        "DRMM v1", 0.61, 0.6, 6.0, versus_reference=noise, p_holm=0.4
    )
    assert "shows no significant difference" in markdown(judged, "jobrec demo", {})


def test_report_files_are_written_with_their_plots(tmp_path):
    results = write_report(report(), tmp_path, "jobrec demo", {"dataset": "tiny"})
    assert "](learning_curve_sizes.png)" in results.read_text()
    assert (tmp_path / "learning_curve_sizes.png").stat().st_size > 0
    assert (tmp_path / "ground_truth.png").stat().st_size > 0


def test_a_snapshot_becomes_a_section_the_report_appends_verbatim(tmp_path):
    generated = (
        "# Results\n\nGenerated by `jobs/evaluate.py`; reproduce with:\n\n```\njobrec run\n```\n\n"
        "dataset: `seed`\n\n![ground truth](ground_truth.png)\n"
    )
    section = snapshot_section(
        "seed", generated, "--env local --env seed", "step  wall", "results/seed"
    )
    assert section.startswith("## The seed preset: a committed snapshot\n")
    assert "# Results" not in section  # its title is the section's
    assert "![ground truth](results/seed/ground_truth.png)" in section
    assert "`jobrec run --env local --env seed` computed" in section and "step  wall" in section
    assert "`jobrec snapshot --env local --env seed` copied" in section
    assert "reproduce with" not in section and "dataset: `seed`" in section  # one command line

    (tmp_path / "seed.md").write_text(section)
    found = read_appendices([str(tmp_path / "seed.md"), str(tmp_path / "missing.md")])
    assert found == [section]  # the missing one is left out, not a failure
    text = markdown(report(), "jobrec demo", {}, found)
    assert text.endswith(section) and text.index("# Results") < text.index("## The seed")


def test_metric_names_are_flat_and_skip_missing_accuracy():
    values = metrics(report())
    assert values["protocol.drmm_v1.accuracy"] == 0.9
    assert "protocol.bm25.accuracy" not in values
    assert values["ground_truth.bm25.p_at_10"] == 0.6


def test_wmd_reranker_equals_gensim_wmdistance(tmp_path):
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(30)]
    keyed = KeyedVectors(vector_size=8)
    keyed.add_vectors(words, rng.normal(size=(30, 8)).astype(np.float32))
    path = str(tmp_path / "vectors.kv")
    keyed.save(path)
    query = ["w1", "w2", "w2", "w7", "unknown"]
    documents = [["w3", "w1", "w9"], ["w2", "w7"], ["w20", "w21", "w22", "w2"], ["nothing"]]
    frame = pd.DataFrame(
        {"query_terms": [query] * 4, "doc_tokens": documents, "bm25": [4, 3, 2, 1]}
    )
    scores = WmdScorer(path).score(frame)
    expected = [1 / (1 + keyed.wmdistance(query, d)) for d in documents]
    np.testing.assert_allclose(scores, expected, rtol=1e-9)
    assert scores[3] == 0.0  # no word in the vocabulary: infinitely far
    assert Bm25Scorer().score(frame).tolist() == [4, 3, 2, 1]
    assert score_column(WmdScorer(path, "WMD (gensim)")) == "score_wmd_gensim"
