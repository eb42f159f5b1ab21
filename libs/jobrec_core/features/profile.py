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
* **Behaviour beyond two steps** (`profile_behaviour`): the cosine of a pool job's behaviour vector
  (`features.behaviour`: a truncated SVD of who wanted what) with the weighted mean of the
  own jobs' vectors, all from the fold of candidates fitted without this candidate's row.
* **Carried evidence** (`features.carried`): a pool job the graph knows nothing of for this
  candidate (nobody else showed interest in it, as in an ad posted this morning) takes both
  behaviour features from the ads most like it by text, their weighted mean, each computed
  for this candidate as above (rows of role "carried" in the candidate's group).

:func:`profile_features` computes them for one candidate's pool in numpy, with no loop per
word, job or neighbour; :func:`with_profile_features` runs it per candidate in Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import pandas as pd
from numba import njit
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.features.behaviour import (
    BEHAVIOUR_VECTORS,
    FOLD_OWNER,
    behaviour_similarity,
    candidate_folds,
    has_fold_vector,
    unit_rows,
)
from jobrec_core.features.carried import (
    CARRIED_COLUMNS,
    CARRIED_FROM,
    CARRIED_WEIGHTS,
    carried_means,
)
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

# A profile row's role in its candidate's group: "own" rows carry the candidate's own jobs,
# "pool" rows the jobs ranked, and "carried" rows the ads whose evidence a pool job nobody
# else wanted carries (`features.carried`).
PROFILE_ROLE = "_profile_role"
# What tells a candidate's profile rows apart: a job can be one of its own and in its pool.
PROFILE_ROW_ORDER = (PROFILE_ROLE, "job_id")
GRAPH_COLUMNS = ("neighbours", "counts", "interested", BEHAVIOUR_VECTORS, *CARRIED_COLUMNS)


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
    own_links, own_starts = _flattened(own_neighbours)
    pool_links, pool_starts = _flattened(pool_neighbours)
    own_link_counts, own_count_starts = _flattened(own_counts)
    pool_link_counts, pool_count_starts = _flattened(pool_counts)
    if not (
        np.array_equal(own_starts, own_count_starts)
        and np.array_equal(pool_starts, pool_count_starts)
    ):
        raise ValueError("every job's neighbours need one count each")
    # every job named, as a dense local id (sorted: a job's sorted neighbours stay in order)
    named = np.concatenate([own_links, pool_links, sequence, own_jobs, pool_jobs])
    local, where = np.unique(named.astype(np.int64), return_inverse=True)
    ends = np.cumsum([own_links.size, pool_links.size, len(sequence), len(own_jobs)])
    own_local, pool_local = where[ends[2] : ends[3]], where[ends[3] :]
    in_sequence = np.zeros(len(local), dtype=bool)
    in_sequence[where[ends[1] : ends[2]]] = True
    # each own job in the row shared it once with every other job of the row
    own_in_sequence = in_sequence[own_local]
    own_weight = np.zeros(len(local))
    own_weight[own_local[own_in_sequence]] = weights[own_in_sequence]
    taken_off = np.where(in_sequence, weights[own_in_sequence].sum() - own_weight, 0.0)
    walks = _two_step_walks(
        where[: ends[0]],
        own_link_counts.astype(np.float64),
        own_starts,
        where[ends[0] : ends[1]],
        pool_link_counts.astype(np.float64),
        pool_starts,
        pool_local,
        in_sequence,
        taken_off,
        weights,
    )
    interested = np.maximum(pool_interested - in_sequence[pool_local], 1)
    return (walks / interested / weights.sum()).astype(np.float32)


def _flattened(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(the arrays one after another, int64; where each starts, and the end)."""
    starts = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays)), out=starts[1:])
    if not arrays:
        return np.zeros(0, dtype=np.int64), starts
    return np.concatenate(arrays).astype(np.int64, copy=False), starts


@njit(cache=True, nogil=True)
def _two_step_walks(
    own_links: np.ndarray,
    own_counts: np.ndarray,
    own_starts: np.ndarray,
    pool_links: np.ndarray,
    pool_counts: np.ndarray,
    pool_starts: np.ndarray,
    pool_jobs: np.ndarray,
    in_sequence: np.ndarray,
    taken_off: np.ndarray,
    weights: np.ndarray,
) -> np.ndarray:
    """The walks of :func:`co_interest_scores` over local job ids, compiled: one pass over the
    own jobs' links, one over the pool jobs' (a pool job has a few dozen among thousands of
    jobs: only the graph's links are visited, no dense matrix). 0.2 ms for 100 pool jobs of
    30 links, against 0.75 through scipy's sparse matrices and numpy's set operations.

    `reach[m]`: weighted walks of one step from the own jobs to m, less `taken_off[m]`, what
    the candidate's own row added. `links[p, m]`: candidates shared by pool job p and m
    (repeated links summed), less one where the row holds both (and p is not m): where the
    graph has no link, taking this candidate off leaves nothing to walk either. A pool job's
    walks are summed in the order of its neighbours: sorted, as `co_interest_table` gives
    them, the sums are those of a sparse product to the last bit."""
    size = in_sequence.size
    reach = np.zeros(size)
    for own in range(own_starts.size - 1):
        for entry in range(own_starts[own], own_starts[own + 1]):
            reach[own_links[entry]] += own_counts[entry] * weights[own]
    for job in range(size):
        reach[job] = max(reach[job] - taken_off[job], 0.0)
    walks = np.zeros(pool_jobs.size)
    shared = np.zeros(size)  # a pool job's links, summed; zero between pool jobs
    for pool in range(pool_jobs.size):
        job = pool_jobs[pool]
        first, last = pool_starts[pool], pool_starts[pool + 1]
        for entry in range(first, last):
            shared[pool_links[entry]] += pool_counts[entry]
        for entry in range(first, last):
            neighbour = pool_links[entry]
            links = shared[neighbour]
            if links == 0.0:  # a repeated link, already walked
                continue
            shared[neighbour] = 0.0
            if in_sequence[job] and in_sequence[neighbour] and neighbour != job:
                links -= 1.0
            walks[pool] += max(links, 0.0) * reach[neighbour]
    return walks


# --- the text profile -------------------------------------------------------------------------


# An own job that shares nothing with the others still counts a little (0.02 squared): with
# two own jobs that disagree, neither is known to be the stray one.
COHERENCE_FLOOR = 0.02


@dataclass(frozen=True)
class TfidfRows:
    """Texts' unit TF-IDF vectors (sublinear term frequency) in CSR form: row `r`'s entries
    are `starts[r]:starts[r + 1]` of `words` (columns) and `values`; column `c` is the word
    `distinct[c]`. Plain arrays, read by compiled code without scipy's per-call checks."""

    starts: np.ndarray
    words: np.ndarray
    values: np.ndarray
    distinct: np.ndarray

    @property
    def count(self) -> int:
        return self.starts.size - 1

    @property
    def entry_rows(self) -> np.ndarray:
        """Each entry's row."""
        return np.repeat(np.arange(self.count), np.diff(self.starts))

    def rows(self, first: int, last: int) -> TfidfRows:
        """Rows `first:last`, over the same columns."""
        entries = slice(self.starts[first], self.starts[last])
        return TfidfRows(
            self.starts[first : last + 1] - self.starts[first],
            self.words[entries],
            self.values[entries],
            self.distinct,
        )

    @staticmethod
    def dense(row: np.ndarray, distinct: np.ndarray) -> TfidfRows:
        """One row given densely over the columns `distinct`."""
        words = np.flatnonzero(row)
        return TfidfRows(np.array([0, words.size]), words, row[words], distinct)


def tfidf_rows(vocabulary: Vocabulary, texts: list[np.ndarray]) -> TfidfRows:
    """Each text's unit TF-IDF vector over the words the texts use, the IDF of `vocabulary`;
    an empty text is a row without entries."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    if not lengths.sum():
        return _empty_rows(len(texts))
    distinct, word_of = vocabulary.distinct(vocabulary.text_ids(texts))
    idf = vocabulary.idf_of(distinct).astype(np.float64)
    starts, words, values = _unit_tfidf_rows(word_of.astype(np.int64), lengths, idf)
    return TfidfRows(starts, words, values, distinct)


def word_tfidf_rows(texts: Sequence[Sequence[str]], idf: Mapping[str, float]) -> TfidfRows:
    """:func:`tfidf_rows` of texts given as words, with the IDF of a word -> IDF mapping (a
    word without one weighs nothing): for the query's choice of jobs
    (`features.queries.coherent_jobs`), which has no word vectors at hand. The columns are
    the words in order of first appearance."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    if not lengths.sum():
        return _empty_rows(len(texts))
    word_of, distinct = pd.factorize(
        np.fromiter(chain.from_iterable(texts), dtype=object, count=int(lengths.sum()))
    )
    weights = np.fromiter((idf.get(w, 0.0) for w in distinct), np.float64, count=distinct.size)
    starts, words, values = _unit_tfidf_rows(word_of.astype(np.int64), lengths, weights)
    return TfidfRows(starts, words, values, np.arange(distinct.size))


def _empty_rows(count: int) -> TfidfRows:
    """`count` rows without entries."""
    none = np.zeros(0, dtype=np.int64)
    return TfidfRows(np.zeros(count + 1, dtype=np.int64), none, np.zeros(0), none)


@njit(cache=True, nogil=True)
def _unit_tfidf_rows(
    word_of: np.ndarray, lengths: np.ndarray, idf: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays of :func:`tfidf_rows`, compiled: each text's words counted once with
    their occurrences, weighted (1 + ln count) x IDF and divided by the row's norm. 0.1 ms
    for a request's 105 texts, against 1.3 ms for scipy's COO -> CSR, duplicate sums,
    product and row scaling."""
    starts = np.zeros(lengths.size + 1, dtype=np.int64)
    words = np.empty(word_of.size, dtype=np.int64)
    values = np.empty(word_of.size, dtype=np.float64)
    occurrences = np.zeros(idf.size, dtype=np.int64)  # in the current text; zero between
    entries = 0
    position = 0
    for text in range(lengths.size):
        first = entries
        for word in word_of[position : position + lengths[text]]:
            if occurrences[word] == 0:
                words[entries] = word
                entries += 1
            occurrences[word] += 1
        position += lengths[text]
        squares = 0.0
        for entry in range(first, entries):
            word = words[entry]
            values[entry] = (1.0 + np.log(occurrences[word])) * idf[word]
            squares += values[entry] * values[entry]
            occurrences[word] = 0
        norm = np.sqrt(squares) if squares > 0 else 1.0
        values[first:entries] /= norm
        starts[text + 1] = entries
    return starts, words[:entries], values[:entries]


def coherence_weights(own: TfidfRows) -> np.ndarray:
    """Each own job's weight in the profile: its mean TF-IDF cosine with the candidate's
    other own jobs, squared (at least `COHERENCE_FLOOR` squared); 1 for a single own job.

    Why: a share of any candidate's interest is noise, jobs unrelated to what they want.
    Such a job resembles none of their other jobs, so it is weighed down, and so are the
    pool jobs only it would make look relevant. The square sharpens the contrast. Chosen on
    the dev candidates' held-out MRR of the untrained profile features (demo and a noisier
    dataset; docs/PAIRS.md), never on the ground truth."""
    if own.count < 2:
        return np.ones(own.count)
    return np.clip(mean_cosines_to_others(own), COHERENCE_FLOOR, None) ** 2


def mean_cosines_to_others(rows: TfidfRows) -> np.ndarray:
    """Each row's mean cosine with the other rows (at least two rows): how much a job agrees
    with the candidate's other jobs."""
    cosines = _pair_cosines(rows.starts, rows.words, rows.values, rows.distinct.size)
    return cosines.sum(axis=1) / (rows.count - 1)


@njit(cache=True, nogil=True)
def _pair_cosines(
    starts: np.ndarray, words: np.ndarray, values: np.ndarray, width: int
) -> np.ndarray:
    """The rows' dot products with each other (unit rows: cosines), 0 on the diagonal: each
    row spread over a dense buffer once, the later rows' entries read against it."""
    rows = starts.size - 1
    cosines = np.zeros((rows, rows))
    dense = np.zeros(width)
    for row in range(rows):
        dense[words[starts[row] : starts[row + 1]]] = values[starts[row] : starts[row + 1]]
        for other in range(row + 1, rows):
            dot = 0.0
            for entry in range(starts[other], starts[other + 1]):
                dot += values[entry] * dense[words[entry]]
            cosines[row, other] = dot
            cosines[other, row] = dot
        dense[words[starts[row] : starts[row + 1]]] = 0.0
    return cosines


def profile_of(own: TfidfRows) -> tuple[np.ndarray, np.ndarray]:
    """(the own jobs' :func:`coherence_weights`, the profile: their rows' mean weighted by
    them, dense over the columns; zeros without own jobs)."""
    weights = coherence_weights(own)
    profile = np.bincount(
        own.words, weights=own.values * weights[own.entry_rows], minlength=own.distinct.size
    ).astype(np.float64)
    return weights, profile / weights.sum() if weights.sum() else profile


def weighted_centroids(vocabulary: Vocabulary, rows: TfidfRows) -> np.ndarray:
    """Each row's word2vec centroid, its words' unit vectors weighted by the row's values,
    float64, not normalised."""
    return _centroids(
        rows.starts, rows.words, rows.values, vocabulary.vectors, rows.distinct.astype(np.int64)
    )


@njit(cache=True, nogil=True)
def _centroids(
    starts: np.ndarray, words: np.ndarray, values: np.ndarray, vectors: np.ndarray, ids: np.ndarray
) -> np.ndarray:
    """:func:`weighted_centroids`, compiled: the vocabulary's float32 vectors are read in
    place and summed in float64 (no float64 copy of a request's 4,000 word vectors); a word
    outside the vocabulary (a negative id) has none."""
    rows, dimensions = starts.size - 1, vectors.shape[1]
    centroids = np.zeros((rows, dimensions))
    for row in range(rows):
        for entry in range(starts[row], starts[row + 1]):
            word = ids[words[entry]]
            if word >= 0:
                for dimension in range(dimensions):
                    centroids[row, dimension] += values[entry] * np.float64(
                        vectors[word, dimension]
                    )
    return centroids


def document_vectors(vocabulary: Vocabulary, texts: list[np.ndarray]) -> np.ndarray:
    """Each text's TF-IDF-weighted word2vec centroid (seed 004's document vector), unit
    length, float32; a zero row where no word has a vector. What the jobs index stores for
    dense retrieval: its cosine with :func:`profile_vector` is `profile_w2v`."""
    return unit_rows(weighted_centroids(vocabulary, tfidf_rows(vocabulary, texts))).astype(
        np.float32
    )


def profile_vector(vocabulary: Vocabulary, own_texts: list[np.ndarray]) -> np.ndarray:
    """The candidate's query vector for dense retrieval: the centroid of their own jobs'
    profile (the TF-IDF vectors' mean weighted by :func:`coherence_weights`), unit length;
    zeros when no own word has a vector. A pool job's `profile_w2v` is its cosine with this."""
    own = tfidf_rows(vocabulary, own_texts)
    _, profile = profile_of(own)
    centroid = weighted_centroids(vocabulary, TfidfRows.dense(profile, own.distinct))[0]
    return unit_rows(centroid).astype(np.float32)


def text_similarities(
    vocabulary: Vocabulary, own_texts: list[np.ndarray], pool_texts: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(`profile_tfidf`, `profile_w2v`) of each pool text against the own texts' profile
    (their mean, weighted by :func:`coherence_weights`), and those weights: all texts'
    TF-IDF vectors over the words they use, computed once."""
    if not pool_texts or not own_texts:
        empty = np.zeros(len(pool_texts), dtype=np.float32)
        return empty, empty.copy(), np.ones(len(own_texts))
    texts = tfidf_rows(vocabulary, [*own_texts, *pool_texts])
    own_weights, profile = profile_of(texts.rows(0, len(own_texts)))
    pool = texts.rows(len(own_texts), texts.count)
    tfidf = np.bincount(
        pool.entry_rows, weights=pool.values * profile[pool.words], minlength=pool.count
    )
    centroid = weighted_centroids(vocabulary, TfidfRows.dense(profile, texts.distinct))[0]
    centroids = weighted_centroids(vocabulary, pool)
    w2v = (
        centroids
        @ centroid
        / np.maximum(np.linalg.norm(centroids, axis=1) * np.linalg.norm(centroid), 1e-12)
    )
    return tfidf.astype(np.float32), w2v.astype(np.float32), own_weights


# --- per candidate ----------------------------------------------------------------------------


def _arrays(values: Iterable[object], dtype: type) -> list[np.ndarray]:
    """Array cells as numpy arrays; a missing cell (a job outside the graph: null in Spark,
    NaN after a pandas merge) as an empty one."""
    return [
        np.asarray(v if isinstance(v, (list, tuple, np.ndarray)) else [], dtype=dtype)
        for v in values
    ]


def profile_features(
    group: pd.DataFrame, vocabulary: Vocabulary, wanted: Collection[str] = PROFILE_FEATURES
) -> dict[str, np.ndarray]:
    """One candidate's rows: its pool (`_profile_role` "pool") and its own jobs ("own"),
    each with `job_id`, `doc_tokens` (or their ids, `doc_ids`) and the job's interest-graph
    row -> the `wanted` :data:`PROFILE_FEATURES` of each pool row, in the pool rows' order.
    The two kinds of rows are told apart in the columns' arrays, not as two frames. The
    text similarities are always computed: they give the own jobs' weights the others use.
    Serving one model computes what it reads (`ranking.factory.featured_pool`); the pairs
    and the evaluation, all of them."""
    role = group[PROFILE_ROLE].to_numpy()
    own, pool, carried = role == "own", role == "pool", role == "carried"
    column = document_column(group)
    kind = np.int64 if column == DOC_IDS else object
    texts = group[column].to_numpy()
    tfidf, w2v, own_weights = text_similarities(
        vocabulary, _arrays(texts[own], kind), _arrays(texts[pool], kind)
    )
    features = {"profile_tfidf": tfidf, "profile_w2v": w2v}
    if "co_interest" in wanted:
        features["co_interest"] = _co_interest(group, own, pool, carried, own_weights)
    if "profile_behaviour" in wanted:
        features["profile_behaviour"] = _behaviour(group, own, pool, carried, own_weights)
    if "occupation_agreement" in wanted:
        occupations = _occupations(group)
        features["occupation_agreement"] = occupation_agreement(
            occupations[own], own_weights, occupations[pool]
        )
    return {name: features[name] for name in PROFILE_FEATURES if name in wanted}


def _co_interest(
    group: pd.DataFrame,
    own: np.ndarray,
    pool: np.ndarray,
    carried: np.ndarray,
    own_weights: np.ndarray,
) -> np.ndarray:
    """`co_interest` of the pool rows (:func:`co_interest_scores`) from the graph's rows; a
    pool job nobody but this candidate showed interest in carries its neighbours' (the
    `carried` rows, :func:`_carried`)."""
    neighbours, counts = group["neighbours"].to_numpy(), group["counts"].to_numpy()
    jobs = group["job_id"].to_numpy(dtype=np.int64)
    interested = group["interested"].fillna(0).to_numpy(dtype=np.int64)
    sequences = group["sequence_job_ids"].to_numpy()[pool]
    sequence = np.asarray(
        sequences[0] if len(sequences) and sequences[0] is not None else [], dtype=np.int64
    )

    def scores(rows: np.ndarray) -> np.ndarray:
        return co_interest_scores(
            _arrays(neighbours[own], np.int64),
            _arrays(counts[own], np.int64),
            _arrays(neighbours[rows], np.int64),
            _arrays(counts[rows], np.int64),
            interested[rows],
            jobs[own],
            jobs[rows],
            sequence,
            own_weights,
        )

    direct = scores(pool)
    unseen = interested[pool] - np.isin(jobs[pool], sequence) <= 0
    return _carried(group, pool, carried, direct, unseen, scores)


def _behaviour(
    group: pd.DataFrame,
    own: np.ndarray,
    pool: np.ndarray,
    carried: np.ndarray,
    own_weights: np.ndarray,
) -> np.ndarray:
    """`profile_behaviour` of the pool rows, in the candidate's fold (`features.behaviour`);
    a pool job with no vector in that fold (nobody outside it showed interest in it) carries
    its neighbours' (:func:`_carried`)."""
    vectors = group[BEHAVIOUR_VECTORS].to_numpy()
    fold = candidate_folds(_fold_owner(group, pool))
    in_fold = int(fold[0]) if fold.size else 0

    def scores(rows: np.ndarray) -> np.ndarray:
        return behaviour_similarity(
            _arrays(vectors[own], np.float32),
            _arrays(vectors[rows], np.float32),
            in_fold,
            own_weights,
        )

    unseen = ~has_fold_vector(_arrays(vectors[pool], np.float32), in_fold)
    return _carried(group, pool, carried, scores(pool), unseen, scores)


def _carried(
    group: pd.DataFrame,
    pool: np.ndarray,
    carried: np.ndarray,
    direct: np.ndarray,
    unseen: np.ndarray,
    scores: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """`direct` (a behaviour feature of the pool rows) with the `unseen` rows' replaced by
    the weighted mean of their neighbours' (`features.carried`), which `scores` computes for
    the `carried` rows the group holds."""
    if not unseen.any() or not carried.any() or CARRIED_FROM not in group.columns:
        return direct
    through = scores(carried)
    jobs = group["job_id"].to_numpy(dtype=np.int64)
    means = carried_means(
        _arrays(group[CARRIED_FROM].to_numpy()[pool][unseen], np.int64),
        _arrays(group[CARRIED_WEIGHTS].to_numpy()[pool][unseen], np.float32),
        jobs[carried],
        through.astype(np.float64),
    )
    out = direct.copy()
    out[unseen] = means
    return out


def _fold_owner(group: pd.DataFrame, pool: np.ndarray) -> np.ndarray:
    """The candidate whose behaviour fold the group reads (none for an empty group): its
    pool rows' :data:`FOLD_OWNER` where they have one, else its `candidate_id`. A further
    training list's rows are keyed by the list's id, a hash unrelated to the candidate's
    fold; reading that id's fold would, three times in four, score the list with vectors
    fitted on the candidate's own row, held-out job included."""
    ids = group["candidate_id"].to_numpy()[:1]
    if FOLD_OWNER in group.columns and pool.any():
        owner = group[FOLD_OWNER].to_numpy()[pool][:1]
        if not pd.isna(owner[0]):
            ids = owner
    return np.asarray(ids, dtype=np.int64)


def _occupations(rows: pd.DataFrame) -> np.ndarray:
    """The rows' normalised title occupations; none where the titles are not normalised."""
    if TITLE_OCCUPATION not in rows.columns:
        return np.full(len(rows), None, dtype=object)
    return rows[TITLE_OCCUPATION].to_numpy(dtype=object)


def add_profile_features(
    frame: pd.DataFrame, vocabulary: Vocabulary, wanted: Sequence[str] = PROFILE_FEATURES
) -> pd.DataFrame:
    """Rows of any number of candidates (pool and own rows, see :func:`profile_features`)
    -> their pool rows with the `wanted` features, candidate by candidate, the own rows and
    the graph's columns dropped (an empty frame too: its features are empty float32
    columns). The features are computed per candidate and the frame is sliced once at the
    end (a request's one candidate is not split off at all)."""
    is_pool = frame[PROFILE_ROLE].to_numpy() == "pool"
    groups = sorted(frame.groupby("candidate_id", sort=False).indices.values(), key=min)
    features = [
        profile_features(frame if len(rows) == len(frame) else frame.take(rows), vocabulary, wanted)
        for rows in groups
    ]
    pool_rows = [rows[is_pool[rows]] for rows in groups]
    columns = {
        name: np.concatenate([f[name] for f in features]).astype(np.float32, copy=False)
        if features
        else np.zeros(0, dtype=np.float32)
        for name in wanted
    }
    kept = frame.take(np.concatenate(pool_rows) if groups else np.zeros(0, dtype=np.int64))
    # `infer_objects`: the own rows' nulls made the pool's numbers objects, and they left
    gone = [c for c in (PROFILE_ROLE, *GRAPH_COLUMNS) if c in kept.columns]
    return kept.drop(columns=gone).infer_objects().assign(**columns)


def profile_rows(
    pool: DataFrame, tokens: DataFrame, graph: DataFrame, shared: Iterable[str] = ()
) -> DataFrame:
    """Pool rows -> the rows :func:`add_profile_features` reads: the pool rows and, for each
    candidate, a row per own job (its text from `tokens`) and a row per ad whose evidence a
    pool job the graph knows little of carries (:func:`carrying_jobs`), all with their graph
    row from `graph` (a :func:`co_interest_table`) and their :data:`PROFILE_ROLE`. An own or
    carried row has the candidate's `shared` columns (what the candidate's rows share, such as
    its query) and nulls in the pool's other columns."""
    own = (
        pool.select("candidate_id", *shared, "own_job_ids")
        .dropDuplicates(["candidate_id"])
        .select(
            "candidate_id",
            *shared,
            F.explode(F.array_distinct("own_job_ids")).alias("job_id"),
        )
        .join(tokens, "job_id")
        .join(graph, "job_id", "left")
        .withColumn(PROFILE_ROLE, F.lit("own"))
    )
    pooled = pool.join(graph, "job_id", "left").withColumn(PROFILE_ROLE, F.lit("pool"))
    rows = pooled.unionByName(own, allowMissingColumns=True)
    if CARRIED_FROM not in graph.columns:
        return rows
    carrying = (
        pooled.where(F.coalesce("interested", F.lit(0)) <= MOSTLY_UNSEEN)
        .select("candidate_id", *shared, F.explode(CARRIED_FROM).alias("job_id"))
        .dropDuplicates(["candidate_id", "job_id"])
        .join(graph, "job_id")
        .withColumn(PROFILE_ROLE, F.lit("carried"))
    )
    return rows.unionByName(carrying, allowMissingColumns=True)


# A pool job whose graph row counts at most this many candidates may be one nobody but the
# candidate showed interest in (`profile_features` decides): its carried rows are fetched.
MOSTLY_UNSEEN = 1


def carrying_jobs(pool_graph: pd.DataFrame) -> np.ndarray:
    """The distinct jobs whose evidence the pool jobs of `pool_graph` (their graph rows)
    may carry: the `carried_from` of those the graph knows at most one candidate of."""
    if CARRIED_FROM not in pool_graph.columns:
        return np.zeros(0, dtype=np.int64)
    sparse = pool_graph["interested"].fillna(0).to_numpy() <= MOSTLY_UNSEEN
    lists = _arrays(pool_graph[CARRIED_FROM].to_numpy()[sparse], np.int64)
    return np.unique(np.concatenate(lists)) if lists else np.zeros(0, dtype=np.int64)


def profile_rows_of(
    pool: pd.DataFrame,
    tokens: pd.DataFrame,
    graph: pd.DataFrame,
    shared: Iterable[str] = (),
    own: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """:func:`profile_rows` on pandas, for a request: `tokens` and `graph` hold (at least)
    the rows of the pool's and the candidates' own jobs, and `graph` those of the jobs the
    pool's may carry (:func:`carrying_jobs`), one row per job. The own rows are built from
    each candidate's list (`own`: :func:`own_jobs_of` of `pool` and `shared`, when the
    caller has it already), the tables looked up by job id and the kinds of rows joined
    once, with no explode or merge: those cost about 5 ms of a 100-job request. Own jobs
    without a text in `tokens` are left out, as Spark's inner join leaves them."""
    own = own if own is not None else own_jobs_of(pool, shared)
    with_text = np.isin(own["job_id"], tokens["job_id"].to_numpy())
    own = {column: values[with_text] for column, values in own.items()}
    own_rows = pd.DataFrame({**own, **_rows_of(tokens, own["job_id"]), PROFILE_ROLE: "own"})
    pooled = pool.assign(**{PROFILE_ROLE: "pool"})
    pooled = pooled.assign(**_rows_of(graph, pooled["job_id"].to_numpy()))
    parts = [pooled, own_rows.assign(**_rows_of(graph, own_rows["job_id"].to_numpy()))]
    if CARRIED_FROM in graph.columns:
        parts.append(_carrying_rows(pooled, graph, shared))
    return pd.concat(parts, ignore_index=True)


def _carrying_rows(
    pooled: pd.DataFrame, graph: pd.DataFrame, shared: Iterable[str]
) -> pd.DataFrame:
    """Per candidate of `pooled` (pool rows with their graph rows), a row per distinct job
    its pool jobs may carry (:func:`carrying_jobs`), with the `shared` columns and its graph
    row."""
    shared = list(shared)
    pieces = []
    for candidate, rows in pooled.groupby("candidate_id", sort=False):
        jobs = carrying_jobs(rows)
        if not len(jobs):
            continue
        head = rows.iloc[0]
        pieces.append(
            pd.DataFrame(
                {
                    "candidate_id": np.repeat(candidate, len(jobs)),
                    **{column: [head[column]] * len(jobs) for column in shared},
                    "job_id": jobs,
                }
            )
        )
    if not pieces:
        return pd.DataFrame(columns=["candidate_id", *shared, "job_id", PROFILE_ROLE])
    carrying = pd.concat(pieces, ignore_index=True)
    return carrying.assign(
        **_rows_of(graph, carrying["job_id"].to_numpy()), **{PROFILE_ROLE: "carried"}
    )


def own_jobs_of(pool: pd.DataFrame, shared: Iterable[str] = ()) -> dict[str, np.ndarray]:
    """Each candidate of `pool` (its first row) -> a row per distinct job of its
    `own_job_ids`, in their order: the columns `candidate_id`, the `shared` ones and
    `job_id`. Built from the lists, not by `explode`: about 2 ms less a request."""
    heads = pool.drop_duplicates("candidate_id")
    own_jobs = [_distinct_jobs(jobs) for jobs in heads["own_job_ids"]]
    counts = [len(jobs) for jobs in own_jobs]
    return {
        **{
            column: np.repeat(heads[column].to_numpy(), counts)
            for column in ("candidate_id", *shared)
        },
        "job_id": np.array([j for jobs in own_jobs for j in jobs], dtype=np.int64),
    }


def _distinct_jobs(jobs: object) -> list[int]:
    """A candidate's own job ids, each once, in their order; none for a missing list."""
    if not isinstance(jobs, (list, tuple, np.ndarray)):
        return []
    return list(dict.fromkeys(int(j) for j in jobs if not pd.isna(j)))


def _rows_of(table: pd.DataFrame, job_ids: np.ndarray) -> dict[str, np.ndarray]:
    """`table`'s columns but `job_id` for each of `job_ids`, in their order, as a left merge
    gives them (missing values where a job has no row)."""
    found = table.set_index("job_id").reindex(job_ids)
    return {column: found[column].to_numpy() for column in found.columns}


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

    rows = profile_rows(pool, tokens, graph)
    return map_groups_in_pandas(rows, ["candidate_id"], run, schema, order=PROFILE_ROW_ORDER)


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
    one compiled pass per Arrow batch."""
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
        own, ["candidate_id"], run, f"candidate_id LONG, {QUERY_VECTOR} ARRAY<FLOAT>", ["job_id"]
    )
    return queries.join(vectors, "candidate_id", "left")
