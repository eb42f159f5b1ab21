"""`spark-submit jobs/index_jobs.py`: runs jobrec_core.entrypoints.index_jobs (its docstring says
what)."""

from jobrec_core.entrypoints.index_jobs import run

if __name__ == "__main__":
    run()
