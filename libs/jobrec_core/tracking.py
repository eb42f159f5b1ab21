"""MLflow tracking and model registry, configured from `conf/`.

Locally: a sqlite store (runs and the model registry) plus a folder of artifacts, so that
registration, aliases and `models:/name@alias` loading behave as on a tracking server. On
Databricks: the workspace's tracking server and Unity Catalog registry.
"""

from __future__ import annotations

from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient

from jobrec_core.config import JobrecConfig


def configure_mlflow(config: JobrecConfig) -> str:
    """Point MLflow at the configured stores and select the experiment; returns its id."""
    settings = config.mlflow
    sqlite_prefix = "sqlite:///"
    if settings.tracking_uri.startswith(sqlite_prefix):
        Path(settings.tracking_uri[len(sqlite_prefix) :]).parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(settings.tracking_uri)
    mlflow.set_registry_uri(settings.registry_uri or settings.tracking_uri)
    experiment = mlflow.get_experiment_by_name(settings.experiment)
    if experiment is not None:
        experiment_id = experiment.experiment_id
    else:
        artifact_location = None
        if settings.artifact_root is not None:
            Path(settings.artifact_root).mkdir(parents=True, exist_ok=True)
            artifact_location = Path(settings.artifact_root).resolve().as_uri()
        experiment_id = mlflow.create_experiment(
            settings.experiment, artifact_location=artifact_location
        )
    mlflow.set_experiment(experiment_id=experiment_id)
    return str(experiment_id)


def registry_client(config: JobrecConfig) -> MlflowClient:
    """A client bound to the configured tracking store and registry."""
    settings = config.mlflow
    return MlflowClient(
        tracking_uri=settings.tracking_uri,
        registry_uri=settings.registry_uri or settings.tracking_uri,
    )
