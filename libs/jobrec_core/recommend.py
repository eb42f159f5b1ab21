"""Top-10 recommendations: BM25's top 100 for a candidate, re-ranked by the champion DRMM.

`jobs/recommend.py` calls :func:`run_recommend`; the evaluation against the generator's ground
truth (`jobrec_core.evaluation`) goes through the same steps, so what is measured is what is
served:

1. :func:`search_candidates`: the query bag of words of *all* the candidate's jobs (the seed's
   query without a held-out positive, `jobrec_core.queries`), searched against the version of
   the jobs index behind the alias now; the results are written to a Delta table, failures go
   to quarantine within the error budget;
2. :func:`candidate_documents`: BM25's results minus the candidate's own jobs, one row each
   with its BM25 score and rank;
3. :func:`rerank_inputs`: the DRMM features of those rows (`pairs.map_features`: the same
   histograms as the training data);
4. scoring with `rerank.score_documents` (the model is broadcast once) and :func:`top_k_rows`.

The table `gold/recommendations` holds `candidate_id, rank, job_id, title, score, bm25,
bm25_rank, model, index, generated_at`; a run for a list of candidates replaces only
their rows, a run for everyone replaces the table: reruns never duplicate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from pyspark import Broadcast
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobrec_core import manifest
from jobrec_core.config import JobrecConfig
from jobrec_core.io import is_delta_table, local_path, read_delta, table_path, write_delta
from jobrec_core.model import Drmm
from jobrec_core.pairs import (
    arrow_batch,
    broadcast_idf,
    build_queries,
    document_tokens,
    map_features,
    quarantine_failed_searches,
    query_inputs,
    retrieve,
    serving_index,
)
from jobrec_core.plots import chart
from jobrec_core.quality import QualityReport, enforce_budget
from jobrec_core.rerank import DrmmScorer, score_column, score_documents
from jobrec_core.search import make_client, resolve_connection

log = logging.getLogger(__name__)

QUARANTINE_SOURCE = "recommend"
FULL_QUERY = {"query_terms": "full_hits"}
SCORED_KEEP = "candidate_id LONG, job_id INT, label INT, bm25 FLOAT, bm25_rank INT"


@dataclass(frozen=True)
class Searched:
    queries: DataFrame  # candidate_id, own_job_ids, query_terms
    retrieved: DataFrame  # candidate_id, full_hits, error
    index: str
    candidates: int
    empty_query: int
    failed: int
    words_and_idf: Broadcast  # the embeddings' (words, IDF), for the features too


def search_candidates(
    spark: SparkSession, config: JobrecConfig, candidates: DataFrame, name: str, source: str
) -> Searched:
    """Step 1 (see the module) for `candidates` (`candidate_id, sequence`); the results go to
    `silver/<name>`."""
    embeddings = manifest.current(config, "embeddings")
    jobs = read_delta(spark, embeddings["jobs"])
    words_and_idf = broadcast_idf(spark, embeddings)
    inputs = query_inputs(
        candidates.select(
            "candidate_id", "sequence", F.lit(None).cast("int").alias("positive_job_id")
        ),
        jobs,
        list(config.queries.fields),
    )
    queries = (
        build_queries(
            inputs, str(embeddings["version"]), words_and_idf, config.queries, config.run.seed
        )
        .select("candidate_id", "own_job_ids", "query_terms")
        .cache()
    )
    connection = resolve_connection(config)
    index = serving_index(make_client(connection), config.elasticsearch.index_alias)
    path = table_path(config, "silver", name)
    searchable = queries.where(F.size("query_terms") > 0)
    log.info("%s: searching %s", name, index)
    write_delta(
        retrieve(
            searchable,
            connection,
            index,
            config.retrieval,
            spark.sparkContext.defaultParallelism,
            FULL_QUERY,
        ),
        path,
    )
    retrieved = read_delta(spark, path)
    searched = retrieved.count()
    failed = quarantine_failed_searches(config, queries, retrieved, source, tuple(FULL_QUERY))
    enforce_budget(
        QualityReport(
            source, searched, searched - failed, {"search_failed": failed} if failed else {}
        ),
        config.quality.error_budget_fraction,
    )
    total = queries.count()
    return Searched(queries, retrieved, index, total, total - searched, failed, words_and_idf)


def candidate_documents(searched: Searched, split: str) -> DataFrame:
    """Step 2: `candidate_id, split, query_terms, job_id, label (0), bm25, bm25_rank`."""
    hits = F.filter(
        F.transform("full_hits", lambda h, i: F.struct(h.alias("h"), (i + 1).alias("rank"))),
        lambda x: ~F.array_contains(F.col("own_job_ids"), x["h"]["job_id"]),
    )
    return (
        searched.retrieved.where(F.col("error").isNull())
        .join(searched.queries, "candidate_id")
        .select("candidate_id", "query_terms", F.explode(hits).alias("x"))
        .select(
            "candidate_id",
            F.lit(split).alias("split"),
            "query_terms",
            F.col("x.h.job_id").alias("job_id"),
            F.lit(0).alias("label"),
            F.col("x.h.score").alias("bm25"),
            F.col("x.rank").alias("bm25_rank"),
        )
    )


def rerank_inputs(
    spark: SparkSession, config: JobrecConfig, searched: Searched, documents: DataFrame
) -> DataFrame:
    """Step 3: `candidate_documents(searched)`-shaped rows -> rows of `pairs.MAP_SCHEMA` with
    features."""
    embeddings = manifest.current(config, "embeddings")
    jobs = read_delta(spark, embeddings["jobs"])
    tokens = document_tokens(
        jobs, list(config.histograms.doc_fields), config.histograms.doc_max_terms
    )
    return map_features(
        documents.join(tokens, "job_id"),
        local_path(embeddings["vectors"]),
        searched.words_and_idf,
        config.histograms.bins,
    )


def top_k_rows(scored: DataFrame, score: str, k: int) -> DataFrame:
    """The k best rows per candidate by `score` (ties: the lower job id), with `rank` from 1."""
    order = Window.partitionBy("candidate_id").orderBy(F.col(score).desc(), "job_id")
    return scored.withColumn("rank", F.row_number().over(order)).where(F.col("rank") <= k)


@dataclass(frozen=True)
class Champion:
    name: str
    version: str
    model: Drmm


def load_champion(config: JobrecConfig) -> Champion:
    """The registry's champion, by alias; refuses a model trained on other embeddings than
    the current ones (its histograms would not match)."""
    from jobrec_core.registry import model_of
    from jobrec_core.tracking import configure_mlflow, registry_client

    configure_mlflow(config)
    settings = config.mlflow
    client = registry_client(config)
    try:
        current = client.get_model_version_by_alias(settings.model_name, settings.champion_alias)
    except Exception as error:  # the registry says "not found" in several ways
        raise LookupError(
            f"{settings.model_name} has no {settings.champion_alias!r} version: train and "
            f"promote one first (jobs/train_drmm.py, jobs/promote_model.py)"
        ) from error
    embeddings = str(manifest.current(config, "embeddings")["version"])
    trained_on = (
        client.get_run(current.run_id).data.tags.get("embeddings_version")
        if current.run_id
        else None
    )
    if trained_on is not None and trained_on != embeddings:
        raise RuntimeError(
            f"{settings.model_name} v{current.version} was trained with embeddings {trained_on}, "
            f"the current ones are {embeddings}: retrain and promote a model first"
        )
    version = str(current.version)
    return Champion(
        settings.model_name, version, model_of(f"models:/{settings.model_name}/{version}")
    )


@dataclass(frozen=True)
class RecommendReport:
    candidates: int
    unknown_ids: list[int]
    empty_query: int
    search_failed: int
    recommended: int
    rows: int
    model: str
    index: str
    table: str

    def format(self) -> str:
        lines = [
            "Recommendations",
            f"  candidates                 {self.candidates:>10,}",
            f"  empty query (skipped)      {self.empty_query:>10,}",
            f"  searches failed (quarant.) {self.search_failed:>10,}",
            f"  candidates recommended     {self.recommended:>10,}",
            f"  rows written               {self.rows:>10,}",
            f"  model {self.model}, index {self.index}",
            f"  table {self.table}",
        ]
        if self.unknown_ids:
            shown = ", ".join(str(i) for i in self.unknown_ids[:10])
            lines.append(f"  not among the cleaned candidates: {shown}")
        return "\n".join(lines)


def run_recommend(
    spark: SparkSession, config: JobrecConfig, candidate_ids: list[int] | None = None
) -> RecommendReport:
    """Every cleaned candidate's top k (or only `candidate_ids`'s) into `gold/recommendations`."""
    champion = load_champion(config)
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    unknown: list[int] = []
    if candidate_ids is not None:
        wanted = sorted(set(candidate_ids))
        candidates = candidates.where(F.col("candidate_id").isin(wanted))
        found = {r["candidate_id"] for r in candidates.select("candidate_id").collect()}
        unknown = [i for i in wanted if i not in found]
    searched = search_candidates(
        spark, config, candidates, "recommendation_retrieval", QUARANTINE_SOURCE
    )
    scorer = DrmmScorer.of(spark, f"DRMM {champion.version}", champion.model)
    inputs = rerank_inputs(spark, config, searched, candidate_documents(searched, "recommend"))
    scored = score_documents(inputs, [scorer], SCORED_KEEP)
    jobs = read_delta(spark, manifest.current(config, "embeddings")["jobs"]).select(
        "job_id", "title"
    )
    top = (
        top_k_rows(scored, score_column(scorer), config.evaluation.k)
        .join(jobs, "job_id")
        .select(
            "candidate_id",
            "rank",
            "job_id",
            "title",
            F.col(score_column(scorer)).alias("score"),
            "bm25",
            "bm25_rank",
            F.lit(f"{champion.name} v{champion.version}").alias("model"),
            F.lit(searched.index).alias("index"),
            F.lit(datetime.now(UTC).replace(microsecond=0)).alias("generated_at"),
        )
    )
    path = table_path(config, "gold", "recommendations")
    replace_where = None
    if candidate_ids is not None and is_delta_table(spark, path):
        replace_where = (
            f"candidate_id IN ({', '.join(str(int(i)) for i in sorted(set(candidate_ids)))})"
        )
    with arrow_batch(spark, config.histograms.map_queries_per_batch):
        write_delta(top, path, replace_where=replace_where)
    written = read_delta(spark, path)
    if candidate_ids is not None:
        written = written.where(F.col("candidate_id").isin(sorted(set(candidate_ids))))
    counts = written.agg(
        F.count("*").alias("rows"), F.countDistinct("candidate_id").alias("n")
    ).first()
    searched.queries.unpersist()
    return RecommendReport(
        candidates=searched.candidates,
        unknown_ids=unknown,
        empty_query=searched.empty_query,
        search_failed=searched.failed,
        recommended=int(counts["n"]) if counts else 0,
        rows=int(counts["rows"]) if counts else 0,
        model=f"{champion.name} v{champion.version}",
        index=searched.index,
        table=path,
    )


def show_candidate(spark: SparkSession, config: JobrecConfig, candidate_id: int) -> str:
    """A candidate's past jobs (score, title) and their recommendations, readable."""
    jobs = read_delta(spark, manifest.current(config, "embeddings")["jobs"]).select(
        "job_id", "title", "function"
    )
    candidate = read_delta(spark, table_path(config, "silver", "candidates")).where(
        F.col("candidate_id") == candidate_id
    )
    past = (
        candidate.select(F.posexplode("sequence").alias("pos", "e"))
        .select("pos", F.col("e.job_id").alias("job_id"), F.col("e.score").alias("score"))
        .join(jobs, "job_id")
        .orderBy("pos")
        .collect()
    )
    if not past:
        return f"candidate {candidate_id} is not among the cleaned candidates"
    recommended = recommendations_of(spark, config, candidate_id).to_dict("records")
    lines = [f"Candidate {candidate_id}: jobs of interest (score, title)"]
    lines += [f"  {r['score']:>2}  {r['title']}  [{r['job_id']}]" for r in past]
    if not recommended:
        lines.append("  no recommendations yet: run jobs/recommend.py for this candidate")
        return "\n".join(lines)
    lines.append(f"Recommended by {recommended[0]['model']} (rank, DRMM score, BM25 rank)")
    lines += [
        f"  {r['rank']:>2}. {r['title']}  [{r['job_id']}]  score {r['score']:.3f}, "
        f"BM25 #{r['bm25_rank']}"
        for r in recommended
    ]
    return "\n".join(lines)


def recommendations_of(
    spark: SparkSession, config: JobrecConfig, candidate_id: int
) -> pd.DataFrame:
    """The candidate's rows of gold/recommendations, best first (empty when none)."""
    path = table_path(config, "gold", "recommendations")
    if not is_delta_table(spark, path):
        return pd.DataFrame()
    rows = read_delta(spark, path).where(F.col("candidate_id") == candidate_id).orderBy("rank")
    return pd.DataFrame(rows.toPandas())


def recommended_candidates(spark: SparkSession, config: JobrecConfig, count: int) -> list[int]:
    """The first `count` candidates (by id) that have recommendations."""
    path = table_path(config, "gold", "recommendations")
    if not is_delta_table(spark, path):
        return []
    ids = read_delta(spark, path).select("candidate_id").distinct().orderBy("candidate_id")
    return [int(row["candidate_id"]) for row in ids.limit(count).collect()]


def rank_figure(recommendations: pd.DataFrame) -> Any:
    """Where each recommended job stood in BM25's 100 and where the re-ranker put it."""
    deepest = int(recommendations["bm25_rank"].max())
    title = "Re-ranking: from BM25's rank to the recommended rank"
    with chart((8, 4.5), title, (deepest + 0.5, 0.5), grid="y") as (figure, axis):
        for position, row in enumerate(recommendations.itertuples()):
            axis.plot(
                [0, 1],
                [row.bm25_rank, row.rank],
                color="#4472c4",
                marker="o",
                alpha=0.7,
                label="one recommended job" if position == 0 else None,
            )
            axis.annotate(str(row.title)[:40], (1.03, row.rank), fontsize=7, va="center")
        axis.set_xticks([0, 1], ["BM25 rank", "recommended rank"])
        axis.set_xlim(-0.1, 1.8)
    return figure
