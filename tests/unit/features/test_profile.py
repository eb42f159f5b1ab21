"""The candidate-profile features as numpy: the interest graph's walks without the
candidate's own row, and the text similarities."""

from __future__ import annotations

import numpy as np
import pandas as pd

from jobrec_core.features.behaviour import BEHAVIOUR_VECTORS
from jobrec_core.features.histograms import Vocabulary
from jobrec_core.features.matching import PROFILE_FEATURES
from jobrec_core.features.occupations import TITLE_OCCUPATION
from jobrec_core.features.profile import (
    COHERENCE_FLOOR,
    PROFILE_ROLE,
    add_profile_features,
    co_interest_scores,
    document_vectors,
    profile_features,
    profile_vector,
    text_similarities,
)


def graph_scores(
    rows: dict[str, list[int]],
    own: list[int],
    pool: list[int],
    sequence: list[int],
    weights: list[float] | None = None,
):
    """`co_interest_scores` on the graph of candidates `rows` (name -> jobs)."""
    links: dict[int, dict[int, int]] = {}
    interested: dict[int, int] = {}
    for jobs in rows.values():
        for a in jobs:
            interested[a] = interested.get(a, 0) + 1
            for b in jobs:
                if a != b:
                    links.setdefault(a, {})
                    links[a][b] = links[a].get(b, 0) + 1

    def adjacency(job: int) -> tuple[np.ndarray, np.ndarray]:
        found = links.get(job, {})
        return np.array(list(found), dtype=np.int64), np.array(list(found.values()), dtype=np.int64)

    own_rows = [adjacency(j) for j in own]
    pool_rows = [adjacency(j) for j in pool]
    return co_interest_scores(
        [n for n, _ in own_rows],
        [c for _, c in own_rows],
        [n for n, _ in pool_rows],
        [c for _, c in pool_rows],
        np.array([interested.get(j, 0) for j in pool]),
        np.array(own),
        np.array(pool),
        np.array(sequence),
        None if weights is None else np.array(weights),
    )


def test_a_held_out_job_is_not_found_through_the_row_it_was_held_out_of():
    # The candidate ("me") held job 3 out; only their own row links 1 and 3.
    rows = {"me": [1, 3], "a": [1, 2], "b": [4, 5]}
    scores = graph_scores(rows, own=[1], pool=[3, 2, 5], sequence=[1, 3])
    assert scores.tolist() == [0.0, 0.0, 0.0]


def test_two_steps_through_other_candidates_count_per_candidate_of_the_pool_job():
    rows = {"me": [1, 3], "a": [1, 2], "b": [2, 3], "c": [3, 9]}
    scores = graph_scores(rows, own=[1], pool=[3, 2], sequence=[1, 3])
    # 1 -a- 2 -b- 3: one walk; 3 interests b and c besides "me"
    assert scores[0] == 0.5
    # 2 is one step from 1, no two-step walk ends there (1 -a- 2 only)
    assert scores[1] == 0.0


def test_recommendations_use_the_whole_row_as_own_jobs():
    rows = {"me": [1, 2], "a": [2, 7], "b": [7, 8]}
    scores = graph_scores(rows, own=[1, 2], pool=[8], sequence=[1, 2])
    # 2 -a- 7 -b- 8, divided by the two own jobs and 8's one candidate
    assert scores.tolist() == [0.5]


def test_text_similarities_rank_the_job_that_shares_the_candidates_words_first():
    words = np.array(["nurse", "patient", "care", "truck", "driver"])
    vectors = np.eye(5, dtype=np.float32)
    vocabulary = Vocabulary(words, vectors, np.ones(5, dtype=np.float32))
    own = [np.array(["nurse", "patient"]), np.array(["nurse", "care"])]
    pool = [np.array(["patient", "care", "nurse"]), np.array(["truck", "driver"]), np.array([])]
    tfidf, w2v, weights = text_similarities(vocabulary, own, pool)
    assert tfidf[0] > 0.5 and tfidf[1] == 0.0 and tfidf[2] == 0.0
    assert weights[0] == weights[1] > 0  # two own jobs as like each other as can be
    # one own job's words exactly: the mean cosine of unit vectors
    same, _, single = text_similarities(vocabulary, own[:1], [own[0]])
    assert np.isclose(same[0], 1.0) and single.tolist() == [1.0]
    assert w2v[0] > w2v[1]
    # the same texts as word ids (what an endpoint holds) give the same features
    as_ids = [[vocabulary.ids(t.astype(object)) for t in texts] for texts in (own, pool)]
    for expected, got in zip(
        (tfidf, w2v, weights), text_similarities(vocabulary, *as_ids), strict=True
    ):
        np.testing.assert_array_equal(expected, got)


def test_an_own_job_unlike_the_others_weighs_less_in_the_profile():
    words = np.array(["nurse", "patient", "care", "truck", "driver"])
    vocabulary = Vocabulary(words, np.eye(5, dtype=np.float32), np.ones(5, dtype=np.float32))
    own = [np.array(["nurse", "patient"]), np.array(["nurse", "care"]), np.array(["truck"])]
    pool = [np.array(["nurse"]), np.array(["truck"])]
    tfidf, _, weights = text_similarities(vocabulary, own, pool)
    # the stray job shares no word with the others: the floor, squared
    assert weights[2] == COHERENCE_FLOOR**2 and weights[0] > 100 * weights[2]
    assert tfidf[0] > 10 * tfidf[1]  # a plain mean would give "truck" a third of the profile


def test_co_interest_weighs_each_own_jobs_walks():
    rows = {"me": [1, 2, 3], "a": [1, 7], "b": [2, 8], "c": [7, 5], "d": [8, 5]}
    # 1 -a- 7 -c- 5 and 2 -b- 8 -d- 5: one walk from each own job, over 5's two candidates
    assert graph_scores(rows, [1, 2], [5], [1, 2, 3]).tolist() == [0.5]
    weighted = graph_scores(rows, [1, 2], [5], [1, 2, 3], weights=[3.0, 1.0])
    assert weighted.tolist() == [0.5]  # one walk from each: the weighted mean is the same
    del rows["d"]  # now 5 is reached from 1 alone
    assert graph_scores(rows, [1, 2], [5], [1, 2, 3]).tolist() == [0.5]
    weighted = graph_scores(rows, [1, 2], [5], [1, 2, 3], weights=[3.0, 1.0])
    assert weighted.tolist() == [0.75]


def test_own_jobs_without_a_link_reach_nothing():
    # a request of one job nobody else was interested in (an online request can be that)
    rows = {"me": [1], "a": [2, 3]}
    assert graph_scores(rows, own=[1], pool=[2, 3], sequence=[1]).tolist() == [0.0, 0.0]


def test_dense_vectors_give_profile_w2v_as_their_cosine():
    """The index's job vector and the candidate's query vector: their cosine, what the kNN
    search ranks by, is the `profile_w2v` feature the re-rankers read."""
    rng = np.random.default_rng(3)
    words = np.array(["nurse", "patient", "care", "truck", "driver", "ward"])
    vectors = rng.normal(size=(6, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vocabulary = Vocabulary(words, vectors, rng.uniform(1, 3, 6).astype(np.float32))
    own = [np.array(["nurse", "patient", "ward"]), np.array(["nurse", "care"]), np.array(["truck"])]
    pool = [np.array(["patient", "care", "nurse"]), np.array(["truck", "driver"]), np.array([])]
    _, w2v, _ = text_similarities(vocabulary, own, pool)
    query = profile_vector(vocabulary, own)
    documents = document_vectors(vocabulary, pool)
    assert documents.dtype == np.float32 and query.dtype == np.float32
    assert np.isclose(np.linalg.norm(query), 1.0)
    assert np.allclose(np.linalg.norm(documents[:2], axis=1), 1.0)
    assert not documents[2].any()  # no word, no vector (stored as null, never indexed)
    np.testing.assert_allclose(documents[:2] @ query, w2v[:2], atol=1e-5)
    # the query does not depend on the order of the candidate's jobs
    np.testing.assert_allclose(profile_vector(vocabulary, own[::-1]), query, atol=1e-6)
    assert not profile_vector(vocabulary, []).any()


def dense_text_reference(vocabulary: Vocabulary, own: list[np.ndarray], pool: list[np.ndarray]):
    """The text features from their definitions, one dense vector per text over the whole
    vocabulary: what the compiled sparse rows must equal."""

    def unit_tfidf(text: np.ndarray) -> np.ndarray:
        row = np.zeros(len(vocabulary.words))
        words, counts = np.unique(vocabulary.ids(text), return_counts=True)
        known = words >= 0  # a word outside the vocabulary has no IDF: weight 0
        row[words[known]] = (1 + np.log(counts[known])) * vocabulary.idf[words[known]]
        norm = np.linalg.norm(row)
        return row / norm if norm else row

    own_rows = np.array([unit_tfidf(t) for t in own])
    pool_rows = np.array([unit_tfidf(t) for t in pool])
    cosines = own_rows @ own_rows.T
    np.fill_diagonal(cosines, 0.0)
    weights = (
        np.clip(cosines.sum(axis=1) / (len(own) - 1), COHERENCE_FLOOR, None) ** 2
        if len(own) > 1
        else np.ones(len(own))
    )
    profile = weights @ own_rows / weights.sum()
    vectors = vocabulary.vectors.astype(np.float64)
    centroids, centroid = pool_rows @ vectors, profile @ vectors
    norms = np.linalg.norm(centroids, axis=1) * np.linalg.norm(centroid)
    return pool_rows @ profile, centroids @ centroid / np.maximum(norms, 1e-12), weights


def test_text_similarities_equal_their_dense_definition():
    rng = np.random.default_rng(8)
    words = np.array([f"w{i:02d}" for i in range(40)])
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vocabulary = Vocabulary(words, vectors, rng.uniform(0.5, 6, 40).astype(np.float32))
    known = [*words[rng.integers(0, 40, 5)]]

    def text(length: int) -> np.ndarray:  # repeated words, and a word outside the vocabulary
        return np.array([*rng.choice([*known, *words], length), *(["unseen"] * (length % 3))])

    for own_count in (1, 2, 5):
        own = [text(n) for n in rng.integers(1, 30, own_count)]
        pool = [text(n) for n in rng.integers(0, 30, 12)]
        for got, expected in zip(
            text_similarities(vocabulary, own, pool),
            dense_text_reference(vocabulary, own, pool),
            strict=True,
        ):
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
        _, w2v, _ = text_similarities(vocabulary, own, pool)
        cosines = document_vectors(vocabulary, pool) @ profile_vector(vocabulary, own)
        np.testing.assert_allclose(cosines, w2v, atol=1e-5)


def test_co_interest_equals_the_dense_graph_walk():
    """`co_interest_scores` visits only the graph's links; the definition subtracts the
    candidate's row from a dense matrix of all links, then walks: the same scores."""
    rng = np.random.default_rng(4)
    for _ in range(50):
        jobs = 30
        links = rng.integers(0, 3, (jobs, jobs)) * (rng.random((jobs, jobs)) < 0.2)
        np.fill_diagonal(links, 0)
        links = links + links.T
        own = rng.choice(jobs, rng.integers(1, 5), replace=False)
        pool = rng.choice(jobs, rng.integers(1, 20), replace=False)
        sequence = np.unique([*own[: rng.integers(0, len(own) + 1)], *rng.choice(jobs, 3)])
        interested = rng.integers(0, 6, len(pool))
        weights = rng.uniform(0.1, 1, len(own))

        found = [np.flatnonzero(links[job]) for job in range(jobs)]
        got = co_interest_scores(
            [found[j] for j in own],
            [links[j, found[j]] for j in own],
            [found[j] for j in pool],
            [links[j, found[j]] for j in pool],
            interested,
            own,
            pool,
            sequence,
            weights,
        )
        row = np.zeros(jobs, dtype=bool)
        row[sequence] = True
        without = links - np.outer(row, row)  # the row shared each pair of its jobs once
        np.fill_diagonal(without, 0)
        reach = np.clip(weights @ without[own], 0, None)
        walks = np.clip(without[pool], 0, None) @ reach
        expected = walks / np.maximum(interested - row[pool], 1) / weights.sum()
        np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-6)


def test_a_repeated_link_counts_as_one_link_of_the_summed_candidates():
    """A pool job's neighbour listed twice is one link: its counts are summed before the
    candidate's own row is taken off, as the graph table would hold it."""

    def scores(pool_neighbours: list[np.ndarray], pool_counts: list[np.ndarray]) -> np.ndarray:
        return co_interest_scores(
            [np.array([2, 3])],
            [np.array([2, 1])],
            pool_neighbours,
            pool_counts,
            np.array([3, 1]),
            np.array([1]),
            np.array([7, 8]),
            np.array([1, 2, 7]),
        )

    repeated = scores([np.array([2, 2, 3]), np.array([3])], [np.array([1, 2, 1]), np.array([1])])
    summed = scores([np.array([2, 3]), np.array([3])], [np.array([3, 1]), np.array([1])])
    np.testing.assert_array_equal(repeated, summed)
    assert repeated[0] > 0


def test_profile_rows_add_each_candidates_own_jobs_once_with_text_and_graph_rows():
    import pandas as pd

    from jobrec_core.features.profile import PROFILE_ROLE, own_jobs_of, profile_rows_of

    pool = pd.DataFrame(
        {
            "candidate_id": [1, 1, 2],
            "query_terms": [["a"], ["a"], ["b"]],
            "job_id": [10, 11, 12],
            "own_job_ids": [[3, 4, 3, None, 9], [3, 4, 3, None, 9], None],
            "doc_tokens": [["x"], ["y"], ["z"]],
        }
    )
    tokens = pd.DataFrame(
        {"job_id": [3, 4, 10, 11, 12], "doc_tokens": [["o"], ["p"], *[["-"]] * 3]}
    )
    graph = pd.DataFrame(
        {"job_id": [4, 10], "neighbours": [[10], [4]], "counts": [[1], [1]], "interested": [2, 3]}
    )
    rows = profile_rows_of(pool, tokens, graph, ["query_terms"])
    own = rows[rows[PROFILE_ROLE] == "own"]
    # each own job once, in the candidate's order; 9 has no text and candidate 2 no own jobs
    assert own["job_id"].tolist() == [3, 4]
    assert own["candidate_id"].tolist() == [1, 1]
    assert own["doc_tokens"].tolist() == [["o"], ["p"]]
    assert own["query_terms"].tolist() == [["a"], ["a"]]
    assert rows[rows[PROFILE_ROLE] == "pool"]["job_id"].tolist() == [10, 11, 12]
    # the graph's columns as a left merge gives them: missing where a job has no row
    interested = rows.set_index("job_id")["interested"]
    assert interested.fillna(-1).to_dict() == {10: 3, 11: -1, 12: -1, 3: -1, 4: 2}
    # the own jobs a caller gathered already (every one, with a text or not) give the same
    own_jobs = own_jobs_of(pool, ["query_terms"])
    assert own_jobs["job_id"].tolist() == [3, 4, 9]
    pd.testing.assert_frame_equal(profile_rows_of(pool, tokens, graph, own=own_jobs), rows)


def test_co_interest_refuses_neighbours_without_their_counts():
    import pytest

    with pytest.raises(ValueError, match="one count each"):
        co_interest_scores(
            [np.array([2, 3])],
            [np.array([1])],
            [np.array([2])],
            [np.array([1])],
            np.array([1]),
            np.array([1]),
            np.array([7]),
            np.array([1]),
        )


def test_a_further_training_list_reads_its_candidates_behaviour_fold_not_its_ids():
    import pandas as pd

    from jobrec_core.features.behaviour import FOLD_OWNER
    from jobrec_core.features.profile import PROFILE_ROLE, _fold_owner

    # a list keyed by its own id (987654321), its own row carrying no owner (Spark's nulls)
    group = pd.DataFrame(
        {
            "candidate_id": [987654321] * 3,
            PROFILE_ROLE: ["own", "pool", "pool"],
            FOLD_OWNER: [np.nan, 42.0, 42.0],
        }
    )
    pool = group[PROFILE_ROLE].to_numpy() == "pool"
    owner = _fold_owner(group, pool)
    assert owner.tolist() == [42] and owner.dtype == np.int64
    # a candidate's own query has no owner column: its id is its fold's key
    assert _fold_owner(group.drop(columns=[FOLD_OWNER]), pool).tolist() == [987654321]


def test_a_subset_of_the_profile_features_is_the_same_floats_as_the_whole():
    """Serving one model computes only the profile features it reads (`wanted`); each is the
    same as when all are computed, and the others are absent."""
    words = np.array(["nurse", "patient", "care", "truck", "driver"])
    vocabulary = Vocabulary(words, np.eye(5, dtype=np.float32), np.ones(5, dtype=np.float32))
    rng = np.random.default_rng(3)
    texts = [["nurse", "patient"], ["nurse", "care"], ["patient", "care"], ["truck", "driver"]]
    rows = pd.DataFrame(
        {
            "candidate_id": [1, 1, 1, 1],
            PROFILE_ROLE: ["own", "own", "pool", "pool"],
            "job_id": [10, 11, 12, 13],
            "doc_tokens": [np.array(t, dtype=object) for t in texts],
            "neighbours": [np.array([12]), np.array([12, 13]), np.array([10]), None],
            "counts": [np.array([2]), np.array([1, 1]), np.array([2]), None],
            "interested": [3, 2, 2, 1],
            "sequence_job_ids": [None, None, np.array([10, 11]), np.array([10, 11])],
            BEHAVIOUR_VECTORS: [rng.standard_normal(8).astype(np.float32) for _ in texts],
            TITLE_OCCUPATION: ["29-1141.00", "29-1141.00", "29-1141.00", "53-3032.00"],
        }
    )
    whole = profile_features(rows, vocabulary)
    assert list(whole) == list(PROFILE_FEATURES)
    for wanted in (("profile_tfidf",), ("profile_w2v", "co_interest", "occupation_agreement")):
        part = profile_features(rows, vocabulary, wanted)
        assert list(part) == list(wanted)
        for name in wanted:
            np.testing.assert_array_equal(part[name], whole[name])
    added = add_profile_features(rows, vocabulary, ("co_interest",))
    assert "profile_behaviour" not in added and added["co_interest"].tolist() == list(
        whole["co_interest"].astype(np.float32)
    )
