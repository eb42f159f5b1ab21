"""Recommend: every cleaned candidate's top 10 jobs, re-ranked by the champion DRMM.

    spark-submit jobs/recommend.py --env local
    spark-submit jobs/recommend.py --env local --candidates 17,42

For each candidate: the query of all their jobs, BM25's top 100 from the jobs alias (minus
their own jobs), DRMM scores from the registry's `champion` (loaded by alias, broadcast once
to the executors; while no model has passed the promotion gate, the pool's own order), the
best `evaluation.k` written to gold/recommendations. With
--candidates only those candidates' rows are replaced. Show one candidate with
`jobrec recommend --candidate ID`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job
from jobrec_core.serving.stage import run_recommend


def candidate_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of ids: {text!r}") from error


def build_parser() -> argparse.ArgumentParser:
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__))
    parser.add_argument(
        "--candidates",
        type=candidate_list,
        default=None,
        help="comma-separated candidate ids (default: every cleaned candidate)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, config = start_job(build_parser(), argv)
    print(run_recommend(get_spark(config), config, args.candidates).format())
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
