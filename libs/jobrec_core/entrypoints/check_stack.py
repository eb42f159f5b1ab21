"""Check every component of the stack in this environment (a post-deploy smoke test).

    spark-submit jobs/check_stack.py [--env local] [--only delta,elasticsearch]

Exits non-zero when a component fails; the report says which and why.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobrec_core.devtools.stack_check import CHECKS, StackContext, format_report, run_checks
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job


def build_parser() -> argparse.ArgumentParser:
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__))
    parser.add_argument(
        "--only",
        type=lambda value: value.split(","),
        default=None,
        help=f"comma-separated subset of: {', '.join(CHECKS)}",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, config = start_job(build_parser(), argv)
    unknown = set(args.only or []) - set(CHECKS)
    if unknown:
        print(f"unknown checks: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    results = run_checks(StackContext(config, get_spark(config)), args.only)
    print(format_report(results))
    return 0 if all(r.ok for r in results) else 1


run = entry_point(main)

if __name__ == "__main__":
    run()
