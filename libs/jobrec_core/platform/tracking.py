"""MLflow tracking and model registry, configured from `conf/`.

Locally: a sqlite store (runs and the model registry) plus a folder of artifacts, so that
registration, aliases and `models:/name@alias` loading behave as on a tracking server. On
Databricks: the workspace's tracking server and Unity Catalog registry.

Every stage's run says what it ran on and which scheduled run started it
(:func:`log_stage_inputs`): its input Delta tables as MLflow datasets, and the Databricks job run
id as a tag.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.data.delta_dataset_source import DeltaDatasetSource
from mlflow.data.meta_dataset import MetaDataset
from mlflow.entities import Run
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.models import infer_signature
from mlflow.tracking import MlflowClient
from mlflow.types import Schema
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from jobrec_core.config import JobrecConfig
from jobrec_core.platform.tables import delta_version, read_delta

# Model-version tags of the promotion gate: `promotion.decision`, `promotion.test_map`, ...
PROMOTION_TAG = "promotion"
# The training run's tag naming the model configuration (`model.version`, e.g. "v10"): the
# registry numbers versions in training order, so version 6 may be configuration v5.
CONFIGURATION_TAG = "model_version_config"
# The Databricks job run that started this process (`--job-run-id`, see `runtime`), and the
# tag of the stage runs that carries it.
JOB_RUN_ID_ENV = "JOBREC_JOB_RUN_ID"
JOB_RUN_ID_TAG = "job_run_id"
# `mlflow.data.context` of the tables a stage reads.
INPUT_CONTEXT = "input"


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


def job_run_id() -> str | None:
    """The Databricks job run id of this process, if a job started it (`$JOBREC_JOB_RUN_ID`)."""
    return os.environ.get(JOB_RUN_ID_ENV, "").strip() or None


def table_dataset(spark: SparkSession, config: JobrecConfig, path: str) -> MetaDataset:
    """A Delta table as an MLflow dataset: its path, current version and schema.

    Named `<layer>/<table>@v<version>` (MLflow's own naming of Delta datasets) since the MLflow
    UI shows the name, and MLflow leaves version 0 out of the source it shows. Metadata only,
    never the rows: `mlflow.data.from_spark` would log a `SparkDataset`, whose profile counts
    the rows (a job over the whole table) when it is logged. The digest comes from the name,
    path, version and schema, so the same snapshot has the same digest in every run."""
    frame = read_delta(spark, path)
    version = delta_version(spark, path)
    root = config.path(config.data.preset) + "/"
    name = f"{path.removeprefix(root)}@v{version}"
    source = DeltaDatasetSource(path=path, delta_table_version=version)
    # `profile` is abstract only to mypy: `Dataset` is no ABC, and MetaDataset has none.
    return MetaDataset(source, name=name, schema=_schema(frame))  # type: ignore[abstract]


def _schema(frame: DataFrame) -> Schema | None:
    """The table's columns as MLflow types them, from the Delta log alone. MLflow types a map
    column from its values (a scan of the table), so a table with one is logged without a
    schema: its path and version still name the snapshot."""
    if _has_map(frame.schema):
        return None
    with warnings.catch_warnings():
        # Its hint on integer columns is about a model's inputs with missing values, not a table.
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer")
        inputs = infer_signature(frame).inputs
    return inputs if isinstance(inputs, Schema) else None


def _has_map(data_type: DataType) -> bool:
    if isinstance(data_type, MapType):
        return True
    if isinstance(data_type, ArrayType):
        return _has_map(data_type.elementType)
    if isinstance(data_type, StructType):
        return any(_has_map(field.dataType) for field in data_type.fields)
    return False


def log_stage_inputs(spark: SparkSession, config: JobrecConfig, tables: Sequence[str]) -> None:
    """In the active run: each input Delta table (by path) as a dataset (`mlflow.log_input`,
    context `input`), and the job run id as the tag `job_run_id` when a job started this
    process. Logging the same table again in a resumed run adds nothing (MLflow keeps one
    input per dataset and run)."""
    run_id = job_run_id()
    if run_id is not None:
        mlflow.set_tag(JOB_RUN_ID_TAG, run_id)
    for path in tables:
        mlflow.log_input(table_dataset(spark, config, path), context=INPUT_CONTEXT)


def log_stage_run(
    spark: SparkSession,
    config: JobrecConfig,
    stage: str,
    tables: Sequence[str],
    metrics: dict[str, float],
    tags: dict[str, str] | None = None,
) -> str:
    """One run for a stage whose outputs are tables, not models (cleaning, build_pairs): its
    inputs, its funnel counts as metrics, the `stage` and `dataset` tags. Returns the run id."""
    configure_mlflow(config)
    with mlflow.start_run(run_name=stage) as run:
        mlflow.set_tags({"stage": stage, "dataset": config.data.preset, **(tags or {})})
        log_stage_inputs(spark, config, tables)
        mlflow.log_metrics(metrics)
    return str(run.info.run_id)


def registry_client(config: JobrecConfig) -> MlflowClient:
    """A client bound to the configured tracking store and registry."""
    settings = config.mlflow
    return MlflowClient(
        tracking_uri=settings.tracking_uri,
        registry_uri=settings.registry_uri or settings.tracking_uri,
    )


def stage_runs(config: JobrecConfig, stage: str, limit: int = 20) -> list[Run]:
    """The latest runs of a pipeline stage (their `stage` tag) in the experiment, newest first."""
    experiment_id = configure_mlflow(config)
    return list(
        registry_client(config).search_runs(
            [experiment_id],
            filter_string=f"tags.stage = '{stage}'",
            order_by=["attributes.start_time DESC"],
            max_results=limit,
        )
    )


def logged_tables(config: JobrecConfig, run_id: str) -> dict[str, pd.DataFrame]:
    """The tables a run logged under `tables/` (`mlflow.log_table`), by name."""
    configure_mlflow(config)
    listed = registry_client(config).list_artifacts(run_id, "tables")
    names = [a.path for a in listed if a.path.endswith(".json")]
    return {
        Path(name).stem: pd.DataFrame(mlflow.load_table(name, run_ids=[run_id]))
        for name in sorted(names)
    }


def logged_images(config: JobrecConfig, run_id: str) -> dict[str, Any]:
    """The PNGs a run logged at its root (`mlflow.log_figure`), as matplotlib figures to show
    again, by file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configure_mlflow(config)
    figures = {}
    for artifact in registry_client(config).list_artifacts(run_id):
        if not artifact.path.endswith(".png"):
            continue
        local = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=artifact.path)
        image = plt.imread(local)
        height, width = image.shape[:2]
        figure = plt.figure(figsize=(width / 100, height / 100))
        axis = figure.add_axes((0, 0, 1, 1))
        axis.imshow(image)
        axis.axis("off")
        figures[artifact.path] = figure
    return figures


def training_run_tag(client: MlflowClient, model_version: ModelVersion, tag: str) -> str | None:
    """A tag of the run that trained a registered version (None for a version logged outside
    a run, or a run without the tag)."""
    if not model_version.run_id:
        return None
    value = client.get_run(model_version.run_id).data.tags.get(tag)
    return str(value) if value is not None else None


def model_versions(config: JobrecConfig) -> pd.DataFrame:
    """Every registered version of the DRMM: the configuration it was trained as, its aliases,
    run and the promotion gate's decision (the `promotion.*` tags), newest first."""
    columns = [
        "version",
        "configuration",
        "aliases",
        "decision",
        "test_accuracy",
        "test_map",
        "reason",
        "run_id",
    ]
    client = registry_client(config)
    name = config.mlflow.model_name
    try:
        registered = client.get_registered_model(name)
    except MlflowException:  # nothing registered yet
        return pd.DataFrame(columns=columns)
    # search_model_versions leaves `aliases` empty on some stores; the model has them all.
    aliases: dict[str, list[str]] = {}
    for alias, number in registered.aliases.items():
        aliases.setdefault(str(number), []).append(alias)
    rows = []
    for version in client.search_model_versions(f"name = '{name}'"):
        tags = {
            key.removeprefix(f"{PROMOTION_TAG}."): value
            for key, value in version.tags.items()
            if key.startswith(f"{PROMOTION_TAG}.")
        }
        rows.append(
            {
                "version": int(version.version),
                "configuration": training_run_tag(client, version, CONFIGURATION_TAG) or "",
                "aliases": ", ".join(sorted(aliases.get(str(version.version), []))),
                "decision": tags.get("decision", ""),
                "test_accuracy": tags.get("test_accuracy", ""),
                "test_map": tags.get("test_map", ""),
                "reason": tags.get("reason", ""),
                "run_id": version.run_id,
            }
        )
    return pd.DataFrame(rows, columns=columns).sort_values("version", ascending=False)
