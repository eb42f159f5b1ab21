"""`spark-submit jobs/generate_data.py`: runs jobrec_core.entrypoints.generate_data (its docstring
says what)."""

from jobrec_core.entrypoints.generate_data import run

if __name__ == "__main__":
    run()
