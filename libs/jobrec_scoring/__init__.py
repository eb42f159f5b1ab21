"""What a registered jobrec model needs to score, and nothing more.

This package imports only numpy, pandas and torch (and MLflow for the pyfunc wrapper). It is
shipped inside every registered model (`code_paths`), so Model Serving and
`mlflow models serve` load a model without the project: no Spark, Petastorm, pydantic,
gensim, POT or numba. The project imports it too, so training, batch scoring and the served
model run the same network and the same input decoding.
"""
