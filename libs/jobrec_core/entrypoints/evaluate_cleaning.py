"""How well the WMD filter removes the noise jobs the generator injected.

    spark-submit jobs/evaluate_cleaning.py --env local [--out docs/img]

Computes every candidate's exact mean similarities (no pruning), then the precision and recall
of the removed jobs against the ground truth's noise jobs at each threshold of a sweep (the
paper's 0.45 included). Prints the table and saves the curve as a PNG.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from jobrec_core.cleaning.stage import evaluate_noise_filter, plot_noise_filter_curve
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.spark import get_spark
from jobrec_core.platform.tables import table_path
from jobrec_core.runtime import add_common_arguments, entry_point, start_job

SWEEP = [round(0.40 + 0.01 * i, 2) for i in range(31)]


def build_parser() -> argparse.ArgumentParser:
    parser = add_common_arguments(argparse.ArgumentParser(description=__doc__))
    parser.add_argument("--out", default=None, help="folder for the PNG (default: reports/)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, config = start_job(build_parser(), argv)
    curve = evaluate_noise_filter(get_spark(config), config, SWEEP)
    print(
        f"WMD filter vs injected noise: {curve[0]['jobs']:,} jobs of the candidates that pass "
        f"the rules, {curve[0]['noise_jobs']:,} of them noise"
    )
    print("threshold  removed  precision  recall")
    for point in curve:
        print(
            f"{point['threshold']:9.2f}  {point['removed']:7,.0f}  "
            f"{point['precision']:9.3f}  {point['recall']:6.3f}"
        )
    folder = Path(args.out or local_path(table_path(config, "reports", "cleaning")))
    threshold = config.cleaning.wmd_similarity_threshold
    print(f"curve: {plot_noise_filter_curve(curve, threshold, folder, config.data.preset)}")
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
