"""Candidate-profile features: how a job relates to the candidate's *own* jobs, not to the
query's words (issue 18, `docs/PAIRS.md`).

A query keeps 300 words of four fields; BM25 and the matching histograms only see those. The
candidate's own jobs say more, in two independent ways:

* **Text** (`profile_tfidf`, `profile_w2v`): every own job's whole text (`doc_tokens`: all
  fields, descriptions included) as a unit TF-IDF vector, sublinear term frequency, the IDF of
  the embeddings' table. `profile_tfidf` is a pool job's mean cosine to the own jobs (its
  vector's dot product with their mean). `profile_w2v` is the cosine of the two TF-IDF-weighted
  word2vec centroids (seed 004's document vector). The mean is weighted by each own job's
  agreement with the others (:func:`coherence_weights`), so that a stray interest, unlike
  the candidate's other jobs, does not pull its own kind of jobs up.
* **Behaviour** (`co_interest`): the platform's interest data as a job-job graph
  (:func:`co_interest_table`: two jobs are linked by every candidate interested in both). A
  pool job scores the two-step walks from the candidate's own jobs to it, divided by how many
  candidates it interests at all (a popular job is not a sign of anything). Two steps, because
  most candidates show interest in one or two jobs: few pool jobs share a candidate with an
  own job directly, many share one with a job that does. The candidate's own interest row is
  left out of the graph (`sequence_job_ids`), so a held-out job is never found through the
  very interest that was held out, in training, selection, evaluation and serving alike.
  The walks of each own job count with the same weights as in the text profile.

:func:`profile_features` computes the three for one candidate's pool in numpy, with no loop per
word, job or neighbour; :func:`with_profile_features` runs it per candidate in Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from scipy import sparse

from jobrec_core.features.histograms import DOC_IDS, Vocabulary
from jobrec_core.features.matching import (
    PROFILE_COLUMNS,
    PROFILE_FEATURES,
    WordsAndIdf,
    document_column,
    idf_vocabulary,
)
from jobrec_core.features.occupations import TITLE_OCCUPATION, occupation_agreement
from jobrec_core.platform.spark import map_groups_in_pandas

CO_INTEREST_SCHEMA = "job_id INT, neighbours ARRAY<INT>, counts ARRAY<INT>, interested INT"
PROFILE_ROLE = "_profile_role"  # "own" rows carry the candidate's own jobs into the group
GRAPH_COLUMNS = ("neighbours", "counts", "interested")


# --- the interest graph -----------------------------------------------------------------------


def co_interest_table(candidates: DataFrame) -> DataFrame:
    """`candidate_id, sequence` (every candidate's interest, cleaned or not: two jobs that
    interested one person are related whatever else that person did) -> one row per job with
    its neighbours, how many candidates each shares with it, and how many candidates it
    interests at all. Jobs appear once per candidate however often they were scored."""
    interests = candidates.select(
        "candidate_id", F.explode(F.array_distinct("sequence.job_id")).alias("job_id")
    )
    pairs = (
        interests.alias("a")
        .join(interests.alias("b"), "candidate_id")
        .where(F.col("a.job_id") != F.col("b.job_id"))
        .groupBy(F.col("a.job_id").alias("job_id"), F.col("b.job_id").alias("neighbour"))
        .count()
    )
    adjacency = pairs.groupBy("job_id").agg(
        F.array_sort(F.collect_list(F.struct("neighbour", "count"))).alias("links")
    )
    return (
        interests.groupBy("job_id")
        .agg(F.count("*").cast("int").alias("interested"))
        .join(adjacency, "job_id", "left")
        .select(
            F.col("job_id").cast("int"),
            F.coalesce(F.col("links.neighbour"), F.array().cast("array<int>"))
            .cast("array<int>")
            .alias("neighbours"),
            F.coalesce(F.col("links.count"), F.array().cast("array<bigint>"))
            .cast("array<int>")
            .alias("counts"),
            "interested",
        )
    )


def co_interest_scores(
    own_neighbours: list[np.ndarray],
    own_counts: list[np.ndarray],
    pool_neighbours: list[np.ndarray],
    pool_counts: list[np.ndarray],
    pool_interested: np.ndarray,
    own_jobs: np.ndarray,
    pool_jobs: np.ndarray,
    sequence: np.ndarray,
    own_weights: np.ndarray | None = None,
) -> np.ndarray:
    """Per pool job, the two-step walks from the own jobs to it over the graph without the
    candidate's own interest row (`sequence`: every job of that row), per own job (a
    weighted mean with `own_weights`), divided by the candidate count of the pool job (also
    without this candidate).

    The row contributed 1 to every pair of its jobs and 1 to each job's candidate count;
    both are taken off before walking."""
    if len(pool_jobs) == 0 or len(own_jobs) == 0:
        return np.zeros(len(pool_jobs), dtype=np.float32)
    weights = np.ones(len(own_jobs)) if own_weights is None else np.asarray(own_weights, float)
    if len(weights) != len(own_jobs):
        raise ValueError(f"{len(weights)} weights for {len(own_jobs)} own jobs")
    everything = np.concatenate([*own_neighbours, *pool_neighbours, sequence, own_jobs, pool_jobs])
    local, where = np.unique(everything.astype(np.int64), return_inverse=True)
    offsets = np.cumsum([0, *map(len, own_neighbours), *map(len, pool_neighbours)])
    own_end = offsets[len(own_neighbours)]
    in_sequence = np.zeros(len(local), dtype=bool)
    in_sequence[np.searchsorted(local, sequence)] = True
    own_local = np.searchsorted(local, own_jobs)
    pool_local = np.searchsorted(local, pool_jobs)
    # reach[m]: walks of one step from the own jobs to m, minus this candidate's own pairs
    per_link = np.repeat(weights, [len(n) for n in own_neighbours])
    reach = np.bincount(
        where[:own_end],
        weights=np.concatenate(own_counts).astype(np.float64) * per_link if own_end else None,
        minlength=len(local),
    ).astype(np.float64)  # numpy counts in int64 when no own job has a link (one-job request)
    # every own job that is in the row shares it with every other job of the row once
    own_in_sequence = in_sequence[own_local]
    own_weight = np.zeros(len(local))
    own_weight[own_local[own_in_sequence]] = weights[own_in_sequence]
    reach[in_sequence] -= weights[own_in_sequence].sum() - own_weight[in_sequence]
    # links[p, m]: candidates shared by pool job p and m, minus this candidate
    rows = np.repeat(np.arange(len(pool_jobs)), [len(n) for n in pool_neighbours])
    links = sparse.csr_matrix(
        (
            np.concatenate(pool_counts).astype(np.float64) if len(rows) else np.zeros(0),
            (rows, where[own_end : offsets[-1]]),
        ),
        shape=(len(pool_jobs), len(local)),
    ).toarray()
    pool_in_sequence = in_sequence[pool_local]
    links[np.ix_(pool_in_sequence, in_sequence)] -= 1.0
    links[np.flatnonzero(pool_in_sequence), pool_local[pool_in_sequence]] += 1.0  # no self pair
    np.clip(links, 0.0, None, out=links)
    interested = np.maximum(pool_interested - pool_in_sequence, 1)
    walks = links @ np.clip(reach, 0.0, None)
    return (walks / interested / weights.sum()).astype(np.float32)


# --- the text profile -------------------------------------------------------------------------


# An own job that shares nothing with the others still counts a little (0.02 squared): with
# two own jobs that disagree, neither is known to be the stray one.
COHERENCE_FLOOR = 0.02


def coherence_weights(own_units: sparse.csr_matrix) -> np.ndarray:
    """Each own job's weight in the profile: its mean TF-IDF cosine with the candidate's
    other own jobs, squared (at least `COHERENCE_FLOOR` squared); 1 for a single own job.

    Why: a share of any candidate's interest is noise, jobs unrelated to what they want.
    Such a job resembles none of their other jobs, so it is weighed down, and so are the
    pool jobs only it would make look relevant. The square sharpens the contrast. Chosen on
    the dev candidates' held-out MRR of the untrained profile features (demo and a noisier
    dataset; docs/PAIRS.md), never on the ground truth."""
    count = own_units.shape[0]
    if count < 2:
        return np.ones(count)
    cosines = np.asarray((own_units @ own_units.T).todense())
    np.fill_diagonal(cosines, 0.0)
    return np.clip(cosines.sum(axis=1) / (count - 1), COHERENCE_FLOOR, None) ** 2


def tfidf_units(
    vocabulary: Vocabulary, texts: list[np.ndarray]
) -> tuple[sparse.csr_matrix, np.ndarray]:
    """(each text's unit TF-IDF vector, sublinear term frequency, as the rows of one sparse
    matrix over the words the texts use; those words' ids). One matrix for all texts, no
    loop per word; an empty text is a zero row."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    if not lengths.sum():
        return sparse.csr_matrix((len(texts), 0)), np.zeros(0, dtype=np.int64)
    ids = vocabulary.text_ids(texts)
    distinct, word_of = vocabulary.distinct(ids)
    counts = sparse.csr_matrix(
        (np.ones(len(ids)), (np.repeat(np.arange(len(texts)), lengths), word_of)),
        shape=(len(texts), len(distinct)),
    )
    counts.sum_duplicates()
    counts.data = 1.0 + np.log(counts.data)  # sublinear term frequency
    weights = sparse.csr_matrix(counts.multiply(vocabulary.idf_of(distinct)[None, :]))
    return sparse.csr_matrix(sparse.diags(1.0 / _norms(weights)) @ weights), distinct


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return np.where(norms > 1e-12, matrix / np.maximum(norms, 1e-12), 0.0)


def document_vectors(vocabulary: Vocabulary, texts: list[np.ndarray]) -> np.ndarray:
    """Each text's TF-IDF-weighted word2vec centroid (seed 004's document vector), unit
    length, float32; a zero row where no word has a vector. What the jobs index stores for
    dense retrieval: its cosine with :func:`profile_vector` is `profile_w2v`."""
    units, distinct = tfidf_units(vocabulary, texts)
    centroids = units @ vocabulary.unit_vectors(distinct).astype(np.float64)
    return _unit_rows(np.asarray(centroids)).astype(np.float32)


def profile_vector(vocabulary: Vocabulary, own_texts: list[np.ndarray]) -> np.ndarray:
    """The candidate's query vector for dense retrieval: the centroid of their own jobs'
    profile (the TF-IDF vectors' mean weighted by :func:`coherence_weights`), unit length;
    zeros when no own word has a vector. A pool job's `profile_w2v` is its cosine with this."""
    units, distinct = tfidf_units(vocabulary, own_texts)
    weights = coherence_weights(units)
    if not len(own_texts) or not weights.sum():
        return np.zeros(vocabulary.vectors.shape[1], dtype=np.float32)
    profile = np.asarray(weights @ units).ravel() / weights.sum()
    centroid = profile @ vocabulary.unit_vectors(distinct).astype(np.float64)
    return _unit_rows(centroid).astype(np.float32)


def text_similarities(
    vocabulary: Vocabulary, own_texts: list[np.ndarray], pool_texts: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(`profile_tfidf`, `profile_w2v`) of each pool text against the own texts' profile
    (their mean, weighted by :func:`coherence_weights`), and those weights: all texts'
    TF-IDF vectors in one sparse matrix over the words they use, one product for each."""
    if not pool_texts or not own_texts:
        empty = np.zeros(len(pool_texts), dtype=np.float32)
        return empty, empty.copy(), np.ones(len(own_texts))
    unit, distinct = tfidf_units(vocabulary, [*own_texts, *pool_texts])
    own = len(own_texts)
    own_weights = coherence_weights(unit[:own])
    profile = np.asarray(own_weights @ unit[:own]).ravel() / own_weights.sum()
    pool = unit[own:]
    tfidf = pool @ profile
    vectors = vocabulary.unit_vectors(distinct).astype(np.float64)
    centroid = profile @ vectors
    centroids = pool @ vectors
    w2v = (
        centroids
        @ centroid
        / np.maximum(np.linalg.norm(centroids, axis=1) * np.linalg.norm(centroid), 1e-12)
    )
    return tfidf.astype(np.float32), w2v.astype(np.float32), own_weights


def _norms(matrix: sparse.csr_matrix) -> np.ndarray:
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    return np.where(norms > 0, norms, 1.0)


# --- per candidate ----------------------------------------------------------------------------


def _arrays(values: pd.Series, dtype: type) -> list[np.ndarray]:
    """Array cells as numpy arrays; a missing cell (a job outside the graph: null in Spark,
    NaN after a pandas merge) as an empty one."""
    return [
        np.asarray(v if isinstance(v, (list, tuple, np.ndarray)) else [], dtype=dtype)
        for v in values
    ]


def profile_features(group: pd.DataFrame, vocabulary: Vocabulary) -> dict[str, np.ndarray]:
    """One candidate's rows: its pool (`_profile_role` "pool") and its own jobs ("own"),
    each with `job_id`, `doc_tokens` (or their ids, `doc_ids`) and the job's interest-graph
    row -> the three features of each pool row, in the pool rows' order."""
    own = group[group[PROFILE_ROLE] == "own"]
    pool = group[group[PROFILE_ROLE] == "pool"]
    column = document_column(group)
    kind = np.int64 if column == DOC_IDS else object
    tfidf, w2v, own_weights = text_similarities(
        vocabulary, _arrays(own[column], kind), _arrays(pool[column], kind)
    )
    sequence = pool["sequence_job_ids"].iat[0] if len(pool) else None
    co_interest = co_interest_scores(
        _arrays(own["neighbours"], np.int64),
        _arrays(own["counts"], np.int64),
        _arrays(pool["neighbours"], np.int64),
        _arrays(pool["counts"], np.int64),
        pool["interested"].fillna(0).to_numpy(dtype=np.int64),
        own["job_id"].to_numpy(dtype=np.int64),
        pool["job_id"].to_numpy(dtype=np.int64),
        np.asarray(sequence if sequence is not None else [], dtype=np.int64),
        own_weights,
    )
    return {
        "profile_tfidf": tfidf,
        "profile_w2v": w2v,
        "co_interest": co_interest,
        "occupation_agreement": occupation_agreement(
            _occupations(own), own_weights, _occupations(pool)
        ),
    }


def _occupations(rows: pd.DataFrame) -> np.ndarray:
    """The rows' normalised title occupations; none where the titles are not normalised."""
    if TITLE_OCCUPATION not in rows.columns:
        return np.full(len(rows), None, dtype=object)
    return rows[TITLE_OCCUPATION].to_numpy(dtype=object)


def add_profile_features(frame: pd.DataFrame, vocabulary: Vocabulary) -> pd.DataFrame:
    """Rows of any number of candidates (pool and own rows, see :func:`profile_features`)
    -> their pool rows with the features, the own rows and the graph's columns dropped."""
    parts = []
    for _, group in frame.groupby("candidate_id", sort=False):
        pool = group[group[PROFILE_ROLE] == "pool"]
        parts.append(pool.assign(**profile_features(group, vocabulary)))
    if not parts:
        return frame.iloc[:0].assign(**{name: [] for name in PROFILE_FEATURES})
    # `infer_objects`: the own rows' nulls made the pool's numbers objects, and they left
    return pd.concat(parts).drop(columns=[PROFILE_ROLE, *GRAPH_COLUMNS]).infer_objects()


def profile_rows(
    pool: DataFrame, tokens: DataFrame, graph: DataFrame, carried: Iterable[str] = ()
) -> DataFrame:
    """Pool rows -> the rows :func:`add_profile_features` reads: the pool rows and, for each
    candidate, a row per own job (its text from `tokens`), all with their graph row from
    `graph` (a :func:`co_interest_table`) and their :data:`PROFILE_ROLE`. An own row has the
    candidate's `carried` columns (what the candidate's rows share, such as its query) and
    nulls in the pool's other columns."""
    own = (
        pool.select("candidate_id", *carried, "own_job_ids")
        .dropDuplicates(["candidate_id"])
        .select(
            "candidate_id",
            *carried,
            F.explode(F.array_distinct("own_job_ids")).alias("job_id"),
        )
        .join(tokens, "job_id")
        .join(graph, "job_id", "left")
        .withColumn(PROFILE_ROLE, F.lit("own"))
    )
    return (
        pool.join(graph, "job_id", "left")
        .withColumn(PROFILE_ROLE, F.lit("pool"))
        .unionByName(own, allowMissingColumns=True)
    )


def profile_rows_of(
    pool: pd.DataFrame, tokens: pd.DataFrame, graph: pd.DataFrame, carried: Iterable[str] = ()
) -> pd.DataFrame:
    """:func:`profile_rows` on pandas, for a request: `tokens` and `graph` hold (at least)
    the rows of the pool's and the candidates' own jobs."""
    own = pool.drop_duplicates("candidate_id")[["candidate_id", *carried, "own_job_ids"]]
    own = own.explode("own_job_ids").dropna(subset=["own_job_ids"])
    own = own.astype({"own_job_ids": "int64"}).drop_duplicates(["candidate_id", "own_job_ids"])
    own_rows = own.rename(columns={"own_job_ids": "job_id"}).merge(tokens, on="job_id")
    return pd.concat(
        [pool.assign(**{PROFILE_ROLE: "pool"}), own_rows.assign(**{PROFILE_ROLE: "own"})],
        ignore_index=True,
    ).merge(graph, on="job_id", how="left")


def with_profile_features(
    pool: DataFrame,
    tokens: DataFrame,
    graph: DataFrame,
    vectors_file: str,
    words_and_idf: WordsAndIdf,
) -> DataFrame:
    """Pool rows (`candidate_id, job_id, doc_tokens, own_job_ids, sequence_job_ids`, any
    others) -> the same rows with :data:`PROFILE_FEATURES`. Each candidate's own jobs join
    its pool rows in one group (:func:`profile_rows`), so nothing per candidate is repeated
    on every pool row."""
    columns = [*pool.columns, *PROFILE_FEATURES]
    schema = ", ".join(
        [*(f"`{f.name}` {f.dataType.simpleString()}" for f in pool.schema.fields), PROFILE_COLUMNS]
    )

    def run(rows: pd.DataFrame) -> pd.DataFrame:
        vocabulary = idf_vocabulary(vectors_file, words_and_idf)
        return add_profile_features(rows, vocabulary)[columns]

    return map_groups_in_pandas(profile_rows(pool, tokens, graph), ["candidate_id"], run, schema)


# --- vectors for dense retrieval --------------------------------------------------------------

DOCUMENT_VECTOR = "doc_vector"
QUERY_VECTOR = "query_vector"


def _stored(vectors: np.ndarray) -> list[np.ndarray | None]:
    """Vectors as column cells: a zero vector (no word with a vector) as null, since a
    cosine with it is undefined (and the index refuses it)."""
    return [vector if vector.any() else None for vector in vectors]


def with_document_vectors(
    documents: DataFrame, vectors_file: str, words_and_idf: WordsAndIdf
) -> DataFrame:
    """Rows with `doc_tokens` -> the same rows with `doc_vector` (:func:`document_vectors`),
    one sparse product per Arrow batch."""
    schema = ", ".join(
        [
            *(f"`{f.name}` {f.dataType.simpleString()}" for f in documents.schema.fields),
            f"{DOCUMENT_VECTOR} ARRAY<FLOAT>",
        ]
    )

    def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        vocabulary = idf_vocabulary(vectors_file, words_and_idf)
        for frame in frames:
            vectors = document_vectors(vocabulary, _arrays(frame["doc_tokens"], object))
            yield frame.assign(**{DOCUMENT_VECTOR: _stored(vectors)})

    return documents.mapInPandas(run, schema)


def query_vector_frame(own: pd.DataFrame, vocabulary: Vocabulary) -> pd.DataFrame:
    """Own-job rows (`candidate_id, job_id, doc_tokens`) of any number of candidates ->
    `candidate_id, query_vector` (:func:`profile_vector`; null when zero). Each candidate's
    jobs are taken in job-id order, so the sums, floats, never depend on how rows arrived."""
    ordered = own.sort_values(["candidate_id", "job_id"], kind="stable")
    candidates, vectors = [], []
    for candidate, group in ordered.groupby("candidate_id", sort=True):
        candidates.append(int(candidate))
        vectors.append(profile_vector(vocabulary, _arrays(group["doc_tokens"], object)))
    return pd.DataFrame(
        {
            "candidate_id": pd.Series(candidates, dtype="int64"),
            QUERY_VECTOR: _stored(np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)),
        }
    )


def with_query_vectors(
    queries: DataFrame, tokens: DataFrame, vectors_file: str, words_and_idf: WordsAndIdf
) -> DataFrame:
    """Queries (`candidate_id, own_job_ids`, any others) -> the same rows with
    `query_vector`, the profile vector of the candidate's own jobs (null without one)."""
    own = queries.select(
        "candidate_id", F.explode(F.array_distinct("own_job_ids")).alias("job_id")
    ).join(tokens.select("job_id", "doc_tokens"), "job_id")

    def run(rows: pd.DataFrame) -> pd.DataFrame:
        return query_vector_frame(rows, idf_vocabulary(vectors_file, words_and_idf))

    vectors = map_groups_in_pandas(
        own, ["candidate_id"], run, f"candidate_id LONG, {QUERY_VECTOR} ARRAY<FLOAT>"
    )
    return queries.join(vectors, "candidate_id", "left")
