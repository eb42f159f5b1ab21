"""`spark-submit jobs/tune_drmm.py`: runs jobrec_core.entrypoints.tune_drmm (its docstring says
what)."""

from jobrec_core.entrypoints.tune_drmm import run

if __name__ == "__main__":
    run()
