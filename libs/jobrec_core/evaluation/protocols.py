"""The paper's protocol (the paper §7-8) on the test splits, as numpy over scored rows.

Accuracy on the test triples, MAP@k on the `map_test` sets (50 BM25 top results labelled
relevant, 50 results of the less informative query labelled not), and diversity against
BM25's top k. The paper's MAP takes BM25's own ranking as the truth: it measures agreement
with BM25, so it is reported as the paper's protocol, not as the judge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.features.matching import DOCUMENT_FEATURES, PROFILE_FEATURES
from jobrec_core.ranking.metrics import (
    NO_DOCUMENT,
    Ranked,
    average_precision_at_k,
    diversity,
    pairwise_accuracy,
    rank_within_queries,
    top_k,
)
from jobrec_core.ranking.scorers import score_column_of
from jobrec_core.ranking.statistics import mean_or_nan

BM25 = "BM25"
WMD = "WMD"

# The paper's figures (§8), next to which ours are printed.
PAPER_PROTOCOL: dict[str, dict[str, float]] = {
    BM25: {"diversity": 0.0},
    WMD: {"map": 0.714},
    "DRMM v1": {"accuracy": 0.946, "map": 0.966, "diversity": 4.363},
    "DRMM v2": {"diversity": 2.0},
    "DRMM v3": {"accuracy": 0.75, "map": 0.8},
    "DRMM v4": {"diversity": 2.0},
}


@dataclass(frozen=True)
class ProtocolRow:
    """One ranker's figures. Accuracy is None for BM25 itself, and accuracy and MAP for a
    re-ranker that reads BM25: a test triple's negative, and a MAP set's negatives, carry
    the BM25 of the less informative query that found them, the positives the full query's,
    so the larger score marks the positive by construction. (BM25's own MAP is 1 by
    construction too, as the reference the others are measured against.)"""

    ranker: str
    accuracy: float | None
    map: float | None
    diversity: float


def triple_documents(triples: DataFrame) -> DataFrame:
    """Triples -> two rows each in the MAP-set shape: the positive (label 1), the negative."""

    def side(prefix: str, label: int) -> Any:
        return F.struct(
            F.col(f"{prefix}_job_id").alias("job_id"),
            F.lit(label).alias("label"),
            F.col(f"{prefix}_bm25").alias("bm25"),
            F.lit(0).alias("bm25_rank"),
            *[F.col(f"{prefix}_{c}").alias(c) for c in (*DOCUMENT_FEATURES, *PROFILE_FEATURES)],
        )

    query = ("candidate_id", "query_terms", "query_idf", "query_job_share")
    return triples.select(
        *query, F.explode(F.array(side("pos", 1), side("neg", 0))).alias("d")
    ).select(*query, "d.*")


def triple_accuracy(scored: pd.DataFrame, column: str) -> float:
    """Accuracy from the two scored rows of each triple (`candidate_id`, `label`); NaN
    without triples."""
    if scored.empty:
        return float("nan")
    pivot = scored.pivot_table(index="candidate_id", columns="label", values=column)
    return pairwise_accuracy(pivot[1].to_numpy(), pivot[0].to_numpy())


def bm25_map_order(label: np.ndarray, bm25_rank: np.ndarray) -> np.ndarray:
    """BM25's own order of a MAP set as a score: its top 50 first by rank, then the rest (the
    less informative query's results, which the full query ranked below 50)."""
    return np.where(label > 0, -bm25_rank, -bm25_rank - 1_000_000).astype(np.float64)


def ranked_by(scored: pd.DataFrame, column: str) -> Ranked:
    """The rows ranked by `column` within each candidate (ties: the lower job id)."""
    return _ranked(scored, scored[column].to_numpy())


def with_empty_pools(
    scored: pd.DataFrame, candidates: np.ndarray, rankers: Sequence[str]
) -> pd.DataFrame:
    """`scored` (labelled pool rows, a score column per ranker of `rankers`) with one
    unjudged placeholder row (job :data:`NO_DOCUMENT`, label 0, every score -inf) for each of
    `candidates` that has none: a candidate whose pool came back empty ranks nothing and
    finds nothing, and is counted as such in every ranker's figures and paired differences,
    instead of leaving the sample."""
    missing = np.setdiff1d(candidates, scored["candidate_id"].to_numpy())
    if not len(missing):
        return scored
    placeholder = pd.DataFrame({"candidate_id": missing, "job_id": NO_DOCUMENT, "label": 0})
    if "real_ad" in scored.columns:  # no job: no real ad either (the real-ad slice)
        placeholder["real_ad"] = False
    for name in rankers:
        placeholder[score_column_of(name)] = -np.inf
    return pd.concat([scored, placeholder], ignore_index=True)


def _ranked(scored: pd.DataFrame, score: np.ndarray) -> Ranked:
    return rank_within_queries(
        scored["candidate_id"].to_numpy(),
        score,
        scored["label"].to_numpy(),
        scored["job_id"].to_numpy(),
    )


def paper_protocol(
    on_triples: pd.DataFrame,
    on_map: pd.DataFrame,
    rerankers: list[str],
    k: int,
    reading_bm25: frozenset[str] = frozenset(),
) -> tuple[list[ProtocolRow], dict[str, int]]:
    """The paper's table from the scored test triples (`candidate_id, label`, a score column
    per re-ranker) and MAP test sets (`candidate_id, job_id, label, bm25_rank`, the same
    score columns); `rerankers` names the score columns (`ranking.scorers.score_column`),
    `reading_bm25` those of them whose score reads BM25 (no accuracy or MAP, see
    :class:`ProtocolRow`). Without triples or MAP sets, their figures are NaN, as the other
    experiments' are."""
    reference = _ranked(
        on_map, bm25_map_order(on_map["label"].to_numpy(), on_map["bm25_rank"].to_numpy())
    )
    reference_top = top_k(reference, k)
    itself = 0.0 if reference.queries else float("nan")  # BM25's diversity from its own top k
    rows = [ProtocolRow(BM25, None, _map(reference, k), itself)]
    for name in rerankers:
        column = score_column_of(name)
        ranked = ranked_by(on_map, column)
        fair = name not in reading_bm25
        rows.append(
            ProtocolRow(
                name,
                triple_accuracy(on_triples, column) if fair else None,
                _map(ranked, k) if fair else None,
                diversity(top_k(ranked, k), reference_top, k),
            )
        )
    return rows, {"triples": on_triples["candidate_id"].nunique(), "map": reference.queries}


def _map(ranked: Ranked, k: int) -> float:
    """MAP@k over the ranked queries; NaN without any."""
    return mean_or_nan(average_precision_at_k(ranked, k))
