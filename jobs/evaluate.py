"""`spark-submit jobs/evaluate.py`: runs jobrec_core.entrypoints.evaluate (its docstring says
what)."""

from jobrec_core.entrypoints.evaluate import run

if __name__ == "__main__":
    run()
