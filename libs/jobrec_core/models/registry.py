"""DRMM models in the MLflow model registry: logging, loading by alias, and promotion.

A registered model is an MLflow pyfunc (:class:`DrmmPyfunc`) around the saved network
(`training.save_model`: spec + weights). Its input is what `build_pairs` stores per (query,
document), one row each: `query_idf` and `hist` (the flattened count histograms) as lists,
`lead_hist` too with `field_histograms`, `doc_len`, the extra features the version uses, and
`query_terms` for embedding gating; its output is one score per row. So the recommender and
any serving endpoint feed it rows of the MAP-set shape, with no torch code of their own.
`model_of` gives the torch network back for batch scoring.

Promotion (`jobs/promote_model.py`) never trusts a number logged at training time: it scores
the challenger and the current champion on the same, current test split, and moves the
champion alias only when the challenger is at least as good on both accuracy and MAP and
above the configured floors. The decision and its numbers are tags of the model version.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import torch
from mlflow.models import infer_signature
from mlflow.pyfunc import PythonModel

from jobrec_core.config import JobrecConfig
from jobrec_core.models.drmm import Drmm
from jobrec_core.models.inputs import (
    QUERY_TERMS,
    RAGGED_TYPES,
    doc_columns,
    document_inputs,
    query_columns,
    query_gate,
    to_bytes,
)
from jobrec_core.models.model_io import load_model
from jobrec_core.platform import manifest

log = logging.getLogger(__name__)

MODEL_ARTIFACT = "drmm"


class DrmmPyfunc(PythonModel):
    """Scores (query, document) rows with a saved DRMM."""

    def load_context(self, context: Any) -> None:
        self.model = load_model(context.artifacts[MODEL_ARTIFACT])

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> np.ndarray:
        return score_frame(self.model, model_input)


def input_columns(model: Drmm) -> list[str]:
    return [*query_columns(model.spec), *doc_columns(model.spec)]


@torch.no_grad()
def score_frame(model: Drmm, frame: pd.DataFrame) -> np.ndarray:
    """Scores of stored-shape rows (see the module), in their order."""
    columns = {c: np.asarray(v) for c, v in to_bytes(frame[input_columns(model)].copy()).items()}
    gate, mask = query_gate(columns, model.spec, model.query_vectors)
    model.eval()
    return model.score(document_inputs(columns, "", model.spec, gate, mask)).numpy()


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
        name=MODEL_ARTIFACT,
        python_model=str(Path(__file__).with_name("pyfunc.py")),
        artifacts={MODEL_ARTIFACT: str(model_file)},
        signature=signature,
        input_example=example,
        registered_model_name=registered_name,
        pip_requirements=[
            f"torch=={torch.__version__.split('+')[0]}",
            f"numpy=={np.__version__}",
            f"pandas=={pd.__version__}",
            f"mlflow=={mlflow.__version__}",
        ],
    )
    version = getattr(info, "registered_model_version", None)
    return str(version) if version is not None else None


def model_of(uri: str) -> Drmm:
    """The torch network inside a registered pyfunc (e.g. `models:/jobrec_drmm@champion`)."""
    wrapper = mlflow.pyfunc.load_model(uri).unwrap_python_model()
    return wrapper.model


# --- promotion ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Champion:
    name: str
    version: str
    model: Drmm


def load_champion(config: JobrecConfig) -> Champion:
    """The registry's champion, by alias; refuses a model trained on other embeddings than
    the current ones (its histograms would not match)."""
    from jobrec_core.models.registry import model_of
    from jobrec_core.platform.tracking import configure_mlflow, registry_client

    configure_mlflow(config)
    settings = config.mlflow
    client = registry_client(config)
    try:
        current = client.get_model_version_by_alias(settings.model_name, settings.champion_alias)
    except Exception as error:  # the registry says "not found" in several ways
        raise LookupError(
            f"{settings.model_name} has no {settings.champion_alias!r} version: train and "
            f"promote one first (jobs/train_drmm.py, jobs/promote_model.py)"
        ) from error
    embeddings = str(manifest.current(config, "embeddings")["version"])
    trained_on = (
        client.get_run(current.run_id).data.tags.get("embeddings_version")
        if current.run_id
        else None
    )
    if trained_on is not None and trained_on != embeddings:
        raise RuntimeError(
            f"{settings.model_name} v{current.version} was trained with embeddings {trained_on}, "
            f"the current ones are {embeddings}: retrain and promote a model first"
        )
    version = str(current.version)
    return Champion(
        settings.model_name, version, model_of(f"models:/{settings.model_name}/{version}")
    )


def model_entry(model_version: str) -> str:
    """The manifest entry of the last model trained with configuration `model_version`."""
    return f"model_{model_version}"
