"""Tokenise the jobs (silver), train word2vec on them and compute IDF.

    spark-submit jobs/train_embeddings.py --env local --set data.preset=tiny

The vectors and the IDF table are saved under a version named after their inputs and
settings, recorded in the dataset's manifest and logged to MLflow.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.embeddings.stage import build_embeddings
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job


def build_parser() -> argparse.ArgumentParser:
    return add_common_arguments(argparse.ArgumentParser(description=__doc__))


def main(argv: Sequence[str] | None = None) -> int:
    _, config = start_job(build_parser(), argv)
    result = build_embeddings(get_spark(config), config)
    print(
        f"embeddings {result.version.name}: {result.jobs:,} jobs, {result.vocabulary:,} words "
        f"in the vocabulary, {result.terms:,} IDF terms, {result.seconds:.0f}s\n"
        f"  vectors {result.version.vectors_file}\n  idf     {result.version.idf_table}"
    )
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
