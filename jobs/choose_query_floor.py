"""`spark-submit jobs/choose_query_floor.py`: runs jobrec_core.entrypoints.choose_query_floor
(its docstring says what)."""

from jobrec_core.entrypoints.choose_query_floor import run

if __name__ == "__main__":
    run()
