"""Generate the raw data of a preset: jobs, candidates and the candidates' ground truth.

    spark-submit jobs/generate_data.py --env local --set data.preset=tiny

Deterministic: the same seed and preset give the same files. Writes replace the preset's raw
folder, so a rerun never duplicates.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from jobrec_core.data.stage import generate_dataset
from jobrec_core.platform.spark import get_spark
from jobrec_core.runtime import add_common_arguments, entry_point, start_job


def build_parser() -> argparse.ArgumentParser:
    return add_common_arguments(argparse.ArgumentParser(description=__doc__))


def main(argv: Sequence[str] | None = None) -> int:
    _, config = start_job(build_parser(), argv)
    started = time.perf_counter()
    counts = generate_dataset(get_spark(config), config)
    summary = ", ".join(f"{key} {value:,}" for key, value in counts.items())
    elapsed = time.perf_counter() - started
    print(f"generated preset {config.data.preset!r}: {summary} in {elapsed:.0f}s")
    return 0


run = entry_point(main)

if __name__ == "__main__":
    run()
