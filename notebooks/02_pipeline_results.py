# Databricks notebook source
# MAGIC %md
# MAGIC # jobrec: pipeline results
# MAGIC The latest evaluation (the paper's protocol, the learning curve over training-set sizes,
# MAGIC the ground truth), each DRMM's training curve, and the registry: every version with its
# MAGIC aliases and the promotion gate's decision. Everything is read back from MLflow, where
# MAGIC `jobs/evaluate.py`, `jobs/train_drmm.py` and `jobs/promote_model.py` logged it.
# MAGIC
# MAGIC Locally: `.venv/bin/python notebooks/02_pipeline_results.py --env local [--figures DIR]`.

# COMMAND ----------

from jobrec_core.devtools.notebook import Parameter, open_notebook
from jobrec_core.platform.tracking import (
    CONFIGURATION_TAG,
    logged_images,
    logged_tables,
    model_versions,
    stage_runs,
)

notebook = open_notebook(
    "Pipeline results", Parameter("trainings", "4", "latest training runs whose curves are shown")
)
config = notebook.config

# COMMAND ----------

# MAGIC %md
# MAGIC ## The latest evaluation

# COMMAND ----------

evaluations = stage_runs(config, "evaluate", limit=1)
if not evaluations:
    print("No evaluation yet: run jobs/evaluate.py (the pipeline's evaluate task).")
for run in evaluations:
    print(
        f"run {run.info.run_id}, dataset {run.data.tags.get('dataset')}, "
        f"index {run.data.tags.get('index')}, embeddings {run.data.tags.get('embeddings')}"
    )
    for name, frame in logged_tables(config, run.info.run_id).items():
        notebook.table(frame, name)
    for name, figure in logged_images(config, run.info.run_id).items():
        notebook.figure(figure, f"evaluation_{name}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Training curves
# MAGIC Train accuracy, dev accuracy and dev MAP per epoch; a dashed line marks the switch
# MAGIC between the two training phases.

# COMMAND ----------

for run in stage_runs(config, "train_drmm", limit=int(notebook.parameter("trainings"))):
    print(f"{run.info.run_name}: run {run.info.run_id}, {run.info.status}")
    for name, figure in logged_images(config, run.info.run_id).items():
        notebook.figure(figure, f"{run.data.tags.get(CONFIGURATION_TAG, 'drmm')}_{name}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## The registry
# MAGIC Promote or roll back by moving the `champion` alias (docs/DEPLOY.md).

# COMMAND ----------

notebook.table(model_versions(config), f"Versions of {config.mlflow.model_name}")
