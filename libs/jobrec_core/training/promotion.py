"""The promotion gate: a registered challenger against the champion on the current test splits.

Promotion never trusts a number logged at training time: it scores the challenger and the
current champion on the same, current held-out test sets (`pairs.splits.held_out_documents`:
each test candidate's held-out job in the pool a recommendation would re-rank) and moves the
champion alias only when the challenger's paired gain in the held-out job's log-rank score
(-ln rank, `ranking.metrics.log_rank_score`), per candidate, is significant (:func:`decide`:
a sign-flip p-value and a bootstrap interval, at a level the run's gates share). The log
rank, not the reciprocal rank: on the same pools it separates two rankers with two to three
times the z, and it orders rankers like the ground truth as well; the MRR is still
measured and shown. While there is no champion, the challenger is compared in the
same way with BM25's own order of the same pools: a model that cannot show it ranks better than
the retriever is not served, and recommendations keep the retriever's order
(`serving.stage.served_ranker`). Otherwise the verdict is "not promoted: no significant
difference" (or "significantly worse"), with the figures. The paper's accuracy and MAP are
measured and recorded too, as the paper's protocol. The sanity floor, even over a champion, is
the held-out log rank of the retriever's own order (`promotion.min_gain_over_retriever`): a
model that ranks the held-out jobs worse than the pools already are is never served. A
champion trained on other embeddings than the challenger cannot be compared with it, nor
served, and one trained under another split rule (`models.splits.SplitRule`) may have learnt
from the test candidates: the challenger is compared with BM25's order instead
(`_other_inputs`). The decision and its numbers are tags
of the model version. A process keeps the scores it measured (`test_scores`): the same
registry version on the same snapshot scores the same, so a pipeline's next gate does not
score its champion again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import mlflow
import numpy as np
import pyarrow as pa
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from jobrec_core.config import JobrecConfig
from jobrec_core.models.registry import (
    EMBEDDINGS_TAG,
    SPLIT_RULE_TAG,
    model_of,
    stale_input,
    trained_configuration,
    version_label,
)
from jobrec_core.models.splits import current_split_rule
from jobrec_core.platform import manifest
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.tracking import (
    PROMOTION_TAG,
    configure_mlflow,
    registry_client,
    training_run_tag,
)
from jobrec_core.ranking.metrics import geometric_mean_rank, log_rank_scores_of
from jobrec_core.ranking.statistics import PairedDifference, paired_difference
from jobrec_core.training.scoring import SplitScores, evaluate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GateFiles:
    """The current snapshot's test files: triples and MAP sets (the paper's protocol) and the
    held-out sets (what the gate decides on)."""

    triples: tuple[str, ...]
    map_sets: tuple[str, ...]
    held_out: tuple[str, ...]


@dataclass(frozen=True)
class Scores:
    """A registry version's scores on the test splits."""

    version: str
    measured: SplitScores
    configuration: str | None = None  # what it was trained as (`model.version`)

    @property
    def label(self) -> str:
        return version_label(self.version, self.configuration)

    @property
    def mrr(self) -> float:
        return self.measured.held_out_mrr

    @property
    def log_rank(self) -> float:
        return self.measured.held_out_log_rank

    @property
    def accuracy(self) -> float:
        return self.measured.accuracy

    @property
    def map(self) -> float:
        return self.measured.map

    @property
    def log_rank_scores(self) -> np.ndarray:
        return self.measured.log_rank_scores


@dataclass(frozen=True)
class Verdict:
    promoted: bool
    reason: str
    gain: PairedDifference | None = None  # challenger - champion, log-rank score per candidate


@dataclass(frozen=True)
class PromotionDecision:
    model: str
    challenger: Scores
    champion: Scores | None
    verdict: Verdict
    # BM25's own order of the same pools, for reference
    bm25_mrr: float = float("nan")
    bm25_log_rank: float = float("nan")

    @property
    def promoted(self) -> bool:
        return self.verdict.promoted

    @property
    def reason(self) -> str:
        return self.verdict.reason

    def format(self) -> str:
        rows = [
            f"{'':<12}{'version':>8}{'log-rank':>10}{'GM rank':>9}{'MRR':>8}{'accuracy':>10}"
            f"{'MAP':>8}"
        ]
        for role, scores in (("challenger", self.challenger), ("champion", self.champion)):
            if scores is not None:
                rows.append(
                    f"{role:<12}{scores.version:>8}{_held_out(scores.log_rank, scores.mrr)}"
                    f"{scores.accuracy:>10.4f}{scores.map:>8.4f}"
                )
        rows.append(f"{'BM25 order':<12}{'':>8}{_held_out(self.bm25_log_rank, self.bm25_mrr)}")
        verdict = "PROMOTED to champion" if self.promoted else "not promoted"
        return "\n".join([*rows, f"{self.model} {self.challenger.label}: {verdict}: {self.reason}"])


def decide(
    challenger: Scores,
    champion: Scores | None,
    retriever_ranks: np.ndarray,
    min_gain_over_retriever: float,
    resamples: int,
    seed: int,
    alpha: float = 0.05,
) -> Verdict:
    """The gate, a pure function: the sanity floor (the challenger's mean held-out log-rank
    score at least the retriever's order's plus `min_gain_over_retriever`, even over a
    champion: a model that ranks the held-out jobs worse than the pools already are is never
    served; the paper's test accuracy, the floor before, is won by construction by a model
    that reads BM25, whose negatives carry the less informative query's), then a significant
    paired gain in the
    held-out log-rank score over the champion, or, while there is none, over the retriever's
    own order of the same pools (`retriever_ranks`, the held-out jobs' ranks in BM25's order:
    :func:`bm25_held_out_ranks`). A first model that cannot show it ranks better than the
    pools already are is not served (see the module).

    Significant at `alpha` (this gate's share of the run's, :func:`gate_alpha`) means both:
    the sign-flip test's p-value is below `alpha`, and the bootstrap interval at 1 - `alpha`
    lies on one side of zero. The interval alone is too narrow on a few candidates (on three,
    it excluded zero with p 0.25); the test alone says nothing about the size of the gain."""
    retriever = log_rank_scores_of(retriever_ranks)
    if len(retriever):  # with none, there is nothing to decide on (below)
        floor_gain = challenger.log_rank - float(np.mean(retriever))
        if not floor_gain >= min_gain_over_retriever:
            return Verdict(
                False,
                f"below the floor (held-out log-rank score {floor_gain:+.4f} over BM25's order "
                f"of the pools < {min_gain_over_retriever})",
            )
    if champion is not None and champion.version == challenger.version:
        return Verdict(True, "already the champion")
    if champion is None:
        reference = retriever
        against = "BM25's order of the pools (no champion yet)"
    else:
        reference, against = champion.log_rank_scores, f"champion {champion.label}"
    ours = challenger.log_rank_scores
    if len(ours) != len(reference):
        raise ValueError(f"the challenger and {against} were scored on different candidates")
    if len(ours) == 0:
        return Verdict(False, "no held-out test candidates to compare on: rerun build_pairs")
    gain = paired_difference(ours, reference, resamples, seed, level=1 - alpha)
    figures = (
        f"held-out log-rank score {gain.mean:+.4f} [{gain.low:+.4f}, {gain.high:+.4f}] "
        f"({1 - alpha:.1%} CI; the held-out job ranks "
        f"{1 / geometric_mean_rank(gain.mean):.2f}x higher, geometric mean), "
        f"p {gain.p_value:.4f} (alpha {alpha:.4f}), over {against} on {len(ours):,} test "
        f"candidates (wins/ties/losses {gain.wins}/{gain.ties}/{gain.losses})"
    )
    significant = gain.p_value < alpha  # False for NaN: no evidence
    if significant and gain.low > 0:
        return Verdict(True, f"significantly better: {figures}", gain)
    if significant and gain.high < 0:
        return Verdict(False, f"significantly worse: {figures}", gain)
    return Verdict(False, f"no significant difference: {figures}", gain)


def gate_alpha(family_alpha: float, gates: int) -> float:
    """One gate's significance level when a run gates `gates` challengers: Bonferroni, so that
    the chance of any of them being promoted on noise is at most `family_alpha`
    (`promotion.family_alpha`). Gates run in sequence against a moving champion, so their
    tests are not independent, which Bonferroni does not need."""
    if gates < 1:
        raise ValueError(f"a run gates at least one challenger, not {gates}")
    return family_alpha / gates


def promote(
    config: JobrecConfig, version: str, files: GateFiles, gates: int = 1
) -> PromotionDecision:
    """Mark `version` challenger, compare it with the champion on the test splits, move the
    champion alias if it passes (see the module), and record the decision as tags. `gates`:
    how many challengers the run gates (`jobrec run`: every configuration of
    `evaluation.models`), which share `promotion.family_alpha` (:func:`gate_alpha`).

    A challenger trained on other embeddings than the current ones is refused: it could not
    be served (`models.registry.load_champion`). The champion alias moves only if it still
    names the champion this gate compared with (another gate may have moved it meanwhile),
    and the decision is recorded once the alias has moved."""
    settings = config.mlflow
    configure_mlflow(config)  # models:/ URIs resolve against the configured registry
    client = registry_client(config)
    name = settings.model_name
    candidate = client.get_model_version(name, version)
    client.set_registered_model_alias(name, settings.challenger_alias, version)

    def scores_of(registered: ModelVersion) -> Scores:
        number = str(registered.version)
        scored = ScoredVersion(
            mlflow.get_registry_uri(),
            name,
            number,
            registered.run_id,
            registered.creation_timestamp,
        )
        return Scores(
            number,
            test_scores(scored, files, config.training.eval_batch_size, config.evaluation.k),
            trained_configuration(client, registered),
        )

    run_status = client.get_run(candidate.run_id).info.status if candidate.run_id else None
    challenger = scores_of(candidate)
    champion = None
    replaced = None  # why a champion trained on other embeddings is not compared with
    try:
        current = client.get_model_version_by_alias(name, settings.champion_alias)
    except MlflowException:
        current = None
        log.info("%s has no %s yet", name, settings.champion_alias)
    if current is not None:
        replaced = _other_inputs(client, current, candidate)
        champion = None if replaced else scores_of(current)
    bm25_ranks = bm25_held_out_ranks(files.held_out)
    bm25 = SplitScores(float("nan"), float("nan"), bm25_ranks)  # its held-out figures alone
    stale = _stale_inputs(client, candidate, config)
    if run_status != "FINISHED":
        verdict = Verdict(False, f"its training run is {run_status}, not FINISHED")
    elif stale:
        verdict = Verdict(False, stale)
    else:
        gate = config.promotion
        verdict = decide(
            challenger,
            champion,
            bm25_ranks,
            gate.min_gain_over_retriever,
            gate.bootstrap_resamples,
            config.run.seed,
            gate_alpha(gate.family_alpha, gates),
        )
        if replaced:
            verdict = replace(verdict, reason=f"{verdict.reason}; {replaced}")
    if verdict.promoted and (
        moved := _champion_moved(client, name, settings.champion_alias, current)
    ):
        verdict = replace(verdict, promoted=False, reason=f"{moved}; {verdict.reason}")
    decision = PromotionDecision(
        name,
        challenger,
        champion,
        verdict,
        bm25.held_out_mrr,
        bm25.held_out_log_rank,
    )
    if decision.promoted:
        client.set_registered_model_alias(name, settings.champion_alias, version)
    _record(client, decision)
    return decision


# What a model was trained on that the gate needs current: the tag, and what it names.
_INPUTS = ((EMBEDDINGS_TAG, "embeddings"), (SPLIT_RULE_TAG, "split rule"))


def _stale_inputs(
    client: MlflowClient, challenger: ModelVersion, config: JobrecConfig
) -> str | None:
    """Why the challenger cannot be promoted, if it was trained on other embeddings than the
    current ones (no current pool can be scored with it, and as champion it would be refused
    at serving) or under another split rule than the current pairs' (the current test
    candidates may be ones it learnt from)."""
    current = {
        EMBEDDINGS_TAG: str(manifest.current(config, "embeddings")["version"]),
        SPLIT_RULE_TAG: current_split_rule(config).fingerprint,
    }
    for tag, what in _INPUTS:
        trained_on = stale_input(client, challenger, tag, current[tag])
        if trained_on is not None:
            return (
                f"not comparable: it was trained on {what} {trained_on}, the current one is "
                f"{current[tag]}; retrain it on them"
            )
    return None


def _champion_moved(
    client: MlflowClient, name: str, alias: str, compared: ModelVersion | None
) -> str | None:
    """Why the alias must not move, if it no longer names the champion this gate compared
    with: another gate (a manual `promote_model` beside the pipeline) moved it while this one
    scored, and this challenger was never compared with the new champion. The registry has
    no compare-and-set, so this narrows the window to the moment before the move."""
    try:
        now: str | None = str(client.get_model_version_by_alias(name, alias).version)
    except MlflowException:
        now = None
    before = None if compared is None else str(compared.version)
    if now == before:
        return None
    return (
        f"not promoted: the {alias} moved from version {before} to {now} while this gate "
        "ran; gate again against it"
    )


@dataclass(frozen=True)
class ScoredVersion:
    """A registry version, as what fixes its scores: versions are immutable, and the run and
    the creation time tell a recreated model's version 1 from a deleted one's."""

    registry_uri: str
    name: str
    version: str
    run_id: str | None
    created: int | None


@lru_cache(maxsize=8)
def test_scores(scored: ScoredVersion, files: GateFiles, batch_size: int, k: int) -> SplitScores:
    """A registry version's scores on a snapshot's test files. Both are immutable, so they
    are kept: a pipeline that trains several models gates each against the one it has just
    gated (the champion), and scores that champion once, not once per gate."""
    return evaluate(
        model_of(f"models:/{scored.name}/{scored.version}"),
        list(files.triples),
        list(files.map_sets),
        list(files.held_out),
        batch_size,
        k,
    )


def _other_inputs(
    client: MlflowClient, champion: ModelVersion, challenger: ModelVersion
) -> str | None:
    """Why the champion cannot be compared with the challenger, if it was trained on other
    embeddings (their histograms and IDFs come from another vocabulary, and serving or
    evaluating it on the current ones is refused, `models.registry.load_champion`), or under
    another split rule (the test candidates may be ones it learnt from, which would flatter
    it). The challenger is then compared with BM25's order, as a first model is; otherwise
    new jobs, which always give new embeddings, would leave a champion nothing can use until
    a model beat it."""
    for tag, what in _INPUTS:
        new = training_run_tag(client, challenger, tag)
        old = None if new is None else stale_input(client, champion, tag, new)
        if old is not None:
            return (
                f"the champion version {champion.version} was trained on {what} {old}, "
                f"this one on {new}"
            )
    return None


def bm25_held_out_ranks(held_out_files: Sequence[str]) -> np.ndarray:
    """BM25's rank (from 1) of each held-out job (`bm25_rank` among the pool), in candidate-id
    order: what the models' figures compare with."""
    import pyarrow.parquet as pq

    columns = ["candidate_id", "label", "bm25_rank"]
    tables = [pq.read_table(local_path(f), columns=columns) for f in held_out_files]
    if not tables:
        return np.zeros(0)
    frame = pa.concat_tables(tables).to_pandas()
    held_out = frame[frame["label"] > 0].sort_values("candidate_id")
    return held_out["bm25_rank"].to_numpy(dtype=np.float64)


def _held_out(log_rank: float, mrr: float) -> str:
    """The held-out columns: the mean log-rank score, the rank it stands for, the MRR."""
    return f"{log_rank:>10.4f}{geometric_mean_rank(log_rank):>9.2f}{mrr:>8.4f}"


def _record(client: MlflowClient, decision: PromotionDecision) -> None:
    tags = {
        "decision": "promoted" if decision.promoted else "rejected",
        "reason": decision.reason,
        "test_held_out_log_rank": f"{decision.challenger.log_rank:.6f}",
        "test_held_out_mrr": f"{decision.challenger.mrr:.6f}",
        "test_accuracy": f"{decision.challenger.accuracy:.6f}",
        "test_bm25_held_out_log_rank": f"{decision.bm25_log_rank:.6f}",
        "test_bm25_held_out_mrr": f"{decision.bm25_mrr:.6f}",
        "test_map": f"{decision.challenger.map:.6f}",
        "decided_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if decision.champion is not None:
        tags |= {
            "champion_version": decision.champion.version,
            "champion_test_held_out_log_rank": f"{decision.champion.log_rank:.6f}",
            "champion_test_held_out_mrr": f"{decision.champion.mrr:.6f}",
            "champion_test_accuracy": f"{decision.champion.accuracy:.6f}",
            "champion_test_map": f"{decision.champion.map:.6f}",
        }
    gain = decision.verdict.gain
    if gain is not None:
        tags |= {
            "gain_held_out_log_rank": f"{gain.mean:.6f}",
            "gain_ci_low": f"{gain.low:.6f}",
            "gain_ci_high": f"{gain.high:.6f}",
            "gain_p_value": f"{gain.p_value:.6f}",
        }
    for key, value in tags.items():
        client.set_model_version_tag(
            decision.model, decision.challenger.version, f"{PROMOTION_TAG}.{key}", value
        )
