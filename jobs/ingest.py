"""`spark-submit jobs/ingest.py`: runs jobrec_core.entrypoints.ingest (its docstring says what)."""

from jobrec_core.entrypoints.ingest import run

if __name__ == "__main__":
    run()
