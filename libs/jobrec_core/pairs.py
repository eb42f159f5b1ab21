"""Stage 3: cleaned candidates -> (q, d+, d−) triples and MAP sets with DRMM features.

The steps, each a DataFrame -> DataFrame function (seed §6, `docs/PAIRS.md`):

1. :func:`query_inputs` + :func:`build_queries`: per candidate, the query bag of words from
   the jobs other than the positive one (`jobrec_core.queries`), and the less informative
   query (a seeded 1/6 of its terms).
2. :func:`retrieve`: both queries against one fixed version of the jobs index, top 100 with
   BM25 scores, sent from the executors in `_msearch` batches (`jobrec_core.retrieval`).
   Written to `silver/retrieval`; queries that kept failing go to quarantine.
3. :func:`select_triples`: keep a candidate only if its positive job is in its top 100;
   pick the negative at random (seeded) among the less informative query's results, never
   one of the candidate's own jobs.
4. :func:`assign_splits`: train / dev / test / map_dev / map_test by the rank of a seeded
   hash of the candidate id: the same kept candidates and seed give the same splits.
5. :func:`triple_features` and :func:`map_features`: matching histograms (counts), query
   IDFs, common unigrams and bigrams (`jobrec_core.histograms`), one BLAS product per query.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from elasticsearch import Elasticsearch
from pyspark import Broadcast
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobrec_core import manifest
from jobrec_core.config import JobrecConfig, PairsConfig, QueriesConfig, RetrievalConfig
from jobrec_core.embeddings import tokens_column
from jobrec_core.histograms import (
    Vocabulary,
    histogram_counts,
    shared_bigrams,
    shared_unigrams,
)
from jobrec_core.io import local_path, read_delta, table_path, write_delta
from jobrec_core.quality import QualityReport, enforce_budget, write_quarantine
from jobrec_core.queries import build_query, candidate_rng, negative_query
from jobrec_core.retrieval import search_all
from jobrec_core.search import EsConnection, make_client, resolve_connection
from jobrec_core.wmd import unit_vectors

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test", "map_dev", "map_test")
TRIPLE_SPLITS = ("train", "dev", "test")
MAP_SPLITS = ("map_dev", "map_test")
QUARANTINE_SOURCE = "build_pairs"

QUERY_SCHEMA = (
    "candidate_id LONG, positive_job_id INT, own_job_ids ARRAY<INT>, "
    "query_terms ARRAY<STRING>, negative_terms ARRAY<STRING>"
)
HITS = "ARRAY<STRUCT<job_id: INT, score: FLOAT>>"
BOTH_QUERIES = {"query_terms": "full_hits", "negative_terms": "negative_hits"}
DOC_COLUMNS = "job_id INT, doc_len INT, hist ARRAY<SMALLINT>, unigrams INT, bigrams INT"
TRIPLE_SCHEMA = (
    "candidate_id LONG, split STRING, query_terms ARRAY<STRING>, query_idf ARRAY<FLOAT>, "
    + ", ".join(
        f"{side}_job_id INT, {side}_bm25 FLOAT, {side}_doc_len INT, "
        f"{side}_hist ARRAY<SMALLINT>, {side}_unigrams INT, {side}_bigrams INT"
        for side in ("pos", "neg")
    )
)
MAP_SCHEMA = (
    "candidate_id LONG, split STRING, query_terms ARRAY<STRING>, query_idf ARRAY<FLOAT>, "
    "job_id INT, label INT, bm25 FLOAT, bm25_rank INT, doc_len INT, hist ARRAY<SMALLINT>, "
    "unigrams INT, bigrams INT"
)


# --- 1. queries -----------------------------------------------------------------------------


def query_inputs(candidates: DataFrame, jobs: DataFrame, fields: list[str]) -> DataFrame:
    """Per candidate, the query fields' tokens of each job other than the positive (every job
    when `positive_job_id` is null, as for recommendations), in the candidate's order:
    `candidate_id, positive_job_id, own_job_ids, jobs`."""
    elements = candidates.select(
        "candidate_id",
        "positive_job_id",
        F.transform("sequence", lambda e: e["job_id"]).alias("own_job_ids"),
        F.posexplode("sequence").alias("pos", "e"),
    ).where(~F.col("e.job_id").eqNullSafe(F.col("positive_job_id")))
    tokens = jobs.select("job_id", *[F.col(tokens_column(f)).alias(f) for f in fields])
    return (
        elements.join(tokens, elements["e.job_id"] == tokens["job_id"])
        .groupBy("candidate_id", "positive_job_id", "own_job_ids")
        .agg(F.array_sort(F.collect_list(F.struct("pos", *fields))).alias("jobs"))
    )


_IDF_LOOKUPS: dict[str, dict[str, float]] = {}


def idf_lookup(version: str, words_and_idf: Broadcast) -> dict[str, float]:
    """word -> IDF of embeddings `version` from the broadcast (words, idf), built once per
    Python worker (Spark reuses workers across tasks)."""
    if version not in _IDF_LOOKUPS:
        words, idf = words_and_idf.value
        _IDF_LOOKUPS[version] = dict(zip(words, idf, strict=True))
    return _IDF_LOOKUPS[version]


def build_queries(
    inputs: DataFrame, version: str, idf: Broadcast, settings: QueriesConfig, seed: int
) -> DataFrame:
    """`query_inputs` -> the query and the negative query of each candidate (`idf`: the
    broadcast (words, idf) of the embeddings' IDF table)."""
    fields = list(settings.fields)

    def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        weights = idf_lookup(version, idf)
        for frame in frames:
            queries, negatives = [], []
            for candidate, jobs in zip(frame["candidate_id"], frame["jobs"], strict=True):
                terms = build_query(
                    [{f: job[f] for f in fields} for job in jobs],
                    fields,
                    weights,
                    settings.max_terms,
                    settings.drop_first_fields,
                )
                rng = candidate_rng(seed, int(candidate), "negative query")
                queries.append(terms)
                negatives.append(negative_query(terms, settings.negative_fraction, rng))
            yield pd.DataFrame(
                {
                    "candidate_id": frame["candidate_id"],
                    "positive_job_id": frame["positive_job_id"],
                    "own_job_ids": frame["own_job_ids"],
                    "query_terms": queries,
                    "negative_terms": negatives,
                }
            )

    return inputs.mapInPandas(run, QUERY_SCHEMA)


# --- 2. retrieval ---------------------------------------------------------------------------


def retrieve(
    queries: DataFrame,
    connection: EsConnection,
    index: str,
    settings: RetrievalConfig,
    partitions: int,
    searches: dict[str, str] = BOTH_QUERIES,
) -> DataFrame:
    """Each query column of `searches` (terms column -> hits column) of every candidate
    against `index`: one client per partition, so at most `partitions` x
    `retrieval.max_concurrent_searches` searches run at once. `error` joins the failures."""
    schema = ", ".join(
        ["candidate_id LONG", *(f"{hits} {HITS}" for hits in searches.values()), "error STRING"]
    )

    def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        client = make_client(connection)
        try:
            for frame in frames:
                texts = [" ".join(t) for column in searches for t in frame[column]]
                results = search_all(client, index, texts, settings)
                per_column = [
                    results[i * len(frame) : (i + 1) * len(frame)] for i in range(len(searches))
                ]
                output = {"candidate_id": frame["candidate_id"]}
                for hits, column_results in zip(searches.values(), per_column, strict=True):
                    output[hits] = [_hits(r.hits) for r in column_results]
                output["error"] = [
                    "; ".join(r.error for r in row if r.error) or None
                    for row in zip(*per_column, strict=True)
                ]
                yield pd.DataFrame(output)
        finally:
            client.close()

    return (
        queries.select("candidate_id", *searches).repartition(partitions).mapInPandas(run, schema)
    )


def _hits(hits: list[tuple[int, float]] | None) -> list[dict[str, Any]] | None:
    return None if hits is None else [{"job_id": j, "score": s} for j, s in hits]


# --- 3. triples and 4. splits ---------------------------------------------------------------


def _seeded_hash(seed: int, purpose: str, column: str) -> Column:
    return F.xxhash64(F.lit(seed), F.lit(purpose), F.col(column))


def select_triples(queries: DataFrame, retrieved: DataFrame, seed: int) -> DataFrame:
    """Candidates whose positive is in their top 100, with its BM25 score, and a negative.

    Adds `outcome`: `kept`, `positive_not_retrieved` or `no_negative` (every result of the
    less informative query is one of the candidate's own jobs); failed searches are not here.
    """
    joined = queries.join(retrieved.where(F.col("error").isNull()), "candidate_id")
    positive = F.filter("full_hits", lambda h: h["job_id"] == F.col("positive_job_id"))
    candidates = F.filter(
        "negative_hits", lambda h: ~F.array_contains(F.col("own_job_ids"), h["job_id"])
    )
    pick = F.pmod(_seeded_hash(seed, "negative job", "candidate_id"), F.size(candidates))
    chosen = F.element_at(candidates, (pick + 1).cast("int"))
    return joined.select(
        "candidate_id",
        "query_terms",
        "negative_terms",
        "own_job_ids",
        "full_hits",
        "negative_hits",
        "positive_job_id",
        F.element_at(positive, 1)["score"].alias("pos_bm25"),
        chosen["job_id"].alias("neg_job_id"),
        chosen["score"].alias("neg_bm25"),
    ).withColumn(
        "outcome",
        F.when(F.size(positive) == 0, "positive_not_retrieved")
        .when(F.size(candidates) == 0, "no_negative")
        .otherwise("kept"),
    )


def split_sizes(settings: PairsConfig, available: int) -> dict[str, int]:
    """How many candidates each split gets out of `available`.

    The evaluation splits get their configured sizes first; `train` gets its size, or every
    remaining candidate when it is `all`. When there are fewer candidates than asked for,
    every split shrinks in proportion (the demo data is smaller than the seed's).
    """
    fixed = {name: getattr(settings, name) for name in ("dev", "test", "map_dev", "map_test")}
    if settings.train == "all":
        budget = available // 2 if sum(fixed.values()) > available // 2 else sum(fixed.values())
        scale = budget / sum(fixed.values()) if sum(fixed.values()) else 0.0
        sizes = {name: int(size * scale) for name, size in fixed.items()}
        return {"train": available - sum(sizes.values()), **sizes}
    wanted = {"train": int(settings.train), **fixed}
    total = sum(wanted.values())
    scale = min(1.0, available / total) if total else 0.0
    return {name: int(size * scale) for name, size in wanted.items()}


def assign_splits(kept: DataFrame, sizes: dict[str, int], seed: int) -> DataFrame:
    """Adds `split` (null: not used) by the rank of a seeded hash of the candidate id."""
    ranked = kept.withColumn(
        "split_rank",
        F.row_number().over(
            Window.orderBy(_seeded_hash(seed, "split", "candidate_id"), "candidate_id")
        ),
    )
    split: Column = F.lit(None).cast("string")
    upper = 0
    bounds = []
    for name in ("test", "dev", "map_test", "map_dev", "train"):
        bounds.append((name, upper, upper + sizes.get(name, 0)))
        upper += sizes.get(name, 0)
    for name, low, high in reversed(bounds):
        split = F.when((F.col("split_rank") > low) & (F.col("split_rank") <= high), name).otherwise(
            split
        )
    return ranked.withColumn("split", split).drop("split_rank")


# --- 5. features ----------------------------------------------------------------------------


def document_tokens(jobs: DataFrame, fields: list[str], max_terms: int) -> DataFrame:
    """`job_id, doc_tokens`: the histogram's document text, fields in order, capped."""
    return jobs.select(
        "job_id",
        F.slice(F.concat(*[F.col(tokens_column(f)) for f in fields]), 1, max_terms).alias(
            "doc_tokens"
        ),
    )


_VOCABULARIES: dict[str, Vocabulary] = {}


def executor_vocabulary(vectors_file: str, words_and_idf: Broadcast) -> Vocabulary:
    """The vocabulary with unit vectors, built once per Python worker and kept (the vectors
    file is named after its embeddings version)."""
    key = vectors_file
    if key not in _VOCABULARIES:
        from gensim.models import KeyedVectors

        words, idf = words_and_idf.value
        keyed = KeyedVectors.load(vectors_file, mmap="r")
        rows = np.array([keyed.key_to_index.get(w, -1) for w in words], dtype=np.int64)
        vectors = np.zeros((len(words), keyed.vector_size), dtype=np.float32)
        present = rows >= 0
        vectors[present] = unit_vectors(np.asarray(keyed.vectors)[rows[present]])
        _VOCABULARIES[key] = Vocabulary(np.asarray(words), vectors, np.asarray(idf))
    return _VOCABULARIES[key]


@dataclass(frozen=True)
class QueryFeatures:
    ids: np.ndarray
    vectors: np.ndarray
    idf: np.ndarray


def query_features(vocabulary: Vocabulary, terms: Iterable[str]) -> QueryFeatures:
    ids = vocabulary.ids(list(terms))
    return QueryFeatures(ids, vocabulary.unit_vectors(ids), vocabulary.idf_of(ids))


def document_features(
    vocabulary: Vocabulary, query: QueryFeatures, documents: Sequence[Iterable[str]], bins: int
) -> list[dict[str, Any]]:
    """Histogram counts (flattened, int16), length, common unigrams and bigrams of each
    document against one query: one matrix product for all of them."""
    words = [list(d) for d in documents]
    lengths = np.array([len(d) for d in words], dtype=np.int64)
    everything = vocabulary.ids([w for d in words for w in d])
    distinct, word_of = vocabulary.distinct(everything)
    counts = histogram_counts(
        query.vectors,
        query.ids,
        vocabulary.unit_vectors(distinct),
        distinct,
        lengths,
        bins,
        word_of=word_of,
    )
    unigrams = shared_unigrams(query.ids, everything, lengths)
    bigrams = shared_bigrams(query.ids, everything, lengths)
    return [
        {
            "doc_len": int(lengths[k]),
            "hist": counts[k].ravel().astype(np.int16),
            "unigrams": int(unigrams[k]),
            "bigrams": int(bigrams[k]),
        }
        for k in range(len(words))
    ]


def triple_features(
    triples: DataFrame, vectors_file: str, words_and_idf: Broadcast, bins: int
) -> DataFrame:
    """Triples with `pos_tokens`/`neg_tokens` -> the stored features of both documents."""

    def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        vocabulary = executor_vocabulary(vectors_file, words_and_idf)
        for frame in frames:
            rows = []
            for record in frame.itertuples(index=False):
                query = query_features(vocabulary, record.query_terms)
                pos, neg = document_features(
                    vocabulary, query, [record.pos_tokens, record.neg_tokens], bins
                )
                row = {
                    "candidate_id": record.candidate_id,
                    "split": record.split,
                    "query_terms": list(record.query_terms),
                    "query_idf": query.idf,
                }
                for side, features, job_id, bm25 in (
                    ("pos", pos, record.positive_job_id, record.pos_bm25),
                    ("neg", neg, record.neg_job_id, record.neg_bm25),
                ):
                    row |= {f"{side}_job_id": job_id, f"{side}_bm25": bm25}
                    row |= {f"{side}_{key}": value for key, value in features.items()}
                rows.append(row)
            yield pd.DataFrame(rows, columns=_columns(TRIPLE_SCHEMA))

    return triples.mapInPandas(run, TRIPLE_SCHEMA)


def map_documents(selected: DataFrame, positives: int, negatives: int) -> DataFrame:
    """Per MAP candidate, the seed's 100 documents: the top `positives` of the full query
    (label 1), then the first `negatives` results of the less informative query that are not
    among them (label 0), each with its BM25 score and rank in its own result list."""
    top = F.slice("full_hits", 1, positives)
    top_ids = F.transform(top, lambda h: h["job_id"])
    rest = F.slice(
        F.filter("negative_hits", lambda h: ~F.array_contains(top_ids, h["job_id"])),
        1,
        negatives,
    )
    labelled = F.concat(_labelled(top, 1), _labelled(rest, 0))
    return selected.select(
        "candidate_id", "split", "query_terms", F.explode(labelled).alias("d")
    ).select("candidate_id", "split", "query_terms", "d.*")


def _labelled(hits: Column, label: int) -> Column:
    """Hits -> (job_id, label, bm25, bm25_rank) structs, ranks from 1 in the hits' order."""
    return F.transform(
        hits,
        lambda h, i: F.struct(
            h["job_id"].alias("job_id"),
            F.lit(label).alias("label"),
            h["score"].alias("bm25"),
            (i + 1).alias("bm25_rank"),
        ),
    )


def map_features(
    documents: DataFrame, vectors_file: str, words_and_idf: Broadcast, bins: int
) -> DataFrame:
    """`map_documents` rows with `doc_tokens` -> one row per (candidate, job) with features;
    all documents of a query in one product."""
    grouped = documents.groupBy("candidate_id", "split", "query_terms").agg(
        F.collect_list(F.struct("job_id", "label", "bm25", "bm25_rank", "doc_tokens")).alias("docs")
    )

    def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        vocabulary = executor_vocabulary(vectors_file, words_and_idf)
        for frame in frames:
            rows = []
            for record in frame.itertuples(index=False):
                query = query_features(vocabulary, record.query_terms)
                docs = list(record.docs)
                features = document_features(
                    vocabulary, query, [d["doc_tokens"] for d in docs], bins
                )
                for doc, feature in zip(docs, features, strict=True):
                    rows.append(
                        {
                            "candidate_id": record.candidate_id,
                            "split": record.split,
                            "query_terms": list(record.query_terms),
                            "query_idf": query.idf,
                            "job_id": doc["job_id"],
                            "label": doc["label"],
                            "bm25": doc["bm25"],
                            "bm25_rank": doc["bm25_rank"],
                            **feature,
                        }
                    )
            yield pd.DataFrame(rows, columns=_columns(MAP_SCHEMA))

    return grouped.mapInPandas(run, MAP_SCHEMA)


def _columns(schema: str) -> list[str]:
    return [part.strip().split(" ")[0] for part in _split_top_level(schema)]


def _split_top_level(schema: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in schema:
        depth += char in "<("
        depth -= char in ">)"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def config_hash(config: JobrecConfig) -> str:
    """What the pairs depend on besides their inputs: the settings of stages 3 and the seed."""
    relevant = {
        "seed": config.run.seed,
        "queries": config.queries.model_dump(),
        "retrieval": config.retrieval.model_dump(),
        "histograms": config.histograms.model_dump(),
        "pairs": config.pairs.model_dump(),
    }
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class PairsFunnel:
    candidates: int
    empty_query: int
    search_failed: int
    outcomes: dict[str, int]
    splits: dict[str, int]
    map_rows: dict[str, int]
    index: str
    embeddings: str
    config_hash: str

    def format(self) -> str:
        lines = [
            "Pairs funnel",
            f"  cleaned candidates                {self.candidates:>12,}",
            f"  empty query                       {self.empty_query:>12,}",
            f"  searches failed (quarantined)     {self.search_failed:>12,}",
            f"  positive not in top 100 (dropped) "
            f"{self.outcomes.get('positive_not_retrieved', 0):>12,}",
            f"  no negative (dropped)             {self.outcomes.get('no_negative', 0):>12,}",
            f"  kept                              {self.outcomes.get('kept', 0):>12,}",
        ]
        lines += [f"  split {name:<27} {self.splits.get(name, 0):>12,}" for name in SPLITS]
        lines += [f"  MAP rows {name:<24} {n:>12,}" for name, n in sorted(self.map_rows.items())]
        lines.append(
            f"  index {self.index}, embeddings {self.embeddings}, config {self.config_hash}"
        )
        return "\n".join(lines)


# --- the stage ------------------------------------------------------------------------------


def run_build_pairs(spark: SparkSession, config: JobrecConfig) -> PairsFunnel:
    """silver candidates + the jobs index -> gold/pairs/{triples,map_sets}; see the module."""
    embeddings = manifest.current(config, "embeddings")
    vectors_file = local_path(embeddings["vectors"])
    jobs = read_delta(spark, embeddings["jobs"])
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    seed = config.run.seed
    words_and_idf = broadcast_idf(spark, embeddings)
    connection = resolve_connection(config)
    index = serving_index(make_client(connection), config.elasticsearch.index_alias)
    log.info("build_pairs: searching %s (embeddings %s)", index, embeddings["version"])

    queries_path = table_path(config, "silver", "queries")
    inputs = query_inputs(candidates, jobs, list(config.queries.fields))
    queries_frame = build_queries(
        inputs, str(embeddings["version"]), words_and_idf, config.queries, seed
    )
    with _step("queries (silver/queries)"):
        write_delta(queries_frame, queries_path)
    queries = read_delta(spark, queries_path)
    searchable = queries.where(F.size("query_terms") > 0)
    if config.pairs.candidates_limit is not None:
        searchable = searchable.orderBy(
            _seeded_hash(seed, "sample", "candidate_id"), "candidate_id"
        ).limit(config.pairs.candidates_limit)

    retrieval_path = table_path(config, "silver", "retrieval")
    partitions = spark.sparkContext.defaultParallelism
    with _step(f"retrieval from {index} (silver/retrieval)"):
        write_delta(
            retrieve(searchable, connection, index, config.retrieval, partitions), retrieval_path
        )
    retrieved = read_delta(spark, retrieval_path)
    searched = retrieved.count()
    failed = quarantine_failed_searches(config, queries, retrieved)
    report = QualityReport(
        QUARANTINE_SOURCE, searched, searched - failed, {"search_failed": failed} if failed else {}
    )
    enforce_budget(report, config.quality.error_budget_fraction)

    selected = select_triples(queries, retrieved, seed).cache()
    outcomes = {
        r["outcome"]: int(r["count"]) for r in selected.groupBy("outcome").count().collect()
    }
    sizes = split_sizes(config.pairs, outcomes.get("kept", 0))
    assigned = assign_splits(selected.where(F.col("outcome") == "kept"), sizes, seed).where(
        F.col("split").isNotNull()
    )
    documents = document_tokens(
        jobs, list(config.histograms.doc_fields), config.histograms.doc_max_terms
    )
    bins = config.histograms.bins
    triples = (
        assigned.where(F.col("split").isin(*TRIPLE_SPLITS))
        .join(
            documents.withColumnRenamed("job_id", "positive_job_id").withColumnRenamed(
                "doc_tokens", "pos_tokens"
            ),
            "positive_job_id",
        )
        .join(
            documents.withColumnRenamed("job_id", "neg_job_id").withColumnRenamed(
                "doc_tokens", "neg_tokens"
            ),
            "neg_job_id",
        )
    )
    triples_path = table_path(config, "gold", "pairs/triples")
    with _step("triples with features (gold/pairs/triples)"):
        write_delta(
            triple_features(triples, vectors_file, words_and_idf, bins),
            triples_path,
            partition_by=["split"],
        )
    map_docs = map_documents(
        assigned.where(F.col("split").isin(*MAP_SPLITS)),
        config.pairs.map_positives,
        config.pairs.map_negatives,
    ).join(documents, "job_id")
    map_path = table_path(config, "gold", "pairs/map_sets")
    # A MAP row carries 100 documents of up to 500 terms: small Arrow batches keep the
    # workers' memory flat (Spark's default of 10,000 rows per batch would hold ~1M documents).
    with (
        _step("MAP sets with features (gold/pairs/map_sets)"),
        arrow_batch(spark, config.histograms.map_queries_per_batch),
    ):
        write_delta(
            map_features(map_docs, vectors_file, words_and_idf, bins),
            map_path,
            partition_by=["split"],
        )
    selected.unpersist()

    split_counts = _counts_by_split(read_delta(spark, triples_path).groupBy("split").count())
    split_counts |= {
        name: n
        for name, n in _counts_by_split(
            read_delta(spark, map_path)
            .groupBy("split")
            .agg(F.countDistinct("candidate_id").alias("count"))
        ).items()
    }
    map_rows = _counts_by_split(read_delta(spark, map_path).groupBy("split").count())
    funnel = PairsFunnel(
        candidates=queries.count(),
        empty_query=queries.where(F.size("query_terms") == 0).count(),
        search_failed=failed,
        outcomes=outcomes,
        splits=split_counts,
        map_rows=map_rows,
        index=index,
        embeddings=str(embeddings["version"]),
        config_hash=config_hash(config),
    )
    manifest.record(
        config,
        "pairs",
        {
            "triples": triples_path,
            "map_sets": map_path,
            "retrieval": retrieval_path,
            "index": index,
            "embeddings": embeddings["version"],
            "config_hash": funnel.config_hash,
            "bins": bins,
            "splits": split_counts,
            "map_rows": map_rows,
        },
    )
    return funnel


@contextmanager
def arrow_batch(spark: SparkSession, rows: int) -> Iterator[None]:
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    previous = str(spark.conf.get(key, "10000"))
    spark.conf.set(key, str(rows))
    try:
        yield
    finally:
        spark.conf.set(key, previous)


@contextmanager
def _step(name: str) -> Iterator[None]:
    started = time.perf_counter()
    log.info("build_pairs: %s ...", name)
    yield
    log.info("build_pairs: %s done in %.1fs", name, time.perf_counter() - started)


def broadcast_idf(spark: SparkSession, embeddings: dict[str, Any]) -> Broadcast:
    """The (words, IDF) of an embeddings version (its manifest entry), broadcast once for
    `build_queries` and the histogram features."""
    rows = read_delta(spark, embeddings["idf"]).select("term", "idf").collect()
    return spark.sparkContext.broadcast(
        ([r["term"] for r in rows], [float(r["idf"]) for r in rows])
    )


def serving_index(client: Elasticsearch, alias: str) -> str:
    """The physical index behind the alias now: a run searches one version throughout, even
    if the alias moves while it runs."""
    if not client.indices.exists_alias(name=alias):
        raise LookupError(f"no index behind the alias {alias!r}: run jobs/index_jobs.py first")
    return sorted(client.indices.get_alias(name=alias))[0]


def _counts_by_split(frame: DataFrame) -> dict[str, int]:
    return {r["split"]: int(r["count"]) for r in frame.collect()}


def quarantine_failed_searches(
    config: JobrecConfig,
    queries: DataFrame,
    retrieved: DataFrame,
    source: str = QUARANTINE_SOURCE,
    query_columns: tuple[str, ...] = tuple(BOTH_QUERIES),
) -> int:
    failed = retrieved.where(F.col("error").isNotNull()).join(queries, "candidate_id")
    quarantine = failed.select(
        F.lit(source).alias("source"),
        F.lit("search_failed").alias("reason"),
        F.col("error").alias("detail"),
        F.to_json(F.struct("candidate_id", *query_columns)).alias("record"),
        F.current_timestamp().alias("quarantined_at"),
    )
    write_quarantine(quarantine, table_path(config, "bronze", "quarantine"), source)
    count = failed.count()
    if count:
        log.warning("%d candidates' searches failed; they are in the quarantine table", count)
    return count
