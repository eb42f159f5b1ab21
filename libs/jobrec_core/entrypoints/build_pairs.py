"""Stage 3: queries, BM25 retrieval, (q, d+, d-) triples and MAP sets with DRMM features.

    spark-submit jobs/build_pairs.py --env local --set data.preset=tiny

Needs the embeddings (jobs/train_embeddings.py), the cleaned candidates
(jobs/clean_candidates.py) and the jobs index (jobs/index_jobs.py). Writes silver/queries,
silver/retrieval, gold/pairs/triples and gold/pairs/map_sets (partitioned by split), records
them in the dataset's manifest, and prints the funnel. Searches that keep failing go to the
quarantine table.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.pairs.stage import run_build_pairs
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job


def build_parser() -> argparse.ArgumentParser:
    return add_common_arguments(argparse.ArgumentParser(description=__doc__))


def main(argv: Sequence[str] | None = None) -> int:
    _, config = start_job(build_parser(), argv)
    print(run_build_pairs(get_spark(config), config).format())
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
