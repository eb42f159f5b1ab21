# Databricks notebook source
# MAGIC %md
# MAGIC # jobrec: data exploration
# MAGIC What the data looks like and what the pipeline made of it: the dataset's distributions
# MAGIC (jobs per candidate, interest scores, jobs per occupation), the size of every table, the
# MAGIC quarantined records by reason, and a few cleaned candidates job by job, with the WM
# MAGIC similarity that decided whether cleaning kept each job.
# MAGIC
# MAGIC On a cluster the parameters are the widgets above (`env`, `set`: overrides, one
# MAGIC `key=value` per line). Locally:
# MAGIC `.venv/bin/python notebooks/01_data_exploration.py --env local [--figures DIR]`.

# COMMAND ----------

from jobrec_core.data.report import (
    candidate_examples,
    format_profile,
    layer_counts,
    profile_dataset,
    profile_figure,
    quarantine_reasons,
)
from jobrec_core.devtools.notebook import Parameter, open_notebook

notebook = open_notebook(
    "Data exploration", Parameter("examples", "3", "cleaned candidates shown job by job")
)
spark, config = notebook.spark, notebook.config

# COMMAND ----------

# MAGIC %md
# MAGIC ## The dataset

# COMMAND ----------

profile = profile_dataset(spark, config)
print(format_profile(profile, config.cleaning.min_jobs, config.cleaning.min_top_score))
notebook.figure(profile_figure(profile), "data_profile.png")

# COMMAND ----------

# MAGIC %md
# MAGIC ## The pipeline's tables and the quarantine

# COMMAND ----------

notebook.table(layer_counts(spark, config), "Rows per table")
notebook.table(quarantine_reasons(spark, config), "Quarantined records by stage and reason")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Cleaned candidates, job by job
# MAGIC `wm_similarity` is the job's mean Word Mover's similarity to the candidate's other jobs;
# MAGIC cleaning keeps a job above `cleaning.wmd_similarity_threshold` (the paper's 0.45).

# COMMAND ----------

examples = candidate_examples(spark, config, int(notebook.parameter("examples")), config.run.seed)
notebook.table(examples, f"Examples (threshold {config.cleaning.wmd_similarity_threshold})")
