"""Stage 5b: top-10 recommendations, the retriever's pool for a candidate re-ranked by the
champion (or in its own order, while there is none).

`jobs/recommend.py` calls :func:`run_recommend`. The pipeline is `ranking.factory`'s, the
one the evaluation measures, so what is measured is what is served:

1. the query bag of words of *all* the candidate's jobs (the paper's query without a held-out
   positive, `features.queries.candidate_queries`);
2. `retrieval.retriever` against the version of the jobs index behind the alias now: BM25's
   top 100, or the dense or hybrid pool (`search.dense`: the kNN of the candidate's profile
   vector, fused with BM25's list); the results are written to
   `silver/recommendation_retrieval`, failures go to quarantine within the error budget
   (`search.bm25.RetrievalCheckpoint`);
3. the pool minus the candidate's own jobs and, for dated data, minus any ad not live on the
   run's as-of date (`ranking.pipeline.LiveOnly`: the index holds the ads live on the day it
   was built for; an ad closed since is left out, and the run counts them), with the DRMM
   features (the histograms of the training data, BM25 of every job for the same query),
   scored by the champion (broadcast once), the top `evaluation.k`; while no model has passed
   the promotion gate, the pool's own order (:func:`served_ranker`).

The table `gold/recommendations` holds `candidate_id, rank, job_id, title, score, bm25,
bm25_rank, model, index, generated_at` (`bm25_rank` null for a job only the kNN list found);
a run for a list of candidates replaces only
their rows, a run for everyone replaces the table: reruns never duplicate.

:func:`online_recommender` loads the same pipeline once for the online endpoint
(`serving.online`, `jobrec serve`): one request at a time, in pandas, no table written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig
from jobrec_core.features.queries import idf_lookup
from jobrec_core.models.registry import NoChampionError, load_champion
from jobrec_core.platform import manifest
from jobrec_core.platform.heap import freeze_long_lived
from jobrec_core.platform.plots import chart
from jobrec_core.platform.spark import arrow_batch
from jobrec_core.platform.tables import is_delta_table, read_delta, table_path, write_delta
from jobrec_core.ranking.factory import (
    in_memory,
    queries_of,
    ranking_inputs,
    rerank_pipeline,
    retriever_step,
)
from jobrec_core.ranking.pipeline import Clock, spark_table
from jobrec_core.ranking.scorers import RetrievalOrderScorer, Scorer, drmm_scorer
from jobrec_core.search.bm25 import RetrievalCheckpoint
from jobrec_core.serving.online import Interest, OnlineRecommender, RecommendRequest
from jobrec_core.text.tokens import tokens_column
from jobrec_core.timeline.asof import as_of, live_on

log = logging.getLogger(__name__)

QUARANTINE_SOURCE = "recommend"
# Candidates from which a run ships the job tables to the workers (`ranking_inputs`): on the
# demo shipping costs about 15 s once and saves about 10 ms a candidate (docs/BENCHMARKS.md).
SHIPPED_TABLES_FROM = 1000


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
    retriever: str
    as_of: str | None = None  # the run's as-of date; None: undated data
    expired_excluded: int = 0  # pool rows of ads not live then, left out
    expired_recommended: int = 0  # recommendations of such ads: 0, checked on what was written

    def format(self) -> str:
        lines = [
            "Recommendations" + (f" as of {self.as_of}" if self.as_of else ""),
            f"  candidates                 {self.candidates:>10,}",
            f"  empty query (skipped)      {self.empty_query:>10,}",
            f"  searches failed (quarant.) {self.search_failed:>10,}",
            f"  candidates recommended     {self.recommended:>10,}",
            f"  rows written               {self.rows:>10,}",
        ]
        if self.as_of:
            lines += [
                f"  expired ads left out       {self.expired_excluded:>10,}",
                f"  expired ads recommended    {self.expired_recommended:>10,}",
            ]
        lines += [
            f"  model {self.model}, index {self.index}, retriever {self.retriever}",
            f"  table {self.table}",
        ]
        if self.unknown_ids:
            shown = ", ".join(str(i) for i in self.unknown_ids[:10])
            lines.append(f"  not among the cleaned candidates: {shown}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ServedRanker:
    """What orders the pools: the champion, or the retriever itself while no model has shown
    at the gate that it ranks better (`training.promotion`)."""

    label: str  # the `model` column of a recommendation
    scorer: Scorer


def served_ranker(spark: SparkSession | None, config: JobrecConfig) -> ServedRanker:
    """The champion (broadcast once through `spark`, when given), or, with a warning, the
    retriever's own order when there is no champion that can rank the current pools
    (`models.registry.NoChampionError`): recommendations never wait for a model, and never serve
    one that was not shown to beat BM25's order."""
    try:
        champion = load_champion(config)
    except NoChampionError as error:
        label = f"{config.retrieval.retriever} order (no champion)"
        log.warning("recommend: %s; serving the %s", error, label)
        return ServedRanker(label, RetrievalOrderScorer())
    scorer = drmm_scorer(spark, f"DRMM {champion.version}", champion.model)
    return ServedRanker(champion.label, scorer)


def run_recommend(
    spark: SparkSession, config: JobrecConfig, candidate_ids: list[int] | None = None
) -> RecommendReport:
    """Every cleaned candidate's top k (or only `candidate_ids`'s) into `gold/recommendations`."""
    if candidate_ids is not None and not candidate_ids:
        # No one asked for (`--candidates ""`): nothing to search or write, and no model to
        # load; replacing the rows of no ids would be `candidate_id IN ()`, which is no SQL.
        return RecommendReport(
            candidates=0,
            unknown_ids=[],
            empty_query=0,
            search_failed=0,
            recommended=0,
            rows=0,
            model="-",
            index="-",
            table=table_path(config, "gold", "recommendations"),
            retriever=config.retrieval.retriever,
        )
    ranker = served_ranker(spark, config)
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    unknown: list[int] = []
    if candidate_ids is not None:
        wanted = sorted(set(candidate_ids))
        candidates = candidates.where(F.col("candidate_id").isin(wanted))
        found = {r["candidate_id"] for r in candidates.select("candidate_id").collect()}
        unknown = [i for i in wanted if i not in found]
    many = candidate_ids is None or len(set(candidate_ids)) >= SHIPPED_TABLES_FROM
    inputs = ranking_inputs(spark, config, ship_tables=many)
    queries = queries_of(config, inputs, candidates).cache()
    retrieval_path = table_path(config, "silver", "recommendation_retrieval")
    checkpoint = RetrievalCheckpoint(config, retrieval_path, QUARANTINE_SOURCE)
    timeline = as_of(config)
    clock = Clock(timeline.day) if timeline.day is not None else None
    log.info("recommend: searching %s (%s)", inputs.index, timeline.describe())
    built_for = manifest.read_manifest(config).get("index", {}).get("as_of")
    if timeline.day is not None and built_for != timeline.day.isoformat():
        log.warning(
            "recommend: the index holds the ads live on %s, the run is as of %s: ads not live "
            "then are left out after the search, and BM25's statistics are the index's; rebuild "
            "it (jobs/index_jobs.py) for the day's own",
            built_for,
            timeline.day,
        )
    ranked = rerank_pipeline(config, inputs, ranker.scorer, checkpoint, clock).transform_spark(
        queries
    )
    titles = inputs.jobs.select("job_id", "title")
    top = ranked.join(titles, "job_id").select(
        "candidate_id",
        "rank",
        "job_id",
        "title",
        "score",
        "bm25",
        "bm25_rank",
        F.lit(ranker.label).alias("model"),
        F.lit(inputs.index).alias("index"),
        F.lit(datetime.now(UTC).replace(microsecond=0)).alias("generated_at"),
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
    total = queries.count()
    expired = (0, 0)
    if timeline.day is not None:
        gone = spark_table(inputs.dates).where(~live_on(timeline.day)).select("job_id")
        # the pools as searched, read back from the run's stored searches (no search again)
        pools = retriever_step(config, inputs, checkpoint).pools_spark(queries)
        expired = (
            expired_in_pools(pools, gone),
            written.join(gone, "job_id", "left_semi").count(),
        )
    queries.unpersist()
    return RecommendReport(
        candidates=total,
        unknown_ids=unknown,
        empty_query=total - checkpoint.searched,
        search_failed=checkpoint.failed,
        recommended=int(counts["n"]) if counts else 0,
        rows=int(counts["rows"]) if counts else 0,
        model=ranker.label,
        index=inputs.index,
        table=path,
        retriever=config.retrieval.retriever,
        as_of=timeline.day.isoformat() if timeline.day is not None else None,
        expired_excluded=expired[0],
        expired_recommended=expired[1],
    )


def expired_in_pools(pools: DataFrame, gone: DataFrame) -> int:
    """How many pool rows (`pool_job_id` arrays, `ranking.pipeline.RetrieverStep.pools_spark`:
    the candidates' own jobs already left out) are ads in `gone` (`job_id`: not live on the
    run's day): what `LiveOnly` left out."""
    hits = pools.select(F.explode("pool_job_id").alias("job_id"))
    return hits.join(gone, "job_id", "left_semi").count()


def online_clock(config: JobrecConfig) -> Clock | None:
    """The day online answers keep ads live on (`serving.clock`): today's at each request, or
    the run's as-of date; None for undated data."""
    timeline = as_of(config)
    if timeline.day is None:
        return None
    return Clock(timeline.day) if config.serving.clock == "as_of" else Clock()


def online_recommender(spark: SparkSession, config: JobrecConfig) -> OnlineRecommender:
    """The served ranker (loaded once, as `run_recommend` does per run) and the pipeline on the
    run's inputs collected into memory, with each job's title and the fields its queries read;
    Spark is needed only here. One request is answered before returning, so that loading the word
    vectors, the IDF vocabulary and the network (seconds) falls on start-up, not on the first
    client."""
    ranker = served_ranker(None, config)
    inputs = ranking_inputs(spark, config, ship_tables=False)
    local = in_memory(inputs)
    catalogue = inputs.jobs.select(
        "job_id", "title", *[tokens_column(f) for f in config.queries.text_fields]
    ).toPandas()
    recommender = OnlineRecommender(
        config=config,
        pipeline=rerank_pipeline(config, local, ranker.scorer, clock=online_clock(config)),
        catalogue=pd.DataFrame(catalogue).set_index("job_id"),
        idf=idf_lookup(local.embeddings_version, local.words_and_idf),
        model=ranker.label,
        index=inputs.index,
    )
    first = int(recommender.catalogue.index[0])
    recommender.recommend(RecommendRequest((Interest(first, 10),)))
    freeze_long_lived()  # what start-up loaded stays out of the requests' collections
    log.info("online: %s on %s, %s jobs in memory", recommender.model, inputs.index, len(catalogue))
    return recommender


def show_candidate(spark: SparkSession, config: JobrecConfig, candidate_id: int) -> str:
    """A candidate's past jobs (score, title; the day of the interest, dated data) and their
    recommendations (with the days each ad was posted and closes), readable."""
    jobs = read_delta(spark, manifest.current(config, "embeddings")["jobs"]).select(
        "job_id", "title", "function", "posted_at", "expires_at"
    )
    candidate = read_delta(spark, table_path(config, "silver", "candidates")).where(
        F.col("candidate_id") == candidate_id
    )
    past = (
        candidate.select(F.posexplode("sequence").alias("pos", "e"))
        .select("pos", F.col("e.job_id").alias("job_id"), "e.score", "e.at")
        .join(jobs, "job_id")
        .orderBy("pos")
        .collect()
    )
    if not past:
        return f"candidate {candidate_id} is not among the cleaned candidates"
    dated = any(r["at"] is not None for r in past)
    recommended = recommendations_of(spark, config, candidate_id).to_dict("records")
    lines = [f"Candidate {candidate_id}: jobs of interest (score, {'day, ' if dated else ''}title)"]
    for r in past:
        day = f"{r['at']}  " if dated else ""
        lines.append(f"  {r['score']:>2}  {day}{r['title']}  [{r['job_id']}]")
    if not recommended:
        lines.append("  no recommendations yet: run jobs/recommend.py for this candidate")
        return "\n".join(lines)
    lives = {
        int(r["job_id"]): (r["posted_at"], r["expires_at"])
        for r in jobs.where(F.col("job_id").isin([int(r["job_id"]) for r in recommended]))
        .select("job_id", "posted_at", "expires_at")
        .collect()
    }
    lines.append(f"Recommended by {recommended[0]['model']} (rank, DRMM score, BM25 rank)")
    for r in recommended:
        posted, expires = lives.get(int(r["job_id"]), (None, None))
        line = f"  {r['rank']:>2}. {r['title']}  [{r['job_id']}]  score {r['score']:.3f}, " + (
            f"BM25 #{int(r['bm25_rank'])}" if pd.notna(r["bm25_rank"]) else "kNN list only"
        )
        if posted is not None:
            line += f", posted {posted}" + (f", closes {expires}" if expires else "")
        lines.append(line)
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
    """Where each recommended job stood in BM25's 100 and where the re-ranker put it; a job
    only the kNN list found (hybrid pool) starts below BM25's deepest."""
    listed = recommendations["bm25_rank"].notna()
    deepest = int(recommendations.loc[listed, "bm25_rank"].max()) if listed.any() else 1
    below = deepest + 2
    title = "Re-ranking: from BM25's rank to the recommended rank"
    with chart((8, 4.5), title, (below + 0.5, 0.5), grid="y") as (figure, axis):
        labelled: set[bool] = set()
        for row, in_bm25 in zip(recommendations.itertuples(), listed, strict=True):
            axis.plot(
                [0, 1],
                [row.bm25_rank if in_bm25 else below, row.rank],
                color="#4472c4" if in_bm25 else "#ed7d31",
                marker="o",
                alpha=0.7,
                label=None
                if in_bm25 in labelled
                else ("one recommended job" if in_bm25 else "found by the kNN list only"),
            )
            labelled.add(bool(in_bm25))
            axis.annotate(str(row.title)[:40], (1.03, row.rank), fontsize=7, va="center")
        axis.set_xticks([0, 1], ["BM25 rank", "recommended rank"])
        axis.set_xlim(-0.1, 1.8)
    return figure
