"""The two-pass search's pure parts: which clauses wait, who contends, when the answer is exact,
and when the screen may skip a search."""

from __future__ import annotations

import math

import numpy as np

from jobrec_core.search.bounded import (
    FieldStatistics,
    contenders,
    exact_top,
    first_pass_body,
    outranked,
    outscoring_count_body,
    split_common,
)

BOOSTS = {"title": 1.5, "requirement_summary": 1.2}


def statistics() -> FieldStatistics:
    return FieldStatistics(
        saturation=2.2,
        documents={"title": 1000, "requirement_summary": 1000},
        frequencies={
            "experience": {"title": 1, "requirement_summary": 999},
            "skill": {"title": 0, "requirement_summary": 990},
            "nurse": {"title": 40, "requirement_summary": 30},
        },
    )


def test_the_commonest_clauses_wait_while_their_largest_contributions_fit_the_budget():
    stats = statistics()
    most = {
        (name, word): BOOSTS[name] * 2.2 * stats.idf(word, name)
        for name in BOOSTS
        for word in ("experience", "skill", "nurse")
    }
    budget = most[("requirement_summary", "experience")] + most[("requirement_summary", "skill")]
    rare, bound = split_common(["nurse", "experience", "skill"], stats, BOOSTS, budget * 1.0001)
    assert rare == {"title": ["nurse", "experience", "skill"], "requirement_summary": ["nurse"]}
    assert math.isclose(bound, budget)
    # a word twice in the query is two clauses: twice the bound
    _, twice = split_common(["experience", "experience"], stats, BOOSTS, 100.0)
    _, once = split_common(["experience"], stats, BOOSTS, 100.0)
    assert math.isclose(twice, 2 * once)
    # nothing fits: everything stays in the first pass
    rare, bound = split_common(["nurse", "skill"], stats, BOOSTS, 0.0)
    assert bound == 0.0 and rare["requirement_summary"] == ["nurse", "skill"]


def test_a_word_the_index_does_not_know_never_waits():
    stats = statistics()
    assert stats.idf("unheard", "title") == 0.0
    rare, _ = split_common(["unheard"], stats, BOOSTS, 1e9)
    assert rare == {"title": ["unheard"], "requirement_summary": ["unheard"]}


def test_the_first_pass_asks_only_the_rare_words_of_each_field():
    body = first_pass_body({"title": ["nurse"], "requirement_summary": []}, BOOSTS, 300, False)
    assert body["query"]["bool"]["should"] == [
        {
            "match": {
                "title": {
                    "query": "nurse",
                    "boost": 1.5,
                    "auto_generate_synonyms_phrase_query": False,
                }
            }
        }
    ]
    assert body["size"] == 300 and body["docvalue_fields"] == ["job_id"]


def test_the_two_passes_give_the_one_pass_top_k_on_random_scores():
    """Full score = partial + common part <= bound; the exact answer, whenever given, is the
    top k of the full scores by score then id, and ties at the cut are kept whole."""
    rng = np.random.default_rng(7)
    top_k, window = 10, 30
    answered = 0
    for _ in range(500):
        jobs = int(rng.integers(5, 200))
        partial = np.round(rng.exponential(3.0, jobs), 1)  # rounding makes ties
        bound = float(rng.choice([0.0, 0.2, 1.0, 5.0]))
        common = np.round(rng.uniform(0, bound, jobs), 1) if bound else np.zeros(jobs)
        common = np.minimum(common, bound)
        full = partial + common
        ids = rng.permutation(jobs) + 1
        order = sorted(range(jobs), key=lambda i: (-partial[i], ids[i]))
        first = [(int(ids[i]), float(partial[i])) for i in order if partial[i] > 0][:window]
        chosen = set(contenders(first, bound, top_k))
        full_hits = [(int(ids[i]), float(full[i])) for i in range(jobs) if ids[i] in chosen]
        exact = exact_top(full_hits, first, window, bound, top_k)
        truth = sorted(
            ((int(ids[i]), float(full[i])) for i in range(jobs)), key=lambda h: (-h[1], h[0])
        )
        if exact is not None:
            answered += 1
            assert exact == truth[:top_k]
    assert answered > 100


def test_an_answer_that_a_job_outside_the_window_could_beat_is_refused():
    first = [(j, 10.0 - j * 0.01) for j in range(1, 31)]  # a full window of 30
    full = [(j, s + 0.05) for j, s in first[:12]]
    assert exact_top(full, first, 30, 5.0, 10) is None  # outside: up to 9.70 + 5.0
    assert exact_top(full, first, 30, 0.01, 10) is not None
    assert exact_top(full[:5], first[:5], 30, 0.0, 10) is None  # fewer than k answered


def test_the_screen_counts_only_jobs_certainly_above_the_held_out_score_and_stops_at_k():
    body = outscoring_count_body({"match_all": {}}, 6.0, 100)
    assert body["size"] == 0 and body["track_total_hits"] == 100
    # within the float margins, not certainly higher: a tie is never counted
    assert 6.0 < body["min_score"] < 6.0001
    assert outranked({"hits": {"total": {"value": 100, "relation": "gte"}}}, 100)
    assert not outranked({"hits": {"total": {"value": 99, "relation": "eq"}}}, 100)


def test_the_screen_never_skips_a_job_of_the_top_k_on_random_scores():
    """What the node counts (scores at least the count body's `min_score`) reaching k means
    the job is outside the top k, ties at the cut included."""
    rng = np.random.default_rng(11)
    top_k = 10
    decided = 0
    for _ in range(500):
        jobs = int(rng.integers(5, 80))
        scores = np.round(rng.exponential(3.0, jobs), 1)  # rounding makes ties
        ids = rng.permutation(jobs) + 1
        ranked = sorted(
            zip(ids.tolist(), scores.tolist(), strict=True), key=lambda h: (-h[1], h[0])
        )
        top = {job for job, _ in ranked[:top_k]}
        position = int(rng.integers(jobs))
        least = outscoring_count_body({}, float(scores[position]), top_k)["min_score"]
        counted = min(int((scores >= least).sum()), top_k)
        if outranked({"hits": {"total": {"value": counted}}}, top_k):
            decided += 1
            assert int(ids[position]) not in top
    assert decided > 100
