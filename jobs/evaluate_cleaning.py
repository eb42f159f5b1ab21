"""`spark-submit jobs/evaluate_cleaning.py`: runs jobrec_core.entrypoints.evaluate_cleaning (its
docstring says what)."""

from jobrec_core.entrypoints.evaluate_cleaning import run

if __name__ == "__main__":
    run()
