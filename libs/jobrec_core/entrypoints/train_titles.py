"""Train the title normaliser (seed 001) on O*NET's titles, score it on the four test sets next
to the trigram baseline, log it to MLflow and register it as the champion normaliser.

    spark-submit jobs/train_titles.py --env local
    spark-submit jobs/train_titles.py --env local --set titles.steps=6000 --set titles.layers=2

Its table (`reports/titles/TITLES.md`) is docs/TITLES.md's. It needs no dataset: the taxonomy
and the real ads come from `data.reference_dir`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job
from jobrec_core.titles.stage import train_title_normaliser


def build_parser() -> argparse.ArgumentParser:
    return add_common_arguments(argparse.ArgumentParser(description=__doc__))


def main(argv: Sequence[str] | None = None) -> int:
    _, config = start_job(build_parser(), argv)
    result = train_title_normaliser(get_spark(config), config)
    print(
        f"title normaliser v{result.version}: {result.taxonomy:,} taxonomy titles, "
        f"{result.members:,} training members, {result.seconds:.0f}s\n"
        f"{result.table}\n"
        f"  report {result.report}"
    )
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
