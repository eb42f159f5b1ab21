"""`spark-submit jobs/clean_candidates.py`: runs jobrec_core.entrypoints.clean_candidates (its
docstring says what)."""

from jobrec_core.entrypoints.clean_candidates import run

if __name__ == "__main__":
    run()
