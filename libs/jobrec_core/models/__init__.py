"""The DRMM network, its serialisation and the MLflow registry: shared by training, evaluation and
serving."""
