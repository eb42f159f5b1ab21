"""What a registered jobrec model needs to score, and nothing more.

This package imports only numpy, pandas, torch, scipy and numba (and MLflow for the pyfunc
wrapper); a registered model's `pip_requirements` pin them. It is shipped inside every
registered model (`code_paths`), so Model Serving and `mlflow models serve` load a model
without the project: no Spark, Petastorm, pydantic, gensim or POT. numba compiles one kernel,
the scoring path's tanh (:mod:`jobrec_scoring.activations`), which gives the same floats on
every CPU. The project imports the package too, so training, batch scoring and the served
model run the same network and the same input decoding.

The numeric libraries' CPU code path is pinned on import (:mod:`jobrec_scoring.numerics`), so a
served model scores as the pipeline that trained and evaluated it.
"""

from jobrec_scoring.numerics import pin_cpu_code_paths

pin_cpu_code_paths()
