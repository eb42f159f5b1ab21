"""The query bag of words: worked examples of each rule of the cap and of how they interact."""

import numpy as np
import pytest
from pydantic import ValidationError

from jobrec_core.config import QueriesConfig, load_config
from jobrec_core.features.profile import mean_cosines_to_others, word_tfidf_rows
from jobrec_core.features.queries import (
    QueryTerm,
    build_query,
    candidate_query,
    candidate_rng,
    cap_terms,
    coherent_jobs,
    collect_terms,
    negative_query,
    request_query,
)
from jobrec_core.ranking.pipeline import QUERY_COLUMNS
from tests.helpers import REPO

FIELDS = ["title", "function", "requirement_summary", "keywords"]
RS = ["requirement_summary"]


def term(word, fields=("title",), jobs=1):
    return QueryTerm(word, frozenset(fields), jobs)


def test_terms_keep_first_appearance_order_their_fields_and_job_counts():
    jobs = [
        {
            "title": ["python", "developer"],
            "requirement_summary": ["degree"],
            "keywords": ["django"],
        },
        {"title": ["data", "engineer"], "function": ["python"], "keywords": ["python", "spark"]},
    ]
    terms = collect_terms(jobs, FIELDS)
    assert [t.term for t in terms] == [
        "python", "developer", "degree", "django", "data", "engineer", "spark",
    ]  # fmt: skip
    python = terms[0]
    assert python.fields == {"title", "function", "keywords"}
    assert python.jobs == 2  # twice in the second job counts once
    assert terms[2] == term("degree", RS, 1)


def test_fields_outside_the_query_fields_are_ignored():
    jobs = [{"title": ["nurse"], "description": ["long", "noisy", "text"]}]
    assert [t.term for t in collect_terms(jobs, FIELDS)] == ["nurse"]


def test_a_short_query_is_kept_whole_even_its_requirement_words():
    terms = [term("nurse"), term("degree", RS), term("care")]
    assert cap_terms(terms, {}, max_terms=3, drop_first_fields=RS) == ["nurse", "degree", "care"]


def test_rule_1_requirement_summary_only_words_go_first():
    terms = [term("nurse"), term("degree", RS), term("care"), term("bls", RS)]
    idf = {"nurse": 1.0, "degree": 9.0, "care": 1.0, "bls": 9.0}
    # 4 > 3: both requirement-only words go, although their IDF is the highest
    assert cap_terms(terms, idf, max_terms=3, drop_first_fields=RS) == ["nurse", "care"]


def test_rule_1_keeps_a_requirement_word_that_also_comes_from_another_field():
    terms = [term("nurse"), term("license", ("requirement_summary", "keywords")), term("bls", RS)]
    assert cap_terms(terms, {}, max_terms=2, drop_first_fields=RS) == ["nurse", "license"]


def test_rule_2_lowest_idf_words_go_next():
    terms = [term("work"), term("nurse"), term("icu"), term("team")]
    idf = {"work": 0.2, "nurse": 3.0, "icu": 6.0, "team": 0.5}
    assert cap_terms(terms, idf, max_terms=2, drop_first_fields=RS) == ["nurse", "icu"]


def test_rule_2_never_drops_a_word_shared_by_two_jobs():
    terms = [term("work", jobs=2), term("nurse"), term("icu"), term("team")]
    idf = {"work": 0.2, "nurse": 3.0, "icu": 6.0, "team": 0.5}
    # "work" has the lowest IDF but appears in two jobs: it stays, "nurse" makes room
    assert cap_terms(terms, idf, max_terms=2, drop_first_fields=RS) == ["work", "icu"]


def test_rules_1_and_2_together():
    terms = [
        term("care", jobs=3),
        term("degree", RS, jobs=2),  # requirement-only: goes in rule 1 although shared
        term("patient"),
        term("icu"),
        term("bls", RS),
        term("ward"),
    ]
    idf = {"care": 0.1, "degree": 5.0, "patient": 2.0, "icu": 7.0, "bls": 8.0, "ward": 1.0}
    # rule 1 leaves care, patient, icu, ward (4 > 3); rule 2 drops "ward" (lowest unshared IDF)
    assert cap_terms(terms, idf, max_terms=3, drop_first_fields=RS) == ["care", "patient", "icu"]


def test_equal_idfs_are_broken_by_the_word():
    terms = [term("b"), term("a"), term("c")]
    assert cap_terms(terms, {}, max_terms=2, drop_first_fields=RS) == ["b", "a"]


def test_the_cap_holds_when_shared_words_alone_exceed_it():
    terms = [term("x", jobs=2), term("y", jobs=2), term("z", jobs=3)]
    idf = {"x": 1.0, "y": 3.0, "z": 2.0}
    assert cap_terms(terms, idf, max_terms=2, drop_first_fields=RS) == ["y", "z"]


def test_build_query_end_to_end():
    jobs = [
        {"title": ["registered", "nurse"], "requirement_summary": ["license"]},
        {"title": ["nurse"], "keywords": ["icu", "care"]},
    ]
    idf = {"registered": 2.0, "nurse": 0.5, "license": 4.0, "icu": 5.0, "care": 1.0}
    assert build_query(jobs, FIELDS, idf, 300, RS) == (
        ["registered", "nurse", "license", "icu", "care"],
        [0.5, 1.0, 0.5, 0.5, 0.5],  # "nurse" is in both jobs
    )
    assert build_query(jobs, FIELDS, idf, 3, RS) == (["registered", "nurse", "icu"], [0.5, 1, 0.5])


def test_negative_query_is_a_seeded_sixth_in_order():
    terms = [f"t{i}" for i in range(30)]
    first = negative_query(terms, 1 / 6, candidate_rng(7, 42, "negative"))
    again = negative_query(terms, 1 / 6, candidate_rng(7, 42, "negative"))
    other = negative_query(terms, 1 / 6, candidate_rng(7, 43, "negative"))
    assert first == again
    assert first != other
    assert len(first) == 5
    assert first == sorted(first, key=terms.index)
    assert set(first) <= set(terms)


def test_negative_query_keeps_at_least_one_term():
    rng = np.random.default_rng(0)
    assert len(negative_query(["only", "two"], 1 / 6, rng)) == 1
    assert negative_query([], 1 / 6, rng) == []


def test_a_request_query_is_the_queries_frame_row_of_all_its_jobs():
    settings = load_config("local", ["queries.min_coherence=0"], REPO / "conf").queries
    jobs = [{"title": ["nurse"]}, {"title": ["nurse", "ward"]}, {"title": ["nurse"]}]
    frame = request_query(86494, [17, 42, 17], jobs, {}, settings)
    assert tuple(frame.columns) == QUERY_COLUMNS and len(frame) == 1
    row = frame.iloc[0]
    assert row["candidate_id"] == 86494
    assert row["own_job_ids"] == row["sequence_job_ids"] == [17, 42, 17]  # repeats kept
    assert row["query_terms"] == ["nurse", "ward"]
    # float32, as Spark stores the shares: the model reads the same numbers either way
    assert row["query_job_share"].dtype == np.float32
    assert row["query_job_share"].tolist() == [1.0, np.float32(1 / 3)]


def coherence_settings(floor: float) -> QueriesConfig:
    return QueriesConfig(
        fields=["title"],
        max_terms=300,
        drop_first_fields=[],
        negative_fraction=1 / 6,
        min_coherence=floor,
        coherence_fields=["title", "description"],
    )


NURSE_JOBS = [
    {"title": ["nurse", "icu"], "description": ["patient", "care", "ward"]},
    {"title": ["welder"], "description": ["steel", "torch"]},  # the stray interest
    {"title": ["nurse"], "description": ["patient", "ward", "night"]},
    {"title": ["nurse", "ward"], "description": ["care", "patient"]},
]
IDF = {
    "nurse": 1.0,
    "icu": 3.0,
    "patient": 1.5,
    "care": 1.2,
    "ward": 2.0,
    "night": 2.5,
    "welder": 4.0,
    "steel": 3.5,
    "torch": 3.5,
}


def test_a_job_unlike_the_others_leaves_the_query():
    kept = coherent_jobs(NURSE_JOBS, IDF, coherence_settings(0.05))
    assert kept == [NURSE_JOBS[0], NURSE_JOBS[2], NURSE_JOBS[3]]  # in their order
    terms, share = candidate_query(NURSE_JOBS, IDF, coherence_settings(0.05))
    assert terms == ["nurse", "icu", "ward"]
    assert share == [1.0, 1 / 3, 1 / 3]  # shares of the jobs the query kept


def test_a_zero_floor_is_the_papers_query_of_every_job():
    assert coherent_jobs(NURSE_JOBS, IDF, coherence_settings(0.0)) == NURSE_JOBS
    terms, _ = candidate_query(NURSE_JOBS, IDF, coherence_settings(0.0))
    assert terms == ["nurse", "icu", "welder", "ward"]


def test_the_two_most_coherent_jobs_stay_whatever_the_floor():
    unrelated = [{"title": [w]} for w in ("baker", "pilot", "miner")]
    # nothing in common: all tie at 0, the first two stay
    assert coherent_jobs(unrelated, {}, coherence_settings(0.5)) == unrelated[:2]
    # two jobs that disagree: neither is known to be the stray one
    assert coherent_jobs(NURSE_JOBS[:2], IDF, coherence_settings(0.99)) == NURSE_JOBS[:2]
    assert coherent_jobs(NURSE_JOBS, IDF, coherence_settings(0.99)) != NURSE_JOBS


def test_coherence_is_the_mean_cosine_of_sublinear_tfidf_vectors():
    texts = [["a", "a", "b"], ["b", "c"], ["a", "c", "c", "c"], []]
    idf = {"a": 2.0, "b": 1.0}  # "c" has no IDF: it weighs nothing
    vocabulary = ["a", "b", "c"]
    dense = np.zeros((len(texts), 3))
    for row, text in enumerate(texts):
        for word in set(text):
            dense[row, vocabulary.index(word)] = (1 + np.log(text.count(word))) * idf.get(word, 0)
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    dense = np.divide(dense, norms, out=np.zeros_like(dense), where=norms > 0)
    cosines = dense @ dense.T
    np.fill_diagonal(cosines, 0)
    expected = cosines.sum(axis=1) / (len(texts) - 1)
    np.testing.assert_allclose(mean_cosines_to_others(word_tfidf_rows(texts, idf)), expected)


def test_a_floor_needs_the_text_it_compares():
    with pytest.raises(ValidationError, match="coherence_fields"):
        QueriesConfig(
            fields=["title"],
            max_terms=300,
            drop_first_fields=[],
            negative_fraction=0.5,
            min_coherence=0.1,
        )
    settings = coherence_settings(0.1)
    assert settings.text_fields == ["title", "description"]
    assert coherence_settings(0.0).text_fields == ["title"]
