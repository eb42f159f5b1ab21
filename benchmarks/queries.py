"""What the coherent-jobs query costs: candidates per second of the query with
`queries.min_coherence` against the paper's query of every job (the baseline), one thread.

    .venv/bin/python benchmarks/queries.py --preset demo --candidates 5000

Needs a built store of the preset (`jobrec demo`): the cleaned candidates and the embeddings'
jobs and IDF table. The candidates' jobs are collected to the driver first (not timed); then
each query is built from every job of the candidate, as recommendations ask it, in the same
process: `features.queries.build_query` for the paper's query, `candidate_query` (the
coherence, `coherent_jobs`, then `build_query`) for jobrec's. Best of three passes each.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

from pyspark.sql import functions as F

from jobrec_core.config import load_config
from jobrec_core.features.queries import build_query, candidate_query, query_inputs
from jobrec_core.platform import manifest
from jobrec_core.platform.spark import arrow_to_pandas, get_spark
from jobrec_core.platform.tables import read_delta, table_path

REPO = Path(__file__).resolve().parents[1]


def best_of(passes: int, work: Callable[[], object]) -> float:
    """The shortest wall time of `passes` runs of `work`, in seconds."""
    times = []
    for _ in range(passes):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--candidates", type=int, default=5000)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_config("local", [f"data.preset={args.preset}", *args.overrides], REPO / "conf")
    settings = config.queries
    spark = get_spark(config)
    embeddings = manifest.current(config, "embeddings")
    jobs = read_delta(spark, embeddings["jobs"])
    candidates = (
        read_delta(spark, table_path(config, "silver", "candidates"))
        .orderBy(F.xxhash64(F.lit(7), F.lit("queries benchmark"), "candidate_id"))
        .limit(args.candidates)
        .select("candidate_id", "sequence", F.lit(None).cast("int").alias("positive_job_id"))
    )
    frame = arrow_to_pandas(query_inputs(candidates, jobs, settings))
    fields = settings.text_fields
    every = [[{f: list(job[f]) for f in fields} for job in row] for row in frame["jobs"]]
    table = arrow_to_pandas(read_delta(spark, embeddings["idf"]).select("term", "idf"))
    idf = dict(zip(table["term"], table["idf"].astype(float), strict=True))
    paper = best_of(
        3,
        lambda: [
            build_query(jobs, settings.fields, idf, settings.max_terms, settings.drop_first_fields)
            for jobs in every
        ],
    )
    ours = best_of(3, lambda: [candidate_query(jobs, idf, settings) for jobs in every])
    count, own = len(every), sum(len(jobs) for jobs in every)
    print(f"{count:,} candidates, {own:,} own jobs, one thread, best of 3")
    print("  query                                          candidates/s   us/candidate")
    for name, seconds in (
        ("the paper's (every job; baseline)", paper),
        (f"coherent jobs (min_coherence {settings.min_coherence})", ours),
    ):
        print(f"  {name:<46} {count / seconds:12,.0f}   {1e6 * seconds / count:12.1f}")


if __name__ == "__main__":
    main()
