"""The exact WMD equals gensim's `wmdistance` (edge cases included); the bounds bracket it."""

import numpy as np
import pytest
from gensim.models import KeyedVectors

from jobrec_core.text.wmd import (
    INF,
    VectorTable,
    centroid,
    centroid_bounds,
    similarity,
    wmd,
)
from tests.helpers import document, random_pairs


def test_equals_gensim_on_random_pairs(vectors):
    table = VectorTable.from_vectors(vectors.vectors)
    for first, second in random_pairs(300):
        expected = vectors.wmdistance(first, second)
        got = wmd(table, document(vectors, first), document(vectors, second))
        assert got == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ([], ["w1", "w2"]),  # empty document
        (["oov-a", "oov-b"], ["w1"]),  # nothing in the vocabulary
        (["w5"], ["w5", "w5"]),  # one and the same word
        (["w1", "w2", "w3"], ["w1", "w2", "w3"]),  # identical documents
        (["w1", "w2", "w2"], ["w2", "w1", "w1"]),  # same words, other frequencies
    ],
)
def test_edge_cases_as_gensim(vectors, first, second):
    table = VectorTable.from_vectors(vectors.vectors)
    expected = vectors.wmdistance(first, second)
    got = wmd(table, document(vectors, first), document(vectors, second))
    assert got == pytest.approx(expected, abs=1e-6) or (np.isinf(got) and np.isinf(expected))


def test_all_zero_distances_give_inf_as_gensim():
    keyed = KeyedVectors(3)
    keyed.add_vectors(["a", "b"], np.array([[1, 0, 0], [2, 0, 0]], dtype=np.float32))
    expected = keyed.wmdistance(["a"], ["b"])  # same direction: unit vectors coincide
    assert expected == INF
    table = VectorTable.from_vectors(keyed.vectors)
    assert wmd(table, document(keyed, ["a"]), document(keyed, ["b"])) == INF


def test_centroid_bounds_bracket_the_exact_value(vectors):
    table = VectorTable.from_vectors(vectors.vectors)
    pairs = [(document(vectors, a), document(vectors, b)) for a, b in random_pairs(300, seed=11)]
    c1, n1 = zip(*(centroid(table, a) for a, _ in pairs), strict=True)
    c2, n2 = zip(*(centroid(table, b) for _, b in pairs), strict=True)
    low, high = centroid_bounds(np.array(c1), np.array(n1), np.array(c2), np.array(n2))
    exact = np.array([wmd(table, a, b) for a, b in pairs])
    assert np.all(low <= exact) and np.all(exact <= high)
    assert np.mean(high - low) < 1.0  # informative, not vacuous


def test_bounds_of_an_empty_document_are_infinite(vectors):
    table = VectorTable.from_vectors(vectors.vectors)
    empty = centroid(table, document(vectors, []))
    full = centroid(table, document(vectors, ["w1", "w2"]))
    low, high = centroid_bounds(*[np.array([x]) for x in (*empty, *full)])
    assert (low[0], high[0]) == (INF, INF)


def test_similarity_is_gensims_mapping():
    assert similarity(0.0) == 1.0
    assert similarity(1.0) == 0.5
    assert similarity(INF) == 0.0
