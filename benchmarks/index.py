"""Indexing speed: the ES-Hadoop connector from Spark vs the Python client's `parallel_bulk`,
and the connector with each job's vector (`doc_vector`, dense retrieval) vs without.

    .venv/bin/python benchmarks/index.py --root /tmp/jobrec-bench --preset seed
    .venv/bin/python benchmarks/index.py --root .jobrec --preset demo --vectors --skip-client

Both paths index the same documents (the preset's jobs, cleaned as stage 2 indexes them) into
a fresh index with the same definition, on the same local node, one after the other in one
run. The connector path is the stage itself (`build_index`: build settings, write, restore,
count check, alias swap); the baseline streams the documents from a JSON-lines file through
`elasticsearch.helpers.parallel_bulk` with as many threads as Spark has write tasks. Preparing
the documents (tokenising, the JSON-lines file) is done once and not timed.

Target (issue 5): the seed preset's 466,101 jobs in under a minute (~8k docs/s) on 2 cores,
and the connector no slower than the client.

With `--vectors` (the preset's embeddings must exist under `--root`), a third path is the
stage with `indexing.vectors` on: the vectors are computed in Spark as the documents stream
to the node (`indexing.documents.with_job_vectors`), so they are inside its write time, and
the node builds the exact (`flat`) vector index. The other paths then index without vectors.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
from elasticsearch import helpers

from jobrec_core.config import JobrecConfig, load_config
from jobrec_core.indexing.documents import (
    index_definition,
    job_documents,
    new_index_name,
    serving_settings,
    with_job_vectors,
)
from jobrec_core.indexing.stage import build_index
from jobrec_core.platform import manifest
from jobrec_core.platform.logs import setup_logging
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.spark import get_spark
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.search.connection import (
    connector_options,
    make_client,
    resolve_connection,
    wait_for_primaries,
)
from jobrec_core.search.local_node import LocalElasticsearch
from jobrec_core.text.tokens import load_stopwords, tokenize_jobs
from jobrec_core.text.vectors import broadcast_idf

REPO = Path(__file__).resolve().parents[1]
ALIAS = "bench_jobs"


def cpu_seconds(process: psutil.Process, children: bool) -> float:
    """User + system CPU time of a process (and, with `children`, of its live children)."""
    tree = [process, *(process.children(recursive=True) if children else [])]
    total = 0.0
    for member in tree:
        try:
            times = member.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


class CpuMeter:
    """CPU seconds spent by the Elasticsearch node and by this process tree (Spark's JVM)."""

    def __init__(self, node_pid: int) -> None:
        self.node = psutil.Process(node_pid)
        self.here = psutil.Process()

    def read(self) -> tuple[float, float]:
        return cpu_seconds(self.node, False), cpu_seconds(self.here, True)


def prepare(spark, config: JobrecConfig, folder: Path) -> tuple[str, Path, int]:
    """(parquet of documents, JSON-lines copy, count), built once per preset."""
    parquet = folder / "documents.parquet"
    lines = folder / "documents.jsonl"
    if not parquet.exists():
        bronze = read_delta(spark, table_path(config, "bronze", "jobs"))
        tokenized = tokenize_jobs(bronze, load_stopwords(tuple(config.text.stopword_languages)))
        job_documents(tokenized, config.indexing.fields).write.mode("overwrite").parquet(
            str(parquet)
        )
    documents = spark.read.parquet(str(parquet))
    if not lines.exists():
        scratch = folder / "documents.json"
        documents.coalesce(1).write.mode("overwrite").json(str(scratch))
        next(scratch.glob("part-*.json")).rename(lines)
    return str(parquet), lines, documents.count()


@dataclass(frozen=True)
class Measurement:
    path: str
    round: int
    write_seconds: float
    documents: int
    stage_seconds: float | None
    es_cpu_seconds: float
    writer_cpu_seconds: float


def measure(
    meter: CpuMeter, run: Callable[[], tuple[float, int, float | None]]
) -> tuple[float, int, float | None, float, float]:
    es_before, own_before = meter.read()
    write_seconds, documents, stage_seconds = run()
    es_after, own_after = meter.read()
    return write_seconds, documents, stage_seconds, es_after - es_before, own_after - own_before


def connector_path(
    spark, config: JobrecConfig, client, options: dict[str, str], parquet: str
) -> tuple[float, int, float | None]:
    """The stage itself; (write seconds, documents indexed, whole stage seconds)."""
    started = time.perf_counter()
    documents = spark.read.parquet(parquet)
    if config.indexing.vectors:
        embeddings = manifest.current(config, "embeddings")
        documents = with_job_vectors(
            documents,
            read_delta(spark, embeddings["jobs"]),
            config,
            local_path(embeddings["vectors"]),
            broadcast_idf(spark, embeddings),
        )
    result = build_index(spark, config, client, options, documents, {})
    return result.write_seconds, result.indexed, time.perf_counter() - started


def client_actions(lines: Path, index: str) -> Iterator[dict]:
    with lines.open(encoding="utf-8") as handle:
        for line in handle:
            document = json.loads(line)
            yield {"_index": index, "_id": document["job_id"], "_source": document}


def python_client_path(
    config: JobrecConfig, client, lines: Path, threads: int
) -> tuple[float, int, float | None]:
    """parallel_bulk into a fresh index; (write seconds, documents counted, None)."""
    name = new_index_name("bench_py")
    client.indices.create(index=name, **index_definition(config, {"alias": "bench_py"}))
    wait_for_primaries(client, name)
    started = time.perf_counter()
    failed = 0
    for ok, _ in helpers.parallel_bulk(
        client,
        client_actions(lines, name),
        thread_count=threads,
        queue_size=threads,
        chunk_size=config.indexing.batch_entries,
        max_chunk_bytes=_bytes(config.indexing.batch_bytes),
        raise_on_error=False,
    ):
        failed += not ok
    seconds = time.perf_counter() - started
    client.indices.put_settings(index=name, settings=serving_settings(config))
    client.indices.refresh(index=name)
    count = int(client.count(index=name)["count"])
    client.indices.delete(index=name)
    if failed:
        print(f"  python client: {failed} documents failed", file=sys.stderr)
    return seconds, count, None


def _bytes(size: str) -> int:
    units = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "b": 1}
    for unit, factor in units.items():
        if size.lower().endswith(unit):
            return int(float(size[: -len(unit)]) * factor)
    return int(size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--root", default=str(REPO / ".jobrec"), help="storage root of the preset")
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--heap", default=None, help="heap of the benchmark's node (default: conf)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--skip-client", action="store_true", help="only the connector path")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, in alternating order")
    parser.add_argument(
        "--vectors", action="store_true", help="also the connector with each job's doc_vector"
    )
    args = parser.parse_args(argv)
    setup_logging()
    root = Path(args.root)
    overrides = [
        f"storage.root={root}",
        f"data.preset={args.preset}",
        f"elasticsearch.local.workdir={root / 'es-bench'}",
        f"elasticsearch.index_alias={ALIAS}",
        "elasticsearch.keep_versions=1",
        *([f"elasticsearch.local.heap={args.heap}"] if args.heap else []),
        *args.overrides,
        "indexing.vectors=false",
    ]
    config = load_config("local", overrides, REPO / "conf")
    with_vectors = load_config("local", [*overrides, "indexing.vectors=true"], REPO / "conf")
    node = LocalElasticsearch(config.elasticsearch.local)
    state = node.start()
    meter = CpuMeter(state.pid)
    try:
        spark = get_spark(config)
        folder = root / args.preset / "bench" / "index"
        folder.mkdir(parents=True, exist_ok=True)
        parquet, lines, total = prepare(spark, config, folder)
        connection = resolve_connection(config)
        client = make_client(connection)
        threads = config.indexing.write_partitions or spark.sparkContext.defaultParallelism

        paths: dict[str, Callable[[], tuple[float, int, float | None]]] = {
            "ES-Hadoop connector (stage 2)": lambda: connector_path(
                spark, config, client, connector_options(connection), parquet
            ),
        }
        if args.vectors:
            paths["connector + doc_vector"] = lambda: connector_path(
                spark, with_vectors, client, connector_options(connection), parquet
            )
        if not args.skip_client:
            paths[f"parallel_bulk, {threads} threads"] = lambda: python_client_path(
                config, client, lines, threads
            )
        rows = []
        for round_ in range(1, args.rounds + 1):
            # Alternate the order: the first path of a fresh node also pays its JIT warm-up.
            order = list(paths) if round_ % 2 else list(reversed(paths))
            for name in order:
                rows.append(Measurement(name, round_, *measure(meter, paths[name])))
    finally:
        node.stop(purge=True)

    print(
        f"\n{args.preset}: {total:,} jobs; batches of {config.indexing.batch_entries} docs / "
        f"{config.indexing.batch_bytes}, {threads} concurrent writers, heap "
        f"{config.elasticsearch.local.heap}"
    )
    print(
        f"{'path':<34}{'round':>6}{'write s':>9}{'docs':>10}{'docs/s':>9}{'whole stage s':>15}"
        f"{'CPU-s ES':>10}{'CPU-s writer':>14}"
    )
    for row in rows:
        stage = f"{row.stage_seconds:.1f}" if row.stage_seconds is not None else "-"
        print(
            f"{row.path:<34}{row.round:>6}{row.write_seconds:>9.1f}{row.documents:>10,}"
            f"{row.documents / row.write_seconds:>9,.0f}{stage:>15}"
            f"{row.es_cpu_seconds:>10.1f}{row.writer_cpu_seconds:>14.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
