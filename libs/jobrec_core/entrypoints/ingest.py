"""Raw files -> bronze Delta tables (jobs, candidates) and the quarantine table.

    spark-submit jobs/ingest.py --env local --set data.preset=tiny

Prints the count of every quarantine reason; exits non-zero with a clear message when a
source has more bad records than `quality.error_budget_fraction`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobrec_core.data.stage import ingest_raw
from jobrec_core.platform.quarantine import DataQualityError
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job


def build_parser() -> argparse.ArgumentParser:
    return add_common_arguments(argparse.ArgumentParser(description=__doc__))


def main(argv: Sequence[str] | None = None) -> int:
    _, config = start_job(build_parser(), argv)
    try:
        reports = ingest_raw(get_spark(config), config)
    except DataQualityError as error:
        print(f"ingest failed: {error}", file=sys.stderr)
        return 1
    for report in reports:
        print(report.format())
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
