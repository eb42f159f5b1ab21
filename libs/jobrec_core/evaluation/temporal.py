"""Experiment 6: the temporal evaluation, as production would see it (numpy over scored rows).

The pipeline ran as of a date T (`run.as_of`): its training data, features, tuning and gate
saw nothing after T. The candidates it could recommend to then, who show interest in the
window after T (`evaluation.temporal.window_days`), are judged on what was on the board in
that window, in two settings, each a pool of its own index:

* **all live ads**: every ad live on at least one day of the window;
* **fresh ads only**: the ads posted in the window, which nobody had shown interest in at T
  (a "new jobs for you" slot). The interest graph ends at T, so no behaviour feature knows
  them: what ranks them is their text, their title occupation and the candidate's profile.

Each ranker is judged by the ground truth (P@k, nDCG@k against the latent interests, paired
per candidate against BM25, and the champion against the untrained baselines) and by the
candidate's own interest in the window (`future_recall`: the share of the ads they went on to
show interest in that are in the ranker's top k), which exists on real data. In the all-live
setting, each ranker's share of fresh ads in its top k stands next to the fresh ads' share
among the relevant jobs of the same pools: a ranker that pushes new ads below older ones
shows it there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from jobrec_core.evaluation.ground_truth import ceiling
from jobrec_core.evaluation.held_out import Agreement, HeldOut
from jobrec_core.evaluation.protocols import ranked_by, with_empty_pools
from jobrec_core.ranking.metrics import Ranked, ndcg_at_k, precision_at_k
from jobrec_core.ranking.scorers import score_column_of
from jobrec_core.ranking.statistics import (
    Interval,
    PairedDifference,
    against_reference,
    bootstrap_mean,
    holm,
)

ALL_LIVE = "all live ads"
FRESH_ONLY = "fresh ads only"
FUTURE = "future"  # a pool row's column: 1 where the candidate showed interest in it after T
FRESH = "fresh"  # a pool row's column: 1 where the ad was posted after T


@dataclass(frozen=True)
class TemporalRow:
    """One ranker in one setting: ground-truth P@k and nDCG@k, its paired P@k difference with
    BM25 (Holm-corrected), the share of the candidates' window interest it puts in its top k,
    and the share of fresh ads in its top k."""

    ranker: str
    precision: Interval
    ndcg: Interval
    future_recall: Interval
    fresh_share: float
    versus_bm25: PairedDifference | None = None
    p_holm: float = float("nan")


@dataclass(frozen=True)
class ChampionComparison:
    """The champion against one baseline, paired per candidate on P@k (Holm-corrected over
    the baselines it is compared with)."""

    baseline: str
    precision: PairedDifference
    p_holm: float


@dataclass(frozen=True)
class TemporalSetting:
    name: str  # ALL_LIVE or FRESH_ONLY
    index: str  # the physical index its pools came from
    ads: int  # in that index
    candidates: int
    rows: list[TemporalRow]
    ceiling: Interval  # the best P@k any order of BM25's pools could reach
    relevant_fresh_share: float  # the fresh ads' share among the relevant jobs of the pools
    champion: str | None = None
    versus_baselines: list[ChampionComparison] = field(default_factory=list)


@dataclass(frozen=True)
class TemporalEvaluation:
    as_of: str  # T
    first: str  # the window's first day, T + 1
    last: str  # its last day
    settings: list[TemporalSetting]
    # each judged candidate's latest interest before T held out, the query from the earlier
    # ones: the held-out measure of this mode, which selects without looking past T
    held_out: HeldOut | None = None
    agreement: Agreement | None = None  # of `held_out` with the all-live P@k, across rankers


@dataclass(frozen=True)
class LabelledPools:
    """One retriever's judged pools for the candidates: rows with `candidate_id, job_id,
    label` (the ground truth), `FUTURE`, `FRESH` and a score column per ranker."""

    rows: pd.DataFrame
    rankers: list[str]


def judge_setting(
    name: str,
    index: str,
    ads: int,
    pools: LabelledPools,
    served: tuple[str, LabelledPools] | None,
    candidates: np.ndarray,
    future_counts: np.ndarray,
    k: int,
    resamples: int,
    seed: int,
    champion: str | None,
    baselines: Sequence[str],
) -> TemporalSetting:
    """A setting's rows: every ranker of `pools` (BM25's pool; its first ranker, the pool's
    own order, the reference), then `served` (a name and the served pipeline's own pools, its
    one ranker the champion), all judged on the same sorted `candidates`;
    `future_counts[i]`, how many ads candidate i showed interest in during the window (the
    denominator of `future_recall`, in the pool or not). The `champion` (one of `pools`'
    rankers) is compared with each of `baselines` too."""
    measured: dict[str, dict[str, np.ndarray]] = {}
    bm25_ranked: Ranked | None = None
    for frame, rankers, label in _judged_sets(pools, served):
        kept = with_empty_pools(frame[frame["candidate_id"].isin(candidates)], candidates, rankers)
        for ranker in rankers:
            ranked = ranked_by(kept, score_column_of(ranker))
            if bm25_ranked is None:
                bm25_ranked = ranked
            future = ranked_by(kept.assign(label=kept[FUTURE]), score_column_of(ranker))
            fresh = ranked_by(kept.assign(label=kept[FRESH]), score_column_of(ranker))
            in_top = np.add.reduceat((ranked.rank < k).astype(np.float64), ranked.starts)
            measured[label(ranker)] = {
                "precision": precision_at_k(ranked, k),
                "ndcg": ndcg_at_k(ranked, k),
                "future": precision_at_k(future, k) * k / np.maximum(future_counts, 1),
                "fresh": precision_at_k(fresh, k) * k,
                "shown": in_top,
            }
    assert bm25_ranked is not None
    names = list(measured)
    compared = against_reference({n: measured[n]["precision"] for n in names}, resamples, seed)
    rows = []
    for ranker in names:
        values = measured[ranker]
        versus, p_holm = compared.get(ranker, (None, float("nan")))
        rows.append(
            TemporalRow(
                ranker,
                bootstrap_mean(values["precision"], resamples, seed),
                bootstrap_mean(values["ndcg"], resamples, seed),
                bootstrap_mean(values["future"], resamples, seed),
                float(values["fresh"].sum() / max(values["shown"].sum(), 1.0)),
                versus,
                p_holm,
            )
        )
    relevant = pools.rows["label"] > 0
    fresh_relevant = float(pools.rows.loc[relevant, FRESH].mean()) if relevant.any() else np.nan
    return TemporalSetting(
        name,
        index,
        ads,
        len(candidates),
        rows,
        ceiling(bm25_ranked, k, resamples, seed),
        fresh_relevant,
        champion,
        versus_baselines(measured, champion, baselines, resamples, seed),
    )


def _judged_sets(
    pools: LabelledPools, served: tuple[str, LabelledPools] | None
) -> list[tuple[pd.DataFrame, list[str], Callable[[str], str]]]:
    """(rows, rankers, how a ranker is named in the table) of BM25's pools and the served
    pipeline's, named after the pipeline."""
    sets: list[tuple[pd.DataFrame, list[str], Callable[[str], str]]] = [
        (pools.rows, pools.rankers, lambda ranker: ranker)
    ]
    if served is not None:
        name, scored = served
        sets.append((scored.rows, scored.rankers, lambda _ranker: name))
    return sets


def versus_baselines(
    measured: Mapping[str, Mapping[str, np.ndarray]],
    champion: str | None,
    baselines: Sequence[str],
    resamples: int,
    seed: int,
) -> list[ChampionComparison]:
    """The champion's paired P@k difference with each baseline it was measured beside."""
    present = [b for b in baselines if b in measured and b != champion]
    if champion is None or champion not in measured or not present:
        return []
    comparisons = []
    for baseline in present:
        paired = against_reference(
            {baseline: measured[baseline]["precision"], champion: measured[champion]["precision"]},
            resamples,
            seed,
        )
        comparisons.append((baseline, *paired[champion]))
    p_values = holm([p for _, _, p in comparisons])
    return [
        ChampionComparison(baseline, difference, p)
        for (baseline, difference, _), p in zip(comparisons, p_values, strict=True)
    ]
