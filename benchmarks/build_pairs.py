"""The whole of stage 3 on a preset against the local node: wall time, rates, peak memory.

    .venv/bin/python benchmarks/build_pairs.py --preset demo

Runs `jobs/build_pairs.py` as data engineers do (its own process, local[2]), with the
Elasticsearch node started here, then reads the step timings from its log and the table
sizes from the manifest. Rates: candidates/s over the whole job, queries/s over the
retrieval step (two queries per candidate), histograms/s over the feature steps (one
histogram matrix per query-document pair: the triples, MAP sets, held-out sets and pool
pairs). Peak memory is sampled every 0.5 s for the whole process tree and for Spark's Python
workers alone (where the features are computed).
The baseline it names is the per-pair histogram rate of `benchmarks/histograms.py`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from _resources import run_measured  # benchmarks/ is on sys.path when run as a script

from jobrec_core.config import load_config
from jobrec_core.platform.manifest import current
from jobrec_core.search.local_node import LocalElasticsearch

REPO = Path(__file__).resolve().parents[1]
STEP = re.compile(r"build_pairs: (?P<name>.+?) done in (?P<seconds>[\d.]+)s")
GIB = 1024**3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    overrides = [f"data.preset={args.preset}", *args.overrides]
    config = load_config("local", overrides, REPO / "conf")
    node = LocalElasticsearch(config.elasticsearch.local)
    node.start()
    command = [sys.executable, str(REPO / "jobs" / "build_pairs.py")]
    for override in overrides:
        command += ["--set", override]
    measured = run_measured(command)
    if measured.returncode != 0:
        print(measured.output[-5000:])
        return measured.returncode
    steps = {m["name"]: float(m["seconds"]) for m in STEP.finditer(measured.output)}
    entry = current(config, "pairs")
    funnel = measured.output[measured.output.index("Pairs funnel") :]
    candidates = int(re.search(r"cleaned candidates\s+([\d,]+)", funnel)[1].replace(",", ""))  # type: ignore[index]
    searched = sum(
        int(m[1].replace(",", ""))
        for m in re.finditer(
            r"(?:searches failed \(quarantined\)|positive not in top 100 \(dropped\)|"
            r"no negative \(dropped\)|kept)\s+([\d,]+)",
            funnel,
        )
    )  # candidates searched (pairs.candidates_limit may sample them)
    triples = sum(entry["splits"].get(s, 0) for s in ("train", "dev", "test"))
    # rows per split of the MAP sets, the held-out sets (one document each) and the pool pairs
    # (two documents each)
    pool_rows = dict(entry["pool_rows"])
    pool_pairs = pool_rows.pop("pool_train", 0)
    retrieval = next(v for k, v in steps.items() if k.startswith("retrieval"))
    features = sum(v for k, v in steps.items() if "features" in k or "pools" in k)
    print(funnel.strip())
    histograms = 2 * (triples + pool_pairs) + sum(pool_rows.values())
    rows = [
        ("wall", f"{measured.seconds:.1f} s", f"{candidates / measured.seconds:,.0f} candidates/s"),
        *[(name, f"{seconds:.1f} s", "") for name, seconds in steps.items()],
        ("queries", f"{2 * searched:,}", f"{2 * searched / retrieval:,.0f} queries/s (retrieval)"),
        ("histograms", f"{histograms:,}", f"{histograms / features:,.0f} pairs/s (features)"),
        ("peak memory, all", f"{measured.peak_rss_bytes / GIB:.2f} GiB", "driver JVM and workers"),
        (
            "peak memory, workers",
            f"{measured.peak_workers_rss_bytes / GIB:.2f} GiB",
            "executor side",
        ),
    ]
    print(f"\nbuild_pairs on {args.preset!r}, local[2], one node on the same 2 cores")
    for name, value, rate in rows:
        print(f"  {name:<46}{value:>12}   {rate}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
