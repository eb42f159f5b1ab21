"""Matching histograms against a direct computation, word by word, as MatchZoo does it."""

import numpy as np
import pytest

from jobrec_core.features.histograms import (
    Vocabulary,
    histogram_counts,
    shared_words,
)
from jobrec_core.features.matching import document_features, query_features
from jobrec_scoring.inputs import transform
from tests.helpers import BINS, reference_histogram


@pytest.fixture(scope="module")
def vocabulary():
    rng = np.random.default_rng(3)
    words = np.array([f"w{i:03d}" for i in range(200)])
    vectors = rng.normal(size=(200, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[7] = 0.0  # a word without a word2vec vector
    idf = rng.uniform(0.5, 9.0, size=200)
    return Vocabulary(words, vectors, idf)


def test_batched_histograms_equal_the_direct_computation(vocabulary):
    rng = np.random.default_rng(11)
    query_words = [f"w{i:03d}" for i in (3, 7, 42, 42, 150, 199)] + ["unseen"]
    documents = [
        [f"w{i:03d}" for i in rng.integers(0, 200, size=n)] + ["unseen"] * (n % 2)
        for n in (1, 17, 60, 3, 120)
    ]
    query_ids = vocabulary.ids(query_words)
    doc_ids = [vocabulary.ids(d) for d in documents]
    counts = histogram_counts(
        vocabulary.unit_vectors(query_ids),
        query_ids,
        vocabulary.unit_vectors(np.concatenate(doc_ids)),
        np.concatenate(doc_ids),
        np.array([len(d) for d in documents]),
        BINS,
    )
    assert counts.shape == (len(documents), len(query_words), BINS + 1)
    for k, words in enumerate(documents):
        expected = reference_histogram(
            vocabulary.unit_vectors(query_ids),
            query_words,
            vocabulary.unit_vectors(vocabulary.ids(words)),
            words,
        )
        np.testing.assert_array_equal(counts[k], expected)
        assert (counts[k].sum(axis=1) == len(words)).all()
    distinct, word_of = np.unique(np.concatenate(doc_ids), return_inverse=True)
    by_distinct_word = histogram_counts(
        vocabulary.unit_vectors(query_ids),
        query_ids,
        vocabulary.unit_vectors(distinct),
        distinct,
        np.array([len(d) for d in documents]),
        BINS,
        word_of=word_of,
    )
    np.testing.assert_array_equal(by_distinct_word, counts)


def test_exact_matches_get_their_own_bin_despite_float32_rounding(vocabulary):
    ids = vocabulary.ids(["w010", "w011"])
    vectors = vocabulary.unit_vectors(ids)
    counts = histogram_counts(vectors[:1], ids[:1], vectors, ids, np.array([2]), BINS)
    assert counts[0, 0, BINS] == 1
    assert counts[0, 0, :BINS].sum() == 1


def test_bin_positions():
    query = np.array([[1.0, 0.0]])
    docs = np.array([[-1.0, 0.0], [0.0, 1.0], [0.999, 0.0447]])
    counts = histogram_counts(query, np.array([0]), docs, np.array([1, 2, 3]), np.array([3]), 30)
    assert counts[0, 0, 0] == 1  # opposite
    assert counts[0, 0, 15] == 1  # orthogonal: the middle
    assert counts[0, 0, 29] == 1  # nearly identical, not the same word
    assert counts[0, 0, 30] == 0


def test_empty_documents_and_queries():
    vectors = np.eye(3)
    empty = histogram_counts(vectors, np.arange(3), np.zeros((0, 3)), np.zeros(0), np.array([0]), 4)
    assert empty.shape == (1, 3, 5) and empty.sum() == 0
    no_terms = histogram_counts(
        np.zeros((0, 3)), np.zeros(0), vectors, np.arange(3), np.array([3]), 4
    )
    assert no_terms.shape == (1, 0, 5)


def test_bins_must_fit_the_compiled_table():
    vectors = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError, match="1 to 255 bins"):
        histogram_counts(vectors, np.arange(3), vectors, np.arange(3), np.array([3]), 256)


def test_variants_are_derived_from_counts():
    counts = np.array([[[0, 2, 1]], [[4, 0, 0]]])
    lengths = np.array([3, 4])
    np.testing.assert_allclose(transform(counts, lengths, "ch"), counts)
    expected_nh = np.array([[[0, 2 / 3, 1 / 3]], [[1, 0, 0]]])
    np.testing.assert_allclose(transform(counts, lengths, "nh"), expected_nh)
    np.testing.assert_allclose(transform(counts, lengths, "lch"), np.log1p(counts), rtol=1e-6)


def test_shared_unigrams_and_bigrams_per_document():
    query = np.array([1, 2, 3, 4])  # bigrams 12 23 34
    first = [9, 1, 2, 3, 2, 3, 7, 4]  # bigrams 91 12 23 32 23 37 74
    documents = np.array([*first, 3, 4, 1])  # then [3] and [4, 1]: "3 4" only across a boundary
    lengths = np.array([8, 1, 2, 0])  # and an empty fourth
    assert shared_words(query, documents, lengths)[0].tolist() == [4, 1, 2, 0]
    assert shared_words(query, documents, lengths)[1].tolist() == [2, 0, 0, 0]  # 12 and 23 once
    assert shared_words(np.array([5]), documents, lengths)[1].tolist() == [0, 0, 0, 0]


def test_shared_counts_equal_a_per_document_reference():
    rng = np.random.default_rng(5)
    query = rng.integers(-3, 20, 12)  # negative ids: words outside the vocabulary
    lengths = rng.integers(0, 30, 50)
    documents = rng.integers(-3, 20, lengths.sum())
    parts = np.split(documents, np.cumsum(lengths)[:-1])

    def bigrams(ids: np.ndarray) -> set[tuple[int, int]]:
        return set(zip(ids[:-1].tolist(), ids[1:].tolist(), strict=True))

    assert shared_words(query, documents, lengths)[0].tolist() == [
        len(set(query.tolist()) & set(p.tolist())) for p in parts
    ]
    assert shared_words(query, documents, lengths)[1].tolist() == [
        len(bigrams(query) & bigrams(p)) for p in parts
    ]


def test_vocabulary_lookups(vocabulary):
    ids = vocabulary.ids(["w002", "never-seen", "w000", "never-seen"])
    assert ids[0] >= 0 and ids[2] >= 0
    assert ids[1] < 0 and ids[1] == ids[3]  # consistent, so an unknown word matches itself
    assert vocabulary.ids(["never-seen"])[0] == ids[1]
    assert vocabulary.words[ids[0]] == "w002"
    assert not vocabulary.unit_vectors(ids)[1].any()
    assert vocabulary.idf_of(ids)[1] == 0.0
    assert vocabulary.ids([]).size == 0


def test_lead_histograms_count_the_lead_terms_alone(vocabulary):
    """DRMM-fields: `lead_hist` is the histogram of a document's first `lead_len` terms (its
    title), `hist` still that of the whole document, however long the lead."""
    rng = np.random.default_rng(5)
    query_words = [f"w{i:03d}" for i in (3, 7, 42, 150)]
    documents = [[f"w{i:03d}" for i in rng.integers(0, 200, size=n)] for n in (0, 4, 30, 9)]
    leads = [0, 4, 6, 20]  # none, all of it, a part, more than the document holds
    features = document_features(
        vocabulary, query_features(vocabulary, query_words), documents, BINS, leads
    )
    unit = vocabulary.unit_vectors(vocabulary.ids(query_words))
    for words, lead, hist, lead_hist in zip(
        documents, leads, features["hist"], features["lead_hist"], strict=True
    ):
        for text, stored in ((words, hist), (words[:lead], lead_hist)):
            expected = reference_histogram(
                unit, query_words, vocabulary.unit_vectors(vocabulary.ids(text)), text
            )
            np.testing.assert_array_equal(stored.reshape(len(query_words), BINS + 1), expected)
    # without lead lengths (no `histograms.lead_fields`): the same `hist`, no `lead_hist`
    plain = document_features(vocabulary, query_features(vocabulary, query_words), documents, BINS)
    for whole, alone, lead_hist in zip(
        features["hist"], plain["hist"], plain["lead_hist"], strict=True
    ):
        np.testing.assert_array_equal(whole, alone)
        assert lead_hist.size == 0


def test_long_queries_count_as_short_ones(vocabulary):
    """Past 1,057 terms (30 bins) a term's counter offsets no longer fit the int16 table:
    the counts still equal the direct computation."""
    rng = np.random.default_rng(8)
    query_ids = rng.integers(0, 200, 1100)
    documents = [rng.integers(0, 200, n) for n in (5, 0, 40)]
    doc_ids = np.concatenate(documents)
    query_vectors = vocabulary.unit_vectors(query_ids)
    counts = histogram_counts(
        query_vectors,
        query_ids,
        vocabulary.unit_vectors(doc_ids),
        doc_ids,
        np.array([len(d) for d in documents]),
        BINS,
    )
    assert counts.shape == (3, 1100, BINS + 1) and counts.dtype == np.int32
    for k, ids in enumerate(documents):
        for term in (0, 700, 1099):
            one = slice(term, term + 1)
            expected = reference_histogram(
                query_vectors[one], query_ids[one], vocabulary.unit_vectors(ids), ids
            )
            np.testing.assert_array_equal(counts[k, one], expected)


def test_documents_as_arrays_or_lists_have_the_same_features(vocabulary):
    """A pool's `doc_tokens` from Arrow are object arrays, a test's are lists."""
    rng = np.random.default_rng(9)
    query = query_features(vocabulary, [f"w{i:03d}" for i in rng.integers(0, 200, 12)])
    lists = [[f"w{i:03d}" for i in rng.integers(0, 200, n)] for n in (3, 0, 25, 7)]
    arrays = [np.array(words, dtype=object) for words in lists]
    for leads in (None, [1, 0, 30, 2]):
        expected = document_features(vocabulary, query, lists, BINS, leads)
        got = document_features(vocabulary, query, arrays, BINS, leads)
        assert expected.keys() == got.keys()
        for name, values in expected.items():
            for one, other in zip(values, got[name], strict=True):
                np.testing.assert_array_equal(one, other)
    assert len(document_features(vocabulary, query, [], BINS)["hist"]) == 0


def test_documents_as_word_ids_have_the_features_of_their_words(vocabulary):
    """An endpoint holds each job's words as ids (`DOC_IDS`), looked up once: the features
    must be those of the words, unknown words included."""
    rng = np.random.default_rng(4)
    query = query_features(vocabulary, [f"w{i:03d}" for i in rng.integers(0, 200, 12)])
    texts = [[f"w{i:03d}" for i in rng.integers(0, 200, n)] for n in (3, 0, 25, 7)]
    texts[2].append("never-seen")
    ids = [vocabulary.ids(text) for text in texts]
    assert ids[2][-1] < 0 and all(i.dtype == np.int64 for i in ids)
    for leads in (None, [1, 0, 30, 2]):
        expected = document_features(vocabulary, query, texts, BINS, leads)
        got = document_features(vocabulary, query, ids, BINS, leads)
        for name, values in expected.items():
            for one, other in zip(values, got[name], strict=True):
                np.testing.assert_array_equal(one, other)
