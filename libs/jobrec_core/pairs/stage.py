"""Stage 3: cleaned candidates -> (q, d+, d−) triples and MAP sets with DRMM features.

The steps, each a DataFrame -> DataFrame function (paper §6, `docs/PAIRS.md`):

1. :func:`query_inputs` + :func:`build_queries`: per candidate, the query bag of words from
   the jobs other than the positive one (`jobrec_core.features.queries`), and the less informative
   query (a seeded 1/6 of its terms).
2. :func:`retrieve`: both queries against one fixed version of the jobs index, top 100 with
   BM25 scores, sent from the executors in `_msearch` batches (`jobrec_core.search.bm25`).
   Written to `silver/retrieval`; queries that kept failing go to quarantine.
3. :func:`select_triples`: keep a candidate only if its positive job is in its top 100;
   pick the negative at random (seeded) among the less informative query's results, never
   one of the candidate's own jobs.
4. :func:`assign_splits`: train / dev / test / map_dev / map_test by where a seeded hash of
   the candidate id alone falls (`SplitRule`); the evaluations' share of the candidates is
   never searched for pairs.
5. :func:`triple_features` and :func:`map_features`: matching histograms (counts), query
   IDFs, common unigrams and bigrams (`jobrec_core.features.matching`), one BLAS product per
   query.
6. :func:`held_out_documents`: for every split's candidates, the pool a recommendation
   would re-rank with their held-out job labelled, with the same features
   (`gold/pairs/held_out`): what training selects epochs on (dev) and the promotion gate
   compares models on (test).
7. The candidate-profile features of every stored (candidate, job) (`features.profile`:
   the own jobs' text, and the interest graph of every candidate, `silver/co_interest`),
   computed once per candidate (`gold/pairs/profiles`) and joined into every table.
8. :func:`pool_pairs`: the training pools as pairs, the held-out job against
   `pairs.pool_negatives` other jobs of its pool (`gold/pairs/pool_triples`): the
   `examples: pool` configurations' training data. With `pairs.pool_lists` above 1, each
   training candidate gives more lists (:func:`more_held_out_jobs`): its next
   highest-scored jobs, each held out from a query of its other jobs, searched once more.
"""

from __future__ import annotations

import hashlib
import json
import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import date
from functools import reduce

import numpy as np
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig
from jobrec_core.features.behaviour import FOLD_OWNER, behaviour_table
from jobrec_core.features.carried import CARRIED_FROM, CARRIED_WEIGHTS, carried_neighbours
from jobrec_core.features.matching import (
    LEAD_LENGTH,
    PROFILE_FEATURES,
    TRIPLE_SCHEMA,
    document_tokens,
    map_features,
    triple_features,
)
from jobrec_core.features.profile import (
    DOCUMENT_VECTOR,
    MOSTLY_UNSEEN,
    co_interest_table,
    with_document_vectors,
    with_profile_features,
)
from jobrec_core.features.queries import (
    build_queries,
    query_inputs,
)
from jobrec_core.models.splits import EVALUATION_REGION, SplitRule
from jobrec_core.pairs.splits import (
    HELD_OUT_SPLITS,
    MAP_SPLITS,
    POOL_SPLIT,
    SPLITS,
    TRIPLE_SPLITS,
    _seeded_hash,
    assign_splits,
    held_out_documents,
    map_documents,
    more_held_out_jobs,
    pool_pairs,
    pool_sample,
    profile_owners,
    select_triples,
    split_sizes,
)
from jobrec_core.platform import manifest
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.progress import spark_progress
from jobrec_core.platform.spark import (
    arrow_batch,
    arrow_to_pandas,
    schema_columns,
    spark_setting,
)
from jobrec_core.platform.tables import read_delta, table_path, write_delta
from jobrec_core.ranking.factory import searched_alias
from jobrec_core.search.bm25 import (
    BOTH_QUERIES,
    FULL_QUERY,
    RetrievalCheckpoint,
    retrieval_fingerprint,
    retrieve,
    serving_index,
)
from jobrec_core.search.connection import make_client, resolve_connection
from jobrec_core.text.vectors import broadcast_idf
from jobrec_core.timeline.asof import as_of, interest_by

log = logging.getLogger(__name__)

QUARANTINE_SOURCE = "build_pairs"


def config_hash(config: JobrecConfig) -> str:
    """What the pairs depend on besides their inputs: the settings of stages 3 and the seed."""
    relevant = {
        "seed": config.run.seed,
        "queries": config.queries.model_dump(),
        "retrieval": config.retrieval.model_dump(),
        # how a batch looks the job tables up, not what it computes (and not read here)
        "histograms": config.histograms.model_dump(exclude={"worker_tables_max_jobs"}),
        "pairs": config.pairs.model_dump(),
    }
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class PairsFunnel:
    candidates: int
    empty_query: int
    evaluation: int  # candidates in the evaluations' region: never searched for pairs
    search_failed: int
    outcomes: dict[str, int]
    splits: dict[str, int]
    pool_rows: dict[str, int]
    index: str
    embeddings: str
    config_hash: str

    @property
    def not_searched(self) -> int:
        """The candidates of the splits' regions left out by `pairs.candidates_limit`."""
        searched = self.search_failed + sum(self.outcomes.values())
        return self.candidates - self.empty_query - self.evaluation - searched

    def metrics(self) -> dict[str, float]:
        """The counts, flat, for the stage's MLflow run."""
        counts = {
            "candidates": self.candidates,
            "empty_query": self.empty_query,
            "evaluation": self.evaluation,
            "not_searched": self.not_searched,
            "search_failed": self.search_failed,
        }
        for group, values in (
            ("outcome", self.outcomes),
            ("split", self.splits),
            ("pool_rows", self.pool_rows),
        ):
            counts |= {f"{group}.{name}": value for name, value in values.items()}
        return {name: float(value) for name, value in counts.items()}

    def format(self) -> str:
        lines = [
            "Pairs funnel",
            f"  cleaned candidates                {self.candidates:>12,}",
            f"  empty query                       {self.empty_query:>12,}",
            f"  the evaluations' (never searched) {self.evaluation:>12,}",
            f"  not searched (candidates_limit)   {self.not_searched:>12,}",
            f"  searches failed (quarantined)     {self.search_failed:>12,}",
            f"  positive not in top 100 (dropped) "
            f"{self.outcomes.get('positive_not_retrieved', 0):>12,}",
            f"  no negative (dropped)             {self.outcomes.get('no_negative', 0):>12,}",
            f"  kept                              {self.outcomes.get('kept', 0):>12,}",
        ]
        lines += [
            f"  split {name:<27} {self.splits.get(name, 0):>12,}"
            for name in (*SPLITS, *HELD_OUT_SPLITS)
        ]
        lines += [f"  pool rows {name:<23} {n:>12,}" for name, n in sorted(self.pool_rows.items())]
        lines[-1] += "  (pairs)" if "pool_train" in self.pool_rows else ""
        lines.append(
            f"  index {self.index}, embeddings {self.embeddings}, config {self.config_hash}"
        )
        return "\n".join(lines)


# --- the stage ------------------------------------------------------------------------------


def run_build_pairs(spark: SparkSession, config: JobrecConfig) -> PairsFunnel:
    """silver candidates + the jobs index -> gold/pairs/{triples,map_sets,held_out}; see the
    module."""
    from jobrec_core.platform.tracking import log_stage_run

    embeddings = manifest.current(config, "embeddings")
    vectors_file = local_path(embeddings["vectors"])
    jobs = read_delta(spark, embeddings["jobs"])
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    seed = config.run.seed
    words_and_idf = broadcast_idf(spark, embeddings)
    connection = resolve_connection(config)
    index = serving_index(make_client(connection), searched_alias(config, history=True))
    log.info("build_pairs: searching %s (embeddings %s)", index, embeddings["version"])

    queries_path = table_path(config, "silver", "queries")
    inputs = query_inputs(candidates, jobs, config.queries)
    queries_frame = build_queries(
        inputs, str(embeddings["version"]), words_and_idf, config.queries, seed
    )
    with _step(spark, "queries (silver/queries)"):
        write_delta(queries_frame, queries_path)
    queries = read_delta(spark, queries_path)
    rule = SplitRule.of(config.pairs, seed)
    searchable = rule.searchable(queries.where(F.size("query_terms") > 0))
    if config.pairs.candidates_limit is not None:
        searchable = searchable.orderBy(
            _seeded_hash(seed, "sample", "candidate_id"), "candidate_id"
        ).limit(config.pairs.candidates_limit)

    retrieval_path = table_path(config, "silver", "retrieval")
    partitions = spark.sparkContext.defaultParallelism
    checkpoint = RetrievalCheckpoint(config, retrieval_path, QUARANTINE_SOURCE, tuple(BOTH_QUERIES))
    with _step(spark, f"retrieval from {index} (silver/retrieval)"):
        retrieved = checkpoint(
            lambda rows: retrieve(
                rows, connection, index, config.retrieval, partitions, found="positive_job_id"
            ),
            searchable,
            queries,
            retrieval_fingerprint(index, config.retrieval, "both queries"),
        )
    failed = checkpoint.failed

    selected = select_triples(queries, retrieved, seed).cache()
    outcomes = {
        r["outcome"]: int(r["count"]) for r in selected.groupBy("outcome").count().collect()
    }
    # Cached: every table below reads it, and the split ranks come from one window per region.
    assigned = (
        assign_splits(selected.where(F.col("outcome") == "kept"), rule, split_sizes(config.pairs))
        .where(F.col("split").isNotNull())
        .cache()
    )
    documents = document_tokens(jobs, config.histograms)
    bins = config.histograms.bins
    graph = interest_graph(spark, config)
    triple_rows = assigned.where(F.col("split").isin(*TRIPLE_SPLITS))
    map_docs = map_documents(
        assigned.where(F.col("split").isin(*MAP_SPLITS)),
        config.pairs.map_positives,
        config.pairs.map_negatives,
    )
    held_out_docs = held_out_documents(assigned)
    pool_docs = pool_sample(
        held_out_documents(assigned, POOL_SPLIT), config.pairs.pool_negatives, seed
    )
    more_lists = _more_training_lists(spark, config, candidates, jobs, assigned, index)
    profiles_path = table_path(config, "gold", "pairs/profiles")
    with _step(spark, "candidate-profile features (gold/pairs/profiles)"):
        wanted = reduce(
            DataFrame.unionByName,
            [
                triple_rows.select("candidate_id", F.col("positive_job_id").alias("job_id")),
                triple_rows.select("candidate_id", F.col("neg_job_id").alias("job_id")),
                map_docs.select("candidate_id", "job_id"),
                held_out_docs.select("candidate_id", "job_id"),
                pool_docs.select("candidate_id", "job_id"),
            ],
        ).distinct()
        rows = wanted.join(profile_owners(assigned), "candidate_id").join(documents, "job_id")
        profiled = with_profile_features(
            rows, documents, graph, vectors_file, words_and_idf
        ).select("candidate_id", "job_id", *PROFILE_FEATURES)
        write_delta(profiled, profiles_path)
    profiles = read_delta(spark, profiles_path)

    def side(prefix: str, job: str) -> DataFrame:
        renamed = [F.col(c).alias(f"{prefix}_{c}") for c in PROFILE_FEATURES]
        tokens = documents.select(
            F.col("job_id").alias(job),
            F.col("doc_tokens").alias(f"{prefix}_tokens"),
            F.col(LEAD_LENGTH).alias(f"{prefix}_{LEAD_LENGTH}"),
        )
        return profiles.select("candidate_id", F.col("job_id").alias(job), *renamed).join(
            tokens, job
        )

    triples = triple_rows.join(
        side("pos", "positive_job_id"), ["candidate_id", "positive_job_id"]
    ).join(side("neg", "neg_job_id"), ["candidate_id", "neg_job_id"])
    triples_path = table_path(config, "gold", "pairs/triples")
    with _step(spark, "triples with features (gold/pairs/triples)"):
        write_delta(
            triple_features(triples, vectors_file, words_and_idf, bins),
            triples_path,
            partition_by=["split"],
        )
    map_path = table_path(config, "gold", "pairs/map_sets")
    held_out_path = table_path(config, "gold", "pairs/held_out")
    pool_path = table_path(config, "gold", "pairs/pool_triples")

    def featured(rows: DataFrame) -> DataFrame:
        joined = rows.join(profiles, ["candidate_id", "job_id"]).join(documents, "job_id")
        return map_features(joined, vectors_file, words_and_idf, bins)

    # A MAP row carries 100 documents of up to 500 terms: small Arrow batches keep the
    # workers' memory flat (Spark's default of 10,000 rows per batch would hold ~1M documents).
    with arrow_batch(spark, config.histograms.map_queries_per_batch):
        for name, path, rows in (
            ("MAP sets with features (gold/pairs/map_sets)", map_path, map_docs),
            ("held-out sets with features (gold/pairs/held_out)", held_out_path, held_out_docs),
        ):
            with _step(spark, name):
                write_delta(featured(rows), path, partition_by=["split"])
        with _step(spark, "training pairs from the pools (gold/pairs/pool_triples)"):
            sampled = featured(pool_docs)
            if more_lists is not None:
                rows, _ = more_lists
                sampled = sampled.unionByName(
                    map_features(
                        with_profile_features(
                            rows.join(documents, "job_id"),
                            documents,
                            graph,
                            vectors_file,
                            words_and_idf,
                        ).drop(FOLD_OWNER),
                        vectors_file,
                        words_and_idf,
                        bins,
                    )
                )
            sampled = sampled.cache()  # both sides of the pairs read it
            pairs = pool_pairs(sampled)
            if more_lists is not None:  # the list ids back to the candidates' own
                _, owners = more_lists
                pairs = pairs.join(owners, "candidate_id", "left").withColumn(
                    "candidate_id", F.coalesce("owner_id", "candidate_id")
                )
            write_delta(
                pairs.select(*schema_columns(TRIPLE_SCHEMA)), pool_path, partition_by=["split"]
            )
            sampled.unpersist()
    assigned.unpersist()
    selected.unpersist()

    split_counts = _counts_by_split(read_delta(spark, triples_path).groupBy("split").count())
    pool_rows: dict[str, int] = {}
    for path in (map_path, held_out_path):  # rows, and the candidates they belong to
        for r in _rows_and_candidates(read_delta(spark, path)):
            pool_rows[r["split"]], split_counts[r["split"]] = int(r["rows"]), int(r["candidates"])
    pool_rows |= _counts_by_split(read_delta(spark, pool_path).groupBy("split").count())
    queried = queries.agg(
        F.count(F.lit(1)).alias("candidates"),
        F.count(F.when(F.size("query_terms") == 0, 1)).alias("empty"),
        F.count(
            F.when((F.size("query_terms") > 0) & (rule.region() == EVALUATION_REGION), 1)
        ).alias("evaluation"),
    ).first()
    assert queried is not None
    funnel = PairsFunnel(
        candidates=int(queried["candidates"]),
        empty_query=int(queried["empty"]),
        evaluation=int(queried["evaluation"]),
        search_failed=failed,
        outcomes=outcomes,
        splits=split_counts,
        pool_rows=pool_rows,
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
            "held_out": held_out_path,
            "pool_triples": pool_path,
            "profiles": profiles_path,
            "retrieval": retrieval_path,
            "index": index,
            "embeddings": embeddings["version"],
            "config_hash": funnel.config_hash,
            "bins": bins,
            "splits": split_counts,
            "split_rule": rule.to_record(),
            "pool_rows": pool_rows,
        },
    )
    log_stage_run(
        spark,
        config,
        "build_pairs",
        [table_path(config, "silver", "candidates"), str(embeddings["jobs"])],
        funnel.metrics(),
        {
            "embeddings_version": funnel.embeddings,
            "index": index,
            "config_hash": funnel.config_hash,
        },
    )
    return funnel


def _more_training_lists(
    spark: SparkSession,
    config: JobrecConfig,
    candidates: DataFrame,
    jobs: DataFrame,
    assigned: DataFrame,
    index: str,
) -> tuple[DataFrame, DataFrame] | None:
    """The training lists after each candidate's first (`pairs.pool_lists` - 1 more, see
    `pairs.splits.more_held_out_jobs`), searched like the first and written to
    `silver/training_lists` and `silver/retrieval_lists`: (their sampled pool rows with the
    profile owners, keyed by the list's id in `candidate_id`, the candidate in
    `features.behaviour.FOLD_OWNER` for the behaviour fold it reads; `candidate_id` (the list id),
    `owner_id`), or None with a single list per candidate."""
    if config.pairs.pool_lists < 2:
        return None
    embeddings = manifest.current(config, "embeddings")
    seed = config.run.seed
    held_out = more_held_out_jobs(candidates, assigned, config.pairs.pool_lists, seed)
    inputs = query_inputs(
        held_out.select(F.col("list_id").alias("candidate_id"), "sequence", "positive_job_id"),
        jobs,
        config.queries,
    )
    lists_path = table_path(config, "silver", "training_lists")
    with _step(spark, "queries of the further training lists (silver/training_lists)"):
        queries = build_queries(
            inputs,
            str(embeddings["version"]),
            broadcast_idf(spark, embeddings),
            config.queries,
            seed,
        ).join(
            held_out.select(
                F.col("list_id").alias("candidate_id"), F.col("candidate_id").alias("owner_id")
            ),
            "candidate_id",
        )
        write_delta(queries, lists_path)
    queries = read_delta(spark, lists_path)
    checkpoint = RetrievalCheckpoint(
        config, table_path(config, "silver", "retrieval_lists"), QUARANTINE_SOURCE
    )
    with _step(
        spark, f"retrieval of the further training lists from {index} (silver/retrieval_lists)"
    ):
        connection, partitions = resolve_connection(config), spark.sparkContext.defaultParallelism
        retrieved = checkpoint(
            lambda rows: retrieve(
                rows, connection, index, config.retrieval, partitions, FULL_QUERY
            ),
            queries.where(F.size("query_terms") > 0).select("candidate_id", "query_terms"),
            queries,
            retrieval_fingerprint(index, config.retrieval, "full query"),
        )
    searched = queries.join(retrieved.where(F.col("error").isNull()), "candidate_id").withColumn(
        "split", F.lit("train")
    )
    rows = (
        pool_sample(held_out_documents(searched, POOL_SPLIT), config.pairs.pool_negatives, seed)
        .join(profile_owners(searched), "candidate_id")
        .join(queries.select("candidate_id", F.col("owner_id").alias(FOLD_OWNER)), "candidate_id")
    )
    return rows, queries.select("candidate_id", "owner_id")


def interest_graph(spark: SparkSession, config: JobrecConfig) -> DataFrame:
    """The interest graph of every candidate (`features.profile.co_interest_table`) with
    each job's behaviour vectors (`features.behaviour`) and, for every job, the ads whose
    evidence it carries where the graph knows nothing of it (`features.carried`), written to
    `silver/co_interest` and named in the manifest for the ranking pipeline. A cleaned
    candidate counts with their cleaned jobs, the others as ingested: a candidate's row is
    then exactly the `sequence_job_ids` the profile features take back out of it. Only the
    interest shown by the run's as-of date counts (`timeline.asof`): an ad posted later has
    no link yet."""
    cleaned = read_delta(spark, table_path(config, "silver", "candidates")).select(
        "candidate_id", "sequence"
    )
    ingested = interest_by(
        read_delta(spark, table_path(config, "bronze", "candidates")), as_of(config).day
    ).select("candidate_id", "sequence")
    rows = cleaned.unionByName(
        ingested.join(cleaned.select("candidate_id"), "candidate_id", "left_anti")
    )
    path = table_path(config, "silver", "co_interest")
    with _step(spark, "behaviour vectors"):
        vectors = behaviour_table(rows, config.pairs.behaviour_dimensions, config.run.seed)
    graph = co_interest_table(rows).join(vectors, "job_id", "left")
    # Undated data is one snapshot with no new ads: an ad nobody wanted there was seen and
    # not wanted, and carrying its neighbours' evidence would change today's features.
    day = as_of(config).day
    if config.pairs.carried_neighbours > 0 and day is not None:
        with _step(spark, "the ads each job carries the evidence of"):
            graph = with_carried_neighbours(spark, config, graph, rows, day)
    with _step(spark, "interest graph (silver/co_interest)"):
        write_delta(graph, path)
    manifest.record(config, "co_interest", {"table": path})
    return read_delta(spark, path)


def with_carried_neighbours(
    spark: SparkSession, config: JobrecConfig, graph: DataFrame, interests: DataFrame, day: date
) -> DataFrame:
    """`graph` with a row for every job of the embeddings' table (one the graph lacks: no
    link, nobody interested) and each job's `carried_from`, `carried_weights`
    (`features.carried`): its `pairs.carried_neighbours` most similar jobs by document
    vector among the ads exposed by the as-of `day` (:func:`exposed_jobs`, from the
    `interests`' days), found on the driver."""
    embeddings = manifest.current(config, "embeddings")
    jobs = read_delta(spark, embeddings["jobs"])
    vectors = with_document_vectors(
        document_tokens(jobs, config.histograms).select("job_id", "doc_tokens"),
        local_path(embeddings["vectors"]),
        broadcast_idf(spark, embeddings),
    ).select(F.col("job_id").cast("int"), DOCUMENT_VECTOR)
    exposed = exposed_jobs(jobs, interests, day)
    found = arrow_to_pandas(
        vectors.join(exposed, "job_id", "left")
        .join(graph.select("job_id", "interested"), "job_id", "left")
        .orderBy("job_id")
    )
    dimensions = config.embeddings.vector_size
    matrix = np.zeros((len(found), dimensions), dtype=np.float32)
    has_vector = found[DOCUMENT_VECTOR].notna().to_numpy()
    if has_vector.any():
        matrix[has_vector] = np.stack(found.loc[has_vector, DOCUMENT_VECTOR].to_list())
    carried = carried_neighbours(
        found["job_id"].to_numpy(),
        matrix,
        found["exposed"].fillna(False).to_numpy(dtype=bool),
        config.pairs.carried_neighbours,
        # only a job the graph knows at most one candidate of can be one nobody else wanted
        wanted=found["interested"].fillna(0).to_numpy() <= MOSTLY_UNSEEN,
    )
    schema = f"job_id INT, {CARRIED_FROM} ARRAY<INT>, {CARRIED_WEIGHTS} ARRAY<FLOAT>"
    with spark_setting(spark, "spark.sql.execution.arrow.pyspark.enabled", "true", "false"):
        table = spark.createDataFrame(carried, schema)
    return table.join(graph, "job_id", "left").select(
        "job_id",
        F.coalesce("neighbours", F.array().cast("array<int>")).alias("neighbours"),
        F.coalesce("counts", F.array().cast("array<int>")).alias("counts"),
        F.coalesce("interested", F.lit(0)).alias("interested"),
        *[c for c in graph.columns if c not in ("job_id", "neighbours", "counts", "interested")],
        CARRIED_FROM,
        CARRIED_WEIGHTS,
    )


def exposed_jobs(jobs: DataFrame, interests: DataFrame, day: date) -> DataFrame:
    """`job_id, exposed`: the ads that have had the time to draw interest by `day`, those
    whose evidence an ad the graph knows nothing of may carry: posted at least the median
    age of the interest shown by then before it (the days from an ad's posting to an
    interest in it), whether anyone showed interest in them or not. An ad that drew nobody
    in that time says so; counting only the ads someone wanted would carry their popularity
    to every new ad."""
    ages = (
        interests.select(F.explode("sequence").alias("e"))
        .join(jobs.select("job_id", "posted_at"), F.col("e.job_id") == F.col("job_id"))
        .select(F.datediff("e.at", "posted_at").alias("age"))
        .where(F.col("age").isNotNull())
    )
    median = ages.agg(F.percentile_approx("age", 0.5).alias("median")).first()
    days = int(median["median"]) if median is not None and median["median"] is not None else 0
    cut = F.date_sub(F.lit(day), days)
    return jobs.select(
        "job_id", (F.col("posted_at").isNull() | (F.col("posted_at") <= cut)).alias("exposed")
    )


def _step(spark: SparkSession, name: str) -> AbstractContextManager[None]:
    """One step of the stage, logged with its Spark jobs' progress (`platform.progress`)."""
    return spark_progress(spark, f"build_pairs: {name}")


def _counts_by_split(frame: DataFrame) -> dict[str, int]:
    return {r["split"]: int(r["count"]) for r in frame.collect()}


def _rows_and_candidates(table: DataFrame) -> list[Row]:
    """Per split of a pool table: its `rows` and its distinct `candidates`, in one job."""
    return (
        table.groupBy("split")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.countDistinct("candidate_id").alias("candidates"),
        )
        .collect()
    )
