"""`spark-submit jobs/promote_model.py`: runs jobrec_core.entrypoints.promote_model (its docstring
says what)."""

from jobrec_core.entrypoints.promote_model import run

if __name__ == "__main__":
    run()
