"""Batch recommendations: each part of `jobs/recommend.py`'s pipeline timed on its own, next to
the same pipeline run whole as the job runs it.

    .venv/bin/python benchmarks/recommend.py --preset demo
    .venv/bin/python benchmarks/recommend.py --preset demo --candidates 2000

Needs a built store of the preset (`jobrec demo`): its cleaned candidates, the index behind
the alias and the registry's champion. The pipeline is `ranking.factory.rerank_pipeline`, the
champion's (`retrieval.retriever`'s pool, the jobs' text, the candidate-profile features, the
matching histograms, the DRMM scores, the top `evaluation.k`), on the first `--candidates`
cleaned candidates by id.

- baseline: BM25 alone, the product's floor: the paper's query, its top `evaluation.k`
  written, no features and no model (`Bm25Retriever >> Reranker(Bm25Scorer) % k`);
- baseline: step by step, the champion's pipeline with each step in its own Spark form, as
  the job ran it before the query steps were fused: the job tables joined in Spark, the
  matching histograms written out by one grouped pass and read back by the scoring's, the
  ranks from a window;
- baseline: the job tables joined in Spark, the pipeline's plan before the tables were
  shipped to the workers: the pool rows joined with the jobs' text and the interest graph,
  then the features, the scores and the cut-off in one grouped pass;
- baseline: the pool rows grouped in Spark, the plan before the pools went to the pass as
  searched: the tables shipped, the pools exploded into one row per job in Spark, then
  shuffled and collected back by query for the grouped pass;
- baseline: every column carried, the plan before the pass kept only the recommended
  columns (`ranking.pipeline.Columns`): the pass sends every working column (the jobs' text,
  the matching histograms) back to Spark, which selects the recommended ones after it, as
  the job did;
- subject: the champion's whole pipeline in one Spark plan (`Pipeline.spark_steps`: with the
  job tables shipped to the workers, `histograms.worker_tables_max_jobs`, the pools as
  searched handed to one pass per batch of queries, `ranking.pipeline.PoolsPerQuery`, which
  makes their rows, looks up the text and the graph, computes the features, the scores and
  the cut-off), then the write of the top k to a Delta table, as
  `serving.stage.run_recommend` runs it (the retrieval's results kept in memory instead of
  the stage's resumable Delta table);
- parts: the subject's steps one at a time (the retriever's pools, then the pass), each
  step's output persisted on disk and counted before the next starts (the previous one then
  dropped), so that each figure is that step's own; their sum is above the subject's wall
  time, since each output is written and scanned again;
- CPU: the CPU seconds each run spent, by kind of process (the Elasticsearch node, Spark's
  Python workers, its JVM, the driver; `platform.resources.CpuTime`), next to what the
  machine's cores could give in its wall time. Two rates follow from the pools part: the
  node's CPU seconds in it bound every plan that runs the same searches (cores x candidates
  / those seconds, with nothing else to do on the cores); all of the part's CPU seconds
  (the searches' client side, and the pools persisted and counted) give the rate these
  pools allow as built here, an estimate with the features and scores free;
- inside the fused pass: its steps' pandas forms one after the other on the driver, one
  thread, on the first `--inside` candidates' rows as the pass receives them (features and
  scores, which Spark runs together, apart).

Every run searches afresh: the searches kept in memory by one run are dropped before the
next (`spark.catalog.clearCache`). The top k of the subject and of both pipeline baselines
are compared: the same jobs in the same ranks, and the largest score difference.

Issue 21's figure, 15 candidates/s, was measured at an earlier commit (docs/BENCHMARKS.md,
"Recommendations for every demo candidate"); the script prints it as a recorded figure.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the driver's own timings: one thread,
os.environ.setdefault("OMP_NUM_THREADS", "1")  # as each of Spark's Python workers runs
from pathlib import Path

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.config import load_config
from jobrec_core.models.registry import load_champion
from jobrec_core.platform.resources import CpuTime
from jobrec_core.platform.spark import arrow_batch, get_spark
from jobrec_core.platform.tables import read_delta, table_path, write_delta
from jobrec_core.ranking.factory import (
    queries_of,
    ranking_inputs,
    rerank_pipeline,
    retriever_step,
)
from jobrec_core.ranking.pipeline import (
    Columns,
    PerQuery,
    Pipeline,
    PoolsPerQuery,
    Reranker,
    Step,
    _pool_rows,
    spark_table,
)
from jobrec_core.ranking.scorers import Bm25Scorer, drmm_scorer
from jobrec_core.search.local_node import SERVICE_NAME, LocalElasticsearch

REPO = Path(__file__).resolve().parents[1]
RECORDED_BASELINE = (
    15.0  # candidates/s, docs/BENCHMARKS.md "Recommendations for every demo candidate"
)


# Each timed run: the name it is written under, and its label.
RUNS = {
    "bm25": "baseline: BM25 alone, top k",
    "steps": "baseline: step by step",
    "joined": "baseline: the job tables joined in Spark",
    "grouped": "baseline: the pool rows grouped in Spark",
    "carried": "baseline: every column carried out of the pass",
    "whole": "subject: whole, as the job runs it",
}


def print_cpu(cpu: dict[str, dict[str, float]], walls: dict[str, float], count: int) -> None:
    """Each run's CPU seconds by kind of process, against the cores' seconds in its wall time,
    and the rate the pools' own CPU seconds allow on these cores."""
    cores = len(os.sched_getaffinity(0))
    print(f"  CPU seconds of each run, by process, on {cores} cores:")
    for name, label in [*RUNS.items(), ("pools", "the pools alone (part)")]:
        spent, available = sum(cpu[name].values()), cores * walls[name]
        kinds = ", ".join(f"{kind} {seconds:.1f}" for kind, seconds in cpu[name].items())
        print(f"    {label:<56}{spent:>6.1f} of {available:.1f} ({spent / available:.0%}): {kinds}")
    node = cpu["pools"].get(SERVICE_NAME, 0.0)
    pools = sum(cpu["pools"].values())
    if node > 0:
        print(
            f"  the node's searches for the pools: {node:.1f} CPU seconds; on {cores} cores no "
            f"plan that runs them writes more than {cores * count / node:.1f} candidates/s"
        )
    print(
        f"  the pools as built here: {pools:.1f} CPU seconds; on {cores} cores about "
        f"{cores * count / pools:.1f} candidates/s with the features and scores free"
    )


def materialised(frame: DataFrame) -> tuple[DataFrame, float]:
    """`frame` persisted on disk and counted, and the seconds that took."""
    started = time.perf_counter()
    frame = frame.persist(StorageLevel.DISK_ONLY)
    frame.count()
    return frame, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--candidates", type=int, default=None, help="default: every one")
    parser.add_argument("--inside", type=int, default=100, help="candidates timed in the pass")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_config("local", [f"data.preset={args.preset}", *args.overrides], REPO / "conf")
    node = LocalElasticsearch(config.elasticsearch.local).start()
    services = {SERVICE_NAME: node.pid}
    # Each run's CPU seconds by kind of process, and its wall time, by its name (`RUNS`)
    cpu: dict[str, dict[str, float]] = {}
    walls: dict[str, float] = {}
    spark = get_spark(config)
    champion = load_champion(config)
    candidates = read_delta(spark, table_path(config, "silver", "candidates"))
    if args.candidates is not None:
        candidates = candidates.orderBy("candidate_id").limit(args.candidates)
    inputs = ranking_inputs(spark, config)
    queries, _ = materialised(queries_of(config, inputs, candidates))
    count = queries.count()
    scorer = drmm_scorer(spark, f"DRMM {champion.version}", champion.model)
    pipeline = rerank_pipeline(config, inputs, scorer)
    joined_inputs = replace(
        inputs, tokens=spark_table(inputs.tokens), graph=spark_table(inputs.graph)
    )
    joined = rerank_pipeline(config, joined_inputs, scorer)
    print(
        f"recommendations on {args.preset!r}: {count:,} candidates, {inputs.index}, champion "
        f"DRMM {champion.version}, retriever {config.retrieval.retriever}, top "
        f"{config.evaluation.k}, {spark.sparkContext.defaultParallelism} cores, job tables "
        f"{'shipped to the workers' if inputs.tokens is not joined_inputs.tokens else 'joined'}"
    )
    with (
        tempfile.TemporaryDirectory() as folder,
        arrow_batch(spark, config.histograms.map_queries_per_batch),
    ):

        def timed_write(ranked: DataFrame, name: str) -> float:
            started = time.perf_counter()
            with CpuTime(services=services) as spent:
                write_delta(ranked, str(Path(folder) / name))
            seconds = time.perf_counter() - started
            cpu[name], walls[name] = spent.seconds, seconds
            spark.catalog.clearCache()  # the next run searches again
            queries.persist(StorageLevel.DISK_ONLY).count()
            return seconds

        bm25_alone = (
            retriever_step(config, inputs, retriever="bm25")
            >> Reranker(Bm25Scorer()) % config.evaluation.k
        )
        timed_write(bm25_alone.transform_spark(queries), "bm25")
        frame = queries
        for step in joined.steps:
            frame = step.transform_spark(frame)
        step_by_step = timed_write(frame, "steps")
        joined_whole = timed_write(joined.transform_spark(queries), "joined")
        grouped = Pipeline(tuple(step for s in pipeline.spark_steps for step in grouped_plan(s)))
        grouped_whole = timed_write(grouped.transform_spark(queries), "grouped")
        assert isinstance(pipeline.steps[-1], Columns)
        carried = Pipeline(pipeline.steps[:-1]).transform_spark(queries)
        carried_whole = timed_write(carried.select(*pipeline.steps[-1].names), "carried")
        whole = timed_write(pipeline.transform_spark(queries), "whole")

        parts: list[tuple[str, float]] = []
        frame = queries
        for step in pipeline.spark_steps:
            if isinstance(step, PoolsPerQuery):  # the pools, then the pass on them
                with CpuTime(services=services) as spent:
                    frame, seconds = materialised(step.retriever.pools_spark(frame))
                cpu["pools"], walls["pools"] = spent.seconds, seconds
                parts.append((f"{part_name(step.retriever)} (pools)", seconds))
                step = step.per_query
                first = queries.select("candidate_id").orderBy("candidate_id").limit(args.inside)
                sampled = _pool_rows(frame).join(first, "candidate_id")
                sample, fused = pd.DataFrame(sampled.toPandas()), step
                output = step.transform_pools_spark(frame)
            else:
                output = step.transform_spark(frame)
            previous = frame
            frame, seconds = materialised(output)
            parts.append((part_name(step), seconds))
            if previous is not queries:
                previous.unpersist()
        started = time.perf_counter()
        write_delta(frame, str(Path(folder) / "parts"))
        parts.append(("write (Delta)", time.perf_counter() - started))
        top = ["candidate_id", "rank", "job_id"]
        subject = read_delta(spark, str(Path(folder) / "whole"))
        rows = subject.count()
        parts_differing = subject.exceptAll(read_delta(spark, str(Path(folder) / "parts"))).count()
        compared = {
            label: differences(subject, read_delta(spark, str(Path(folder) / name)), top)
            for name, label in (
                ("steps", "step by step"),
                ("joined", "the joined tables"),
                ("grouped", "the grouped pool rows"),
                ("carried", "every column carried"),
            )
        }
    width = 60
    print(f"  {'part':<{width}}{'seconds':>10}{'candidates/s':>16}")
    for name, seconds in parts:
        print(f"  {name:<{width}}{seconds:>10.1f}{count / seconds:>16.1f}")
    print(f"  {'sum of the parts':<{width}}{sum(s for _, s in parts):>10.1f}")
    for name, label in RUNS.items():
        print(f"  {label:<{width}}{walls[name]:>10.1f}{count / walls[name]:>16.1f}")
    print_cpu(cpu, walls, count)
    inside = sample["candidate_id"].nunique()
    fused.transform(sample[sample["candidate_id"] == sample["candidate_id"].iloc[0]])  # loads
    print(f"  inside the fused pass, one thread, {inside} candidates, ms a candidate:")
    for step in fused.steps:
        started = time.perf_counter()
        sample = step.transform(sample)
        each = (time.perf_counter() - started) * 1e3 / inside
        print(f"    {type(step).__name__:<{width - 4}}{each:>10.2f}")
    recorded = count / whole / RECORDED_BASELINE
    print(
        f"  subject {step_by_step / whole:.2f}x step by step, {joined_whole / whole:.2f}x the "
        f"joined tables, {grouped_whole / whole:.2f}x the grouped pool rows, "
        f"{carried_whole / whole:.2f}x every column carried, "
        f"{recorded:.1f}x issue 21's recorded {RECORDED_BASELINE:.0f} "
        f"candidates/s (earlier commit); {rows:,} rows; parts "
        f"{'equal' if parts_differing == 0 else 'DIFFERENT'}"
    )
    for name, (lists_differing, largest) in compared.items():
        print(
            f"  top {config.evaluation.k} rows differing from {name}: {lists_differing}, "
            f"largest score difference {largest:.2g}"
        )
    return 0 if all(differing == 0 for differing, _ in compared.values()) else 1


def differences(subject: DataFrame, other: DataFrame, top: list[str]) -> tuple[int, float]:
    """Rows of `subject`'s top lists (`top` columns) not in `other`'s, and the largest score
    difference between their common rows."""
    differing = subject.select(*top).exceptAll(other.select(*top)).count()
    largest = (
        subject.alias("a")
        .join(other.alias("b"), top)
        .agg(F.max(F.abs(F.col("a.score") - F.col("b.score"))))
        .collect()[0][0]
    )
    return differing, float(largest)


def grouped_plan(step: Step) -> list[Step]:
    """`step` as the plan before `PoolsPerQuery`: the retriever's rows, then the grouped pass."""
    return [step.retriever, step.per_query] if isinstance(step, PoolsPerQuery) else [step]


def part_name(step: Step) -> str:
    if isinstance(step, PerQuery):
        return f"PerQuery({', '.join(type(s).__name__ for s in step.steps)})"
    return type(step).__name__


if __name__ == "__main__":
    raise SystemExit(main())
