"""Name every job's occupation from its title: silver jobs get `title_occupation` and
`title_confidence` from the normaliser jobs/train_titles.py registered, computed in Spark.

    spark-submit jobs/normalise_titles.py --env local --set data.preset=tiny

Prints how the real ads map: agreement with their title-match label, confidence, the
commonest occupations.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.features.occupations import format_mapping
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job
from jobrec_core.titles.stage import normalise_job_titles, occupation_names


def build_parser() -> argparse.ArgumentParser:
    return add_common_arguments(argparse.ArgumentParser(description=__doc__))


def main(argv: Sequence[str] | None = None) -> int:
    _, config = start_job(build_parser(), argv)
    mapping = normalise_job_titles(get_spark(config), config)
    print(format_mapping(mapping, occupation_names(config)))
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
