"""Stage 4: train a DRMM on the stored triples, track it in MLflow, register it.

    spark-submit jobs/train_drmm.py --env local
    spark-submit jobs/train_drmm.py --env local --set model.version=v2 \
        --set training.launcher=torchrun

Needs gold/pairs (jobs/build_pairs.py). Streams the triples with Petastorm into distributed
PyTorch (Spark's TorchDistributor by default; `training.launcher` picks torchrun or a single
process), checkpoints every epoch, and registers the model under `mlflow.model_name`. A
killed run resumes from its last checkpoint when rerun with the same settings; `--fresh`
starts over. Promote with jobs/promote_model.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job
from jobrec_core.training.stage import run_training


def build_parser() -> argparse.ArgumentParser:
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__))
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="ignore checkpoints of an interrupted run with the same settings, and train a "
        "two-phase model's phase 1 even where a finished training already did",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, config = start_job(build_parser(), argv)
    print(run_training(get_spark(config), config, fresh=args.fresh).format())
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
