"""The serving tests' champion: trained once on the tiny pairs for the package's modules."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from jobrec_core.config import JobrecConfig
from jobrec_core.evaluation.stage import held_out_candidates
from jobrec_core.training.stage import run_training


def quick(config: JobrecConfig, **evaluation) -> JobrecConfig:
    return config.model_copy(
        update={
            "training": config.training.model_copy(update={"launcher": "single", "max_epochs": 2}),
            "evaluation": config.evaluation.model_copy(update=evaluation),
            # the demo leaves the kNN votes out of experiment 5; the tests keep them
            "knn": config.knn.model_copy(update={"dev_candidates": 40, "k_grid": [2, 8]}),
        }
    )


@pytest.fixture(scope="package")
def champion(spark, tiny, tiny_pairs):
    """DRMM v1 trained on the tiny pairs and made champion for this package only, so that
    the batch and the online recommendations are compared on one model (the registry is
    shared with the promotion tests, which start without a champion)."""
    config = quick(
        tiny[0], ground_truth_candidates=40, held_out_candidates=40, retriever_candidates=40
    )
    outcome = run_training(spark, config, fresh=True)
    client = MlflowClient(config.mlflow.tracking_uri)
    name, alias = config.mlflow.model_name, config.mlflow.champion_alias
    client.set_registered_model_alias(name, alias, str(outcome.version))
    yield config, str(outcome.version)
    client.delete_registered_model_alias(name, alias)


@pytest.fixture(scope="package")
def recommended(spark, champion) -> list[int]:
    """The held-out candidates the package's modules recommend to. `gold/recommendations` is
    one table for the package: each module writing these same candidates' rows, each sees
    the table hold exactly them, whichever runs first."""
    config, _ = champion
    return [int(r["candidate_id"]) for r in held_out_candidates(spark, config, 4).collect()]
