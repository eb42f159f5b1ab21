"""The one place pipelines are built from the configuration, for evaluation and serving alike.

    inputs = ranking_inputs(spark, config)  # what every step reads
    pipeline = rerank_pipeline(config, inputs, scorer, sink)  # retriever >> features >> scorer % k

The online endpoint builds the same pipeline on `in_memory(inputs)`: the tables collected once,
so that its pandas form answers a request without Spark.

**Adding a re-ranker.** Write a class with a `name` and `score(frame) -> ndarray` (the
`ranking.scorers.Scorer` protocol) that reads any column a feature step adds, decorated with
`@untrained("Name")` (or train it and register it, as the DRMMs are); name it in
`evaluation.baselines`. Evaluation then scores it next to the others, and serving can use it
by the same pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol

import numpy as np
import pandas as pd
from pyspark import Broadcast
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig
from jobrec_core.features.histograms import DOC_IDS, Vocabulary
from jobrec_core.features.matching import (
    PROFILE_FEATURES,
    WordsAndIdf,
    document_tokens,
    idf_vocabulary,
)
from jobrec_core.features.neighbours import InterestMemory
from jobrec_core.features.profile import QUERY_VECTOR, with_query_vectors
from jobrec_core.features.queries import candidate_queries
from jobrec_core.platform import manifest
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.spark import arrow_to_pandas
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.ranking.pipeline import (
    Bm25Retriever,
    Clock,
    Columns,
    DocumentText,
    DrmmFeatures,
    JobTable,
    LiveOnly,
    Pipeline,
    PoolRetriever,
    ProfileFeatures,
    ProfileRows,
    Reranker,
    RetrievalSink,
    RetrieverStep,
    Step,
    WorkerTable,
    by_job_id,
    keep_in_memory,
    spark_table,
)
from jobrec_core.ranking.scorers import UNTRAINED, Scorer
from jobrec_core.search.bm25 import serving_index
from jobrec_core.search.connection import EsConnection, make_client, resolve_connection
from jobrec_core.search.dense import Retriever
from jobrec_core.search.index_versions import history_alias
from jobrec_core.text.vectors import broadcast_idf
from jobrec_core.timeline.asof import as_of


@dataclass(frozen=True)
class RankingInputs:
    """What the steps read, resolved once per run: one embeddings version and one version
    of the jobs index throughout, even if the alias moves meanwhile."""

    embeddings_version: str
    vectors_file: str
    words_and_idf: Broadcast
    jobs: DataFrame  # the embeddings' tokenized jobs
    # job_id, doc_tokens; then the interest graph (`features.profile.co_interest_table`):
    # shipped to the workers too where the index is small (`histograms.worker_tables_max_jobs`)
    tokens: DataFrame | WorkerTable
    graph: DataFrame | WorkerTable
    dates: DataFrame | WorkerTable  # job_id, posted_at, expires_at (`ranking.pipeline.LiveOnly`)
    connection: EsConnection
    index: str
    partitions: int


class PipelineInputs(Protocol):
    """What building a pipeline reads: :class:`RankingInputs` for Spark, or
    :class:`InMemoryInputs` for requests answered without Spark."""

    @property
    def embeddings_version(self) -> str: ...
    @property
    def vectors_file(self) -> str: ...
    @property
    def words_and_idf(self) -> WordsAndIdf: ...
    @property
    def tokens(self) -> JobTable: ...
    @property
    def graph(self) -> JobTable: ...
    @property
    def dates(self) -> JobTable: ...
    @property
    def connection(self) -> EsConnection: ...
    @property
    def index(self) -> str: ...
    @property
    def partitions(self) -> int: ...


@dataclass(frozen=True)
class InMemoryInputs:
    """A run's :class:`RankingInputs` with the tables the steps read collected into pandas
    and the IDF as a plain value: a pipeline built on them runs its pandas form with no Spark
    job, for an endpoint that answers one request at a time."""

    embeddings_version: str
    vectors_file: str
    words_and_idf: tuple[list[str], list[float]]
    tokens: pd.DataFrame
    graph: pd.DataFrame
    dates: pd.DataFrame
    connection: EsConnection
    index: str
    partitions: int = 1


def in_memory(inputs: RankingInputs) -> InMemoryInputs:
    """`inputs` collected to the driver, once: every job's text and graph row (the demo's
    30,000 jobs; `jobrec serve` on the demo holds 1.5 GB in all, torch and the word vectors
    included)."""
    words_and_idf = inputs.words_and_idf.value
    vocabulary = idf_vocabulary(inputs.vectors_file, words_and_idf)
    return InMemoryInputs(
        embeddings_version=inputs.embeddings_version,
        vectors_file=inputs.vectors_file,
        words_and_idf=words_and_idf,
        tokens=text_rows(spark_table(inputs.tokens), vocabulary),
        graph=job_table_rows(spark_table(inputs.graph)),
        dates=job_table_rows(spark_table(inputs.dates)),
        connection=inputs.connection,
        index=inputs.index,
    )


def with_word_ids(tokens: pd.DataFrame, vocabulary: Vocabulary) -> pd.DataFrame:
    """`tokens` with `DOC_IDS`: every job's words looked up once, in one pass, so that no
    request hashes them again (about 1 ms of a 100-job request)."""
    texts = tokens["doc_tokens"].tolist()
    ids = vocabulary.text_ids(texts)
    ends = np.cumsum([len(t) for t in texts])
    return tokens.assign(**{DOC_IDS: np.split(ids, ends[:-1]) if texts else []})


def searched_alias(config: JobrecConfig, history: bool = False) -> str:
    """The alias a run searches: the ads live on the as-of date (`elasticsearch.index_alias`),
    or with `history`, for dated data, every ad posted by then (`indexing.stage`): where the
    training data and the paper's evaluations find a candidate's past interest, mostly in ads
    that have expired since."""
    alias = config.elasticsearch.index_alias
    return history_alias(alias) if history and as_of(config).dated else alias


def ranking_inputs(
    spark: SparkSession, config: JobrecConfig, ship_tables: bool = True, history: bool = False
) -> RankingInputs:
    """What the steps read, for this run, searching `searched_alias(config, history)`. With
    `ship_tables`, where the index has at most `histograms.worker_tables_max_jobs` jobs, the
    jobs' text and the interest graph are also shipped to the workers (`shipped`): about 15 s
    once on the demo, which a batch repays after one or two thousand candidates; a run for a
    handful of candidates, or one that collects the tables itself (`in_memory`), passes False
    and joins."""
    embeddings = manifest.current(config, "embeddings")
    jobs = read_delta(spark, embeddings["jobs"])
    graph = manifest.read_manifest(config).get("co_interest")
    if graph is None:
        raise RuntimeError("no interest graph yet (features.profile): run jobs/build_pairs.py")
    connection = resolve_connection(config)
    vectors_file = local_path(embeddings["vectors"])
    words_and_idf = broadcast_idf(spark, embeddings)
    text = document_tokens(jobs, config.histograms)
    graph_table = read_delta(spark, str(graph["table"]))
    date_table = jobs.select("job_id", "posted_at", "expires_at")
    tokens: DataFrame | WorkerTable = text
    links: DataFrame | WorkerTable = graph_table
    dates: DataFrame | WorkerTable = date_table
    client = make_client(connection)
    try:
        index = serving_index(client, searched_alias(config, history))
        indexed_jobs = int(client.count(index=index)["count"])
    finally:
        client.close()
    if ship_tables and indexed_jobs <= config.histograms.worker_tables_max_jobs:
        vocabulary = idf_vocabulary(vectors_file, words_and_idf.value)
        tokens = shipped(spark, text, text_rows(text, vocabulary))
        links = shipped(spark, graph_table, job_table_rows(graph_table))
        dates = shipped(spark, date_table, job_table_rows(date_table))
    return RankingInputs(
        embeddings_version=str(embeddings["version"]),
        vectors_file=vectors_file,
        words_and_idf=words_and_idf,
        jobs=jobs,
        tokens=tokens,
        graph=links,
        dates=dates,
        connection=connection,
        index=index,
        partitions=spark.sparkContext.defaultParallelism,
    )


def job_table_rows(table: DataFrame) -> pd.DataFrame:
    """A job table collected to the driver (through Arrow) and indexed by job id."""
    return by_job_id(arrow_to_pandas(table))


def text_rows(tokens: DataFrame, vocabulary: Vocabulary) -> pd.DataFrame:
    """The jobs' text collected, with each job's word ids looked up once (`with_word_ids`)."""
    return by_job_id(with_word_ids(arrow_to_pandas(tokens), vocabulary))


def shipped(spark: SparkSession, table: DataFrame, rows: pd.DataFrame) -> WorkerTable:
    """`table` with its collected `rows` broadcast to the workers, which then look the
    features' rows up in memory (`ranking.pipeline.WorkerTable`)."""
    return WorkerTable(table, spark.sparkContext.broadcast(rows))


def queries_of(
    config: JobrecConfig, inputs: RankingInputs, candidates: DataFrame, hold_out: bool = False
) -> DataFrame:
    """The queries frame of `candidates` (`candidate_id, sequence`, `positive_job_id` with
    `hold_out`): the query of all of each candidate's jobs, or of all but the held-out one, with
    the run's embeddings (`features.queries.candidate_queries`)."""
    return candidate_queries(
        candidates,
        inputs.jobs,
        inputs.embeddings_version,
        inputs.words_and_idf,
        config.queries,
        config.run.seed,
        hold_out,
    )


def interest_memory(
    spark: SparkSession, config: JobrecConfig, inputs: RankingInputs
) -> InterestMemory:
    """The kNN memory (`features.neighbours`): a seeded sample of `knn.memory_candidates`
    cleaned candidates, each one's profile vector and jobs."""
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    sample = candidates.orderBy(
        F.xxhash64(F.lit(config.run.seed), F.lit("knn memory"), "candidate_id"), "candidate_id"
    ).limit(config.knn.memory_candidates)
    rows = sample.select("candidate_id", F.array_distinct("sequence.job_id").alias("own_job_ids"))
    vectors = with_query_vectors(
        rows, spark_table(inputs.tokens), inputs.vectors_file, inputs.words_and_idf
    )
    frame = vectors.select(
        "candidate_id", QUERY_VECTOR, F.col("own_job_ids").alias("job_ids")
    ).toPandas()
    return InterestMemory.of(frame)


def baseline_scorers(config: JobrecConfig, inputs: RankingInputs) -> list[Scorer]:
    """The untrained re-rankers named in `evaluation.baselines` (`ranking.scorers.UNTRAINED`),
    each given the inputs its fields name."""
    unknown = [name for name in config.evaluation.baselines if name not in UNTRAINED]
    if unknown:
        raise ValueError(f"evaluation.baselines: unknown {unknown}; known: {sorted(UNTRAINED)}")
    scorers = []
    for name in config.evaluation.baselines:
        cls = UNTRAINED[name]
        wanted = {f.name: getattr(inputs, f.name) for f in fields(cls) if f.name != "name"}
        scorers.append(cls(name=name, **wanted))
    return scorers


def retriever_step(
    config: JobrecConfig,
    inputs: PipelineInputs,
    sink: RetrievalSink = keep_in_memory,
    retriever: Retriever | None = None,
) -> RetrieverStep:
    """The first step: `retriever` (default `retrieval.retriever`): BM25, or the dense or
    hybrid pool, whose kNN needs the index's job vectors from the run's embeddings."""
    kind = retriever or config.retrieval.retriever
    if kind == "bm25":
        return Bm25Retriever(
            inputs.connection, inputs.index, config.retrieval, inputs.partitions, sink
        )
    check_vectors(inputs)
    return PoolRetriever(
        kind,
        inputs.connection,
        inputs.index,
        config.retrieval,
        inputs.tokens,
        inputs.vectors_file,
        inputs.words_and_idf,
        inputs.partitions,
        sink,
    )


def check_vectors(inputs: PipelineInputs) -> None:
    """Raises when the index's job vectors are missing or come from other embeddings than
    the run's: the query vectors would then live in another space."""
    client = make_client(inputs.connection)
    try:
        mapping = client.indices.get_mapping(index=inputs.index)[inputs.index]["mappings"]
    finally:
        client.close()
    built_from = mapping.get("_meta", {}).get("jobrec", {}).get("source", {})
    found = built_from.get("vectors_embeddings")
    if found != inputs.embeddings_version:
        has = f"job vectors of embeddings {found}" if found else "no job vectors"
        raise LookupError(
            f"index {inputs.index} has {has}, the run uses {inputs.embeddings_version}: "
            "rebuild it with jobs/index_jobs.py (indexing.vectors: true)"
        )


def featured_pool(
    config: JobrecConfig,
    inputs: PipelineInputs,
    sink: RetrievalSink = keep_in_memory,
    retriever: Retriever | None = None,
    reads: frozenset[str] | None = None,
    clock: Clock | None = None,
) -> Pipeline:
    """The pool of `retriever` (default `retrieval.retriever`) with the text and the
    features: every re-ranker's, or, with `reads` (`Scorer.reads`), the profile features
    among them and none when they name none (the candidate's own jobs are then not even
    looked up). The features computed are the same floats either way. Without the profile
    rows, a request's rows stay in the pool's order where the grouped pass sorts them by
    job: a score that sums over a query's rows (`scorers.Bm25Mix`) could then differ in its
    last bits online and in a batch (docs/KNOWN_ISSUES.md; no configuration mixes BM25
    without reading a profile feature). With a `clock`, only the ads live on its day stay
    in the pool (`pipeline.LiveOnly`)."""
    first: Step = retriever_step(config, inputs, sink, retriever)
    if clock is not None:
        first = first >> LiveOnly(inputs.dates, clock)
    wanted = tuple(f for f in PROFILE_FEATURES if reads is None or f in reads)
    features = DrmmFeatures(inputs.vectors_file, inputs.words_and_idf, config.histograms.bins)
    pool = first >> DocumentText(inputs.tokens)
    if wanted:
        pool = (
            pool
            >> ProfileRows(inputs.tokens, inputs.graph)
            >> ProfileFeatures(inputs.vectors_file, inputs.words_and_idf, wanted)
        )
    return pool >> features


def rerank_pipeline(
    config: JobrecConfig,
    inputs: PipelineInputs,
    scorer: Scorer,
    sink: RetrievalSink = keep_in_memory,
    clock: Clock | None = None,
) -> Pipeline:
    """`retrieval.retriever`'s pool re-ranked by `scorer`, the top `evaluation.k`: what is
    recommended (:data:`RECOMMENDED_COLUMNS`); with a `clock` (dated data), of the ads live on
    its day only."""
    return (
        featured_pool(config, inputs, sink, reads=scorer.reads, clock=clock)
        >> Reranker(scorer) % config.evaluation.k
        >> Columns(RECOMMENDED_COLUMNS)
    )


# What a recommendation says: the job, its rank and score, and BM25's view of it (null
# `bm25_rank`: only the kNN list found it).
RECOMMENDED_COLUMNS = ("candidate_id", "rank", "job_id", "score", "bm25", "bm25_rank")
