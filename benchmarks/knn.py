"""kNN-augmented scoring's throughput, as seed 003's table reports it: items (candidates) per
second for the plain bi-encoder, the kNN votes and their mix.

    .venv/bin/python benchmarks/knn.py --preset demo --candidates 2000

Needs a built store of the preset (`jobrec demo`): the index behind the alias with its job
vectors, and the cleaned candidates. One thread, on the driver, after a warm-up pass:

- **bi-encoder**: the dense pool, the exact kNN of the candidate's profile vector over the
  jobs' vectors on the node (`search.dense.knn_body`), top 100 minus the candidate's own
  jobs, the candidates sent in `retrieval.msearch_batch` batches;
- **kNN**: the memory's IVF search (faiss) and the votes for the 100 jobs of each pool;
- **kNN-BE**: both, and the mix of the cosine and the votes, z-normalised per candidate.

The profile vectors, the memory and its index are built first and not timed (their build
time is printed).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from jobrec_core.config import load_config
from jobrec_core.features.neighbours import ivf_index, nearest, neighbour_votes
from jobrec_core.features.profile import QUERY_VECTOR, with_query_vectors
from jobrec_core.platform.spark import get_spark
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.ranking.factory import interest_memory, ranking_inputs
from jobrec_core.ranking.interpolation import interpolate
from jobrec_core.ranking.pipeline import spark_table
from jobrec_core.search.bm25 import search_all
from jobrec_core.search.connection import make_client
from jobrec_core.search.dense import knn_body
from jobrec_core.search.local_node import LocalElasticsearch

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--candidates", type=int, default=2000)
    parser.add_argument("--k", type=int, default=64, help="neighbours (seed 003 chose 64)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_config("local", [f"data.preset={args.preset}", *args.overrides], REPO / "conf")
    LocalElasticsearch(config.elasticsearch.local).start()
    spark = get_spark(config)
    inputs = ranking_inputs(spark, config, ship_tables=False)
    started = time.perf_counter()
    memory = interest_memory(spark, config, inputs)
    index = ivf_index(memory, config.knn.probes)
    built = time.perf_counter() - started
    sample = (
        read_delta(spark, table_path(config, "silver", "candidates"))
        .orderBy(F.xxhash64(F.lit(7), F.lit("knn benchmark"), "candidate_id"))
        .limit(args.candidates)
        .select("candidate_id", F.array_distinct("sequence.job_id").alias("own_job_ids"))
    )
    tokens = spark_table(inputs.tokens)
    queries = with_query_vectors(sample, tokens, inputs.vectors_file, inputs.words_and_idf)
    frame = pd.DataFrame(queries.where(F.col(QUERY_VECTOR).isNotNull()).toPandas())
    ids = frame["candidate_id"].to_numpy(dtype=np.int64)
    vectors = np.stack([np.asarray(v, dtype=np.float32) for v in frame[QUERY_VECTOR]])
    own = [{int(j) for j in jobs} for jobs in frame["own_job_ids"]]
    client = make_client(inputs.connection)
    settings = config.retrieval

    def bi_encoder() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        found = search_all(client, inputs.index, list(vectors), settings, knn_body)
        rows = [
            (candidate, job, score)
            for candidate, mine, result in zip(ids, own, found, strict=True)
            for job, score in result.hits or []
            if job not in mine
        ]
        candidate, job, cosine = (np.asarray(x) for x in zip(*rows, strict=True))
        return candidate.astype(np.int64), job.astype(np.int64), cosine.astype(np.float64)

    def knn(candidate: np.ndarray, job: np.ndarray) -> np.ndarray:
        members, similarity = nearest(memory, index, ids, vectors, args.k)
        return neighbour_votes(memory, members, similarity, args.k, ids, candidate, job)

    candidate, job, _ = bi_encoder()  # warm-up, and the pools the others score
    knn(candidate, job)
    timings = {}
    started = time.perf_counter()
    bi_encoder()
    timings["bi-encoder (dense retrieval)"] = time.perf_counter() - started
    started = time.perf_counter()
    knn(candidate, job)
    timings["kNN (IVF search, votes)"] = time.perf_counter() - started
    started = time.perf_counter()
    found = bi_encoder()
    interpolate(found[0], found[2], knn(found[0], found[1]), 0.3)
    timings["kNN-BE (both, mixed)"] = time.perf_counter() - started
    print(
        f"\n{args.preset}: {len(ids):,} candidates, pools of {settings.top_k}, memory of "
        f"{len(memory):,} candidates ({built:.1f} s to build with its index), k = {args.k}, "
        f"{config.knn.probes} lists probed; one thread"
    )
    print(f"{'method':<32}{'seconds':>9}{'items/s':>10}")
    for name, seconds in timings.items():
        print(f"{name:<32}{seconds:>9.2f}{len(ids) / seconds:>10,.0f}")


if __name__ == "__main__":
    main()
