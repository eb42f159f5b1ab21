"""Retrieve -> features -> re-rank -> cut-off, composed like PyTerrier's pipelines.

    pipeline = retriever >> DocumentText(tokens) >> DrmmFeatures(...) >> Reranker(scorer) % 10

**The contract.** A retriever takes a frame of queries (`candidate_id, own_job_ids,
sequence_job_ids, query_terms, query_job_share`) and returns a *ranked frame*: one row per
(candidate, job) with `score` and `rank` (1 is the best of the candidate), plus
`query_terms`, `query_job_share`, `bm25`,
`bm25_rank` and the query's `own_job_ids` and `sequence_job_ids` (what the profile features
read). Every
later step takes a ranked frame and returns one: a feature step adds columns, a re-ranker
replaces `score` and `rank`, a cut-off keeps the top k.

**Two engines, one code path.** Each step has `transform(pandas.DataFrame)`, for one request
or one batch, and `transform_spark(DataFrame)`, for millions of candidates. The Spark form runs
the pandas form inside `mapInPandas`; a step that needs every row of a query at once (the
features: one matrix product per query) is a :class:`QueryStep`, and gets them through
`platform.spark.map_groups_in_pandas`. Consecutive query steps (features, scores, cut-off)
run in one such pass (:class:`PerQuery`), so the matching histograms never leave Python.
The tables of jobs the steps look rows up in (texts, the interest graph) are a :data:`JobTable`:
Spark DataFrames for a batch, joined in Spark; the same tables also shipped to every worker
(:class:`WorkerTable`), looked up there inside the query steps' pass; or pandas frames held in
memory by the online endpoint (`serving.online`), whose requests then never start a Spark job.

Evaluation and serving build their pipelines in `ranking.factory`, from the configuration;
a new re-ranker is one :class:`ranking.scorers.Scorer` class registered there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
from elasticsearch import Elasticsearch
from pyspark import Broadcast
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from jobrec_core.config import RetrievalConfig
from jobrec_core.features.matching import (
    FEATURE_COLUMNS,
    PROFILE_FEATURES,
    WordsAndIdf,
    add_features,
    idf_vocabulary,
)
from jobrec_core.features.profile import (
    GRAPH_COLUMNS,
    PROFILE_ROLE,
    PROFILE_ROW_ORDER,
    QUERY_VECTOR,
    add_profile_features,
    carrying_jobs,
    own_jobs_of,
    profile_rows,
    profile_rows_of,
    query_vector_frame,
    with_query_vectors,
)
from jobrec_core.platform.heap import freeze_long_lived
from jobrec_core.platform.spark import map_groups_in_pandas, rows_in_order, schema_columns
from jobrec_core.ranking.scorers import Bm25Mix, Scorer, score_column
from jobrec_core.search.bm25 import FULL_QUERY, Search, retrieval_fingerprint, retrieve, search_all
from jobrec_core.search.connection import EsConnection, make_client
from jobrec_core.search.dense import HYBRID_HITS, PoolResult, Retriever, search_pools

QUERY_COLUMNS = (
    "candidate_id",
    "own_job_ids",
    "sequence_job_ids",
    "query_terms",
    "query_job_share",
)
RANKED_SCHEMA = (
    "candidate_id LONG, query_terms ARRAY<STRING>, query_job_share ARRAY<FLOAT>, job_id INT, "
    "score DOUBLE, rank INT, bm25 FLOAT, bm25_rank INT, own_job_ids ARRAY<INT>, "
    "sequence_job_ids ARRAY<INT>"
)


@dataclass(frozen=True, eq=False)
class WorkerTable:
    """A Spark table of jobs that is also shipped to every worker, once, as a pandas frame
    indexed by job id (a broadcast of :func:`by_job_id`'s frame). A step that reads it looks
    each query's rows up in the worker's memory, inside the query steps' grouped pass
    (:class:`PerQuery`), instead of joining in Spark: a join shuffles every pool row and
    carries each job's text through the shuffle and Arrow, and costs more than the features
    it feeds (docs/BENCHMARKS.md). Only for tables a worker can hold
    (`histograms.worker_tables_max_jobs`). Pickled into a task, only the broadcast travels."""

    frame: DataFrame | None  # None in a worker
    shipped: Broadcast

    @property
    def rows(self) -> pd.DataFrame:
        return self.shipped.value

    def __reduce__(self) -> tuple[Any, ...]:
        return (WorkerTable, (None, self.shipped))


JobTable: TypeAlias = DataFrame | pd.DataFrame | WorkerTable
"""A table of jobs a step reads (`job_id` and columns): a Spark DataFrame, the same table also
shipped to the workers (:class:`WorkerTable`), or the rows collected once into a pandas frame,
for a process that answers requests without Spark."""


def job_rows(table: JobTable, job_ids: Iterable[int]) -> pd.DataFrame:
    """The rows of `table` for `job_ids`, as pandas: one request's lookup, in memory when the
    table is, else one small Spark query."""
    wanted = sorted({int(j) for j in job_ids})
    if isinstance(table, WorkerTable):
        table = table.rows
    if isinstance(table, pd.DataFrame):
        if table.index.name == _BY_JOB_ID:  # `by_job_id`: a hash lookup per wanted job
            positions = table.index.get_indexer(np.asarray(wanted, dtype=np.int64))
            found = table.take(np.sort(positions[positions >= 0]))
        else:  # a scan of the whole table
            found = table[table["job_id"].isin(wanted)]
        return found.reset_index(drop=True)
    return table.where(F.col("job_id").isin(wanted)).toPandas()


def by_job_id(table: pd.DataFrame) -> pd.DataFrame:
    """An in-memory :data:`JobTable` indexed by its (distinct) `job_id`, which stays a column
    too: :func:`job_rows` then finds a request's 100 jobs among the demo's 30,000 in 0.1 ms
    instead of scanning them all (0.5 ms a table)."""
    # int64 whatever the column's type (Spark's INT is int32): a lookup would otherwise cast
    # the whole index on every call
    indexed = table.set_index(pd.Index(table["job_id"].to_numpy(np.int64), name=_BY_JOB_ID))
    if not indexed.index.is_unique:
        raise ValueError("a job table holds one row per job_id")
    return indexed


# The index name `by_job_id` gives: not `job_id` itself, which a merge or a groupby on the
# column would then find ambiguous.
_BY_JOB_ID = "_job_id_index"


def spark_table(table: JobTable) -> DataFrame:
    """`table` for a Spark step; a pandas table serves requests only."""
    if isinstance(table, WorkerTable):
        if table.frame is None:
            raise TypeError("a worker's copy of a table has no Spark form")
        return table.frame
    if isinstance(table, pd.DataFrame):
        raise TypeError("a step built on in-memory tables has no Spark form (transform only)")
    return table


def _shipped(*tables: JobTable) -> bool:
    return all(isinstance(t, WorkerTable) for t in tables)


class Step:
    """One step of a pipeline; `a >> b` chains, `a % k` keeps the top k."""

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        raise NotImplementedError

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        raise NotImplementedError

    def __rshift__(self, other: Step) -> Pipeline:
        return Pipeline((*_steps(self), *_steps(other)))

    def __mod__(self, k: int) -> Pipeline:
        return self >> Cutoff(k)


def _steps(step: Step) -> tuple[Step, ...]:
    return step.steps if isinstance(step, Pipeline) else (step,)


@dataclass(frozen=True)
class Pipeline(Step):
    steps: tuple[Step, ...]

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        for step in self.steps:
            frame = step.transform(frame)
        return frame

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        for step in self.spark_steps:
            frame = step.transform_spark(frame)
        return frame

    @property
    def spark_steps(self) -> list[Step]:
        """What `transform_spark` runs: the steps, each run of query steps fused."""
        return _fused(self.steps)


class QueryStep(Step):
    """A step whose pandas form needs all the rows of each query it is given, and nothing
    else: no search, and no table but one shipped to the workers. In Spark, consecutive query
    steps run as one grouped pass (:class:`PerQuery`), so that what one adds and a later one
    reads (the matching histograms, about 100 jobs x query terms x bins a query) stays in the
    Python worker instead of crossing to the JVM and back between steps."""

    @property
    def fusable(self) -> bool:
        """Whether the step can run in the grouped pass (a step that looks rows up: only
        when its tables are shipped to the workers)."""
        return True

    def spark_fields(self, fields: list[str]) -> list[str]:
        """The output's DDL fields (`` `name` type``) given the input's, in order."""
        raise NotImplementedError


@dataclass(frozen=True)
class PerQuery(Step):
    """Query steps run one after the other on each batch of whole queries (grouped by
    `QUERY_KEYS`, `platform.spark.map_groups_in_pandas`): their pandas forms, unchanged."""

    steps: tuple[QueryStep, ...]

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return Pipeline(self.steps).transform(frame)

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        fields = _fields(frame)
        order = _row_order(frame.columns)
        run = self._run(fields)
        return map_groups_in_pandas(
            frame, list(QUERY_KEYS), run, ", ".join(self._fields_after(fields)), order
        )

    def transform_pools_spark(self, pools: DataFrame) -> DataFrame:
        """The same pass on a retriever's pools as they come, one row per query
        (:meth:`RetrieverStep.pools_spark`): each batch's pools become their rows in the
        worker (:func:`pool_rows_of`), in the order the grouped pass sorts them into. No
        shuffle and no regrouping of the pool rows: a query's rows are in one Arrow row
        already."""
        fields = _fields(_pool_rows(pools))
        order = _row_order(field_name(f) for f in fields)
        run = self._run(fields)

        def each(batches: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            freeze_long_lived()  # as `platform.spark.map_groups_in_pandas`'s passes
            for batch in batches:
                rows, counts = pool_rows_of(batch)
                if len(rows):  # a batch of empty pools has nothing to rank
                    yield run(rows_in_order(rows, counts, order))

        return pools.mapInPandas(each, ", ".join(self._fields_after(fields)))

    def _fields_after(self, fields: list[str]) -> list[str]:
        for step in self.steps:
            fields = step.spark_fields(fields)
        return fields

    def _run(self, fields: list[str]) -> Callable[[pd.DataFrame], pd.DataFrame]:
        """What a worker runs on whole queries' rows (`fields`): the steps, then the output's
        columns as Arrow takes them."""
        columns = [field_name(f) for f in self._fields_after(fields)]
        arrays = [c for c in QUERY_KEYS[1:] if c in columns]

        def run(rows: pd.DataFrame) -> pd.DataFrame:
            done = self.transform(rows)
            # Arrow takes the query's arrays back as lists.
            return done.assign(**{c: [list(t) for t in done[c]] for c in arrays})[columns]

        return run


def _row_order(columns: Iterable[str]) -> list[str]:
    """The columns that tell a query's rows apart, which a pass sorts its rows by: the
    candidate's own rows first, if any, then by job."""
    present = set(columns)
    return [c for c in PROFILE_ROW_ORDER if c in present]


@dataclass(frozen=True)
class PoolsPerQuery(Step):
    """A retriever and the query steps right after it, in one Spark pass: the pools as
    searched (one row per query) go straight to the steps' worker, which makes their rows
    (:meth:`PerQuery.transform_pools_spark`). The plan of :class:`PerQuery` after the
    retriever's ranked frame, without exploding every pool into rows in Spark, shuffling them
    by query and collecting them back into one row per query. The same rows, in the same
    order, to the bit."""

    retriever: RetrieverStep
    per_query: PerQuery

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return self.per_query.transform(self.retriever.transform(frame))

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        return self.per_query.transform_pools_spark(self.retriever.pools_spark(frame))


QUERY_KEYS = ("candidate_id", "query_terms", "query_job_share")  # what a query's rows share


def _fused(steps: Sequence[Step]) -> list[Step]:
    """`steps` with each run of two or more consecutive query steps made one :class:`PerQuery`
    (a lone query step keeps its own Spark form, which may be cheaper than a grouping), and a
    retriever with the pass right after it made one :class:`PoolsPerQuery`."""
    out: list[Step] = []
    run: list[QueryStep] = []
    for step in [*steps, None]:
        if isinstance(step, QueryStep) and step.fusable:
            run.append(step)
            continue
        if len(run) > 1 and out and isinstance(out[-1], RetrieverStep):
            out[-1] = PoolsPerQuery(out[-1], PerQuery(tuple(run)))
        else:
            out += [PerQuery(tuple(run))] if len(run) > 1 else run
        run = []
        if step is not None:
            out.append(step)
    return out


# --- retrieval --------------------------------------------------------------------------------


# What a retriever hands its searches to: (the searches, the query rows to search, all the
# queries, the retriever's fingerprint) -> the results to rank.
RetrievalSink = Callable[[Search, DataFrame, DataFrame, str], DataFrame]


def keep_in_memory(
    search: Search, searchable: DataFrame, queries: DataFrame, fingerprint: str
) -> DataFrame:
    """The default sink: every query searched, the results as they are (a stage passes one
    that stores them in Delta, resumable, and quarantines the failed searches,
    `search.bm25.RetrievalCheckpoint`)."""
    return search(searchable).cache()


class RetrieverStep(Step):
    """A first step: queries -> the ranked frame of their pools. In Spark, the searches'
    results as they are stored (one row per query) become the pools' rows at the end."""

    def pools_spark(self, frame: DataFrame) -> DataFrame:
        """The pools of `frame`'s queries, one row per query (:data:`POOLS_SCHEMA`)."""
        raise NotImplementedError

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        return _pool_rows(self.pools_spark(frame))


@dataclass(frozen=True)
class Bm25Retriever(RetrieverStep):
    """The paper's BM25 query against one version of the jobs index (`search.bm25`), top
    `settings.top_k`, minus the candidate's own jobs. `sink` receives the raw results
    (`candidate_id, full_hits, error`) and the queries, and returns the results to rank."""

    connection: EsConnection
    index: str
    settings: RetrievalConfig
    partitions: int = 1
    sink: RetrievalSink = field(default=keep_in_memory, compare=False)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame[frame["query_terms"].map(len) > 0]  # an empty query finds nothing
        client = make_client(self.connection)
        try:
            texts = [" ".join(terms) for terms in frame["query_terms"]]
            results = search_all(client, self.index, texts, self.settings)
        finally:
            client.close()
        failed = [r.error for r in results if r.error]
        if failed:
            raise RuntimeError(f"{len(failed)} searches failed: {failed[0]}")
        hits = [[{"job_id": j, "score": s} for j, s in r.hits or []] for r in results]
        return _ranked_hits(frame.assign(full_hits=hits))

    def pools_spark(self, frame: DataFrame) -> DataFrame:
        queries = frame.select(*QUERY_COLUMNS)
        connection, index, settings, partitions = (
            self.connection,
            self.index,
            self.settings,
            self.partitions,
        )
        retrieved = self.sink(
            lambda rows: retrieve(rows, connection, index, settings, partitions, FULL_QUERY),
            queries.where(F.size("query_terms") > 0),
            queries,
            retrieval_fingerprint(index, settings, "bm25"),
        )
        # Hits come by score, then job id (`search.bm25.ranked_hits`): a kept hit's BM25 rank
        # is its position among all hits, own jobs included.
        return _pools(retrieved, queries, lambda hit, position: (hit["score"], position))


@dataclass(frozen=True)
class PoolRetriever(RetrieverStep):
    """The dense or hybrid pool (`search.dense`): the kNN of the candidate's profile vector
    (`features.profile.profile_vector`, from their own jobs' text in `tokens`), alone or
    fused with BM25's list by reciprocal rank, at most `settings.top_k` jobs, the
    candidate's own jobs left out, each with its BM25 score for the same query. `sink` as
    :class:`Bm25Retriever`'s."""

    retriever: Retriever
    connection: EsConnection
    index: str
    settings: RetrievalConfig
    tokens: JobTable
    vectors_file: str
    words_and_idf: WordsAndIdf
    partitions: int = 1
    sink: RetrievalSink = field(default=keep_in_memory, compare=False)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame[frame["query_terms"].map(len) > 0]
        vectors = _query_vectors(frame, self.tokens, self.vectors_file, self.words_and_idf)
        searched = frame.merge(vectors, on="candidate_id", how="left")
        client = make_client(self.connection)
        try:
            results = _search_pools(client, self.index, self.settings, self.retriever, searched)
        finally:
            client.close()
        failed = [r.error for r in results if r.error]
        if failed:
            raise RuntimeError(f"{len(failed)} searches failed: {failed[0]}")
        hits = [[h.as_dict() for h in r.hits or []] for r in results]
        return _ranked_hits(searched.assign(full_hits=hits))

    def pools_spark(self, frame: DataFrame) -> DataFrame:
        queries = frame.select(*QUERY_COLUMNS)
        schema = f"candidate_id LONG, full_hits {HYBRID_HITS}, error STRING"
        # What the executors need, without `self` (its DataFrames live on the driver only).
        connection, index, settings, retriever = (
            self.connection,
            self.index,
            self.settings,
            self.retriever,
        )

        vectors_file, words_and_idf, partitions = (
            self.vectors_file,
            self.words_and_idf,
            self.partitions,
        )
        # Shipped to the workers, the jobs' text gives each batch its profile vectors where it
        # is searched; else a Spark job computes them first (joins and a grouped pass).
        in_worker = self.tokens if isinstance(self.tokens, WorkerTable) else None

        def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            freeze_long_lived()  # as `search.bm25.retrieve`'s partitions
            client = make_client(connection)
            try:
                for batch in frames:
                    if in_worker is not None:
                        vectors = _query_vectors(batch, in_worker, vectors_file, words_and_idf)
                        batch = batch.merge(vectors, on="candidate_id", how="left")
                    results = _search_pools(client, index, settings, retriever, batch)
                    yield pd.DataFrame(
                        {
                            "candidate_id": batch["candidate_id"],
                            "full_hits": [
                                None if r.hits is None else [h.as_dict() for h in r.hits]
                                for r in results
                            ],
                            "error": [r.error for r in results],
                        }
                    )
            finally:
                client.close()

        tokens = spark_table(self.tokens)

        def search(rows: DataFrame) -> DataFrame:
            searched = ["candidate_id", "query_terms", "own_job_ids"]
            if in_worker is None:
                rows = with_query_vectors(rows, tokens, vectors_file, words_and_idf)
                searched.append(QUERY_VECTOR)
            return rows.select(*searched).repartition(partitions).mapInPandas(run, schema)

        retrieved = self.sink(
            search,
            queries.where(F.size("query_terms") > 0),
            queries,
            retrieval_fingerprint(index, settings, retriever, vectors_file),
        )
        return _pools(retrieved, queries, lambda hit, _position: (hit["bm25"], hit["bm25_rank"]))


def _query_vectors(
    frame: pd.DataFrame, tokens: JobTable, vectors_file: str, words_and_idf: WordsAndIdf
) -> pd.DataFrame:
    """`candidate_id, query_vector` of the candidates of `frame` (`own_job_ids`): the profile
    vectors of their own jobs' text (`tokens`), for one request."""
    own = pd.DataFrame(own_jobs_of(frame))  # each job once, as Spark's `array_distinct`
    texts = job_rows(tokens, own["job_id"])[["job_id", "doc_tokens"]]
    return query_vector_frame(
        own.merge(texts, on="job_id"), idf_vocabulary(vectors_file, words_and_idf)
    )


def _search_pools(
    client: Elasticsearch,
    index: str,
    settings: RetrievalConfig,
    retriever: Retriever,
    queries: pd.DataFrame,
) -> list[PoolResult]:
    """`search.dense.search_pools` for query rows with their `query_vector`."""
    return search_pools(
        client,
        index,
        [" ".join(terms) for terms in queries["query_terms"]],
        [_vector(v) for v in queries[QUERY_VECTOR]],
        [list(own) if own is not None else [] for own in queries["own_job_ids"]],
        settings,
        retriever,
    )


def _vector(cell: Any) -> np.ndarray | None:
    return None if cell is None or not isinstance(cell, (list, np.ndarray)) else np.asarray(cell)


# A pool's kept hits, in pool order: array columns `pool_<name>` of one row per query.
POOL_HITS = {"job_id": "int", "score": "double", "bm25": "float", "bm25_rank": "int"}
POOLS_SCHEMA = ", ".join(
    [
        "candidate_id LONG, query_terms ARRAY<STRING>, query_job_share ARRAY<FLOAT>",
        "own_job_ids ARRAY<INT>, sequence_job_ids ARRAY<INT>",
        *(f"pool_{name} ARRAY<{kind.upper()}>" for name, kind in POOL_HITS.items()),
    ]
)


def _pools(
    retrieved: DataFrame, queries: DataFrame, bm25_of: Callable[[Column, Column], tuple]
) -> DataFrame:
    """Stored search results (`candidate_id, full_hits, error`, hits in pool order) -> one row
    per query (:data:`POOLS_SCHEMA`): its hits that are not one of the candidate's own jobs,
    as arrays; `bm25_of(hit, position)` gives a hit's BM25 score and rank."""
    kept = F.filter(
        F.transform("full_hits", lambda h, i: F.struct(h.alias("h"), (i + 1).alias("position"))),
        lambda x: ~F.array_contains(F.col("own_job_ids"), x["h"]["job_id"]),
    )

    def of_each(value: Callable[[Column], Column], name: str) -> Column:
        return F.transform(kept, lambda x: value(x).cast(POOL_HITS[name])).alias(f"pool_{name}")

    return (
        retrieved.where(F.col("error").isNull())
        .join(queries, "candidate_id")
        .select(
            *QUERY_KEYS,
            *_CARRIED,
            of_each(lambda x: x["h"]["job_id"], "job_id"),
            of_each(lambda x: x["h"]["score"], "score"),
            of_each(lambda x: bm25_of(x["h"], x["position"])[0], "bm25"),
            of_each(lambda x: bm25_of(x["h"], x["position"])[1], "bm25_rank"),
        )
    )


def _pool_rows(pools: DataFrame) -> DataFrame:
    """Pools (:data:`POOLS_SCHEMA`) -> the ranked frame: one row per kept hit, `rank` its
    position among them. :func:`pool_rows_of` is the same in pandas."""
    hits = F.arrays_zip(*(F.col(f"pool_{name}").alias(name) for name in POOL_HITS))
    return pools.select(*QUERY_KEYS, *_CARRIED, F.posexplode(hits).alias("kept", "x")).select(
        *QUERY_KEYS,
        F.col("x.job_id").alias("job_id"),
        F.col("x.score").alias("score"),
        (F.col("kept") + 1).cast("int").alias("rank"),
        F.col("x.bm25").alias("bm25"),
        F.col("x.bm25_rank").alias("bm25_rank"),
        *_CARRIED,
    )


def pool_rows_of(pools: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """:func:`_pool_rows` in a worker, on a batch of pools: (the rows, each query's row
    count). The query's columns are repeated by reference; the hits' arrays are concatenated
    once per column. The hits' columns are what pandas makes of Python numbers (int64, and
    float64, NaN where a rank is missing): what the grouped pass reads from its rows."""
    counts = pools["pool_job_id"].map(_length).to_numpy(dtype=np.int64)
    rows: dict[str, Any] = {
        key: np.repeat(pools[key].to_numpy(), counts) for key in (*QUERY_KEYS, *_CARRIED)
    }
    for name, kind in POOL_HITS.items():
        cells = [c for c in pools[f"pool_{name}"] if _length(c)]
        values = np.concatenate(cells) if cells else np.zeros(0)
        if values.dtype.kind in "fO":  # a missing value: NaN (Arrow) or None
            values = values.astype(np.float64)
        whole = kind == "int" and not np.isnan(values.astype(np.float64)).any()
        rows[name] = values.astype(np.int64 if whole else np.float64)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    rows["rank"] = np.arange(int(counts.sum()), dtype=np.int64) - starts + 1
    return pd.DataFrame(rows)[schema_columns(RANKED_SCHEMA)], counts


def _length(cell: Any) -> int:
    return 0 if cell is None or not isinstance(cell, (list, np.ndarray)) else len(cell)


_CARRIED = ("own_job_ids", "sequence_job_ids")  # from the query to every row of its pool


def _ranked_hits(frame: pd.DataFrame) -> pd.DataFrame:
    """Queries with their `full_hits` -> one row per hit that is not one of the candidate's
    own jobs, in the index's order (score, then job id); BM25's rank counts every hit, own jobs
    included, and `rank` only the kept ones.
    The pandas twin of the Spark SQL in `Bm25Retriever.transform_spark` (one request's 100
    hits; the batch path never loops in Python)."""
    names = (
        "candidate_id",
        "query_terms",
        "query_job_share",
        "job_id",
        "score",
        "bm25",
        "bm25_rank",
    )
    columns: dict[str, list[Any]] = {name: [] for name in (*names, *_CARRIED)}
    for candidate, terms, share, own, sequence, hits in zip(
        frame["candidate_id"],
        frame["query_terms"],
        frame["query_job_share"],
        frame["own_job_ids"],
        frame["sequence_job_ids"],
        frame["full_hits"],
        strict=True,
    ):
        own_list = [int(j) for j in (own if own is not None else [])]
        sequence_list = [int(j) for j in (sequence if sequence is not None else [])]
        own_jobs = set(own_list)
        terms_list = list(terms)
        share_list = [float(x) for x in share]
        for position, hit in enumerate(hits if hits is not None else []):
            if int(hit["job_id"]) in own_jobs:
                continue
            columns["candidate_id"].append(int(candidate))
            columns["query_terms"].append(terms_list)
            columns["query_job_share"].append(share_list)
            columns["job_id"].append(int(hit["job_id"]))
            columns["score"].append(float(hit["score"]))
            columns["bm25"].append(np.float32(hit.get("bm25", hit["score"])))
            columns["bm25_rank"].append(hit.get("bm25_rank", position + 1))
            columns["own_job_ids"].append(own_list)
            columns["sequence_job_ids"].append(sequence_list)
    ranked = pd.DataFrame(columns)
    ranked["bm25"] = ranked["bm25"].astype(np.float32)
    ranked["score"] = ranked["score"].astype(np.float64)
    # Null where the job is not in BM25's own list (a dense or hybrid pool's).
    has_null = ranked["bm25_rank"].isna().any()
    ranked["bm25_rank"] = ranked["bm25_rank"].astype("Int32" if has_null else np.int64)
    ranked["rank"] = ranked.groupby("candidate_id", sort=False).cumcount().to_numpy() + 1
    return ranked[schema_columns(RANKED_SCHEMA)]


def _ranks(frame: pd.DataFrame) -> np.ndarray:
    """1 for the best `score` of each candidate; equal scores by the lower job id (a missing
    score last). One `lexsort` of the columns: pandas' sort, groupby and cumcount cost about
    3 ms a 100-row request."""
    if frame.empty:
        return np.zeros(0, dtype=np.int32)
    candidates = frame["candidate_id"].to_numpy()
    order = np.lexsort(
        (
            frame["job_id"].to_numpy(),
            -frame["score"].to_numpy(dtype=np.float64),
            candidates,
        )
    )
    ordered = candidates[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    positions = np.arange(len(order))
    group_start = np.maximum.accumulate(np.where(first, positions, 0))
    ranks = np.empty(len(frame), dtype=np.int32)
    ranks[order] = positions - group_start + 1
    return ranks


# --- time -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clock:
    """The day a pipeline keeps ads live on: a fixed day (a batch, as of its date), or, with
    none, today's (UTC) at each call (an endpoint that serves for days)."""

    day: date | None = None

    def today(self) -> date:
        return self.day if self.day is not None else datetime.now(UTC).date()


@dataclass(frozen=True)
class LiveOnly(QueryStep):
    """Leaves out the pool rows of ads that are not live on the clock's day: posted after it
    or expired by it (`timeline.asof`; `dates`: `job_id, posted_at, expires_at`, nulls
    open-ended). `rank` then counts the rows kept, in the pool's order. An index holds the
    ads live on the day it was built for; this step keeps a later day's answers from holding
    an ad that has closed since. In Spark a join, or a lookup in the features' pass when
    `dates` is shipped to the workers."""

    dates: JobTable
    clock: Clock

    @property
    def fusable(self) -> bool:
        return _shipped(self.dates)

    def spark_fields(self, fields: list[str]) -> list[str]:
        return fields

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty:
            return frame
        day = pd.Timestamp(self.clock.today())
        dates = job_rows(self.dates, frame["job_id"])
        posted, expires = (pd.to_datetime(dates[c]) for c in ("posted_at", "expires_at"))
        live = (posted.isna() | (posted <= day)) & (expires.isna() | (expires > day))
        kept = frame[frame["job_id"].isin(dates["job_id"][live])].copy()
        kept["rank"] = (
            kept.groupby("candidate_id", sort=False)["rank"].rank(method="first").astype(np.int64)
        )
        return kept.reset_index(drop=True)

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        if self.fusable:
            return PerQuery((self,)).transform_spark(frame)
        day = F.lit(self.clock.today())
        dates = spark_table(self.dates)
        gone = dates.where((F.col("posted_at") > day) | (F.col("expires_at") <= day)).select(
            "job_id"
        )
        order = Window.partitionBy("candidate_id").orderBy("rank")
        kept = frame.join(gone, "job_id", "left_anti").select(*frame.columns)
        return kept.withColumn("rank", F.row_number().over(order))


# --- features ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocumentText(QueryStep):
    """Adds `doc_tokens`, the job's tokens the features and the WMD scorer read, from
    `tokens` (`job_id, doc_tokens`, `features.matching.document_tokens`): in Spark a join, or
    a lookup in the features' pass when the table is shipped to the workers."""

    tokens: JobTable

    @property
    def fusable(self) -> bool:
        return _shipped(self.tokens)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return frame.merge(job_rows(self.tokens, frame["job_id"]), on="job_id", how="inner")

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        if self.fusable:
            return PerQuery((self,)).transform_spark(frame)
        return frame.join(spark_table(self.tokens), "job_id")

    def spark_fields(self, fields: list[str]) -> list[str]:
        return [*fields, *_fields(spark_table(self.tokens).drop("job_id"))]


@dataclass(frozen=True)
class ProfileRows(QueryStep):
    """Adds what :class:`ProfileFeatures` reads (`features.profile.profile_rows`): each pool
    row's graph row from `graph` (`features.profile.co_interest_table`), and a row per own job
    of the candidate, with its text from `tokens` and the candidate's query. In Spark joins,
    or lookups in the features' pass when both tables are shipped to the workers."""

    tokens: JobTable
    graph: JobTable

    @property
    def fusable(self) -> bool:
        return _shipped(self.tokens, self.graph)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        own = own_jobs_of(frame, QUERY_KEYS[1:])
        wanted = [*own["job_id"].tolist(), *frame["job_id"].astype(int).tolist()]
        tokens, graph = job_rows(self.tokens, wanted), job_rows(self.graph, wanted)
        pool_graph = graph[graph["job_id"].isin(frame["job_id"])]
        carrying = np.setdiff1d(carrying_jobs(pool_graph), graph["job_id"].to_numpy())
        if len(carrying):  # the ads whose evidence a pool job nobody else wanted carries
            graph = pd.concat([graph, job_rows(self.graph, carrying)], ignore_index=True)
        return _in_profile_order(profile_rows_of(frame, tokens, graph, QUERY_KEYS[1:], own))

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        if self.fusable:
            return PerQuery((self,)).transform_spark(frame)
        return profile_rows(
            frame, spark_table(self.tokens), spark_table(self.graph), QUERY_KEYS[1:]
        )

    def spark_fields(self, fields: list[str]) -> list[str]:
        graph = _fields(spark_table(self.graph).drop("job_id"))
        return [*fields, *graph, f"`{PROFILE_ROLE}` string"]


def _in_profile_order(rows: pd.DataFrame) -> pd.DataFrame:
    """Each candidate's rows in `PROFILE_ROW_ORDER` (by role, "carried" before "own" before
    "pool", then by job id), the candidates where they were: the order the Spark form's
    grouped pass sorts them into, so that the profile features' sums add up in the same
    order, and to the same bits, either way."""
    candidates = pd.factorize(rows["candidate_id"])[0]
    roles = pd.factorize(rows[PROFILE_ROLE], sort=True)[0]  # by name, as Spark sorts them
    order = np.lexsort((rows["job_id"].to_numpy(np.int64), roles, candidates))
    return rows.take(order).reset_index(drop=True)


@dataclass(frozen=True)
class ProfileFeatures(QueryStep):
    """Adds the candidate-profile features (`features.matching.PROFILE_FEATURES`, from
    `features.profile` and `features.behaviour`): each pool job against the candidate's own
    jobs' text, through the interest graph and by the jobs' behaviour vectors, from the rows
    :class:`ProfileRows` added, which then leave. `features`: which of them (all by default;
    a pipeline that serves one model, those it reads)."""

    vectors_file: str
    words_and_idf: WordsAndIdf
    features: tuple[str, ...] = PROFILE_FEATURES

    def __post_init__(self) -> None:
        unknown = set(self.features) - set(PROFILE_FEATURES)
        if unknown or not self.features:
            raise ValueError(f"profile features {self.features}: choose from {PROFILE_FEATURES}")

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        vocabulary = idf_vocabulary(self.vectors_file, self.words_and_idf)
        return add_profile_features(frame, vocabulary, self.features).reset_index(drop=True)

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        return PerQuery((self,)).transform_spark(frame)

    def spark_fields(self, fields: list[str]) -> list[str]:
        gone = {PROFILE_ROLE, *GRAPH_COLUMNS}
        added = [f"`{name}` FLOAT" for name in self.features]
        return [*(f for f in fields if field_name(f) not in gone), *added]


@dataclass(frozen=True)
class DrmmFeatures(QueryStep):
    """Adds DRMM's inputs: `query_idf`, `doc_len`, `hist`, `unigrams`, `bigrams`
    (`features.matching`, the code that built the training data)."""

    vectors_file: str
    words_and_idf: WordsAndIdf
    bins: int

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        vocabulary = idf_vocabulary(self.vectors_file, self.words_and_idf)
        return add_features(frame, vocabulary, self.bins)

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        return PerQuery((self,)).transform_spark(frame)

    def spark_fields(self, fields: list[str]) -> list[str]:
        return [*fields, *_quoted(FEATURE_COLUMNS)]


@dataclass(frozen=True)
class ScoreColumns(QueryStep):
    """Adds `score_<name>` for each scorer, in one pass over the rows (several re-rankers
    side by side, as the evaluation compares them); with `keep`, only those columns and the
    scores leave the step (the features are large, the scores small). A scorer mixed with
    BM25 (`scorers.Bm25Mix`) is scored row by row like the others, then mixed per query:
    alone in Spark by windows over the candidate, as no batch of rows is sure to hold whole
    queries; after the features, in their grouped pass (:class:`PerQuery`)."""

    scorers: Sequence[Scorer]
    keep: Sequence[str] | None = None

    def spark_fields(self, fields: list[str]) -> list[str]:
        if self.keep is not None:
            fields = Columns(tuple(self.keep)).spark_fields(fields)
        return [*fields, *(f"`{score_column(s)}` DOUBLE" for s in self.scorers)]

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        scored = frame[list(self.keep)].copy() if self.keep is not None else frame.copy()
        for scorer in self.scorers:
            scored[score_column(scorer)] = scorer.score(frame) if len(frame) else []
        return scored

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        mixed = [s for s in self.scorers if isinstance(s, Bm25Mix)]
        keep = list(self.keep) if self.keep is not None else list(frame.columns)
        carried = bool(mixed) and "bm25" not in keep
        by_row = ScoreColumns(
            [s.inner if isinstance(s, Bm25Mix) else s for s in self.scorers], keep
        )
        schema = ", ".join(
            [
                _ddl(frame.select(*keep)),
                *([f"{_MIX_BM25} DOUBLE"] if carried else []),
                *(f"{score_column(s)} DOUBLE" for s in self.scorers),
            ]
        )

        def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for rows in frames:
                scored = by_row.transform(rows)
                if carried:
                    scored.insert(len(keep), _MIX_BM25, rows["bm25"].to_numpy(dtype=np.float64))
                yield scored

        scored = frame.mapInPandas(run, schema)
        bm25 = F.col(_MIX_BM25 if carried else "bm25")
        for scorer in mixed:
            column = score_column(scorer)
            scored = scored.withColumn(
                column,
                scorer.alpha * _zscore(F.col(column)) + (1.0 - scorer.alpha) * _zscore(bm25),
            )
        return scored.drop(_MIX_BM25)


_MIX_BM25 = "_mix_bm25"  # BM25 carried through a `keep` that leaves it out, for the mix


def _zscore(column: Column) -> Column:
    """`column` standardised within its candidate, as `ranking.interpolation.zscores`."""
    query = Window.partitionBy("candidate_id")
    centred = column - F.avg(column).over(query)
    spread = F.stddev_pop(column).over(query)
    return F.when(spread > 1e-12, centred / spread).otherwise(F.lit(0.0))


@dataclass(frozen=True)
class Reranker(QueryStep):
    """`score` := the scorer's score, and `rank` by it (ties: the lower job id). Alone in
    Spark, the scores come row by row and the ranks from a window over the candidate; after
    the features, both run in their grouped pass (:class:`PerQuery`)."""

    scorer: Scorer

    def spark_fields(self, fields: list[str]) -> list[str]:
        return fields  # `score` and `rank` replaced in place

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        scored = ScoreColumns([self.scorer]).transform(frame).reset_index(drop=True)
        scored["score"] = scored.pop(score_column(self.scorer))
        scored["rank"] = _ranks(scored)
        return scored

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        column = score_column(self.scorer)
        scored = ScoreColumns([self.scorer]).transform_spark(frame.drop("score", "rank"))
        order = Window.partitionBy("candidate_id").orderBy(F.col("score").desc(), "job_id")
        return scored.withColumnRenamed(column, "score").withColumn(
            "rank", F.row_number().over(order)
        )


@dataclass(frozen=True)
class Cutoff(QueryStep):
    """The top `k` rows of each candidate by `rank`."""

    k: int

    def spark_fields(self, fields: list[str]) -> list[str]:
        return fields

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame["rank"] <= self.k].sort_values(["candidate_id", "rank"])

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        return frame.where(F.col("rank") <= self.k)


@dataclass(frozen=True)
class Columns(QueryStep):
    """Only the columns `names`, in that order: what the pipeline's caller reads. At the end
    of the fused pass, the working columns the steps added (each pool job's text, its
    matching histograms, about 2,000 values a row) then never cross back from the Python
    worker: Spark cannot prune columns through `mapInPandas`, and converting them to Arrow
    took a third of the recommendations' pass (docs/BENCHMARKS.md)."""

    names: tuple[str, ...]

    def spark_fields(self, fields: list[str]) -> list[str]:
        named = {field_name(f): f for f in fields}
        missing = [name for name in self.names if name not in named]
        if missing:
            raise ValueError(f"columns {missing} are not in the pipeline's rows: {list(named)}")
        return [named[name] for name in self.names]

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return frame[list(self.names)]

    def transform_spark(self, frame: DataFrame) -> DataFrame:
        return frame.select(*self.names)


def _fields(frame: DataFrame) -> list[str]:
    return [f"`{f.name}` {f.dataType.simpleString()}" for f in frame.schema.fields]


def _quoted(ddl: str) -> list[str]:
    """A DDL of plain columns (`name TYPE, ...`, as `features.matching` writes them) as
    fields (`` `name` TYPE``)."""
    return [f"`{name}` {kind}" for name, kind in (c.split(" ", 1) for c in ddl.split(", "))]


def field_name(field: str) -> str:
    """A field's name (`` `name` type`` -> name)."""
    return field.split("`")[1]


def _ddl(frame: DataFrame) -> str:
    return ", ".join(_fields(frame))
