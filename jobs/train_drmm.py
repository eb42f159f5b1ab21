"""`spark-submit jobs/train_drmm.py`: runs jobrec_core.entrypoints.train_drmm (its docstring says
what)."""

from jobrec_core.entrypoints.train_drmm import run

if __name__ == "__main__":
    run()
