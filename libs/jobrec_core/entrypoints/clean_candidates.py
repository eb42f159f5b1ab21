"""Stage 1: clean the candidates (rule filters, WMD filter, rules again) into silver.

    spark-submit jobs/clean_candidates.py --env local --set data.preset=tiny

Needs the embeddings of jobs/train_embeddings.py (read from the dataset's manifest). Writes
silver/candidates (candidate_id, sequence, positive_job_id) and silver/job_similarity, and
prints the funnel: how many candidates and jobs each rule removed.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.cleaning.stage import run_cleaning
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job


def build_parser() -> argparse.ArgumentParser:
    return add_common_arguments(argparse.ArgumentParser(description=__doc__))


def main(argv: Sequence[str] | None = None) -> int:
    _, config = start_job(build_parser(), argv)
    print(run_cleaning(get_spark(config), config).format())
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
