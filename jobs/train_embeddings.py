"""`spark-submit jobs/train_embeddings.py`: runs jobrec_core.entrypoints.train_embeddings (its
docstring says what)."""

from jobrec_core.entrypoints.train_embeddings import run

if __name__ == "__main__":
    run()
