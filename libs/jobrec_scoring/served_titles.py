"""The registered title normaliser's code (MLflow "models from code", like
:mod:`jobrec_scoring.served`): a column of free-text titles in, each one's occupation, the
taxonomy title it matched and their cosine out."""

from __future__ import annotations

from typing import Any

import pandas as pd
from mlflow.models import set_model
from mlflow.pyfunc import PythonModel

from jobrec_scoring.titles import NORMALISER_ARTIFACT, TitleNormaliser

TITLE_COLUMN = "title"


class TitleNormaliserPyfunc(PythonModel):
    """Normalises the `title` column of its input (see `TitleNormaliser.normalise`)."""

    def load_context(self, context: Any) -> None:
        self.normaliser = TitleNormaliser.load(context.artifacts[NORMALISER_ARTIFACT])

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        return self.normaliser.normalise(model_input[TITLE_COLUMN].tolist())


set_model(TitleNormaliserPyfunc())
