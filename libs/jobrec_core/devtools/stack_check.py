"""Proof that every component of the stack works here, end to end, on real services.

`jobrec demo` runs these checks before the pipeline and prints the report; the integration
tests call the same functions. Each check does a small amount of real work with a component
(Delta, Elasticsearch through the ES-Hadoop connector, the MLflow registry, Petastorm, DDP
through TorchDistributor) and returns a one-line account of what it verified.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import SparkSession

from jobrec_core.config import JobrecConfig
from jobrec_core.search.bm25 import multi_match_query
from jobrec_core.search.connection import (
    ES_FORMAT,
    connector_options,
    make_client,
    resolve_connection,
    wait_for_primaries,
)

log = logging.getLogger(__name__)

CHECK_INDEX = "jobrec-stack-check"


class StackCheckError(AssertionError):
    """A component ran but did not behave as expected."""


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    seconds: float


@dataclass(frozen=True)
class StackContext:
    config: JobrecConfig
    spark: SparkSession

    def scratch(self, name: str) -> str:
        return self.config.path(f"stack_check/{name}")


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise StackCheckError(message)


def check_delta(ctx: StackContext) -> str:
    """Write, MERGE, read back and time-travel a Delta table."""
    from delta.tables import DeltaTable

    path = ctx.scratch("delta")
    spark = ctx.spark
    rows = [(1, "data engineer", 5), (2, "nurse", 3), (3, "welder", 4)]
    spark.createDataFrame(rows, "job_id INT, title STRING, score INT").write.format("delta").mode(
        "overwrite"
    ).option("overwriteSchema", "true").save(path)
    updates = spark.createDataFrame(
        [(2, "registered nurse", 6), (4, "baker", 2)], "job_id INT, title STRING, score INT"
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(updates.alias("u"), "t.job_id = u.job_id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    latest = {r.job_id: r.title for r in spark.read.format("delta").load(path).collect()}
    history = DeltaTable.forPath(spark, path).history().select("version").collect()
    version = max(r.version for r in history)
    before = spark.read.format("delta").option("versionAsOf", version - 1).load(path)
    _expect(latest.get(2) == "registered nurse" and len(latest) == 4, f"MERGE gave {latest}")
    _expect(before.count() == 3, "time travel did not return the pre-MERGE table")
    return f"4 rows after MERGE (version {version}); version {version - 1} reads back 3 rows"


def check_elasticsearch(ctx: StackContext) -> str:
    """Write a DataFrame through the ES-Hadoop connector, then BM25-search it with the client."""
    connection = resolve_connection(ctx.config)
    client = make_client(connection)
    similarity = ctx.config.elasticsearch.similarity
    client.options(ignore_status=404).indices.delete(index=CHECK_INDEX)
    text = {"type": "text", "similarity": "jobrec_bm25"}
    client.indices.create(
        index=CHECK_INDEX,
        settings={
            "number_of_shards": 1,
            "number_of_replicas": 0,
            "similarity": {"jobrec_bm25": {"type": "BM25", "k1": similarity.k1, "b": similarity.b}},
        },
        mappings={
            "properties": {
                "job_id": {"type": "integer"},
                "title": text,
                "function": text,
                "keywords": text,
            }
        },
    )
    wait_for_primaries(client, CHECK_INDEX)
    jobs = ctx.spark.createDataFrame(
        [
            (1, "python developer", "engineering", ["python", "flask", "mongodb"]),
            (2, "registered nurse", "healthcare", ["patient", "care"]),
            (3, "data engineer", "engineering", ["spark", "python", "sql"]),
        ],
        "job_id INT, title STRING, function STRING, keywords ARRAY<STRING>",
    )
    (
        jobs.write.format(ES_FORMAT)
        .options(**connector_options(connection))
        .option("es.resource", CHECK_INDEX)
        .option("es.mapping.id", "job_id")
        .mode("append")
        .save()
    )
    client.indices.refresh(index=CHECK_INDEX)
    response = client.search(
        index=CHECK_INDEX,
        query=multi_match_query("python developer flask", ctx.config.retrieval),
        size=10,
    )
    hits = [(int(h["_id"]), float(h["_score"])) for h in response["hits"]["hits"]]
    _expect(client.count(index=CHECK_INDEX)["count"] == 3, "connector did not write 3 documents")
    _expect(bool(hits) and hits[0][0] == 1, f"unexpected ranking {hits}")
    client.indices.delete(index=CHECK_INDEX)
    version = client.info()["version"]["number"]
    ranking = ", ".join(f"{doc}:{score:.2f}" for doc, score in hits)
    return f"Elasticsearch {version}: 3 docs via connector; BM25 multi_match -> {ranking}"


def check_mlflow(ctx: StackContext) -> str:
    """Log and register a torch model, alias it, load it back by alias and predict."""
    import mlflow
    import torch

    from jobrec_core.models.registry import scoring_requirements
    from jobrec_core.platform.tracking import configure_mlflow, registry_client

    configure_mlflow(ctx.config)
    name = f"{ctx.config.mlflow.model_name}_stack_check"
    torch.manual_seed(ctx.config.run.seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 1))
    example = np.ones((2, 4), dtype=np.float32)
    with mlflow.start_run(run_name="stack-check") as run:
        mlflow.log_param("purpose", "stack check")
        mlflow.log_metric("loss", 0.5)
        # Pinned requirements: MLflow would otherwise infer them by importing the model in a
        # subprocess, seconds of the demo's start.
        info = mlflow.pytorch.log_model(
            model,
            name="model",
            registered_model_name=name,
            input_example=example,
            pip_requirements=scoring_requirements(),
        )
    client = registry_client(ctx.config)
    version = info.registered_model_version
    client.set_registered_model_alias(name, ctx.config.mlflow.champion_alias, str(version))
    loaded = mlflow.pyfunc.load_model(f"models:/{name}@{ctx.config.mlflow.champion_alias}")
    prediction = np.asarray(loaded.predict(example))
    expected = model(torch.from_numpy(example)).detach().numpy()
    _expect(np.allclose(prediction, expected, atol=1e-6), "loaded model predicts differently")
    return (
        f"run {run.info.run_id[:8]}; registered {name} v{version}; "
        f"@{ctx.config.mlflow.champion_alias} loaded and predicts identically"
    )


def check_petastorm(ctx: StackContext) -> str:
    """Stream a Spark-written Parquet dataset through Petastorm into a torch DataLoader."""
    from petastorm import make_batch_reader
    from petastorm.pytorch import DataLoader

    rows, width = 1000, 31
    path = ctx.scratch("petastorm")
    rng = np.random.default_rng(ctx.config.run.seed)
    data = [(i, rng.random(width).astype(float).tolist()) for i in range(rows)]
    ctx.spark.createDataFrame(data, "id INT, histogram ARRAY<DOUBLE>").repartition(4).write.mode(
        "overwrite"
    ).parquet(path)
    url = Path(path).resolve().as_uri() if "://" not in path else path
    seen, shapes = 0, set()
    # The synchronous pool, as training uses: petastorm 0.13.1's thread pool can end a read
    # early on a busy machine (docs/TRAINING.md).
    with make_batch_reader(
        url, num_epochs=1, reader_pool_type="dummy", seed=ctx.config.run.seed
    ) as reader:
        for batch in DataLoader(reader, batch_size=128):
            seen += int(batch["id"].shape[0])
            shapes.add(tuple(batch["histogram"].shape[1:]))
    _expect(seen == rows, f"streamed {seen} rows, expected {rows}")
    _expect(shapes == {(width,)}, f"unexpected histogram shapes {shapes}")
    return f"{rows} rows streamed in batches of 128; histogram tensors of width {width}"


def ddp_step(seed: int) -> dict[str, Any]:
    """One DDP training step; runs in each process that TorchDistributor starts.

    Checks what DDP promises: after the step every rank holds identical parameters, although
    each saw different data.
    """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(seed)
        model = DistributedDataParallel(torch.nn.Linear(8, 1))
        optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
        generator = torch.Generator().manual_seed(seed + rank)
        x = torch.randn(16, 8, generator=generator)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimiser.step()
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        gathered = [torch.zeros_like(flat) for _ in range(world)]
        dist.all_gather(gathered, flat)
        identical = all(torch.equal(gathered[0], g) for g in gathered)
        # Every rank done before any tears the group down: on a loaded machine rank 0 once
        # destroyed it while gloo still worked for rank 1, and aborted ("terminate called
        # without an active exception") after its result was out.
        dist.barrier()
        return {"rank": rank, "world_size": world, "identical": identical}
    finally:
        dist.destroy_process_group()


def check_ddp(ctx: StackContext) -> str:
    """A 2-process CPU (gloo) DDP step through Spark's TorchDistributor."""
    from pyspark.ml.torch.distributor import TorchDistributor

    processes = 2
    # The distributor's child processes import this module with the driver's interpreter.
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    result = TorchDistributor(num_processes=processes, local_mode=True, use_gpu=False).run(
        ddp_step, ctx.config.run.seed
    )
    if result is None:
        raise StackCheckError("TorchDistributor returned no result from rank 0")
    _expect(result["world_size"] == processes, f"world size {result['world_size']}")
    _expect(bool(result["identical"]), "ranks disagree on parameters after the step")
    return (
        f"{processes} processes (gloo): gradients all-reduced, parameters identical on every rank"
    )


CHECKS: dict[str, Callable[[StackContext], str]] = {
    "delta": check_delta,
    "elasticsearch": check_elasticsearch,
    "mlflow": check_mlflow,
    "petastorm": check_petastorm,
    "ddp": check_ddp,
}


def run_checks(ctx: StackContext, names: list[str] | None = None) -> list[CheckResult]:
    """Run the named checks (all by default); a failure is reported, not raised."""
    results = []
    for name in names or list(CHECKS):
        log.info("checking %s", name)
        started = time.perf_counter()
        try:
            detail, ok = CHECKS[name](ctx), True
        except Exception as error:
            log.exception("%s check failed", name)
            detail, ok = f"{type(error).__name__}: {error}", False
        results.append(CheckResult(name, ok, detail, time.perf_counter() - started))
    return results


def format_report(results: list[CheckResult]) -> str:
    width = max(len(r.name) for r in results)
    lines = ["Component report", "=" * 16]
    for r in results:
        lines.append(
            f"{'OK  ' if r.ok else 'FAIL'} {r.name:<{width}} {r.seconds:6.1f}s  {r.detail}"
        )
    passed = sum(r.ok for r in results)
    lines.append(f"{passed}/{len(results)} components OK")
    return "\n".join(lines)
