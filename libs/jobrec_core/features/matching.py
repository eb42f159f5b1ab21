"""DRMM's features of (query, document) pairs: matching histograms, query IDFs, shared
unigrams and bigrams (the paper §5, `jobrec_core.features.histograms`).

One function computes them, :func:`document_features`, for all the documents of one query in
one matrix product; it returns columns, not rows. The pairs stage stores them for triples
(:func:`triple_features`) and MAP sets (:func:`map_features`), and the ranking pipeline's
`DrmmFeatures` step computes them for retrieved pools (:func:`add_features`) with the same
code, so what a model is trained on is what it scores.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark import Broadcast
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobrec_core.config import HistogramsConfig
from jobrec_core.features.histograms import (
    DOC_IDS,
    Vocabulary,
    histogram_counts,
    shared_words,
)
from jobrec_core.features.occupations import TITLE_OCCUPATION
from jobrec_core.platform.spark import map_groups_in_pandas, schema_columns
from jobrec_core.text.tokens import tokens_column
from jobrec_core.text.vectors import keyed_vectors, words_and_idf_of, worker_cached
from jobrec_core.text.wmd import unit_vectors

FEATURE_COLUMNS = (
    "query_idf ARRAY<FLOAT>, doc_len INT, hist ARRAY<SMALLINT>, lead_hist ARRAY<SMALLINT>, "
    "unigrams INT, bigrams INT"
)
DOCUMENT_FEATURES = ("doc_len", "hist", "lead_hist", "unigrams", "bigrams")
# The candidate-profile features (`features.profile`), stored with the others.
PROFILE_FEATURES = (
    "profile_tfidf",
    "profile_w2v",
    "co_interest",
    "profile_behaviour",
    "occupation_agreement",
)
PROFILE_COLUMNS = ", ".join(f"{name} FLOAT" for name in PROFILE_FEATURES)

TRIPLE_SCHEMA = (
    "candidate_id LONG, split STRING, query_terms ARRAY<STRING>, query_idf ARRAY<FLOAT>, "
    "query_job_share ARRAY<FLOAT>, "
    + ", ".join(
        f"{side}_job_id INT, {side}_bm25 FLOAT, {side}_doc_len INT, "
        f"{side}_hist ARRAY<SMALLINT>, {side}_lead_hist ARRAY<SMALLINT>, "
        f"{side}_unigrams INT, {side}_bigrams INT, "
        + ", ".join(f"{side}_{name} FLOAT" for name in PROFILE_FEATURES)
        for side in ("pos", "neg")
    )
)

MAP_SCHEMA = (
    "candidate_id LONG, split STRING, query_terms ARRAY<STRING>, query_idf ARRAY<FLOAT>, "
    "query_job_share ARRAY<FLOAT>, "
    "job_id INT, label INT, bm25 FLOAT, bm25_rank INT, doc_len INT, hist ARRAY<SMALLINT>, "
    f"lead_hist ARRAY<SMALLINT>, unigrams INT, bigrams INT, {PROFILE_COLUMNS}"
)


def document_tokens(jobs: DataFrame, histograms: HistogramsConfig) -> DataFrame:
    """`job_id, doc_tokens, lead_len, title_occupation`: the histogram's document text,
    `doc_fields` in order, capped at `doc_max_terms`; how many of its first tokens come from
    `lead_fields`; the title's normalised occupation (null before `titles.stage` ran)."""

    def joined(fields: list[str]) -> Column:
        return F.concat(*[F.col(tokens_column(f)) for f in fields])

    lead = histograms.lead_fields
    return jobs.select(
        "job_id",
        F.slice(joined(histograms.doc_fields), 1, histograms.doc_max_terms).alias("doc_tokens"),
        (
            F.least(F.greatest(F.size(joined(lead)), F.lit(0)), F.lit(histograms.doc_max_terms))
            if lead
            else F.lit(None)
        )
        .cast("int")
        .alias(LEAD_LENGTH),
        (F.col(TITLE_OCCUPATION) if TITLE_OCCUPATION in jobs.columns else F.lit(None))
        .cast("string")
        .alias(TITLE_OCCUPATION),
    )


# How many of a document's first tokens are its lead fields' (`document_tokens`); null in
# every row without `histograms.lead_fields`: then no `lead_hist` is computed (it is empty).
LEAD_LENGTH = "lead_len"


WordsAndIdf = Broadcast | tuple[list[str], list[float]]


def idf_vocabulary(vectors_file: str, words_and_idf: WordsAndIdf) -> Vocabulary:
    """The IDF table's words with their unit vectors, built once per Python worker (the
    vectors file is named after its embeddings version)."""

    def build() -> Vocabulary:
        words, idf = words_and_idf_of(words_and_idf)
        keyed = keyed_vectors(vectors_file)
        rows = np.array([keyed.key_to_index.get(w, -1) for w in words], dtype=np.int64)
        vectors = np.zeros((len(words), keyed.vector_size), dtype=np.float32)
        present = rows >= 0
        vectors[present] = unit_vectors(np.asarray(keyed.vectors)[rows[present]])
        return Vocabulary(np.asarray(words), vectors, np.asarray(idf))

    return worker_cached("idf_vocabulary", vectors_file, build)


@dataclass(frozen=True)
class QueryFeatures:
    ids: np.ndarray
    vectors: np.ndarray
    idf: np.ndarray


def query_features(vocabulary: Vocabulary, terms: Iterable[str]) -> QueryFeatures:
    ids = vocabulary.ids(list(terms))
    return QueryFeatures(ids, vocabulary.unit_vectors(ids), vocabulary.idf_of(ids))


def document_features(
    vocabulary: Vocabulary,
    query: QueryFeatures,
    documents: Sequence[Sequence[str] | np.ndarray],
    bins: int,
    lead_lengths: Sequence[int] | None = None,
) -> dict[str, np.ndarray]:
    """Columns `doc_len`, `hist` (counts, flattened, int16), `lead_hist` (the counts of the
    first `lead_lengths` terms alone: the lead fields' matches; empty without
    `lead_lengths`), `unigrams`, `bigrams` of each document against one query: one matrix
    product for all of them. Each document's `hist` and `lead_hist` are rows of one array.
    The columns are numpy arrays (of objects for the histograms), which a `DataFrame` takes
    as they are: built from lists, a request's frame cost 0.1 ms more."""
    count = len(documents)
    lengths = np.fromiter(map(len, documents), dtype=np.int64, count=count)
    everything = vocabulary.text_ids(documents)
    distinct, word_of = vocabulary.distinct(everything)
    # With lead lengths, each document is counted as two, its lead terms then the rest, and
    # `hist` is their sum.
    split = lead_lengths is not None
    lead = np.minimum(np.asarray(lead_lengths, dtype=np.int64).reshape(-1), lengths) if split else 0
    counts = histogram_counts(
        query.vectors,
        query.ids,
        vocabulary.unit_vectors(distinct),
        distinct,
        np.stack([lead, lengths - lead], axis=1).ravel() if split else lengths,
        bins,
        word_of=word_of,
        dtype=np.int16,  # the stored type
    )
    flat = (count, counts[0].size if count else 0)  # a document's histograms, flattened
    lead_hist = _rows(np.zeros((count, 0), dtype=np.int16))
    if split:
        parts = counts.reshape(count, 2, *counts.shape[1:])
        lead_hist = _rows(parts[:, 0].reshape(flat))
        counts = parts.sum(axis=1, dtype=np.int16)
    unigrams, bigrams = shared_words(query.ids, distinct, lengths, word_of=word_of)
    return {
        "doc_len": lengths,
        "hist": _rows(counts.reshape(flat)),
        "lead_hist": lead_hist,
        "unigrams": unigrams,
        "bigrams": bigrams,
    }


def _rows(matrix: np.ndarray) -> np.ndarray:
    """The rows of a 2-d array as a 1-d array of objects (views of them): a list column's
    cells."""
    return np.fromiter(matrix, dtype=object, count=len(matrix))


def document_column(frame: pd.DataFrame) -> str:
    """The jobs' words as ids (`DOC_IDS`) where the rows have them, else `doc_tokens`."""
    return DOC_IDS if DOC_IDS in frame.columns else "doc_tokens"


def add_features(frame: pd.DataFrame, vocabulary: Vocabulary, bins: int) -> pd.DataFrame:
    """Rows of (candidate, query, document) with `query_terms` and the document's
    `doc_tokens` and `lead_len` -> the same rows with `query_idf` and the document features.
    All rows of a candidate share one query; each candidate's documents go through one
    matrix product."""
    query_idf: list[np.ndarray] = []
    parts: dict[str, list[np.ndarray]] = {name: [] for name in DOCUMENT_FEATURES}
    groups = list(frame.groupby("candidate_id", sort=False).indices.values())
    no_lead = bool(frame[LEAD_LENGTH].isna().all())  # no `histograms.lead_fields`
    for rows in groups:
        query = query_features(vocabulary, frame["query_terms"].iat[rows[0]])
        features = document_features(
            vocabulary,
            query,
            frame[document_column(frame)].iloc[rows].tolist(),
            bins,
            None if no_lead else frame[LEAD_LENGTH].iloc[rows].to_numpy(),
        )
        query_idf += [query.idf] * len(rows)
        for name in DOCUMENT_FEATURES:
            parts[name].append(features[name])
    columns: dict[str, Any] = {"query_idf": query_idf}
    columns |= {name: np.concatenate(arrays) if arrays else [] for name, arrays in parts.items()}
    # The columns were filled group by group: put them back in the rows' order.
    order = frame.index[np.concatenate(groups)] if groups else frame.index
    return frame.assign(**pd.DataFrame(columns, index=order))


def triple_features(
    triples: DataFrame, vectors_file: str, words_and_idf: Broadcast, bins: int
) -> DataFrame:
    """Triples with `pos_tokens`/`neg_tokens` and `pos_lead_len`/`neg_lead_len` -> the stored
    features of both documents: the two sides are two documents of one query, featured
    together by :func:`add_features` (one candidate, one triple)."""
    columns = schema_columns(TRIPLE_SCHEMA)

    def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        vocabulary = idf_vocabulary(vectors_file, words_and_idf)
        for frame in frames:
            query = frame[["candidate_id", "query_terms"]]
            both = pd.concat(
                [
                    query.assign(
                        doc_tokens=frame[f"{side}_tokens"],
                        **{LEAD_LENGTH: frame[f"{side}_{LEAD_LENGTH}"]},
                    )
                    for side in ("pos", "neg")
                ],
                ignore_index=True,
            )
            featured = add_features(both, vocabulary, bins)
            sides = {"pos": featured.iloc[: len(frame)], "neg": featured.iloc[len(frame) :]}
            out = frame.rename(columns={"positive_job_id": "pos_job_id"}).assign(
                query_terms=[list(t) for t in frame["query_terms"]],
                query_idf=sides["pos"]["query_idf"].to_numpy(),
                **{
                    f"{side}_{name}": part[name].to_numpy()
                    for side, part in sides.items()
                    for name in DOCUMENT_FEATURES
                },
            )
            yield out[columns]

    return triples.mapInPandas(run, TRIPLE_SCHEMA)


def map_features(
    documents: DataFrame, vectors_file: str, words_and_idf: Broadcast, bins: int
) -> DataFrame:
    """`map_documents` rows with `doc_tokens` -> one row per (candidate, job) with features;
    all documents of a query in one product."""

    def run(frame: pd.DataFrame) -> pd.DataFrame:
        vocabulary = idf_vocabulary(vectors_file, words_and_idf)
        featured = add_features(frame, vocabulary, bins)
        return featured.assign(query_terms=[list(t) for t in featured["query_terms"]])[
            schema_columns(MAP_SCHEMA)
        ]

    return map_groups_in_pandas(
        documents, ["candidate_id", "split", "query_terms"], run, MAP_SCHEMA, order=["job_id"]
    )
