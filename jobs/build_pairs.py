"""`spark-submit jobs/build_pairs.py`: runs jobrec_core.entrypoints.build_pairs (its docstring says
what)."""

from jobrec_core.entrypoints.build_pairs import run

if __name__ == "__main__":
    run()
