"""Stage 5a: does the re-ranker recommend better jobs than BM25 alone? Five experiments
(the first three after the paper §7-8).

1. **The paper's protocol** on the test splits (`evaluation.protocols`), for BM25's own order,
   the baselines and every DRMM configuration trained on the current pairs.
2. **Learning curve**: the configured DRMM trained on nested samples of the training triples
   (`training.learning_curve_sizes`, scaled down when there are fewer), dev accuracy, dev
   MAP and dev held-out MRR of each. Training belongs to the training stage: the caller
   passes a `trainer` (`training.stage.train_on_files`), so this stage never imports another.
3. **Ground truth** (`evaluation.ground_truth`): held-out candidates (in no split: not the
   test split the gate promotes on either) go through the recommendation pipeline
   (`ranking.factory`: a query of all their jobs, BM25's top 100 minus their own jobs, the
   features); every ranker scores the same rows in one Spark pass, and their top k are
   judged against the generator's latent interests, over all of them and over the
   candidates with a relevant real ad.
4. **Held-out interest** (`evaluation.held_out`): held-out candidates' highest-scored job held
   out, the query built from their other jobs, through the same pipeline; where each ranker
   puts the held-out job. It needs no ground truth, so it exists on real data; its agreement
   with the ground truth across rankers is reported.
5. **Retrievers** (`evaluation.retrievers`): BM25's, the dense and the hybrid pools
   (`search.dense`) for the same candidates, each in its own order and re-ranked by the
   champion; recall of the pool, P@k and nDCG@k against the ground truth, and the held-out
   interest that would select among them. Experiments 3 and 4's BM25 pools are reused. With
   `knn.dev_candidates`, also the votes of similar past candidates (seed 003), alone and
   mixed with the champion, `k` and λ chosen on dev candidates (`tune_knn`).
6. **Temporal** (`evaluation.temporal`, dated data whose last date is after the run's as-of
   date T): the candidates cleaned as of T who show interest in the window after it, judged
   on the ads live in the window and on the ads posted in it alone, each an index of its own
   built by the `IndexBuilder` the wiring passes (`indexing.stage.index_builder`), with the
   features as of T; and the held-out measure of this mode, each one's latest interest
   before T held out.

This module alone reads and writes tables here; only the scores come back to the driver,
where the metrics are numpy (`ranking.metrics`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, timedelta
from functools import reduce
from typing import Any, cast

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig
from jobrec_core.evaluation.curve import CurvePoint, CurveTraining, curve_sizes
from jobrec_core.evaluation.ground_truth import (
    GRADES,
    GroundTruth,
    GroundTruthRow,
    ground_truth,
    relevant_totals,
    with_relevance,
)
from jobrec_core.evaluation.held_out import (
    HeldOut,
    agreement,
    held_out_interest,
    with_held_out_label,
)
from jobrec_core.evaluation.protocols import (
    BM25,
    paper_protocol,
    triple_documents,
    with_empty_pools,
)
from jobrec_core.evaluation.report import EvaluationReport
from jobrec_core.evaluation.retrievers import (
    BM25_RETRIEVER,
    KNN_RANKER,
    JudgedPool,
    KnnChoice,
    RetrieverComparison,
    choose_knn,
    compare_retrievers,
    judged_pool,
    mix_name,
    pipeline_name,
    with_knn,
)
from jobrec_core.evaluation.temporal import (
    ALL_LIVE,
    FRESH,
    FRESH_ONLY,
    FUTURE,
    LabelledPools,
    TemporalEvaluation,
    judge_setting,
)
from jobrec_core.features.neighbours import InterestMemory, ivf_index
from jobrec_core.features.profile import QUERY_VECTOR, with_query_vectors
from jobrec_core.models.registry import load_champion, model_entry, model_of
from jobrec_core.models.splits import current_split_rule
from jobrec_core.platform import manifest
from jobrec_core.platform.spark import arrow_batch
from jobrec_core.platform.tables import (
    RawLocations,
    delta_version,
    is_delta_table,
    read_delta,
    snapshot_files,
    table_path,
    write_delta,
)
from jobrec_core.platform.tracking import configure_mlflow
from jobrec_core.ranking.factory import (
    RankingInputs,
    baseline_scorers,
    featured_pool,
    interest_memory,
    queries_of,
    ranking_inputs,
)
from jobrec_core.ranking.pipeline import ScoreColumns, spark_table
from jobrec_core.ranking.scorers import (
    BM25_COLUMN,
    RETRIEVAL_ORDER,
    RetrievalOrderScorer,
    Scorer,
    drmm_scorer,
    reads_bm25,
    score_column_of,
)
from jobrec_core.search.bm25 import RetrievalCheckpoint
from jobrec_core.search.dense import Retriever
from jobrec_core.timeline.asof import as_of, interest_between, live_between, posted_between
from jobrec_scoring.model import load_model

log = logging.getLogger(__name__)

QUARANTINE_SOURCE = "evaluate"

# Trains the configured DRMM on the given training files (None: the whole training split; the
# dev split as usual) and returns (dev accuracy, dev MAP, dev held-out MRR) of the epoch it
# kept, and the epochs it ran.
CurveTrainer = Callable[[list[str] | None, int], CurveTraining]

# Builds a version of an alias from a selection of the run's tokenised jobs, with the
# indexing stage's code: (the selection, the alias, what the selection is) -> (the physical
# index, its documents) (`indexing.stage.index_builder`).
IndexBuilder = Callable[[Callable[[DataFrame], DataFrame], str, str], tuple[str, int]]


# --- the models ---------------------------------------------------------------------------------


def evaluation_tables(spark: SparkSession, config: JobrecConfig) -> list[str]:
    """The Delta tables the evaluation reads, for its MLflow run: the pairs, the cleaned
    candidates, what the ranking pipeline reads (`ranking.factory.ranking_inputs`: tokenised
    jobs, IDF, interest graph) and the generator's ground truth where there is one."""
    pairs = manifest.current(config, "pairs")
    embeddings = manifest.current(config, "embeddings")
    tables = [str(pairs[name]) for name in ("triples", "map_sets", "held_out", "pool_triples")]
    tables += [
        table_path(config, "silver", "candidates"),
        str(embeddings["jobs"]),
        str(embeddings["idf"]),
        str(manifest.current(config, "co_interest")["table"]),
    ]
    truth = RawLocations.of(config).ground_truth
    return [*tables, truth] if is_delta_table(spark, truth) else tables


def current_models(
    spark: SparkSession, config: JobrecConfig
) -> tuple[dict[str, str], dict[str, str]]:
    """({"DRMM v1": registry version, ...}, {ranker: why skipped}): the last model of each
    configuration in the manifest, when it was trained on the current pairs."""
    pairs = manifest.current(config, "pairs")
    current = {
        "pairs_config_hash": str(pairs["config_hash"]),
        "triples_table_version": str(delta_version(spark, str(pairs["triples"]))),
    }
    recorded = manifest.read_manifest(config)
    found, skipped = {}, {}
    for version in config.evaluation.models:
        ranker = f"DRMM {version}"
        entry = recorded.get(model_entry(version))
        if entry is None or entry.get("version") is None:
            skipped[ranker] = f"never trained (jobs/train_drmm.py --set model.version={version})"
        elif any(str(entry.get(key)) != value for key, value in current.items()):
            skipped[ranker] = (
                f"registry version {entry['version']} was trained on older pairs: retrain it"
            )
        else:
            found[ranker] = str(entry["version"])
    return found, skipped


def drmm_scorers(spark: SparkSession, config: JobrecConfig, models: dict[str, str]) -> list[Scorer]:
    configure_mlflow(config)
    name = config.mlflow.model_name
    return [
        drmm_scorer(spark, ranker, model_of(f"models:/{name}/{version}"))
        for ranker, version in models.items()
    ]


def _collect(frame: DataFrame) -> pd.DataFrame:
    """The (small) scored rows on the driver."""
    return cast(pd.DataFrame, frame.toPandas())


# --- 1. the paper's protocol --------------------------------------------------------------------


def run_paper_protocol(
    spark: SparkSession, config: JobrecConfig, rerankers: list[Scorer], tokens: DataFrame
) -> tuple[list, dict[str, int]]:
    pairs = manifest.current(config, "pairs")
    triples = read_delta(spark, str(pairs["triples"])).where(F.col("split") == "test")
    map_sets = read_delta(spark, str(pairs["map_sets"])).where(F.col("split") == "map_test")
    # These rows are documents, not queries as in the grouped passes: a batch holds
    # `map_queries_per_batch` MAP queries' documents. The join leaves them in job order, and
    # a DRMM runs its network once per query in a batch: at 64 rows a batch (one or two rows
    # a query), the demo's protocol took 57 s instead of 15, with the same scores.
    documents_per_query = config.pairs.map_positives + config.pairs.map_negatives
    with arrow_batch(spark, config.histograms.map_queries_per_batch * documents_per_query):
        on_triples = _collect(
            ScoreColumns(rerankers, keep=["candidate_id", "label"]).transform_spark(
                triple_documents(triples).join(tokens, "job_id")
            )
        )
        on_map = _collect(
            ScoreColumns(
                rerankers, keep=["candidate_id", "job_id", "label", "bm25_rank"]
            ).transform_spark(map_sets.join(tokens, "job_id"))
        )
    names = [scorer.name for scorer in rerankers]
    reading_bm25 = frozenset(scorer.name for scorer in rerankers if reads_bm25(scorer))
    return paper_protocol(on_triples, on_map, names, config.evaluation.k, reading_bm25)


# --- 2. learning curve --------------------------------------------------------------------------


def run_learning_curve(
    spark: SparkSession, config: JobrecConfig, trainer: CurveTrainer
) -> list[tuple[CurvePoint, str]]:
    """Nested seeded samples of the training candidates of `evaluation.curve_model`'s
    examples (the paper's triples, one per candidate, or each candidate's pool pairs;
    `gold/pairs/learning_curve`), one model trained on each by `trainer`: the points, each
    with its model's file."""
    pairs = manifest.current(config, "pairs")
    if config.model.versions[config.evaluation.curve_model].examples == "pool":
        examples = read_delta(spark, str(pairs["pool_triples"])).where("split = 'pool_train'")
    else:
        examples = read_delta(spark, str(pairs["triples"])).where("split = 'train'")
    candidates = examples.select("candidate_id").distinct()
    available = candidates.count()
    sizes = curve_sizes(config.training.learning_curve_sizes, available)
    if not sizes:
        return []
    subsets_path = table_path(config, "gold", "pairs/learning_curve")
    ordered = candidates.orderBy(
        F.xxhash64(F.lit(config.run.seed), F.lit("learning curve"), "candidate_id"), "candidate_id"
    )
    subsets = [
        examples.join(ordered.limit(used), "candidate_id").withColumn(
            "split", F.lit(f"train_{used}")
        )
        for used, _ in sizes
        if used < available
    ]
    if subsets:
        write_delta(reduce(DataFrame.unionByName, subsets), subsets_path, partition_by=["split"])
    # dev accuracy and MAP say nothing of a model that reads BM25 (`ProtocolRow`); they are
    # the network's own, before any mix with BM25
    fair = BM25_COLUMN not in config.model.versions[config.evaluation.curve_model].extras
    points = []
    for used, asked in sizes:
        log.info("learning curve: %s on %d candidates", config.evaluation.curve_model, used)
        # The whole split is the training split itself (the trainer may already have it).
        files = None if used == available else snapshot_files(spark, subsets_path, f"train_{used}")
        accuracy, map_, mrr, epochs, model_file = trainer(files, used)
        point = CurvePoint(
            used, asked, accuracy if fair else None, map_ if fair else None, mrr, epochs
        )
        points.append((point, model_file))
    return points


def with_ground_truth(points: list[CurvePoint], rows: list[GroundTruthRow]) -> list[CurvePoint]:
    """The curve's points with their models' ground-truth rows (in the points' order)."""
    return [
        replace(
            point,
            precision=row.precision,
            precision_low=row.precision_low,
            precision_high=row.precision_high,
            ndcg=row.ndcg,
        )
        for point, row in zip(points, rows, strict=True)
    ]


# --- 3. ground truth ----------------------------------------------------------------------------


def evaluation_candidates(spark: SparkSession, config: JobrecConfig) -> DataFrame:
    """The cleaned candidates of the evaluations' region of the rule the pairs were built
    with (`pairs.splits.SplitRule`): none was searched for a pair, so none is one a model
    learns on, is selected on (dev) or is promoted on (test), whatever pairs are rebuilt."""
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    return current_split_rule(config).evaluation(candidates)


def seeded_sample(frame: DataFrame, seed: int, purpose: str, count: int) -> DataFrame:
    """`count` rows of `frame` (with `candidate_id`) in the order of a hash of (`seed`,
    `purpose`, candidate): the same sample on every run, another for another purpose."""
    return frame.orderBy(
        F.xxhash64(F.lit(seed), F.lit(purpose), "candidate_id"), "candidate_id"
    ).limit(count)


def held_out_candidates(spark: SparkSession, config: JobrecConfig, count: int) -> DataFrame:
    """A seeded sample of :func:`evaluation_candidates`: the evaluation's candidates."""
    return seeded_sample(
        evaluation_candidates(spark, config), config.run.seed, "ground truth", count
    )


def _scored_pools(
    spark: SparkSession,
    config: JobrecConfig,
    inputs: RankingInputs,
    rankers: list[Scorer],
    queries: DataFrame,
    name: str,
    label: Callable[[DataFrame], DataFrame],
    retriever: Retriever = BM25_RETRIEVER,
) -> pd.DataFrame:
    """`retriever`'s pools for `queries` (searches kept in `silver/<name>`; BM25's, the
    paper's pipeline, unless asked), every ranker's score, then `label(scored)`'s
    judgement, on the driver."""
    checkpoint = RetrievalCheckpoint(config, table_path(config, "silver", name), QUARANTINE_SOURCE)
    pipeline = featured_pool(config, inputs, checkpoint, retriever) >> ScoreColumns(
        rankers, keep=["candidate_id", "job_id"]
    )
    scored = pipeline.transform_spark(queries)
    with arrow_batch(spark, config.histograms.map_queries_per_batch):
        return _collect(label(scored))


def is_real_ad(config: JobrecConfig) -> Column:
    """Whether `job_id` is one of the real ads: a generated dataset gives them its last ids
    (`data.generate`). Only the ground truth's slice reads it."""
    return F.col("job_id") > config.data.sizes().generated_jobs


def run_ground_truth(
    spark: SparkSession,
    config: JobrecConfig,
    inputs: RankingInputs,
    rankers: list[Scorer],
    curve: Sequence[Scorer] = (),
) -> tuple[GroundTruth, GroundTruth | None, pd.DataFrame] | None:
    """(the rankers' ground truth, the learning curve's models' against the first ranker, the
    labelled scores): all scored in one pass; each table's statistics over its own rankers
    only."""
    count = config.evaluation.ground_truth_candidates
    truth_path = RawLocations.of(config).ground_truth
    if count <= 0 or not is_delta_table(spark, truth_path):
        log.info("ground truth: skipped (no generator ground truth, or 0 candidates asked for)")
        return None
    queries = queries_of(config, inputs, held_out_candidates(spark, config, count)).cache()
    asked = _candidate_ids(queries)
    truth = read_delta(spark, truth_path)
    labelled = _scored_pools(
        spark,
        config,
        inputs,
        [*rankers, *curve],
        queries,
        "ground_truth_retrieval",
        lambda scored: with_relevance(scored, inputs.jobs, truth).withColumn(
            "real_ad", is_real_ad(config)
        ),
    )
    queries.unpersist()
    names = [scorer.name for scorer in rankers]
    settings = config.evaluation

    def judged(rankers: list[str], baseline: str | None = None) -> GroundTruth:
        return ground_truth(
            with_empty_pools(labelled, asked, rankers),
            rankers,
            settings.k,
            settings.bootstrap_resamples,
            config.run.seed,
            baseline,
        )

    curve_names = [scorer.name for scorer in curve]
    if settings.paired_baseline not in names:
        log.warning(
            "ground truth: evaluation.paired_baseline %r is not among the rankers (%s): no "
            "paired table against it",
            settings.paired_baseline,
            ", ".join(names),
        )
    measured = judged(names, settings.paired_baseline)
    return measured, judged([names[0], *curve_names]) if curve_names else None, labelled


def _candidate_ids(queries: DataFrame) -> np.ndarray:
    """The queries' candidates, sorted: those an experiment measures, whether or not their
    pool comes back (`protocols.with_empty_pools`)."""
    return np.sort(_collect(queries.select("candidate_id"))["candidate_id"].to_numpy())


# --- 4. held-out interest -----------------------------------------------------------------------


def run_held_out(
    spark: SparkSession, config: JobrecConfig, inputs: RankingInputs, rankers: list[Scorer]
) -> tuple[HeldOut, pd.DataFrame] | None:
    """Held-out candidates' highest-scored job held out, the rest as the query
    (`evaluation.held_out`); no ground truth read. With the labelled scores."""
    settings = config.evaluation
    if settings.held_out_candidates <= 0:
        return None
    candidates = held_out_candidates(spark, config, settings.held_out_candidates)
    return _held_out_measure(spark, config, inputs, rankers, candidates, "held_out_retrieval")


def _held_out_measure(
    spark: SparkSession,
    config: JobrecConfig,
    inputs: RankingInputs,
    rankers: list[Scorer],
    candidates: DataFrame,
    searches: str,
) -> tuple[HeldOut, pd.DataFrame]:
    """The held-out measure of `candidates` (their `positive_job_id` held out, the rest of
    their sequence the query), their pools searched into the table `searches`; with the
    labelled scores."""
    queries = queries_of(config, inputs, candidates, hold_out=True).cache()
    asked = _candidate_ids(queries)
    labelled = _scored_pools(
        spark,
        config,
        inputs,
        rankers,
        queries,
        searches,
        lambda scored: with_held_out_label(scored, queries),
    )
    queries.unpersist()
    names = [scorer.name for scorer in rankers]
    settings = config.evaluation
    measured = held_out_interest(
        with_empty_pools(labelled, asked, names),
        names,
        settings.k,
        config.retrieval.top_k,
        settings.bootstrap_resamples,
        config.run.seed,
    )
    return measured, labelled


# --- 5. retrievers -------------------------------------------------------------------------------


def champion_scorer(
    spark: SparkSession, config: JobrecConfig, models: dict[str, str]
) -> Scorer | None:
    """The registry's champion as a ranker, named after its configuration when it is one
    of the evaluated models; None (with a warning) when there is none: none trained yet, or
    the gate found none better than BM25's order."""
    try:
        champion = load_champion(config, splits=current_split_rule(config).fingerprint)
    except LookupError as error:
        log.warning(
            "evaluation: %s; experiments 5 and 6 compare the pools in their own orders, as "
            "recommend serves them without a champion",
            error,
        )
        return None
    name = next(
        (ranker for ranker, version in models.items() if version == str(champion.version)),
        champion.label,
    )
    return drmm_scorer(spark, name, champion.model)


@dataclass(frozen=True)
class ScoredPools:
    """Experiments 3 and 4's BM25 pools, labelled and scored (None: not run): experiment 5
    reuses them for its BM25 rows when they hold its candidates and rankers."""

    ground_truth: pd.DataFrame | None = None
    ground_truth_candidates: int = 0
    held_out: pd.DataFrame | None = None
    held_out_candidates: int = 0


def run_retrievers(
    spark: SparkSession,
    config: JobrecConfig,
    inputs: RankingInputs,
    champion: Scorer | None,
    scored: ScoredPools,
) -> RetrieverComparison | None:
    """`evaluation.retriever_candidates` ground-truth candidates and as many held-out-interest
    queries through each of :func:`measured_retrievers`' pools, in the pool's own order and
    re-ranked by `champion` (`evaluation.retrievers`); without a champion, in their own
    orders alone (and without kNN, which mixes with the champion), which is what
    `recommend` serves then."""
    settings = config.evaluation
    count = settings.retriever_candidates
    truth_path = RawLocations.of(config).ground_truth
    if count <= 0 or not is_delta_table(spark, truth_path):
        return None
    rankers = [RetrievalOrderScorer(), *([champion] if champion is not None else [])]
    knn = (
        tune_knn(spark, config, inputs, champion)
        if champion is not None and config.knn.dev_candidates > 0
        else None
    )
    candidates = held_out_candidates(spark, config, count)
    truth = read_delta(spark, truth_path)
    queries = queries_of(config, inputs, candidates).cache()
    totals = _collect(relevant_totals(queries, inputs.jobs, truth)).sort_values("candidate_id")
    judged = _judged_pools(
        spark,
        config,
        inputs,
        rankers,
        queries,
        totals["candidate_id"].to_numpy(),
        "ground_truth",
        lambda frame: with_relevance(frame, inputs.jobs, truth),
        (scored.ground_truth, scored.ground_truth_candidates),
        _knn_columns(knn, inputs, queries),
    )
    queries.unpersist()
    held_out_queries = queries_of(config, inputs, candidates, hold_out=True).cache()
    held_out = _judged_pools(
        spark,
        config,
        inputs,
        rankers,
        held_out_queries,
        _candidate_ids(held_out_queries),
        "held_out",
        lambda frame: with_held_out_label(frame, held_out_queries),
        (scored.held_out, scored.held_out_candidates),
        _knn_columns(knn, inputs, held_out_queries),
    )
    held_out_queries.unpersist()
    rerankers = [r.name for r in rankers[1:]]
    if knn:
        rerankers += [KNN_RANKER, mix_name(knn.reranker)]
    compared = compare_retrievers(
        judged,
        rerankers,
        {grade: totals[name].to_numpy(dtype=np.int64) for name, grade in GRADES.items()},
        settings.k,
        settings.bootstrap_resamples,
        config.run.seed,
        held_out,
        config.retrieval.top_k,
        served_retriever=config.retrieval.retriever,
    )
    return replace(compared, knn=knn.choice if knn else None)


def measured_retrievers(config: JobrecConfig) -> list[Retriever]:
    """The retrievers experiment 5 measures: BM25 (the reference), `evaluation.retrievers`,
    and the served one (`retrieval.retriever`), which selection keeps unless another beats it."""
    wanted = [BM25_RETRIEVER, *config.evaluation.retrievers, config.retrieval.retriever]
    return list(dict.fromkeys(wanted))


@dataclass(frozen=True)
class KnnScoring:
    """The kNN memory, its index, what the dev candidates chose, and the re-ranker (the
    champion's name) the votes mix with."""

    memory: InterestMemory
    index: Any
    choice: KnnChoice
    reranker: str


def tune_knn(
    spark: SparkSession, config: JobrecConfig, inputs: RankingInputs, champion: Scorer
) -> KnnScoring:
    """The memory (`ranking.factory.interest_memory`) and seed 003's choice of `k` and λ on
    `knn.dev_candidates` dev-split candidates' held-out interest, through the configured
    retriever's pool re-ranked by `champion` (`evaluation.retrievers.choose_knn`)."""
    settings = config.knn
    memory = interest_memory(spark, config, inputs)
    index = ivf_index(memory, settings.probes)
    pairs = manifest.current(config, "pairs")
    dev = read_delta(spark, str(pairs["triples"])).where(F.col("split") == "dev")
    candidates = seeded_sample(
        read_delta(spark, table_path(config, "silver", "candidates")).join(
            dev.select("candidate_id").distinct(), "candidate_id"
        ),
        config.run.seed,
        "knn dev",
        settings.dev_candidates,
    )
    queries = queries_of(config, inputs, candidates, hold_out=True).cache()
    log.info("evaluation 5/6: kNN memory of %d candidates; choosing k and λ on dev", len(memory))
    pools = _scored_pools(
        spark,
        config,
        inputs,
        [champion],
        queries,
        "retrievers/knn_dev",
        lambda frame: with_held_out_label(frame, queries),
        config.retrieval.retriever,
    )
    choice = choose_knn(
        memory,
        index,
        pools,
        _query_vectors(inputs, queries),
        champion.name,
        settings.k_grid,
        config.retrieval.top_k,
        config.evaluation.bootstrap_resamples,
        config.run.seed,
    )
    queries.unpersist()
    log.info("evaluation 5/6: kNN chose k=%d, λ=%.2f", choice.k, choice.lam)
    return KnnScoring(memory, index, choice, champion.name)


def _query_vectors(inputs: RankingInputs, queries: DataFrame) -> pd.DataFrame:
    vectors = with_query_vectors(
        queries.select("candidate_id", "own_job_ids"),
        spark_table(inputs.tokens),
        inputs.vectors_file,
        inputs.words_and_idf,
    )
    return _collect(vectors.select("candidate_id", QUERY_VECTOR))


def _knn_columns(
    knn: KnnScoring | None, inputs: RankingInputs, queries: DataFrame
) -> Callable[[pd.DataFrame], pd.DataFrame] | None:
    """What adds the kNN rankers' columns to a collected pool of `queries` (None: no kNN)."""
    if knn is None:
        return None
    vectors = _query_vectors(inputs, queries)
    return lambda frame: with_knn(frame, vectors, knn.memory, knn.index, knn.reranker, knn.choice)


def _judged_pools(
    spark: SparkSession,
    config: JobrecConfig,
    inputs: RankingInputs,
    rankers: list[Scorer],
    queries: DataFrame,
    ids: np.ndarray,
    experiment: str,
    label: Callable[[DataFrame], DataFrame],
    earlier: tuple[pd.DataFrame | None, int],
    extend: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
) -> dict[str, JudgedPool]:
    """Every retriever's pool of `queries` (searches kept in `silver/retrievers/`), scored by
    `rankers` (and by the rankers `extend` adds on the driver, the kNN ones), labelled by
    `label` and judged for the candidates `ids`; BM25's taken from `earlier` (an earlier
    experiment's labelled pools, and how many candidates they hold) when it has them."""
    names = [r.name for r in rankers]
    judged_names = [*names, *((KNN_RANKER, mix_name(names[1])) if extend else ())]
    pools: dict[str, JudgedPool] = {}
    retrievers = measured_retrievers(config)
    for retriever in retrievers:
        log.info("evaluation 5/6: the %s pool, %s", retriever, experiment.replace("_", " "))
        found = _reused(*earlier, config.evaluation.retriever_candidates, retriever, names)
        if found is None:
            found = _scored_pools(
                spark,
                config,
                inputs,
                rankers,
                queries,
                f"retrievers/{experiment}_{retriever}",
                label,
                retriever,
            )
        if extend is not None:
            found = extend(found)
        pools[retriever] = judged_pool(found, judged_names, ids)
    return pools


def _reused(
    frame: pd.DataFrame | None,
    measured: int,
    wanted: int,
    retriever: Retriever,
    rankers: list[str],
) -> pd.DataFrame | None:
    """An earlier experiment's BM25 pools as experiment 5's, its retrieval order BM25's own,
    when it scored `rankers` for at least the `wanted` candidates (the judged pool keeps only
    those: the seeded sample's first ones)."""
    needed = [score_column_of(BM25), *(score_column_of(n) for n in rankers[1:])]
    if retriever != BM25_RETRIEVER or frame is None or measured < wanted:
        return None
    if any(column not in frame for column in needed):
        return None
    return frame.assign(**{score_column_of(RETRIEVAL_ORDER): frame[needed[0]]})


# --- 6. temporal -------------------------------------------------------------------------------


def temporal_candidates(
    spark: SparkSession, config: JobrecConfig, first: date, last: date
) -> DataFrame:
    """The cleaned candidates (as of the run's date) who show interest from `first` to
    `last`: `candidate_id, sequence, positive_job_id, future_job_ids` (the ads of that
    interest)."""
    window = interest_between(
        read_delta(spark, table_path(config, "bronze", "candidates")), first, last
    ).select("candidate_id", F.array_distinct("sequence.job_id").alias("future_job_ids"))
    cleaned = read_delta(spark, table_path(config, "silver", "candidates"))
    return cleaned.join(window, "candidate_id")


def run_temporal(
    spark: SparkSession,
    config: JobrecConfig,
    inputs: RankingInputs,
    rankers: list[Scorer],
    champion: Scorer | None,
    builder: IndexBuilder | None,
) -> TemporalEvaluation | None:
    """Experiment 6 (`evaluation.temporal`); None when there is nothing to judge: undated
    data, no generator ground truth, no day after the as-of date, or no index builder."""
    settings = config.evaluation.temporal
    timeline = as_of(config)
    truth_path = RawLocations.of(config).ground_truth
    if timeline.day is None or timeline.last_date is None or builder is None:
        log.info("evaluation 6/6: skipped (undated data, or no index builder passed)")
        return None
    if settings.candidates <= 0 or not is_delta_table(spark, truth_path):
        log.info("evaluation 6/6: skipped (no generator ground truth, or 0 candidates asked for)")
        return None
    first = timeline.day + timedelta(days=1)
    last = min(timeline.day + timedelta(days=settings.window_days), timeline.last_date)
    if last < first:
        log.info("evaluation 6/6: skipped (the data ends on its as-of date %s)", timeline.day)
        return None
    log.info("evaluation 6/6: temporal, cut at %s, judged on %s to %s", timeline.day, first, last)
    alias = config.elasticsearch.index_alias
    indices = {
        ALL_LIVE: builder(
            lambda jobs: jobs.where(live_between(first, last)), f"{alias}_window", "window"
        ),
        FRESH_ONLY: builder(
            lambda jobs: jobs.where(posted_between(first, last)), f"{alias}_fresh", "fresh"
        ),
    }
    candidates = seeded_sample(
        temporal_candidates(spark, config, first, last),
        config.run.seed,
        "temporal",
        settings.candidates,
    ).cache()
    queries = queries_of(config, inputs, candidates).cache()
    ids = _candidate_ids(queries)
    window_interest = _collect(
        candidates.select("candidate_id", F.size("future_job_ids").alias("count"))
    ).set_index("candidate_id")
    future_counts = window_interest["count"].reindex(ids).fillna(0).to_numpy(np.float64)
    future = candidates.select(
        "candidate_id", F.explode("future_job_ids").alias("job_id")
    ).withColumn(FUTURE, F.lit(1))
    fresh = inputs.jobs.select("job_id", posted_between(first, last).cast("int").alias(FRESH))
    truth = read_delta(spark, truth_path)

    def label(scored: DataFrame) -> DataFrame:
        return (
            with_relevance(scored, inputs.jobs, truth)
            .join(fresh, "job_id")
            .join(future, ["candidate_id", "job_id"], "left")
            .fillna(0, subset=[FUTURE])
        )

    names = [scorer.name for scorer in rankers]
    retriever = config.retrieval.retriever
    served_scorer = champion if champion is not None else RetrievalOrderScorer()
    served_name = pipeline_name(retriever, champion.name if champion is not None else None)
    judged = []
    for setting, (index, ads) in indices.items():
        view = replace(inputs, index=index)
        slug = setting.replace(" ", "_")
        log.info("evaluation 6/6: %s (%s, %d ads)", setting, index, ads)
        pools = _scored_pools(spark, config, view, rankers, queries, f"temporal/{slug}_bm25", label)
        served = None
        if retriever != BM25_RETRIEVER or champion is None:
            rows = _scored_pools(
                spark,
                config,
                view,
                [served_scorer],
                queries,
                f"temporal/{slug}_{retriever}",
                label,
                retriever,
            )
            served = (served_name, LabelledPools(rows, [served_scorer.name]))
        judged.append(
            judge_setting(
                setting,
                index,
                ads,
                LabelledPools(pools, names),
                served,
                ids,
                future_counts,
                config.evaluation.k,
                config.evaluation.bootstrap_resamples,
                config.run.seed,
                champion.name if champion is not None else None,
                [name for name in config.evaluation.baselines if name != BM25],
            )
        )
    queries.unpersist()
    held_out = temporal_held_out(spark, config, inputs, rankers, candidates)
    candidates.unpersist()
    all_live = {row.ranker: row.precision.mean for row in judged[0].rows}
    return TemporalEvaluation(
        timeline.day.isoformat(),
        first.isoformat(),
        last.isoformat(),
        judged,
        held_out,
        agreement(held_out, all_live),
    )


def temporal_held_out(
    spark: SparkSession,
    config: JobrecConfig,
    inputs: RankingInputs,
    rankers: list[Scorer],
    candidates: DataFrame,
) -> HeldOut:
    """The held-out measure of the temporal mode: each candidate's latest interest before the
    cut (the last of their cleaned sequence) held out, the query from the earlier ones, the
    pool from every ad posted by then (`inputs`, the history's index)."""
    latest = candidates.withColumn("positive_job_id", F.element_at("sequence", -1)["job_id"])
    return _held_out_measure(spark, config, inputs, rankers, latest, "temporal/held_out_latest")[0]


# --- the stage ----------------------------------------------------------------------------------


def run_evaluation(
    spark: SparkSession,
    config: JobrecConfig,
    trainer: CurveTrainer | None = None,
    index_builder: IndexBuilder | None = None,
) -> EvaluationReport:
    """The six experiments (see the module); the learning curve runs when
    `evaluation.learning_curve` is on and a `trainer` is given, the temporal evaluation
    when the data is dated and an `index_builder` is given."""
    # The paper's evaluations search what the training data did: for dated data, every ad
    # posted by the as-of date (a held-out interest is mostly in an ad expired since)
    inputs = ranking_inputs(spark, config, history=True)
    models, skipped = current_models(spark, config)
    for ranker, reason in skipped.items():
        log.warning("%s: %s", ranker, reason)
    drmm = drmm_scorers(spark, config, models)
    baselines = baseline_scorers(config, inputs)
    report = EvaluationReport(config.evaluation.k, models, skipped)
    report.input_tables = evaluation_tables(spark, config)
    # BM25's row of the paper's table is its own order of the MAP sets, not a score column.
    rerankers = [scorer for scorer in baselines if scorer.name != BM25] + drmm
    log.info(
        "evaluation 1/6: the paper's protocol (%s)", ", ".join([BM25, *(s.name for s in rerankers)])
    )
    report.protocol, queries = run_paper_protocol(
        spark, config, rerankers, spark_table(inputs.tokens)
    )
    report.queries |= queries
    curve: list[Scorer] = []
    if config.evaluation.learning_curve and trainer is not None:
        log.info("evaluation 2/6: learning curve")
        trained = run_learning_curve(spark, config, trainer)
        report.curve = [point for point, _ in trained]
        report.curve_model = f"DRMM {config.evaluation.curve_model}"
        curve = [
            drmm_scorer(spark, f"curve {point.candidates}", load_model(model_file))
            for point, model_file in trained
        ]
    log.info("evaluation 3/6: ground truth")
    scored = ScoredPools()
    judged = run_ground_truth(spark, config, inputs, [*baselines, *drmm], curve)
    if judged is not None:
        measured, on_curve, labelled = judged
        scored = replace(
            scored,
            ground_truth=labelled,
            ground_truth_candidates=config.evaluation.ground_truth_candidates,
        )
        if on_curve is not None:
            report.curve = with_ground_truth(report.curve, on_curve.rows[1:])
        report.ground_truth, report.ceiling = measured.rows, measured.ceiling
        report.versus_baseline = measured.versus_baseline
        report.real_ad_slice = measured.real_ad_rows
        report.queries["ground_truth"] = measured.candidates
        report.queries["ground_truth_real_ads"] = measured.real_ad_candidates
    log.info("evaluation 4/6: held-out interest")
    measured_held_out = run_held_out(spark, config, inputs, [*baselines, *drmm])
    if measured_held_out is not None:
        held_out, labelled = measured_held_out
        scored = replace(
            scored, held_out=labelled, held_out_candidates=config.evaluation.held_out_candidates
        )
        report.held_out, report.held_out_found = held_out.rows, held_out.found
        report.queries["held_out"] = held_out.candidates
        report.agreement = agreement(
            held_out, {row.ranker: row.precision for row in report.ground_truth}
        )
    champion = champion_scorer(spark, config, models)
    if len(config.evaluation.retrievers) > 1:
        log.info("evaluation 5/6: retrievers (%s)", ", ".join(measured_retrievers(config)))
        report.retrievers = run_retrievers(spark, config, inputs, champion, scored)
    report.temporal = run_temporal(
        spark, config, inputs, [*baselines, *drmm], champion, index_builder
    )
    return report
