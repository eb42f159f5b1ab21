"""The registered model's code (MLflow "models from code"): logged as this file, not as a
pickle, so loading it runs reviewed source instead of deserialising objects."""

from mlflow.models import set_model

from jobrec_core.models.registry import DrmmPyfunc

set_model(DrmmPyfunc())
