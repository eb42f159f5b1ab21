"""DRMM matching histograms and the pair features, vectorised with numpy (paper §5.1, §6).

For one query and any number of documents, :func:`histogram_counts` computes every cosine
similarity between the query's term vectors and all the documents' term vectors in one BLAS
product, bins them, and counts with one scatter-add (`np.add.at`): no Python loop over
words or bins.

Binning (`bins` = `histograms.bins`, 30): [-1, 1) is split into `bins` equal bins, bin
`floor((cos + 1) / 2 * bins)`; a similarity of 1 that is not an exact match (two different
words with the same vector) falls in the last of them. One more bin, index `bins`, counts the
exact matches: document terms that *are* the query term. Deciding exact matches by the term,
not by `cos == 1.0`, keeps them exact under float rounding (a word's cosine with itself is
0.99999994 in float32).

Terms are integers: their row in the vocabulary of the IDF table (every word of every job).
Words without a word2vec vector (rarer than `embeddings.min_count`) have a zero vector, so
their similarity to any other word is 0 (the middle bin); their exact matches still count.

Only the counts (CH) are stored, as small integers. The variants are derived on read
(:func:`jobrec_scoring.inputs.transform`): NH = CH / document length, LCH = ln(1 + CH).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from itertools import chain

import numpy as np
import pandas as pd


def histogram_counts(
    query_vectors: np.ndarray,
    query_ids: np.ndarray,
    doc_vectors: np.ndarray,
    doc_ids: np.ndarray,
    doc_lengths: np.ndarray,
    bins: int,
    word_of: np.ndarray | None = None,
) -> np.ndarray:
    """Count histograms, shape (documents, query terms, bins + 1).

    `doc_vectors`/`doc_ids` are the documents' terms one after another, `doc_lengths` how many
    belong to each document. Vectors are unit length (rows of zeros for unknown words). With
    `word_of`, `doc_vectors`/`doc_ids` are the distinct words and `word_of` gives each
    document term's row: the product and the binning then run once per distinct word (a
    query's 100 jobs share most of their words).
    """
    documents = len(doc_lengths)
    terms = len(query_ids)
    width = bins + 1
    if documents == 0 or terms == 0:
        return np.zeros((documents, terms, width), dtype=np.int32)
    cosines = query_vectors @ doc_vectors.T  # (terms, all document terms)
    # cos >= -1 up to rounding, so truncation is the floor; int32 halves the memory traffic.
    slots = ((cosines + 1.0) * (bins / 2.0)).astype(np.int32)
    np.clip(slots, 0, bins - 1, out=slots)
    matched = np.flatnonzero(np.isin(doc_ids, query_ids))  # exact matches: only these columns
    if matched.size:
        columns = slots[:, matched]
        columns[query_ids[:, None] == doc_ids[None, matched]] = bins
        slots[:, matched] = columns
    # Each (document, distinct word) pair adds its number of occurrences to one counter per
    # query term, at index (document, term, slot) of the result. The part that depends on
    # the word alone, term * width + slot, is a table with a row per distinct word; a pair's
    # row of indices is one gather of a contiguous row, and its document's offset is added
    # to the whole row. Counting pairs rather than every occurrence (a job repeats about a
    # third of its words) halves the time on the demo's pools.
    slots += (np.arange(terms, dtype=np.int32) * width)[:, None]
    size = documents * terms * width
    index = np.int32 if size <= np.iinfo(np.int32).max else np.int64
    table = slots.T.astype(index, order="C")  # (distinct words, terms)
    stride = max(len(doc_ids), 1)
    word = np.arange(len(doc_ids)) if word_of is None else word_of
    document = np.repeat(np.arange(documents, dtype=np.int64), doc_lengths)
    pairs, occurrences = np.unique(document * stride + word, return_counts=True)
    pair_document, pair_word = np.divmod(pairs, stride)
    keys = table[pair_word]
    keys += (pair_document * (terms * width)).astype(index)[:, None]
    counts = np.zeros(size, dtype=np.int32)
    # `np.add.at` (numpy >= 1.25's fast path: the counters' own type for the increment) takes
    # about 60% of `np.bincount`'s time here, which first scans its input for the minimum
    # and maximum and counts in float64 with weights.
    np.add.at(counts, keys.ravel(), np.repeat(occurrences.astype(np.int32), terms))
    return counts.reshape(documents, terms, width)


def shared_words(
    query_ids: np.ndarray, doc_ids: np.ndarray, doc_lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per document (documents' ids one after another, `doc_lengths` each), the distinct
    words it shares with the query, and the distinct pairs of adjacent words it shares with it
    (pairs across two documents' boundary do not count): both from one pass that finds the
    documents' query words."""
    ids = np.asarray(doc_ids)
    query = np.asarray(query_ids)
    documents = len(doc_lengths)
    document_of = _document_of(doc_lengths)
    member = np.isin(ids, query)
    unigrams = _distinct_per_document(np.unique(query), ids[member], document_of[member], documents)
    # Both words of a shared pair are query words: only such pairs are coded and compared
    # (a few of a document's), instead of every adjacent pair.
    starts = np.flatnonzero(member[:-1] & member[1:] & (document_of[:-1] == document_of[1:]))
    codes = _bigram_codes(ids[starts], ids[starts + 1])
    vocabulary = np.unique(_bigram_codes(query[:-1], query[1:]))
    shared = np.isin(codes, vocabulary)
    bigrams = _distinct_per_document(
        vocabulary, codes[shared], document_of[starts[shared]], documents
    )
    return unigrams, bigrams


def _document_of(doc_lengths: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(doc_lengths), dtype=np.int64), doc_lengths)


def _distinct_per_document(
    vocabulary: np.ndarray, values: np.ndarray, document_of: np.ndarray, documents: int
) -> np.ndarray:
    """Per document, how many distinct members of the sorted `vocabulary` (the query's: a
    few hundred at most) its `values` (all members) hold: marked in a documents x vocabulary
    table, not sorted."""
    present = np.zeros((documents, vocabulary.size), dtype=bool)
    present[document_of, np.searchsorted(vocabulary, values)] = True
    return present.sum(axis=1)


def _bigram_codes(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Adjacent word pairs as one int64 each: the first id shifted up by 32 bits, the second
    id's low 32 bits below it."""
    return (first.astype(np.int64) << 32) | (second.astype(np.int64) & 0xFFFFFFFF)


# A job's words as vocabulary ids: a column of the job table an endpoint holds in memory, looked
# up once when it starts instead of in every request (`Vocabulary.text_ids`).
DOC_IDS = "doc_ids"


class Vocabulary:
    """Words -> integer ids, with their unit vectors and IDF, for lookups without loops.

    Built once per executor from the IDF table (all words of the jobs) and the word2vec
    vectors; `ids` maps an array of words with one vectorised hash lookup.
    """

    def __init__(self, words: np.ndarray, vectors: np.ndarray, idf: np.ndarray) -> None:
        order = np.argsort(words)
        self.words = words[order]
        self.vectors = vectors[order]
        self.idf = idf[order]
        self._index = pd.Index(self.words.astype(object))

    def ids(self, words: np.ndarray | list[str]) -> np.ndarray:
        """Ids of `words`. A word outside the vocabulary (only if the IDF table is older than
        the jobs) gets a negative id derived from the word: no vector, but still an exact
        match of itself."""
        array = np.asarray(words, dtype=object)
        if array.size == 0:
            return np.zeros(0, dtype=np.int64)
        ids = self._index.get_indexer(array).astype(np.int64)  # one hash lookup per word, in C
        for position in np.flatnonzero(ids < 0):  # rare: stale IDF table
            ids[position] = -1 - zlib.crc32(str(array[position]).encode("utf-8"))
        return ids

    def text_ids(self, texts: Sequence[Sequence[str] | np.ndarray]) -> np.ndarray:
        """The ids of the texts' words, one text after another. Texts given as integer arrays
        are ids already (`DOC_IDS`, looked up once when serving starts) and are joined as
        they are: the lookup of a request's 12,700 words costs about 1 ms."""
        given_ids = [isinstance(t, np.ndarray) and t.dtype.kind in "iu" for t in texts]
        if any(given_ids):
            if not all(given_ids):
                raise ValueError("texts mix word ids and words: give one kind")
            return np.concatenate(texts).astype(np.int64, copy=False)
        if len(texts) and all(isinstance(t, np.ndarray) for t in texts):
            return self.ids(np.concatenate(texts, dtype=object))
        total = sum(len(t) for t in texts)
        return self.ids(np.fromiter(chain.from_iterable(texts), dtype=object, count=total))

    def distinct(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct ids, sorted; each id's position among them): `np.unique` with
        `return_inverse`, by marking a vocabulary-sized table instead of sorting while the
        vocabulary is at most a few times the ids: for a request's 12,700 words, 56 us
        against the sort's 130 with the demo's 45,000 words, but 1.25 ms with 200,000."""
        if (ids.size and ids.min() < 0) or len(self.words) > 4 * ids.size:  # sort after all
            distinct, positions = np.unique(ids, return_inverse=True)
            return distinct, positions.ravel()
        present = np.zeros(len(self.words), dtype=bool)
        present[ids] = True
        distinct = np.flatnonzero(present)
        rank = np.cumsum(present) - 1
        return distinct, rank[ids]

    def unit_vectors(self, ids: np.ndarray) -> np.ndarray:
        """Vectors of `ids`; zeros for unknown words."""
        vectors = np.take(self.vectors, np.maximum(ids, 0), axis=0)  # `take`: 2/3 of `[]`'s time
        vectors[ids < 0] = 0.0
        return vectors

    def idf_of(self, ids: np.ndarray) -> np.ndarray:
        values = self.idf[np.maximum(ids, 0)].astype(np.float32)
        values[ids < 0] = 0.0
        return values
