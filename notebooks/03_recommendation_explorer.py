# Databricks notebook source
# MAGIC %md
# MAGIC # jobrec: recommendation explorer
# MAGIC One candidate: the jobs they showed interest in, the ten jobs recommended to them, and
# MAGIC how the champion DRMM re-ranked BM25's retrieval. Set `candidate` (empty: the first
# MAGIC candidate with recommendations); `refresh` = true recomputes the candidate's
# MAGIC recommendations with the current champion and index first.
# MAGIC
# MAGIC Locally (a refresh needs Elasticsearch: `jobrec es start`):
# MAGIC `.venv/bin/python notebooks/03_recommendation_explorer.py --env local --candidate ID`.

# COMMAND ----------

from jobrec_core.devtools.notebook import Parameter, open_notebook
from jobrec_core.serving.stage import (
    rank_figure,
    recommendations_of,
    recommended_candidates,
    run_recommend,
    show_candidate,
)

notebook = open_notebook(
    "Recommendation explorer",
    Parameter("candidate", "", "candidate id (empty: the first with recommendations)"),
    Parameter("refresh", "false", "true: recompute this candidate's recommendations first"),
)
spark, config = notebook.spark, notebook.config

# COMMAND ----------

chosen = notebook.parameter("candidate").strip()
candidates = [int(chosen)] if chosen else recommended_candidates(spark, config, 1)
if not candidates:
    raise SystemExit("No recommendations yet: run jobs/recommend.py, or pass a candidate id.")
candidate = candidates[0]
refresh = notebook.parameter("refresh").lower() == "true"
if refresh or recommendations_of(spark, config, candidate).empty:
    print(run_recommend(spark, config, [candidate]).format())

# COMMAND ----------

print(show_candidate(spark, config, candidate))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Re-ranking
# MAGIC Where each recommended job stood among BM25's 100 and where the DRMM put it.

# COMMAND ----------

recommended = recommendations_of(spark, config, candidate)
notebook.table(recommended[["rank", "title", "score", "bm25", "bm25_rank", "model"]], "Recommended")
notebook.figure(rank_figure(recommended), f"candidate_{candidate}_ranks.png")
