# Databricks notebook source
# MAGIC %md
# MAGIC # jobrec: stack check
# MAGIC Runs the component checks of `jobrec_core.stack_check` in this environment: Delta,
# MAGIC Elasticsearch through the ES-Hadoop connector, the MLflow registry, Petastorm and a
# MAGIC 2-process DDP step. On a cluster the configuration is `conf/databricks.yaml`; run locally
# MAGIC (`python notebooks/00_stack_check.py`) it uses `conf/local.yaml` and expects the local
# MAGIC Elasticsearch node to be running (`jobrec es start`).

# COMMAND ----------

import os

from jobrec_core.config import load_config
from jobrec_core.spark import get_spark
from jobrec_core.stack_check import StackContext, format_report, run_checks

env = "databricks" if "DATABRICKS_RUNTIME_VERSION" in os.environ else "local"
config = load_config(env)
spark = get_spark(config)

# COMMAND ----------

results = run_checks(StackContext(config, spark))
print(format_report(results))
