"""`spark-submit jobs/recommend.py`: runs jobrec_core.entrypoints.recommend (its docstring says
what)."""

from jobrec_core.entrypoints.recommend import run

if __name__ == "__main__":
    run()
