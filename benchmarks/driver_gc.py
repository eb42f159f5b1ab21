"""The local driver JVM's garbage collector: the one `conf/local.yaml` names (subject) against
G1, the JVM's default (baseline), on one real step of the pipeline.

    .venv/bin/jobrec demo                                   # once: the store it runs on
    .venv/bin/python benchmarks/driver_gc.py [--step build_pairs] [--rounds 2]

Each run is a fresh process (a new driver JVM) that runs the step as `jobrec run` does, on the
store the demo left; the two collectors take turns, the baseline first. build_pairs' retrieval
is checkpointed in that store, so the step searches nothing and the node mostly idles. Printed:
each run's wall time and the CPU seconds of its process tree (the node's apart), then the
medians. The step rewrites its tables with the same rows each time (the collector changes no
value), so the store stays as the demo left it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from jobrec_core.config import load_config
from jobrec_core.platform.spark import DRIVER_JAVA_OPTIONS as OPTIONS
from jobrec_core.search.local_node import SERVICE_NAME, LocalElasticsearch

REPO = Path(__file__).resolve().parents[1]
BASELINE = "-XX:+UseG1GC"
RESULT = "driver_gc result: "


def run_step(step: str, options: str) -> None:
    """In the child: the step in a session whose driver JVM runs with `options`; prints its
    record as one JSON line."""
    from jobrec_core.pipeline import pipeline_steps, run_steps
    from jobrec_core.platform.spark import get_spark

    config = load_config("local", [], REPO / "conf")
    config.spark.conf[OPTIONS] = options
    node = LocalElasticsearch(config.elasticsearch.local).status()
    spark = get_spark(config)
    built = pipeline_steps(spark, config, 3, "benchmarks/driver_gc.py")
    steps = [s for s in built if s.name == step]
    if not steps:
        raise SystemExit(f"no step {step!r}")
    services = {SERVICE_NAME: node.pid} if node is not None else {}
    (record,) = run_steps(steps, None, None, emit=lambda _: None, services=services)
    cpu = sum(seconds for kind, seconds in record.cpu_seconds.items() if kind != SERVICE_NAME)
    print(RESULT + json.dumps({"seconds": record.seconds, "cpu": cpu}), flush=True)


def measured(step: str, options: str) -> dict[str, float]:
    child = [sys.executable, __file__, "--step", step, f"--child-options={options}"]
    finished = subprocess.run(child, capture_output=True, text=True, check=False)
    lines = [line for line in finished.stdout.splitlines() if line.startswith(RESULT)]
    if finished.returncode != 0 or not lines:
        print(finished.stderr[-5000:], file=sys.stderr)
        raise SystemExit(f"the {options!r} run failed ({finished.returncode})")
    return json.loads(lines[-1][len(RESULT) :])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--step", default="build_pairs", help="the pipeline step to run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each collector")
    parser.add_argument("--child-options", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_options is not None:
        run_step(args.step, args.child_options)
        return 0
    config = load_config("local", [], REPO / "conf")
    subject = config.spark.conf.get(OPTIONS, "")
    if not subject or subject == BASELINE:
        raise SystemExit(f"conf/local.yaml sets no {OPTIONS} other than {BASELINE}")
    node = LocalElasticsearch(config.elasticsearch.local)
    started_here = node.status() is None
    node.start()
    runs: dict[str, list[dict[str, float]]] = {BASELINE: [], subject: []}
    try:
        for round_number in range(1, args.rounds + 1):
            for options, results in runs.items():
                results.append(measured(args.step, options))
                last = results[-1]
                print(
                    f"round {round_number}, {options}: {last['seconds']:.1f} s, "
                    f"{last['cpu']:.0f} CPU s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if started_here:
            node.stop()
    print(f"\n{args.step} on the demo's store, local[2], a fresh driver JVM per run")
    print("| driver JVM | runs: wall (CPU s) | median wall | median CPU s |")
    print("|---|---|---|---|")
    for label, options in (("baseline: G1", BASELINE), ("subject: conf/", subject)):
        results = runs[options]
        each = ", ".join(f"{r['seconds']:.1f} s ({r['cpu']:.0f})" for r in results)
        wall = statistics.median(r["seconds"] for r in results)
        cpu = statistics.median(r["cpu"] for r in results)
        print(f"| {label} `{options}` | {each} | {wall:.1f} s | {cpu:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
