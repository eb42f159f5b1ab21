"""The registered model's code (MLflow "models from code"): logged as this file, not as a
pickle, so loading it runs reviewed source instead of deserialising objects. It imports only
this package, which is logged with it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from mlflow.models import set_model
from mlflow.pyfunc import PythonModel

from jobrec_scoring.model import MODEL_ARTIFACT, load_model, score_frame


class DrmmPyfunc(PythonModel):
    """Scores (query, document) rows with a saved DRMM."""

    def load_context(self, context: Any) -> None:
        self.model = load_model(context.artifacts[MODEL_ARTIFACT])

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> np.ndarray:
        return score_frame(self.model, model_input)


set_model(DrmmPyfunc())
