"""`spark-submit jobs/normalise_titles.py`: runs jobrec_core.entrypoints.normalise_titles
(its docstring says what)."""

from jobrec_core.entrypoints.normalise_titles import run

if __name__ == "__main__":
    run()
