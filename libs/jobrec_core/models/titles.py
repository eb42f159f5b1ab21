"""The title normaliser in the MLflow model registry: logged with the `jobrec_scoring`
package as its only code (`jobrec_scoring.served_titles`), like the DRMM, and loaded back as
the :class:`TitleNormaliser` it wraps."""

from __future__ import annotations

import tempfile
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.models import infer_signature

from jobrec_core.models.registry import SCORING_PACKAGE, model_location, scoring_requirements
from jobrec_scoring.served_titles import TITLE_COLUMN
from jobrec_scoring.titles import NORMALISER_ARTIFACT, TitleNormaliser


def log_title_normaliser(normaliser: TitleNormaliser, registered_name: str) -> str:
    """Log `normaliser` to the active run and register it; returns the new version."""
    example = pd.DataFrame({TITLE_COLUMN: ["Senior Java Developer (Remote)", "Registered Nurse"]})
    with tempfile.TemporaryDirectory() as folder:
        saved = Path(folder) / "normaliser.pt"
        normaliser.save(saved)
        info = mlflow.pyfunc.log_model(
            **model_location(NORMALISER_ARTIFACT),
            python_model=str(SCORING_PACKAGE / "served_titles.py"),
            artifacts={NORMALISER_ARTIFACT: str(saved)},
            code_paths=[str(SCORING_PACKAGE)],
            signature=infer_signature(
                example, normaliser.normalise(example[TITLE_COLUMN].tolist())
            ),
            input_example=example,
            registered_model_name=registered_name,
            pip_requirements=scoring_requirements(),
        )
    return str(info.registered_model_version)


def load_title_normaliser(uri: str) -> TitleNormaliser:
    """The normaliser inside a registered pyfunc (`models:/jobrec_title_normaliser/3`)."""
    return mlflow.pyfunc.load_model(uri).unwrap_python_model().normaliser
