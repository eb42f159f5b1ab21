"""The registered model's code (MLflow "models from code"): logged as this file, not as a
pickle, so loading it runs reviewed source instead of deserialising objects. It imports only
this package, which is logged with it."""

from mlflow.models import set_model

from jobrec_scoring.model import DrmmPyfunc

set_model(DrmmPyfunc())
