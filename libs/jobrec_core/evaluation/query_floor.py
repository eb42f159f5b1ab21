"""How `queries.min_coherence` was chosen: each floor's BM25 query on held-out interest.

For a seeded sample of cleaned candidates that no split and no evaluation uses, each
candidate's highest-scored job is held out and the query is built from their other jobs,
once per floor (`features.queries.coherent_jobs`). BM25's pool of each query, in BM25's own
order, gives the held-out job's rank, scored as models are selected, by its log-rank score
(`ranking.metrics.log_rank_score`; just past the pool when the pool lacks it), with the MRR
beside it. Every floor is paired per candidate against the paper's query (floor 0). No model
is involved, and nothing reads the ground truth: the metric exists on real data, so it is what
chooses the floor.

The sample is drawn from all cleaned candidates, not from the splits: a split keeps only the
candidates whose held-out job today's query found, which would favour today's floor.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from jobrec_core.config import JobrecConfig
from jobrec_core.evaluation.held_out import with_held_out_label
from jobrec_core.evaluation.protocols import ranked_by
from jobrec_core.evaluation.stage import evaluation_candidates, held_out_candidates, seeded_sample
from jobrec_core.platform.progress import spark_progress
from jobrec_core.platform.spark import arrow_batch, arrow_to_pandas
from jobrec_core.ranking.factory import RankingInputs, queries_of, ranking_inputs, retriever_step
from jobrec_core.ranking.metrics import (
    first_relevant_rank,
    log_rank_scores_of,
    reciprocal_of_ranks,
)
from jobrec_core.ranking.statistics import (
    SIGNIFICANCE,
    Interval,
    PairedDifference,
    against_reference,
    bootstrap_mean,
    significantly_above,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FloorRow:
    """One floor's held-out log-rank score and MRR over BM25's pools, and its log-rank
    difference from floor 0."""

    floor: float
    log_rank: Interval
    mrr: float
    found: float  # the share of queries whose pool holds the held-out job
    versus_paper: PairedDifference | None  # None for floor 0 itself
    p_holm: float  # versus_paper's p-value, Holm-corrected across the floors; NaN for floor 0


def sample_candidates(spark: SparkSession, config: JobrecConfig, count: int) -> DataFrame:
    """`count` cleaned candidates (seeded) outside every split and every evaluation sample."""
    settings = config.evaluation
    evaluated = held_out_candidates(
        spark,
        config,
        max(
            settings.ground_truth_candidates,
            settings.held_out_candidates,
            settings.retriever_candidates,
        ),
    )
    unused = evaluation_candidates(spark, config).join(evaluated, "candidate_id", "left_anti")
    return seeded_sample(unused, config.run.seed, "query floor", count)


def with_floor(config: JobrecConfig, floor: float) -> JobrecConfig:
    """`config` with `queries.min_coherence` := `floor`."""
    queries = config.queries.model_copy(update={"min_coherence": floor})
    return config.model_copy(update={"queries": queries})


def held_out_ranks(
    spark: SparkSession,
    config: JobrecConfig,
    inputs: RankingInputs,
    candidates: DataFrame,
) -> pd.Series:
    """candidate id -> the held-out job's rank (from 1) in BM25's pool of the query of the
    candidate's other jobs, built with `config.queries`; just past the pool where it lacks
    the job, or came back empty."""
    queries = queries_of(config, inputs, candidates, hold_out=True).cache()
    scored = retriever_step(config, inputs, retriever="bm25").transform_spark(queries)
    labelled = with_held_out_label(scored.select("candidate_id", "job_id", "score"), queries)
    with arrow_batch(spark, config.histograms.map_queries_per_batch):
        frame = arrow_to_pandas(labelled)
    asked = arrow_to_pandas(queries.select("candidate_id"))["candidate_id"]
    queries.unpersist()
    ranked = ranked_by(frame, "score")
    missed = config.retrieval.top_k + 1.0
    ranks = pd.Series(
        first_relevant_rank(ranked, config.retrieval.top_k),
        index=np.unique(frame["candidate_id"].to_numpy()),
    )
    return ranks.reindex(np.sort(asked.to_numpy()), fill_value=missed)


def choose_query_floor(
    spark: SparkSession, config: JobrecConfig, floors: Sequence[float], count: int
) -> list[FloorRow]:
    """Every floor of `floors` (0, the paper's query, first) on `count` candidates."""
    if not floors or floors[0] != 0 or len(set(floors)) < len(floors):
        raise ValueError(
            f"the floors must start with 0, the paper's query, each once: got {list(floors)}"
        )
    inputs = ranking_inputs(spark, config, ship_tables=False, history=True)
    candidates = sample_candidates(spark, config, count).cache()
    if candidates.isEmpty():
        raise ValueError(
            "no cleaned candidate is outside the splits and the evaluation's samples: lower "
            "evaluation.ground_truth_candidates, held_out_candidates or retriever_candidates"
        )
    ranks: dict[str, np.ndarray] = {}  # by str(floor), the statistics' ranker names
    for floor in floors:
        with spark_progress(spark, f"query floor {floor}: held-out queries through BM25"):
            found = held_out_ranks(spark, with_floor(config, floor), inputs, candidates)
        log.info(
            "query floor %s: held-out log-rank score %.4f on %d queries",
            floor,
            log_rank_scores_of(found.to_numpy()).mean(),
            len(found),
        )
        ranks[str(floor)] = found.to_numpy()
    candidates.unpersist()
    resamples, seed = config.evaluation.bootstrap_resamples, config.run.seed
    scores = {floor: log_rank_scores_of(values) for floor, values in ranks.items()}
    compared = against_reference(scores, resamples, seed)
    rows = []
    for floor in floors:
        values = ranks[str(floor)]
        found_share = float((values <= config.retrieval.top_k).mean())
        mrr = float(reciprocal_of_ranks(values, config.retrieval.top_k).mean())
        versus, p_holm = compared.get(str(floor), (None, float("nan")))
        log_rank = bootstrap_mean(scores[str(floor)], resamples, seed)
        rows.append(FloorRow(floor, log_rank, mrr, found_share, versus, p_holm))
    return rows


def chosen_floor(rows: Sequence[FloorRow]) -> float:
    """The floor with the highest held-out log-rank score among those significantly above the
    paper's query (the paired interval above zero and the Holm-corrected p below 0.05); among
    equal scores the lower floor; 0 when none is."""
    better = [r for r in rows if significantly_above(r.versus_paper, r.p_holm)]
    return max(better, key=lambda r: (r.log_rank.mean, -r.floor)).floor if better else 0.0


def floor_table(rows: Sequence[FloorRow], candidates: int) -> list[str]:
    """The printed table."""
    lines = [
        f"Query floor (queries.min_coherence): {candidates:,} candidates' held-out interest "
        "through BM25's pool, paired against the paper's query (floor 0)",
        "  floor  log-rank score              95% CI     MRR  found  vs floor 0            "
        "95% CI  p (Holm)",
    ]
    for row in rows:
        score = row.log_rank
        line = (
            f"  {row.floor:5.2f}         {score.mean:+.4f}  [{score.low:+.4f}, {score.high:+.4f}]"
            f"  {row.mrr:.4f}  {row.found:5.3f}"
        )
        if row.versus_paper is not None:
            v = row.versus_paper
            line += f"     {v.mean:+.4f}  [{v.low:+.4f}, {v.high:+.4f}]    {row.p_holm:.4f}"
        lines.append(line)
    lines.append(
        f"  chosen: {chosen_floor(rows)} (the highest log-rank score significantly above floor 0, "
        f"Holm-corrected p < {SIGNIFICANCE})"
    )
    return lines
