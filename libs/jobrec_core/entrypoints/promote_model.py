"""Promote a registered DRMM: challenger vs champion on the test split.

    spark-submit jobs/promote_model.py --env local
    spark-submit jobs/promote_model.py --env local --version 3

Sets the `challenger` alias on the version (default: the one the last jobs/train_drmm.py
registered), scores it and the current `champion` on the current held-out test sets, and moves
`champion` only if the challenger's paired gain in the held-out log-rank score is significant
at `promotion.family_alpha` (this job gates one challenger): sign-flip p below it and the
bootstrap interval at that level above zero (and its mean held-out log-rank score is at least
BM25's order's, `promotion.min_gain_over_retriever`);
otherwise it says "not promoted: no significant difference" with the figures. The paper's
accuracy and MAP are printed too. The decision and its numbers are tags of the model version.
Exit code 0 either way; 1 with `--require-promotion` when not promoted.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from jobrec_core.platform import manifest
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job
from jobrec_core.training.promotion import promote
from jobrec_core.training.stage import gate_files


def build_parser() -> argparse.ArgumentParser:
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__))
    parser.add_argument(
        "--version", default=None, help="registry version (default: the last trained)"
    )
    parser.add_argument(
        "--require-promotion", action="store_true", help="exit 1 when the version is not promoted"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, config = start_job(build_parser(), argv)
    version = args.version or str(manifest.current(config, "model")["version"])
    decision = promote(config, version, gate_files(get_spark(config), config))
    print(decision.format())
    return 1 if args.require_promotion and not decision.promoted else 0


run = entry_point(main)

if __name__ == "__main__":
    run()
