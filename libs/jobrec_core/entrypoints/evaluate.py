"""Evaluate: BM25, the WMD baseline and every DRMM configuration, by the paper's protocol, a
learning curve, against the generator's ground truth, and, for dated data, on the days after
the run's as-of date (docs/RESULTS.md, docs/EVALUATION.md).

    spark-submit jobs/evaluate.py --env local
    spark-submit jobs/evaluate.py --env local --report-dir docs
    spark-submit jobs/evaluate.py --env local --set evaluation.learning_curve=false

Needs gold/pairs (jobs/build_pairs.py) and the models of jobs/train_drmm.py (one per
`--set model.version=vN`; a configuration not trained on the current pairs is reported and
skipped). Prints the tables next to the paper's figures, logs them to an MLflow run
`evaluate`, and writes RESULTS.md with its plots to --report-dir (default: the dataset's
reports/evaluation folder).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from functools import partial

from jobrec_core.evaluation.stage import run_evaluation
from jobrec_core.indexing.stage import index_builder
from jobrec_core.platform.spark import get_spark
from jobrec_core.results import publish
from jobrec_core.runtime import add_common_arguments, entry_point, start_job
from jobrec_core.training.stage import train_on_files


def build_parser() -> argparse.ArgumentParser:
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__))
    parser.add_argument(
        "--report-dir",
        default=None,
        help="folder for RESULTS.md and its plots (default: <dataset>/reports/evaluation)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, config = start_job(build_parser(), argv)
    spark = get_spark(config)
    report = run_evaluation(
        spark, config, partial(train_on_files, spark, config), index_builder(spark, config)
    )
    print(report.format())
    arguments = list(argv if argv is not None else sys.argv[1:])
    results, run_id = publish(
        config, report, args.report_dir, "spark-submit jobs/evaluate.py " + shlex.join(arguments)
    )
    print(f"\nreport: {results}; MLflow run {run_id}")
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
