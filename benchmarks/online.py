"""End-to-end latency of the online recommendations (`jobrec serve`, POST /recommend) over
real candidates of the store, with the time of each part, against the batch path's cost per
candidate for the same candidates.

    .venv/bin/python benchmarks/online.py
    .venv/bin/python benchmarks/online.py --batch-candidates 2000   # the batch's fixed costs spread
    .venv/bin/python benchmarks/online.py --requests 500 --set retrieval.retriever=bm25

Needs a built store of the preset with a champion (`jobrec demo`). The endpoint runs in this
process on 127.0.0.1 with the configured retriever and the registry's champion, loaded as
`jobrec serve` loads them; one client sends the requests one after another on one kept-alive
connection, each a seeded sample's cleaned candidate with their jobs and scores. After
--warm-up requests (not counted), each request's wall time is taken at the client, and the
server's own split of it (`serving.online.PARTS`): the query, the retrieval (the searches on
the local node), the features, the scoring (the champion, the top k) and the formatting.

The baseline is the batch path (`jobs/recommend.py`'s pipeline, `transform_spark` on local
Spark's cores) for the same champion and the same candidates (--batch-candidates: the sample
extended, to spread the batch's fixed costs over more), from the queries to the collected top
10 with titles, without the Delta writes; its wall time divided by the candidates is what a
candidate costs in a batch. The two paths' top 10 are compared candidate by candidate.

Then the same requests go once more through the recommender in this process, without HTTP,
each step of its pipeline timed on its own (`TimedStep`): which step a served request's
features and scoring spend their time in.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from jobrec_core.config import load_config
from jobrec_core.models.registry import load_champion
from jobrec_core.platform.spark import get_spark
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.ranking.factory import queries_of, ranking_inputs, rerank_pipeline
from jobrec_core.ranking.pipeline import Pipeline, Step
from jobrec_core.ranking.scorers import drmm_scorer
from jobrec_core.search.local_node import LocalElasticsearch
from jobrec_core.serving.endpoint import serve
from jobrec_core.serving.online import PARTS
from jobrec_core.serving.stage import online_recommender

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class TimedStep(Step):
    """A served pipeline's step, with each call's wall time (ms) kept in `times`."""

    step: Step
    times: list[float] = field(default_factory=list)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        started = time.perf_counter()
        result = self.step.transform(frame)
        self.times.append((time.perf_counter() - started) * 1e3)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--requests", type=int, default=300, help="candidates, one request each")
    parser.add_argument("--warm-up", type=int, default=20, help="requests sent first, not counted")
    parser.add_argument(
        "--batch-candidates", type=int, default=None, help="the batch's (default: --requests)"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    limit = max(args.batch_candidates or args.requests, args.requests)
    config = load_config("local", [f"data.preset={args.preset}", *args.overrides], REPO / "conf")
    LocalElasticsearch(config.elasticsearch.local).start()
    spark = get_spark(config)

    started = time.perf_counter()
    recommender = online_recommender(spark, config)
    loaded = time.perf_counter() - started
    sample = (
        read_delta(spark, table_path(config, "silver", "candidates"))
        .orderBy(F.xxhash64(F.lit(7), F.lit("online benchmark"), "candidate_id"))
        .limit(limit)
        .select("candidate_id", "sequence")
        .cache()
    )
    everyone = sample.collect()
    candidates = everyone[: args.requests]
    bodies = [
        json.dumps(
            {
                "candidate_id": int(row["candidate_id"]),
                "jobs": [{"job_id": e["job_id"], "score": e["score"]} for e in row["sequence"]],
            }
        ).encode()
        for row in candidates
    ]

    server = serve(recommender, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=60)

    def post(body: bytes) -> dict:
        connection.request("POST", "/recommend", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {answer}")
        return answer

    for body in bodies[: args.warm_up]:
        post(body)
    wall: list[float] = []
    parts: dict[str, list[float]] = {p: [] for p in (*PARTS, "total")}
    online: dict[int, list[int]] = {}
    for body, row in zip(bodies, candidates, strict=True):
        begun = time.perf_counter()
        answer = post(body)
        wall.append((time.perf_counter() - begun) * 1e3)
        for part in parts:
            parts[part].append(answer["timings_ms"][part])
        online[int(row["candidate_id"])] = [r["job_id"] for r in answer["recommendations"]]
    connection.close()
    server.shutdown()
    server.server_close()

    timed = [TimedStep(step) for step in recommender.pipeline.steps]
    in_process = replace(recommender, pipeline=Pipeline(tuple(timed)))
    for body in bodies:
        in_process.recommend(in_process.parse(body))

    inputs = ranking_inputs(spark, config, ship_tables=False)
    champion = load_champion(config)
    scorer = drmm_scorer(spark, f"DRMM {champion.version}", champion.model)
    begun = time.perf_counter()
    ranked = rerank_pipeline(config, inputs, scorer).transform_spark(
        queries_of(config, inputs, sample)
    )
    top = pd.DataFrame(
        ranked.join(inputs.jobs.select("job_id", "title"), "job_id")
        .select("candidate_id", "rank", "job_id", "title", "score")
        .toPandas()
    )
    batch_s = time.perf_counter() - begun
    batch = {
        int(c): group.sort_values("rank")["job_id"].tolist()
        for c, group in top.groupby("candidate_id")
    }
    same = sum(online[c] == batch.get(c, []) for c in online)

    jobs = np.array([len(row["sequence"]) for row in candidates])
    print(
        f"{args.preset}: {len(bodies)} requests, one at a time over HTTP on 127.0.0.1 (after "
        f"{args.warm_up} warm-up), each a cleaned candidate ({jobs.mean():.1f} jobs on average); "
        f"{recommender.model}, {config.retrieval.retriever} pool of {config.retrieval.top_k}, "
        f"top {config.evaluation.k}; loaded in {loaded:.1f} s "
        f"({len(recommender.catalogue):,} jobs in memory)"
    )
    print(f"{'path':<44}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}")
    rows = [("online, end to end at the client", wall)]
    rows += [(f"  {part}", parts[part]) for part in (*PARTS, "total")]
    for name, values in rows:
        p50, p95 = np.percentile(values, [50, 95])
        print(f"{name:<44}{p50:>9.1f}{p95:>9.1f}{np.mean(values):>9.1f}")
    baseline = f"batch path (Spark {config.spark.master}), a candidate"
    print(
        f"{baseline:<44}"
        f"{'':>9}{'':>9}{batch_s / len(everyone) * 1e3:>9.1f}"
        f"   ({len(everyone)} candidates in {batch_s:.1f} s)"
    )
    print(
        f"same top {config.evaluation.k} online and in the batch: {same}/{len(online)} candidates"
    )
    print("each step of the same requests, in this process (no HTTP):")
    for step in timed:
        p50, p95 = np.percentile(step.times, [50, 95])
        print(f"  {type(step.step).__name__:<42}{p50:>9.1f}{p95:>9.1f}{np.mean(step.times):>9.1f}")


if __name__ == "__main__":
    main()
