"""Stage 2: index every job into Elasticsearch through the ES-Hadoop connector.

    spark-submit jobs/index_jobs.py --env local --set data.preset=tiny

Reads the tokenised jobs of jobs/train_embeddings.py, builds a new physical index
(`<alias>_v<time>`), checks its document count, then points the alias (`jobs`) at it in one
atomic step. Documents Elasticsearch refuses go to the quarantine table. The connection
(nodes, credentials) comes from the configuration, the environment or a secret scope.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.indexing.stage import run_indexing
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job


def build_parser() -> argparse.ArgumentParser:
    return add_common_arguments(argparse.ArgumentParser(description=__doc__))


def main(argv: Sequence[str] | None = None) -> int:
    _, config = start_job(build_parser(), argv)
    print(run_indexing(get_spark(config), config).format())
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
