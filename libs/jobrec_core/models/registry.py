"""DRMM models in the MLflow model registry: logging, loading by alias, and promotion.

A registered model is an MLflow pyfunc (:class:`jobrec_scoring.served.DrmmPyfunc`) around the
saved network (`training.save_model`: spec + weights), logged with the `jobrec_scoring` package
as its only code: it loads and serves with torch, numpy, pandas and MLflow alone. Its input is
described in :mod:`jobrec_scoring.model`. `model_of` gives the torch network back for batch
scoring.

Promotion (`jobs/promote_model.py`, `training.promotion`) never trusts a number logged at
training time: it scores the challenger and the current champion on the same, current test
split, and moves the champion alias only when the challenger's paired held-out log-rank gain
is significant. The decision and its numbers are tags of the model version.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import llvmlite
import mlflow
import numba
import numpy as np
import pandas as pd
import scipy
import torch
from mlflow.entities.model_registry import ModelVersion
from mlflow.models import infer_signature
from mlflow.tracking import MlflowClient

import jobrec_scoring
from jobrec_core.config import JobrecConfig
from jobrec_core.platform import manifest
from jobrec_core.platform.tracking import CONFIGURATION_TAG, training_run_tag
from jobrec_scoring.inputs import QUERY_TERMS, RAGGED_TYPES
from jobrec_scoring.model import MODEL_ARTIFACT, input_columns, score_frame
from jobrec_scoring.network import Drmm

log = logging.getLogger(__name__)

SCORING_PACKAGE = Path(jobrec_scoring.__file__).parent


def input_example(map_rows: pd.DataFrame, model: Drmm) -> pd.DataFrame:
    example = map_rows[input_columns(model)].head(2).copy()
    for column in example.columns:
        if column in RAGGED_TYPES or column == QUERY_TERMS:  # JSON-able lists
            example[column] = example[column].map(lambda values: np.asarray(values).tolist())
    return example


def log_drmm(
    model: Drmm, model_file: Path, example: pd.DataFrame, registered_name: str | None
) -> str | None:
    """Log the model to the active run (signature and input example from stored rows) and
    register it; returns the new registry version (None when not registering)."""
    with warnings.catch_warnings():
        # The counts are integers and never missing: MLflow's hint about NaN in integer
        # columns does not apply.
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer")
        signature = infer_signature(example, score_frame(model, example))
    info = mlflow.pyfunc.log_model(
        **model_location(MODEL_ARTIFACT),
        python_model=str(SCORING_PACKAGE / "served.py"),
        artifacts={MODEL_ARTIFACT: str(model_file)},
        code_paths=[str(SCORING_PACKAGE)],
        signature=signature,
        input_example=example,
        registered_model_name=registered_name,
        pip_requirements=scoring_requirements(),
    )
    version = getattr(info, "registered_model_version", None)
    return str(version) if version is not None else None


def scoring_requirements() -> list[str]:
    """What a registered model needs installed: what `jobrec_scoring` imports, pinned."""
    return [
        f"torch=={torch.__version__.split('+')[0]}",
        f"numpy=={np.__version__}",
        f"pandas=={pd.__version__}",
        f"scipy=={scipy.__version__}",
        f"numba=={numba.__version__}",  # the scoring tanh's compiler (jobrec_scoring.activations)
        f"llvmlite=={llvmlite.__version__}",  # its code generator: the same machine code
        f"mlflow=={mlflow.__version__}",
    ]


def model_location(name: str) -> dict[str, str]:
    """Where the model goes in its run: MLflow 3 names a logged model, MLflow 2 (the 2.21 of
    Databricks Runtime 16.4 LTS ML) only knows an artifact path."""
    key = "name" if int(mlflow.__version__.split(".")[0]) >= 3 else "artifact_path"
    return {key: name}


def model_of(uri: str) -> Drmm:
    """The torch network inside a registered pyfunc (e.g. `models:/jobrec_drmm@champion`)."""
    wrapper = mlflow.pyfunc.load_model(uri).unwrap_python_model()
    return wrapper.model


# --- promotion ----------------------------------------------------------------------------------


def version_label(version: str, configuration: str | None) -> str:
    """A registry version as messages name it, e.g. "version 5 (v10)": the registry numbers
    versions in training order, so version 5 need not be configuration v5."""
    return f"version {version}" + (f" ({configuration})" if configuration else "")


@dataclass(frozen=True)
class Champion:
    name: str
    version: str
    model: Drmm
    configuration: str | None = None  # what it was trained as (`model.version`)

    @property
    def label(self) -> str:
        """e.g. "jobrec_drmm version 5 (v10)"."""
        return f"{self.name} {version_label(self.version, self.configuration)}"


class NoChampionError(LookupError):
    """No champion can rank the current pools: none has passed the gate yet (which the first
    model must, against the retriever's own order), or it was trained on other embeddings.
    Recommendations then serve the retriever's own order (`serving.stage.served_ranker`)."""


def load_champion(config: JobrecConfig, *, splits: str | None = None) -> Champion:
    """The registry's champion, by alias; refuses a model trained on other embeddings than
    the current ones (its histograms would not match), and, when `splits` (a split rule's
    fingerprint) is given, one trained under another split rule: an evaluation passes it, as
    its candidates may be ones such a model learnt from; serving does not. Raises
    :class:`NoChampionError`."""
    from jobrec_core.models.registry import model_of
    from jobrec_core.platform.tracking import configure_mlflow, registry_client

    configure_mlflow(config)
    settings = config.mlflow
    client = registry_client(config)
    try:
        current = client.get_model_version_by_alias(settings.model_name, settings.champion_alias)
    except Exception as error:  # the registry says "not found" in several ways
        raise NoChampionError(
            f"{settings.model_name} has no {settings.champion_alias!r} version: train and "
            f"promote one first (jobs/train_drmm.py, jobs/promote_model.py)"
        ) from error
    # Other embeddings: its histograms and IDFs come from another vocabulary, so it can
    # score no current pool.
    embeddings = str(manifest.current(config, "embeddings")["version"])
    trained_on = stale_input(client, current, EMBEDDINGS_TAG, embeddings)
    if trained_on is not None:
        raise NoChampionError(
            f"{settings.model_name} version {current.version} was trained with embeddings "
            f"{trained_on}, the current ones are {embeddings}: retrain and promote a model first"
        )
    other_splits = None if splits is None else stale_input(client, current, SPLIT_RULE_TAG, splits)
    if other_splits is not None:
        raise NoChampionError(
            f"{settings.model_name} version {current.version} was trained under split rule "
            f"{other_splits}, the current pairs' is {splits}: the evaluation's candidates may "
            f"be ones it learnt from; retrain and promote a model first"
        )
    version = str(current.version)
    return Champion(
        settings.model_name,
        version,
        model_of(f"models:/{settings.model_name}/{version}"),
        trained_configuration(client, current),
    )


# The training run's tags that name what a model was trained on (`training.stage`).
EMBEDDINGS_TAG = "embeddings_version"
SPLIT_RULE_TAG = "split_rule"  # `models.splits.SplitRule.fingerprint`


def stale_input(
    client: MlflowClient, model_version: ModelVersion, tag: str, current: str
) -> str | None:
    """What a registered model's training run was tagged with under `tag`, when it is not
    `current`. None when it is, or for a model logged outside a training run (no record:
    taken as it is)."""
    trained_on = training_run_tag(client, model_version, tag)
    return None if trained_on is None or trained_on == current else trained_on


def trained_configuration(client: MlflowClient, model_version: ModelVersion) -> str | None:
    """The configuration a registered model was trained as (None for a model logged outside a
    training run)."""
    return training_run_tag(client, model_version, CONFIGURATION_TAG)


def model_entry(model_version: str) -> str:
    """The manifest entry of the last model trained with configuration `model_version`."""
    return f"model_{model_version}"
