"""`spark-submit jobs/train_titles.py`: runs jobrec_core.entrypoints.train_titles
(its docstring says what)."""

from jobrec_core.entrypoints.train_titles import run

if __name__ == "__main__":
    run()
