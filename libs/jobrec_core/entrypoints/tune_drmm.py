"""Choose DRMM hyper-parameters on the dev split by the held-out-interest metric.

    spark-submit jobs/tune_drmm.py --env local \
        --grid training.learning_rate=0.002,0.005,0.01 --grid training.batch_size=32,64

Every combination of the `--grid` values is trained from scratch on the training triples
(nothing is registered) and scored by the dev held-out log-rank score of the epoch it keeps,
the measure early stopping uses. The table goes to stdout, best first, with the `--set` line of
the chosen settings to put in the environment's overlay; the trials go to an MLflow run
`tune_drmm`. `--set` applies to every trial. Needs gold/pairs (jobs/build_pairs.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobrec_core.config import load_config
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job
from jobrec_core.training.stage import run_tuning
from jobrec_core.training.tuning import expand_grid, format_trials


def build_parser() -> argparse.ArgumentParser:
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__))
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="values to try for one setting; repeat for a grid over several",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, config = start_job(build_parser(), argv)
    try:
        combinations = expand_grid(args.grid)
    except ValueError as error:
        print(f"tune_drmm: {error}", file=sys.stderr)
        return 2
    trials = [
        (combination, load_config(args.env, [*args.overrides, *combination], args.conf_dir))
        for combination in combinations
    ]
    print(format_trials(run_tuning(get_spark(config), trials)))
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
