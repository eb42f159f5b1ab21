"""Does the re-ranker recommend better jobs than BM25 alone? Three experiments (seed §7-8).

1. **The seed's protocol** on the test splits: accuracy on the test triples, MAP@k on the
   `map_test` sets (50 BM25 top results labelled relevant, 50 results of the less informative
   query labelled not), and diversity against BM25's top k, for BM25's own order, the WMD
   baseline and every DRMM configuration trained on the current pairs.
2. **Learning curve**: the configured DRMM trained on nested samples of the training triples
   (`training.learning_curve_sizes`, scaled down when there are fewer), dev accuracy and dev
   MAP of each.
3. **Ground truth**: held-out candidates (in no training, dev or MAP-dev split) go through the
   recommendation path (`jobrec_core.recommend`: a query of all their jobs, BM25's top 100
   minus their own jobs); each ranker's top k is scored against the generator's latent
   interests (a job of the primary occupation is relevance 2, of the related one 1): P@k and
   nDCG@k. The seed's MAP takes BM25's own ranking as the truth; this one does not.

Every ranker scores the same rows in one Spark pass (`rerank.score_documents`); only the
scores come back to the driver, where the metrics are numpy (`jobrec_core.metrics`).
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core import manifest
from jobrec_core.batches import snapshot_files
from jobrec_core.config import JobrecConfig
from jobrec_core.io import (
    RawLocations,
    delta_version,
    is_delta_table,
    local_path,
    read_delta,
    table_path,
    write_delta,
)
from jobrec_core.metrics import (
    Ranked,
    average_precision_at_k,
    diversity,
    ndcg_at_k,
    pairwise_accuracy,
    precision_at_k,
    rank_within_queries,
    top_k,
)
from jobrec_core.model import DrmmSpec
from jobrec_core.pairs import arrow_batch, document_tokens
from jobrec_core.recommend import candidate_documents, rerank_inputs, search_candidates
from jobrec_core.rerank import (
    Bm25Scorer,
    DrmmScorer,
    Scorer,
    WmdScorer,
    score_column,
    score_documents,
)

log = logging.getLogger(__name__)

QUARANTINE_SOURCE = "evaluate"
BM25 = "BM25"
WMD = "WMD"

# The seed's figures (§8), next to which ours are printed.
SEED_PROTOCOL: dict[str, dict[str, float]] = {
    BM25: {"diversity": 0.0},
    WMD: {"map": 0.714},
    "DRMM v1": {"accuracy": 0.946, "map": 0.966, "diversity": 4.363},
    "DRMM v2": {"diversity": 2.0},
    "DRMM v3": {"accuracy": 0.75, "map": 0.8},
    "DRMM v4": {"diversity": 2.0},
}
SEED_CURVE = {9000: (0.932, 0.966), 18000: (0.939, 0.968), 27000: (0.945, 0.966)}
SEED_PRECISION = {BM25: 0.84, "DRMM v1": 0.82}  # P@10 judged by hand, 100 candidates


@dataclass(frozen=True)
class ProtocolRow:
    ranker: str
    accuracy: float | None  # None: BM25's triple scores come from two different queries
    map: float
    diversity: float


@dataclass(frozen=True)
class CurvePoint:
    triples: int
    configured: int  # the size asked for (`training.learning_curve_sizes`)
    dev_accuracy: float
    dev_map: float
    epochs: int


@dataclass(frozen=True)
class GroundTruthRow:
    ranker: str
    precision: float
    ndcg: float
    diversity: float


@dataclass
class EvaluationReport:
    k: int
    models: dict[str, str]  # ranker -> registry version
    skipped: dict[str, str] = field(default_factory=dict)  # ranker -> why not evaluated
    protocol: list[ProtocolRow] = field(default_factory=list)
    queries: dict[str, int] = field(default_factory=dict)  # experiment -> queries measured
    curve: list[CurvePoint] = field(default_factory=list)
    ground_truth: list[GroundTruthRow] = field(default_factory=list)

    def format(self) -> str:
        """The three tables, ours next to the seed's."""
        k = self.k
        lines = [
            f"1. The seed's protocol: {self.queries.get('triples', 0):,} test triples, "
            f"{self.queries.get('map', 0):,} MAP test queries (seed's figures in brackets)",
            f"  {'ranker':<10}{'accuracy':>18}{f'MAP@{k}':>18}{'diversity':>18}",
        ]
        for row in self.protocol:
            seed = SEED_PROTOCOL.get(row.ranker, {})
            lines.append(
                f"  {row.ranker:<10}{_with_seed(row.accuracy, seed.get('accuracy')):>18}"
                f"{_with_seed(row.map, seed.get('map')):>18}"
                f"{_with_seed(row.diversity, seed.get('diversity'), '.2f'):>18}"
            )
        lines.append(f"  ({BM25}'s MAP is 1 by construction: its top 50 are the relevant ones)")
        for ranker, reason in self.skipped.items():
            lines.append(f"  {ranker}: not evaluated: {reason}")
        if self.curve:
            lines += [
                "",
                "2. Learning curve (dev split; seed's figures in brackets)",
                f"  {'triples':>9}{'asked':>8}{'epochs':>8}{'dev accuracy':>22}{'dev MAP':>20}",
            ]
            for point in self.curve:
                seed_acc, seed_map = SEED_CURVE.get(point.configured, (None, None))
                lines.append(
                    f"  {point.triples:>9,}{point.configured:>8,}{point.epochs:>8}"
                    f"{_with_seed(point.dev_accuracy, seed_acc):>22}"
                    f"{_with_seed(point.dev_map, seed_map):>20}"
                )
        if self.ground_truth:
            lines += [
                "",
                f"3. Ground truth: {self.queries.get('ground_truth', 0):,} held-out candidates, "
                f"BM25's top 100 re-ranked, top {k} judged against their latent interests",
                f"  {'ranker':<10}{f'P@{k}':>18}{f'nDCG@{k}':>10}{'diversity':>11}",
            ]
            for gt in self.ground_truth:
                precision = _with_seed(gt.precision, SEED_PRECISION.get(gt.ranker))
                lines.append(
                    f"  {gt.ranker:<10}{precision:>18}{gt.ndcg:>10.3f}{gt.diversity:>11.2f}"
                )
            lines.append("  (the seed's P@10 was judged by hand on 100 candidates)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _with_seed(ours: float | None, seed: float | None, spec: str = ".3f") -> str:
    text = "-" if ours is None or np.isnan(ours) else format(ours, spec)
    return text if seed is None else f"{text} ({format(seed, spec)})"


# --- the models ---------------------------------------------------------------------------------


def current_models(
    spark: SparkSession, config: JobrecConfig
) -> tuple[dict[str, str], dict[str, str]]:
    """({"DRMM v1": registry version, ...}, {ranker: why skipped}): the last model of each
    configuration in the manifest, when it was trained on the current pairs."""
    from jobrec_core.training_run import model_entry

    pairs = manifest.current(config, "pairs")
    current = {
        "pairs_config_hash": str(pairs["config_hash"]),
        "triples_table_version": str(delta_version(spark, str(pairs["triples"]))),
    }
    recorded = manifest.read_manifest(config)
    found, skipped = {}, {}
    for version in config.model.versions:
        ranker = f"DRMM {version}"
        entry = recorded.get(model_entry(version))
        if entry is None or entry.get("version") is None:
            skipped[ranker] = f"never trained (jobs/train_drmm.py --set model.version={version})"
        elif any(str(entry.get(key)) != value for key, value in current.items()):
            skipped[ranker] = f"registry v{entry['version']} was trained on older pairs: retrain it"
        else:
            found[ranker] = str(entry["version"])
    return found, skipped


def drmm_scorers(spark: SparkSession, config: JobrecConfig, models: dict[str, str]) -> list[Scorer]:
    from jobrec_core.registry import model_of
    from jobrec_core.tracking import configure_mlflow

    configure_mlflow(config)
    name = config.mlflow.model_name
    return [
        DrmmScorer.of(spark, ranker, model_of(f"models:/{name}/{version}"))
        for ranker, version in models.items()
    ]


# --- 1. the seed's protocol ---------------------------------------------------------------------


def triple_documents(triples: DataFrame) -> DataFrame:
    """Triples -> two rows each in the MAP-set shape: the positive (label 1), the negative."""

    def side(prefix: str, label: int) -> Any:
        return F.struct(
            F.col(f"{prefix}_job_id").alias("job_id"),
            F.lit(label).alias("label"),
            F.col(f"{prefix}_bm25").alias("bm25"),
            F.lit(0).alias("bm25_rank"),
            *[F.col(f"{prefix}_{c}").alias(c) for c in ("doc_len", "hist", "unigrams", "bigrams")],
        )

    return triples.select(
        "candidate_id",
        "query_terms",
        "query_idf",
        F.explode(F.array(side("pos", 1), side("neg", 0))).alias("d"),
    ).select("candidate_id", "query_terms", "query_idf", "d.*")


def triple_accuracy(scored: pd.DataFrame, column: str) -> float:
    """Accuracy from the two scored rows of each triple (`candidate_id`, `label`)."""
    pivot = scored.pivot_table(index="candidate_id", columns="label", values=column)
    return pairwise_accuracy(pivot[1].to_numpy(), pivot[0].to_numpy())


def bm25_map_order(label: np.ndarray, bm25_rank: np.ndarray) -> np.ndarray:
    """BM25's own order of a MAP set as a score: its top 50 first by rank, then the rest (the
    less informative query's results, which the full query ranked below 50)."""
    return np.where(label > 0, -bm25_rank, -bm25_rank - 1_000_000).astype(np.float64)


def _collect(frame: DataFrame) -> pd.DataFrame:
    """The (small) scored rows on the driver."""
    return cast(pd.DataFrame, frame.toPandas())


def _ranked(scored: pd.DataFrame, score: np.ndarray) -> Ranked:
    return rank_within_queries(
        scored["candidate_id"].to_numpy(),
        score,
        scored["label"].to_numpy(),
        scored["job_id"].to_numpy(),
    )


def seed_protocol(
    spark: SparkSession, config: JobrecConfig, drmm: list[Scorer], tokens: DataFrame
) -> tuple[list[ProtocolRow], dict[str, int]]:
    pairs = manifest.current(config, "pairs")
    vectors = local_path(manifest.current(config, "embeddings")["vectors"])
    rerankers: list[Scorer] = [WmdScorer(vectors, WMD), *drmm]
    k = config.evaluation.k
    triples = read_delta(spark, str(pairs["triples"])).where(F.col("split") == "test")
    with arrow_batch(spark, config.histograms.map_queries_per_batch):
        on_triples = _collect(
            score_documents(
                triple_documents(triples).join(tokens, "job_id"),
                rerankers,
                "candidate_id LONG, label INT",
            )
        )
        map_sets = read_delta(spark, str(pairs["map_sets"])).where(F.col("split") == "map_test")
        on_map = _collect(
            score_documents(
                map_sets.join(tokens, "job_id"),
                rerankers,
                "candidate_id LONG, job_id INT, label INT, bm25_rank INT",
            )
        )
    reference = _ranked(
        on_map, bm25_map_order(on_map["label"].to_numpy(), on_map["bm25_rank"].to_numpy())
    )
    reference_top = top_k(reference, k)
    rows = [ProtocolRow(BM25, None, float(average_precision_at_k(reference, k).mean()), 0.0)]
    for scorer in rerankers:
        column = score_column(scorer)
        ranked = _ranked(on_map, on_map[column].to_numpy())
        rows.append(
            ProtocolRow(
                scorer.name,
                triple_accuracy(on_triples, column),
                float(average_precision_at_k(ranked, k).mean()),
                diversity(top_k(ranked, k), reference_top, k),
            )
        )
    return rows, {"triples": on_triples["candidate_id"].nunique(), "map": reference.queries}


# --- 2. learning curve --------------------------------------------------------------------------


def curve_sizes(configured: list[int], available: int) -> list[tuple[int, int]]:
    """(triples used, size asked for): the sizes scaled down together when the largest is
    more than the training split holds (the demo data is smaller than the seed's)."""
    if not configured:
        return []
    largest = max(configured)
    if available >= largest:
        return [(size, size) for size in sorted(configured)]
    return [(max(1, round(size * available / largest)), size) for size in sorted(configured)]


def learning_curve(spark: SparkSession, config: JobrecConfig) -> list[CurvePoint]:
    """Train the configured DRMM on nested seeded samples of the training triples."""
    from jobrec_core.training_run import launch, make_plan, training_inputs

    inputs = training_inputs(spark, config)
    triples = read_delta(spark, inputs.triples).where(F.col("split") == "train")
    sizes = curve_sizes(config.training.learning_curve_sizes, triples.count())
    if not sizes:
        return []
    subsets_path = table_path(config, "gold", "pairs/learning_curve")
    ordered = triples.orderBy(
        F.xxhash64(F.lit(config.run.seed), F.lit("learning curve"), "candidate_id"), "candidate_id"
    )
    subsets = [ordered.limit(used).withColumn("split", F.lit(f"train_{used}")) for used, _ in sizes]
    union = subsets[0]
    for subset in subsets[1:]:
        union = union.unionByName(subset)
    write_delta(union, subsets_path, partition_by=["split"])
    spec = DrmmSpec.from_config(config, config.embeddings.vector_size)
    points = []
    for used, asked in sizes:
        directory = Path(
            local_path(config.path(f"{config.data.preset}/models/learning_curve/{used}"))
        )
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        plan = replace(
            make_plan(config, spec, inputs, str(directory)),
            train_files=snapshot_files(spark, subsets_path, f"train_{used}"),
        )
        log.info("learning curve: training on %d triples", used)
        result = launch(spark, config, plan)
        last = result.history[-1]
        points.append(CurvePoint(used, asked, last.dev_accuracy, last.dev_map, len(result.history)))
    return points


# --- 3. ground truth ----------------------------------------------------------------------------


def held_out_candidates(spark: SparkSession, config: JobrecConfig, count: int) -> DataFrame:
    """A seeded sample of cleaned candidates in no split a model learns or is selected on."""
    pairs = manifest.current(config, "pairs")
    used = (
        read_delta(spark, str(pairs["triples"]))
        .where(F.col("split").isin("train", "dev"))
        .select("candidate_id")
        .unionByName(
            read_delta(spark, str(pairs["map_sets"]))
            .where(F.col("split") == "map_dev")
            .select("candidate_id")
        )
        .distinct()
    )
    return (
        read_delta(spark, table_path(config, "silver", "candidates"))
        .join(used, "candidate_id", "left_anti")
        .orderBy(
            F.xxhash64(F.lit(config.run.seed), F.lit("ground truth"), "candidate_id"),
            "candidate_id",
        )
        .limit(count)
    )


def with_relevance(documents: DataFrame, jobs: DataFrame, truth: DataFrame) -> DataFrame:
    """`label` := the job's occupation's relevance to the candidate's latent interests."""
    relevance = F.when(
        F.col("occupation_code").isNotNull(),
        F.element_at("occupation_relevance", F.col("occupation_code")),
    )
    return (
        documents.drop("label")
        .join(jobs.select("job_id", "occupation_code"), "job_id")
        .join(truth.select("candidate_id", "occupation_relevance"), "candidate_id")
        .withColumn("label", F.coalesce(relevance, F.lit(0)).cast("int"))
        .drop("occupation_code", "occupation_relevance")
    )


def ground_truth(
    spark: SparkSession, config: JobrecConfig, drmm: list[Scorer], tokens: DataFrame
) -> tuple[list[GroundTruthRow], int]:
    count = config.evaluation.ground_truth_candidates
    truth_path = RawLocations.of(config).ground_truth
    if count <= 0 or not is_delta_table(spark, truth_path):
        log.info("ground truth: skipped (no generator ground truth, or 0 candidates asked for)")
        return [], 0
    embeddings = manifest.current(config, "embeddings")
    searched = search_candidates(
        spark,
        config,
        held_out_candidates(spark, config, count),
        "ground_truth_retrieval",
        QUARANTINE_SOURCE,
    )
    labelled = with_relevance(
        candidate_documents(searched, "ground_truth"),
        read_delta(spark, embeddings["jobs"]),
        read_delta(spark, truth_path),
    )
    rankers: list[Scorer] = [
        Bm25Scorer(BM25),
        WmdScorer(local_path(embeddings["vectors"]), WMD),
        *drmm,
    ]
    with arrow_batch(spark, config.histograms.map_queries_per_batch):
        scored = _collect(
            score_documents(
                rerank_inputs(spark, config, searched, labelled).join(tokens, "job_id"),
                rankers,
                "candidate_id LONG, job_id INT, label INT",
            )
        )
    searched.queries.unpersist()
    k = config.evaluation.k
    reference_top = top_k(_ranked(scored, scored[score_column(rankers[0])].to_numpy()), k)
    rows = []
    for scorer in rankers:
        ranked = _ranked(scored, scored[score_column(scorer)].to_numpy())
        rows.append(
            GroundTruthRow(
                scorer.name,
                float(precision_at_k(ranked, k).mean()),
                float(ndcg_at_k(ranked, k).mean()),
                diversity(top_k(ranked, k), reference_top, k),
            )
        )
    return rows, int(scored["candidate_id"].nunique())


# --- the stage ----------------------------------------------------------------------------------


def run_evaluation(spark: SparkSession, config: JobrecConfig) -> EvaluationReport:
    """The three experiments (see the module); the report is also logged to MLflow by
    :func:`log_report`."""
    embeddings = manifest.current(config, "embeddings")
    tokens = document_tokens(
        read_delta(spark, embeddings["jobs"]),
        list(config.histograms.doc_fields),
        config.histograms.doc_max_terms,
    )
    models, skipped = current_models(spark, config)
    for ranker, reason in skipped.items():
        log.warning("%s: %s", ranker, reason)
    drmm = drmm_scorers(spark, config, models)
    report = EvaluationReport(config.evaluation.k, models, skipped)
    log.info("evaluation 1/3: the seed's protocol (%s)", ", ".join(["BM25", "WMD", *models]))
    report.protocol, queries = seed_protocol(spark, config, drmm, tokens)
    report.queries |= queries
    if config.evaluation.learning_curve:
        log.info("evaluation 2/3: learning curve")
        report.curve = learning_curve(spark, config)
    log.info("evaluation 3/3: ground truth")
    report.ground_truth, report.queries["ground_truth"] = ground_truth(spark, config, drmm, tokens)
    return report
