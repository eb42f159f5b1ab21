"""The promotion gate: a registered challenger against the champion on the current test split.

Promotion never trusts a number logged at training time: it scores the challenger and the
current champion on the same, current test split, and moves the champion alias only when the
challenger is at least as good on both accuracy and MAP and above the configured floors. The
decision and its numbers are tags of the model version."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from jobrec_core.config import JobrecConfig
from jobrec_core.models.registry import model_of
from jobrec_core.platform.tracking import PROMOTION_TAG, configure_mlflow, registry_client
from jobrec_core.training.scoring import evaluate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scores:
    version: str
    accuracy: float
    map: float


@dataclass(frozen=True)
class PromotionDecision:
    model: str
    challenger: Scores
    champion: Scores | None
    promoted: bool
    reason: str

    def format(self) -> str:
        rows = [f"{'':<12}{'version':>8}{'accuracy':>10}{'MAP':>8}"]
        for role, scores in (("challenger", self.challenger), ("champion", self.champion)):
            if scores is not None:
                rows.append(
                    f"{role:<12}{scores.version:>8}{scores.accuracy:>10.4f}{scores.map:>8.4f}"
                )
        verdict = "PROMOTED to champion" if self.promoted else "NOT promoted"
        return "\n".join(
            [*rows, f"{self.model} v{self.challenger.version}: {verdict}: {self.reason}"]
        )


def decide(
    challenger: Scores, champion: Scores | None, min_accuracy: float, min_map: float
) -> tuple[bool, str]:
    """The gate, a pure function: floors first, then at least as good as the champion on both
    accuracy and MAP."""
    if not (challenger.accuracy >= min_accuracy and challenger.map >= min_map):
        return False, (
            f"below the floors (accuracy {challenger.accuracy:.4f} vs {min_accuracy}, "
            f"MAP {challenger.map:.4f} vs {min_map})"
        )
    if champion is None:
        return True, "above the floors; there was no champion"
    if champion.version == challenger.version:
        return True, "already the champion"
    if challenger.accuracy >= champion.accuracy and challenger.map >= champion.map:
        return True, f"at least as good as champion v{champion.version} on accuracy and MAP"
    return False, (
        f"worse than champion v{champion.version} (accuracy {challenger.accuracy:.4f} vs "
        f"{champion.accuracy:.4f}, MAP {challenger.map:.4f} vs {champion.map:.4f})"
    )


def promote(
    config: JobrecConfig,
    version: str,
    test_triples: list[str],
    test_map_sets: list[str],
) -> PromotionDecision:
    """Mark `version` challenger, compare it with the champion on the test split, move the
    champion alias if it passes (see the module), and record the decision as tags."""
    settings = config.mlflow
    configure_mlflow(config)  # models:/ URIs resolve against the configured registry
    client = registry_client(config)
    name = settings.model_name
    candidate = client.get_model_version(name, version)
    client.set_registered_model_alias(name, settings.challenger_alias, version)

    def scores_of(model_version: str) -> Scores:
        model = model_of(f"models:/{name}/{model_version}")
        measured = evaluate(
            model,
            test_triples,
            test_map_sets,
            config.training.eval_batch_size,
            config.evaluation.k,
        )
        return Scores(model_version, measured["accuracy"], measured["map"])

    run_status = client.get_run(candidate.run_id).info.status if candidate.run_id else None
    challenger = scores_of(version)
    champion = None
    try:
        current = client.get_model_version_by_alias(name, settings.champion_alias)
        champion = scores_of(str(current.version))
    except MlflowException:
        log.info("%s has no %s yet", name, settings.champion_alias)
    if run_status != "FINISHED":
        promoted, reason = False, f"its training run is {run_status}, not FINISHED"
    else:
        promoted, reason = decide(
            challenger, champion, config.promotion.min_accuracy, config.promotion.min_map
        )
    decision = PromotionDecision(name, challenger, champion, promoted, reason)
    _record(client, decision)
    if promoted:
        client.set_registered_model_alias(name, settings.champion_alias, version)
    return decision


def _record(client: MlflowClient, decision: PromotionDecision) -> None:
    tags = {
        "decision": "promoted" if decision.promoted else "rejected",
        "reason": decision.reason,
        "test_accuracy": f"{decision.challenger.accuracy:.6f}",
        "test_map": f"{decision.challenger.map:.6f}",
        "decided_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if decision.champion is not None:
        tags |= {
            "champion_version": decision.champion.version,
            "champion_test_accuracy": f"{decision.champion.accuracy:.6f}",
            "champion_test_map": f"{decision.champion.map:.6f}",
        }
    for key, value in tags.items():
        client.set_model_version_tag(
            decision.model, decision.challenger.version, f"{PROMOTION_TAG}.{key}", value
        )
