"""DRMM matching histograms and the pair features, vectorised with numpy (paper §5.1, §6).

For one query and any number of documents, :func:`histogram_counts` computes every cosine
similarity between the query's term vectors and all the documents' distinct words in one BLAS
product, then bins and counts them in one numba-compiled pass (`_count_bins`): no Python
loop over words or bins.

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
from operator import attrgetter

import numpy as np
import pandas as pd
from numba import njit


def histogram_counts(
    query_vectors: np.ndarray,
    query_ids: np.ndarray,
    doc_vectors: np.ndarray,
    doc_ids: np.ndarray,
    doc_lengths: np.ndarray,
    bins: int,
    word_of: np.ndarray | None = None,
    dtype: type = np.int32,
) -> np.ndarray:
    """Count histograms, shape (documents, query terms, bins + 1), as `dtype`: int16, the
    stored type, holds any document of up to 32,767 terms (a count is at most its document's
    length) in half the memory; a longer one is refused.

    `doc_vectors`/`doc_ids` are the documents' terms one after another, `doc_lengths` how many
    belong to each document. Vectors are unit length (rows of zeros for unknown words). With
    `word_of`, `doc_vectors`/`doc_ids` are the distinct words and `word_of` gives each
    document term's row: the product and the binning then run once per distinct word (a
    query's 100 jobs share most of their words).
    """
    documents = len(doc_lengths)
    terms = len(query_ids)
    if not 0 < bins < 256:
        raise ValueError(f"histograms need 1 to 255 bins, not {bins}")
    counts: np.ndarray = np.zeros((documents, terms, bins + 1), dtype=dtype)
    lengths = np.asarray(doc_lengths, dtype=np.int64)
    if lengths.size and lengths.max() > np.iinfo(counts.dtype).max:
        raise ValueError(f"a document of {lengths.max()} terms overflows {counts.dtype}")
    if documents == 0 or terms == 0:
        return counts
    # (all document terms, terms): one BLAS product, a word's cosines side by side for
    # `_count_bins` to read and write in order
    cosines = doc_vectors @ query_vectors.T
    word = np.arange(len(doc_ids)) if word_of is None else word_of
    return _count_bins(
        np.ascontiguousarray(cosines, dtype=np.float32),
        np.asarray(query_ids, dtype=np.int64),
        np.asarray(doc_ids, dtype=np.int64),
        np.asarray(word, dtype=np.int64),
        lengths,
        bins,
        counts,
    )


@njit(cache=True, nogil=True)
def _count_bins(
    cosines: np.ndarray,
    query_ids: np.ndarray,
    word_ids: np.ndarray,
    word_of: np.ndarray,
    doc_lengths: np.ndarray,
    bins: int,
    counts: np.ndarray,
) -> np.ndarray:
    """The counting behind :func:`histogram_counts`, compiled: first every (word, query
    term)'s bin, then each document's words counted once with their occurrences (a job repeats
    about a third of its words), each adding its occurrences to one counter per query term
    of `counts` (zeros, of the caller's type). In numpy the same counting needs a sort for
    the (document, word) pairs, a gather of their bins and a scatter-add: 1.4 ms of a
    100-job request, against about 0.45 here."""
    words, terms = cosines.shape
    # float32 arithmetic, as numpy's `((cos + 1) * (bins / 2)).astype(int32)`: truncation is
    # the floor since cos >= -1 up to rounding, clipped to the last similarity bin; the
    # exact-match bin is decided by the term, not by the cosine. One byte a bin (bins < 256,
    # checked by the caller) keeps the table in cache. A word's cosines are read and its
    # slots written in order, which the compiler vectorises: 0.09 ms for a request's 4,000
    # words and 52 terms, against 0.21 with the cosines stored term by term.
    one = np.float32(1.0)
    half = np.float32(bins / 2.0)
    slot_of = np.empty((words, terms), dtype=np.uint8)
    for w in range(words):
        word_id = word_ids[w]
        similarities = cosines[w]
        slots = slot_of[w]
        for term in range(terms):
            slot = min(max(int((similarities[term] + one) * half), 0), bins - 1)
            slots[term] = bins if query_ids[term] == word_id else slot
    occurrences = np.zeros(words, dtype=np.int32)  # in the current document; zero between
    seen = np.empty(max(1, doc_lengths.max()), dtype=np.int64)
    start = 0
    for document in range(doc_lengths.size):
        distinct = 0
        for position in range(start, start + doc_lengths[document]):
            w = word_of[position]
            if occurrences[w] == 0:
                seen[distinct] = w
                distinct += 1
            occurrences[w] += 1
        histograms = counts[document]
        for k in range(distinct):
            w = seen[k]
            times = occurrences[w]
            occurrences[w] = 0
            slots = slot_of[w]
            for term in range(terms):
                histograms[term, slots[term]] += times
        start += doc_lengths[document]
    return counts


def shared_words(
    query_ids: np.ndarray,
    doc_ids: np.ndarray,
    doc_lengths: np.ndarray,
    word_of: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per document (documents' ids one after another, `doc_lengths` each), the distinct
    words it shares with the query, and the distinct pairs of adjacent words it shares with it
    (pairs across two documents' boundary do not count). With `word_of`, as in
    :func:`histogram_counts`, `doc_ids` are the distinct words and `word_of` gives each
    document term's row: only the distinct words are compared with the query."""
    query = np.asarray(query_ids, dtype=np.int64)
    if word_of is None:
        doc_ids, word_of = np.unique(np.asarray(doc_ids, dtype=np.int64), return_inverse=True)
    vocabulary = np.unique(query)  # the query's distinct words; a word's place among them
    words = np.asarray(doc_ids, dtype=np.int64)
    # a word's place if it is a query word, else -1: one binary search per word (`np.isin`
    # compares every word with each of the query's ~50 words in turn: 0.2 ms a request)
    places = np.searchsorted(vocabulary, words)
    found = places < vocabulary.size
    found[found] = vocabulary[places[found]] == words[found]
    places = np.where(found, places, -1)
    return _shared_counts(
        np.searchsorted(vocabulary, query),
        places,
        np.asarray(word_of, dtype=np.int64).ravel(),
        np.asarray(doc_lengths, dtype=np.int64),
        vocabulary.size,
    )


@njit(cache=True, nogil=True)
def _shared_counts(
    query_places: np.ndarray,
    places: np.ndarray,
    word_of: np.ndarray,
    doc_lengths: np.ndarray,
    size: int,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`shared_words` in one compiled pass over the documents' words. `query_places`
    are the query's terms and `places` the documents' distinct words as places among the
    query's `size` distinct words (-1: not a query word); a pair of adjacent query words is
    looked up in a table of the query's own pairs, and a word or pair counts once per
    document (marked with the document's number). About 0.13 ms for 100 jobs, against 0.4 in
    numpy's sorts and set operations."""
    pair_of = np.full((size, size), -1, dtype=np.int32)  # a query pair's number, else -1
    for k in range(query_places.size - 1):
        if pair_of[query_places[k], query_places[k + 1]] < 0:
            pair_of[query_places[k], query_places[k + 1]] = k
    word_seen_in = np.full(size, -1, dtype=np.int64)
    pair_seen_in = np.full(max(query_places.size, 1), -1, dtype=np.int64)
    unigrams = np.zeros(doc_lengths.size, dtype=np.int64)
    bigrams = np.zeros(doc_lengths.size, dtype=np.int64)
    start = 0
    for document in range(doc_lengths.size):
        previous = -1  # the last word's place among the query's words, -1 if none
        for position in range(start, start + doc_lengths[document]):
            word = places[word_of[position]]
            if word < 0:
                previous = -1
                continue
            if word_seen_in[word] != document:
                word_seen_in[word] = document
                unigrams[document] += 1
            if previous >= 0:
                pair = pair_of[previous, word]
                if pair >= 0 and pair_seen_in[pair] != document:
                    pair_seen_in[pair] = document
                    bigrams[document] += 1
            previous = word
        start += doc_lengths[document]
    return unigrams, bigrams


_DTYPE = attrgetter("dtype")
_MIXED_TEXTS = "texts mix word ids and words: give one kind"

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
        # the texts' types and dtypes through `map`, in C: a Python test per text cost 40 us
        if len(texts) and set(map(type, texts)) == {np.ndarray}:
            kinds = {dtype.kind for dtype in set(map(_DTYPE, texts))}
            if not kinds & set("iu"):
                return self.ids(np.concatenate(texts, dtype=object))
            if kinds - set("iu"):
                raise ValueError(_MIXED_TEXTS)
            return np.concatenate(texts).astype(np.int64, copy=False)
        if any(isinstance(t, np.ndarray) and t.dtype.kind in "iu" for t in texts):
            raise ValueError(_MIXED_TEXTS)
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
        rank = np.empty(len(self.words), dtype=np.int64)  # read at the distinct ids alone
        rank[distinct] = np.arange(distinct.size)
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
