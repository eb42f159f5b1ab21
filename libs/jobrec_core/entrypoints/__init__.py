"""Entry points of the pipeline: one module per stage, run with `spark-submit jobs/<stage>.py`
locally or as a Databricks workflow task. Each parses its arguments, loads the configuration,
gets the Spark session, calls `jobrec_core`, writes its outputs and reports counts."""
