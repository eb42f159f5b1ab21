"""Which `queries.min_coherence` the held-out interest prefers, on the current run's data.

    spark-submit jobs/choose_query_floor.py --env local [--floors 0,0.02,0.05] [--candidates N]

Needs build_pairs' outputs and the jobs index (after `scripts/demo.sh` or `jobrec run`). For a
seeded sample of cleaned candidates outside every split and evaluation sample, holds out each
one's highest-scored job, builds the query of the others at each floor and searches BM25;
prints each floor's held-out log-rank score (and MRR), paired against the paper's query
(floor 0), and the floor it would choose (`evaluation.query_floor`). Reads no ground truth
and trains nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.evaluation.query_floor import choose_query_floor, floor_table
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job

FLOORS = "0,0.02,0.03,0.05,0.08,0.12"


def floors_of(text: str) -> list[float]:
    """`--floors`: comma-separated, 0 first."""
    try:
        floors = [float(part) for part in text.split(",")]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"--floors: numbers, comma-separated ({error})") from None
    if floors[0] != 0 or any(not 0 <= f < 1 for f in floors) or len(set(floors)) < len(floors):
        raise argparse.ArgumentTypeError("--floors: 0 first, then distinct floors in [0, 1)")
    return floors


def build_parser() -> argparse.ArgumentParser:
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__))
    parser.add_argument("--floors", type=floors_of, default=floors_of(FLOORS), help=FLOORS)
    parser.add_argument("--candidates", type=int, default=1500, help="sample size (1500)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, config = start_job(build_parser(), argv)
    rows = choose_query_floor(get_spark(config), config, args.floors, args.candidates)
    print("\n".join(floor_table(rows, args.candidates)))
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
