"""The compiled transport solver finds the same optimum as POT's network simplex, and the
batched WMD built on it equals gensim's `wmdistance`, edge cases included; Arrow list columns
pack into the same documents."""

import numpy as np
import ot
import pyarrow as pa
import pytest
from gensim.models import KeyedVectors

from jobrec_core.text.transport import transport_cost
from jobrec_core.text.wmd import (
    COMPILED_MAX_CELLS,
    DocumentBatch,
    VectorTable,
    WmdDocument,
    wmd,
    wmd_pairs,
)
from tests.helpers import WORDS, document, random_pairs


def problems(count, seed):
    """Random problems of 1 to 25 sources and sinks, many of them degenerate: equal weights,
    integer costs with ties, zero costs, sources that exactly fill sinks."""
    rng = np.random.default_rng(seed)
    for index in range(count):
        n, m = rng.integers(1, 26, 2)
        if index % 3 == 0:
            supply, demand = np.full(n, 1.0 / n), np.full(m, 1.0 / m)
        else:
            supply, demand = rng.random(n) + 0.01, rng.random(m) + 0.01
            supply, demand = supply / supply.sum(), demand / demand.sum()
        if index % 4 == 0:
            cost = rng.integers(0, 4, (n, m)).astype(np.float64)
        else:
            cost = rng.random((n, m)) * 2
        if index % 5 == 0 and n == m:
            supply = demand.copy()  # every source can fill one sink exactly
        yield supply, demand * (supply.sum() / demand.sum()), cost


def test_same_optimum_as_pots_network_simplex():
    for supply, demand, cost in problems(400, seed=5):
        got = transport_cost(supply, demand, cost)
        assert not np.isnan(got)
        assert got == pytest.approx(ot.emd2(supply, demand, cost), abs=1e-9)


def test_batched_wmd_equals_gensim(vectors):
    pairs = [
        *random_pairs(300, seed=13),
        ([], ["w1", "w2"]),  # empty document: inf
        (["w5"], ["w5", "w5"]),  # one and the same word: 0
        (["w1", "w2", "w3"], ["w1", "w2", "w3"]),  # identical documents
        (["w1", "w2", "w2"], ["w2", "w1", "w1"]),  # same words, other frequencies
        ([WORDS[i] for i in range(60)], [WORDS[i] for i in range(30, 95)]),  # large: POT's
    ]
    assert COMPILED_MAX_CELLS < 60 * 65
    table = VectorTable.from_vectors(vectors.vectors)
    documents = [document(vectors, words) for pair in pairs for words in pair]
    first = np.arange(0, len(documents), 2)
    got = wmd_pairs(table, DocumentBatch.from_documents(documents), first, first + 1)
    one_by_one = [wmd(table, documents[k], documents[k + 1]) for k in first]
    expected = [vectors.wmdistance(a, b) for a, b in pairs]
    assert np.array_equal(np.isinf(got), np.isinf(expected))
    finite = ~np.isinf(got)
    np.testing.assert_allclose(got[finite], np.array(expected)[finite], rtol=0, atol=1e-9)
    np.testing.assert_allclose(got, one_by_one, rtol=0, atol=1e-12)


def test_batched_wmd_keeps_gensims_answer_for_all_zero_distances():
    keyed = KeyedVectors(3)
    keyed.add_vectors(["a", "b"], np.array([[1, 0, 0], [2, 0, 0]], dtype=np.float32))
    table = VectorTable.from_vectors(keyed.vectors)
    documents = [WmdDocument.from_word_ids(np.array([0])), WmdDocument.from_word_ids(np.array([1]))]
    batch = DocumentBatch.from_documents(documents)
    assert wmd_pairs(table, batch, np.array([0]), np.array([1]))[0] == np.inf
    none = DocumentBatch.from_documents([])
    assert wmd_pairs(table, none, np.empty(0, np.int64), np.empty(0, np.int64)).size == 0


def test_arrow_list_columns_pack_into_the_same_documents():
    documents = [WmdDocument.from_word_ids(np.array(ids)) for ids in ([3, 1, 3], [], [2], [5, 4])]
    ids = pa.array([d.ids.astype(np.int32).tolist() for d in documents], pa.list_(pa.int32()))
    weights = pa.array([d.weights.tolist() for d in documents], pa.list_(pa.float64()))
    # A slice, as a record batch of a larger one gives: its offsets do not start at 0.
    packed = DocumentBatch.from_arrow(ids.slice(1), pa.chunked_array([weights.slice(1)]))
    expected = DocumentBatch.from_documents(documents[1:])
    for got, want in zip(
        (packed.ids, packed.weights, packed.offsets),
        (expected.ids, expected.weights, expected.offsets),
        strict=True,
    ):
        np.testing.assert_array_equal(got, want)
    assert [packed.document(k).ids.tolist() for k in range(len(packed))] == [[], [2], [4, 5]]
    both = DocumentBatch.concat(expected, packed)
    assert both.document(4).ids.tolist() == [2] and len(both) == 6
    with pytest.raises(ValueError, match="not as many weights"):
        DocumentBatch.from_arrow(ids, weights.slice(1))
