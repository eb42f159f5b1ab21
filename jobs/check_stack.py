"""`spark-submit jobs/check_stack.py`: runs jobrec_core.entrypoints.check_stack (its docstring says
what)."""

from jobrec_core.entrypoints.check_stack import run

if __name__ == "__main__":
    run()
