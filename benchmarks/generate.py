"""Data generation speed: vectorised candidate blocks vs one candidate at a time, then the
whole preset through Spark with wall time and peak memory.

    .venv/bin/python benchmarks/generate.py --preset seed

Then `jobs/ingest.py` on the generated preset (raw -> bronze with validation), measured the
same way.

Baseline: the same candidate model written the obvious way, a Python loop per candidate
(and per job of the candidate) with `random.Random`, timed on the same number of candidates
in the same run. Target (issue 3): the `seed` preset (466,101 jobs, 7,388,266 candidates)
in under 15 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np
from _resources import Measured, run_measured  # benchmarks/ is on sys.path when run as a script

from jobrec_core.config import load_config
from jobrec_core.data.generate import (
    CandidatePools,
    GenerationPlan,
    assign_job_occupations,
    generate_candidate_block,
)
from jobrec_core.taxonomy.onet import load_catalogue
from jobrec_core.taxonomy.real_ads import real_ad_titles
from jobrec_core.taxonomy.titles import split_titles
from jobrec_core.text.tokens import load_stopwords

REPO = Path(__file__).resolve().parents[1]


def row_by_row(n: int, plan: GenerationPlan, pools: CandidatePools, seed: int) -> int:
    """The baseline: one candidate, then one job, at a time."""
    settings = plan.settings
    rng = random.Random(seed)
    occupations = list(range(len(pools.counts)))
    weights = pools.primary_weights.tolist()
    lengths_cfg = settings.sequence_length
    elements = 0
    for _ in range(n):
        primary = rng.choices(occupations, weights)[0]
        related = -1
        if rng.random() < settings.related_rate and pools.related_counts[primary] > 0:
            related = int(pools.related[primary, rng.randrange(pools.related_counts[primary])])
        draw = rng.random()
        if draw < lengths_cfg.p_one:
            length = 1
        elif draw < lengths_cfg.p_one + lengths_cfg.p_two:
            length = 2
        else:
            length = 3
            while rng.random() > 1 / (lengths_cfg.tail_mean - 2) and length < lengths_cfg.max:
                length += 1
        sequence, seen = [], set()
        for _ in range(length):
            noise = rng.random() < settings.noise_rate
            if noise:
                occupation = rng.choices(occupations, weights)[0]
            elif related >= 0 and rng.random() < settings.related_share:
                occupation = related
            else:
                occupation = primary
            start = int(pools.offsets[occupation])
            job = int(
                pools.jobs_by_occupation[start + rng.randrange(int(pools.counts[occupation]))]
            )
            if job in seen:
                continue
            seen.add(job)
            table = settings.scores.noise if noise else settings.scores.genuine
            sequence.append({"job_id": job, "score": rng.choices(range(1, 11), table)[0]})
        elements += len(sequence)
    return elements


def _print_measured(name: str, measured: Measured, target_s: float | None) -> None:
    target = f"   (target: under {target_s:.0f} s)" if target_s else ""
    print(f"  {name:<17} wall {measured.seconds:6.0f} s{target}")
    peak = measured.peak_rss_bytes / 2**30
    print(f"  {'':<17} peak {peak:6.2f} GiB (driver JVM and Python workers together)")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="seed")
    parser.add_argument(
        "--sample", type=int, default=100_000, help="candidates for the side-by-side"
    )
    parser.add_argument("--storage-root", default="/tmp/jobrec-bench")
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()

    config = load_config(
        "local",
        [f"data.preset={args.preset}", f"data.candidates_per_task={args.sample}"],
        REPO / "conf",
    )
    catalogue = load_catalogue(config.data.reference_dir)
    sizes = config.data.sizes()
    occupations = np.full(sizes.jobs, -1, dtype=np.int32)
    generated = sizes.jobs - sizes.real_ads
    occupations[:generated] = assign_job_occupations(generated, catalogue, 1.0, config.run.seed)
    # the product's split: the titles real ads match go to the normaliser's side
    real_titles = real_ad_titles(config.data.reference_dir)
    titles = split_titles(catalogue, real_titles, config.titles.split_seed).generator
    plan = GenerationPlan(
        catalogue, config.data, config.run.seed, load_stopwords(), occupations, titles
    )
    pools = CandidatePools.build(plan)

    started = time.perf_counter()
    batch = generate_candidate_block(0, plan, pools)
    vectorised = time.perf_counter() - started
    started = time.perf_counter()
    row_by_row(args.sample, plan, pools, config.run.seed)
    looped = time.perf_counter() - started
    print(f"candidates, one core, {args.sample:,} candidates ({batch.num_rows:,} generated):")
    for name, seconds in (
        ("vectorised block (jobrec)", vectorised),
        ("row by row (baseline)", looped),
    ):
        print(f"  {name:<29} {seconds:8.2f} s   {args.sample / seconds:12,.0f} candidates/s")
    print(f"  speed-up                      {looped / vectorised:8.1f}x")

    if args.skip_spark:
        return 0
    overrides = [
        "--set",
        f"data.preset={args.preset}",
        "--set",
        f"storage.root={args.storage_root}",
    ]
    measured = run_measured([sys.executable, str(REPO / "jobs" / "generate_data.py"), *overrides])
    if measured.returncode != 0:
        print(measured.output[-5000:])
        return 1
    print(f"\nwhole preset {args.preset!r} through Spark (local[2]):")
    print(f"  {sizes.jobs:,} jobs, {sizes.candidates:,} candidates")
    _print_measured("generate_data.py", measured, target_s=900)
    ingest = run_measured([sys.executable, str(REPO / "jobs" / "ingest.py"), *overrides])
    if ingest.returncode != 0:
        print(ingest.output[-5000:])
        return 1
    _print_measured("ingest.py", ingest, target_s=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
