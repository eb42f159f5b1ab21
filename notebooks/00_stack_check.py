# Databricks notebook source
# MAGIC %md
# MAGIC # jobrec: stack check
# MAGIC Runs the component checks of `jobrec_core.devtools.stack_check` in this environment: Delta,
# MAGIC Elasticsearch through the ES-Hadoop connector, the MLflow registry, Petastorm and a
# MAGIC 2-process DDP step. On a cluster the configuration is `conf/databricks.yaml` and the
# MAGIC bundle target's overlay (the `env` widget: `databricks,prod`, say); run locally
# MAGIC (`.venv/bin/python notebooks/00_stack_check.py --env local`) it uses `conf/local.yaml`
# MAGIC and expects the local Elasticsearch node to be running (`jobrec es start`).

# COMMAND ----------

from jobrec_core.devtools.notebook import open_notebook
from jobrec_core.devtools.stack_check import StackContext, format_report, run_checks

notebook = open_notebook("Stack check")

# COMMAND ----------

results = run_checks(StackContext(notebook.config, notebook.spark))
print(format_report(results))
