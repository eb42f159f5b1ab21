"""Retrieval: the paper's query against the jobs index, today's request next to the baseline.

    .venv/bin/python benchmarks/retrieval.py --preset demo --queries 4000
    .venv/bin/python benchmarks/retrieval.py --preset seed --queries 2000 --screen

Needs a built store of the preset (`jobrec demo`, or the stages up to `build_pairs`): its
`silver/queries` and the index behind the alias. Sends the first `--queries` full queries
(by candidate id) as `build_pairs` and `recommend` do: `retrieval.msearch_batch` per
`_msearch`, `retrieval.max_concurrent_searches` at once on the node, from one client per
Spark task (`--clients`, the 2 cores' 2 tasks), and reports queries/s over the wall time and
the median `took` of the node.

- baseline: the request before issue 21, sorted on the node by `_score` then `job_id` with
  `track_scores` and `track_total_hits: false` (dynamic pruning);
- one pass: `search.bm25.search_all` with `retrieval.bound_budget: 0`, no sort clause,
  exhaustive counting, `top_k + retrieval.tie_margin` hits asked, ties at the cut ordered by
  job id on the client (issue 21's first change);
- two passes: `search.bm25.search_all` with `retrieval.bound_budget` (`--budget`), the
  commonest clauses left to a second pass over the contenders (`search.bounded`).

All must give the same top-`top_k` lists, (job id, score) for (job id, score): the script
checks every query and fails if one differs. The runs alternate (baseline, one pass, two
passes, twice) so that the node's caches favour none. The node's `took` is the median of
queries sent alone.

With `--screen`, it times build_pairs' question instead, whether each candidate's held-out
job is in their query's top k: the baseline searches every query as configured and looks;
the subject screens first (`search.bm25.screened_out`, `retrieval.screen`: the job's own
score, then a count of the jobs above it) and searches the rest. Both must find the held-out
job for the same candidates.

With `--hybrid`, it times the hybrid pool that recommendations re-rank (`search.dense.
search_pools`: the kNN of each candidate's profile vector, the BM25 search, fused): the
baseline scores the kNN jobs outside BM25's hits with a request of their own
(`retrieval.scored_in_search: 0`, as before issue 21's change), the subject inside the BM25
search. Both must give the same pools, BM25 scores included.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np
from elasticsearch import Elasticsearch

from jobrec_core.config import JobrecConfig, RetrievalConfig, load_config
from jobrec_core.features.profile import QUERY_VECTOR, with_query_vectors
from jobrec_core.platform.spark import get_spark
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.ranking.factory import ranking_inputs
from jobrec_core.ranking.pipeline import spark_table
from jobrec_core.search.bm25 import (
    multi_match_query,
    screened_out,
    search_all,
    search_body,
    serving_index,
)
from jobrec_core.search.connection import make_client, resolve_connection
from jobrec_core.search.dense import PoolHit, search_pools
from jobrec_core.search.local_node import LocalElasticsearch

REPO = Path(__file__).resolve().parents[1]
Hits = list[tuple[int, float]]


def baseline_body(text: str, settings: RetrievalConfig) -> dict[str, Any]:
    """The request `search.bm25` sent before issue 21: ties ordered by the node."""
    return {
        "query": multi_match_query(text, settings),
        "size": settings.top_k,
        "sort": [{"_score": "desc"}, {"job_id": "asc"}],
        "track_scores": True,
        "_source": False,
        "track_total_hits": False,
    }


def baseline_search(
    client: Elasticsearch, index: str, texts: Sequence[str], settings: RetrievalConfig
) -> list[Hits]:
    """The baseline's `_msearch` batches (no retries: the benchmark fails on an error)."""
    hits: list[Hits] = []
    for start in range(0, len(texts), settings.msearch_batch):
        searches: list[dict[str, Any]] = []
        for text in texts[start : start + settings.msearch_batch]:
            searches += [{"index": index}, baseline_body(text, settings)]
        response = client.msearch(
            searches=searches, max_concurrent_searches=settings.max_concurrent_searches
        )
        hits += [
            [(int(h["_id"]), float(h["_score"])) for h in item["hits"]["hits"]]
            for item in response["responses"]
        ]
    return hits


def subject_search(
    client: Elasticsearch, index: str, texts: Sequence[str], settings: RetrievalConfig
) -> list[Hits]:
    results = search_all(client, index, texts, settings)
    failed = [r.error for r in results if r.error]
    if failed:
        raise RuntimeError(f"{len(failed)} searches failed: {failed[0]}")
    return [r.hits or [] for r in results]


Searcher = Callable[[Elasticsearch, str, Sequence[str], RetrievalConfig], list[Hits]]
Query = TypeVar("Query")
Answer = TypeVar("Answer")


def timed(
    searcher: Callable[[Elasticsearch, str, Sequence[Query], RetrievalConfig], list[Answer]],
    make: Callable[[], Elasticsearch],
    index: str,
    queries: list[Query],
    settings: RetrievalConfig,
    clients: int,
) -> tuple[float, list[Answer]]:
    """Wall seconds and answers in query order: `clients` threads, one client and one share
    of the queries each, as Spark's tasks split them."""

    def run(share: list[Query]) -> list[Answer]:
        client = make()
        try:
            return searcher(client, index, share, settings)
        finally:
            client.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        shares = list(pool.map(run, [queries[i::clients] for i in range(clients)]))
    seconds = time.perf_counter() - started
    answers: list[Any] = [None] * len(queries)
    for offset, share in enumerate(shares):
        answers[offset::clients] = share
    return seconds, answers


def alternated(
    variants: dict[str, tuple[Callable[..., list[Any]], RetrievalConfig]],
    connection: Any,
    index: str,
    queries: list[Any],
    clients: int,
) -> tuple[dict[str, float], dict[str, list[Any]]]:
    """Each variant (searcher, settings) run twice, alternating so that the node's caches
    favour none: its best wall seconds, and its answers. The shard request cache is emptied
    before each run: it keeps the answers of `size: 0` requests (the screen's counts), and a
    stage never asks the same query twice."""
    runs: dict[str, list[float]] = {name: [] for name in variants}
    answers: dict[str, list[Any]] = {}
    for name in [*variants, *variants]:
        searcher, variant_settings = variants[name]
        make_client(connection).indices.clear_cache(index=index, request=True)
        seconds, answers[name] = timed(
            searcher, lambda: make_client(connection), index, queries, variant_settings, clients
        )
        runs[name].append(seconds)
    return {name: min(seconds) for name, seconds in runs.items()}, answers


Candidates = list[tuple[str, int]]  # (query text, held-out job)


def found_searching(
    client: Elasticsearch, index: str, asked: Sequence[Any], settings: RetrievalConfig
) -> list[bool]:
    """build_pairs without a screen: every query searched, its held-out job looked for."""
    hits = subject_search(client, index, [text for text, _ in asked], settings)
    return [any(j == job for j, _ in found) for found, (_, job) in zip(hits, asked, strict=True)]


def found_screening(
    client: Elasticsearch, index: str, asked: Sequence[Any], settings: RetrievalConfig
) -> list[bool]:
    """build_pairs with the screen: the queries it cannot decide searched, as above."""
    texts = [text for text, _ in asked]
    outside = screened_out(client, index, texts, [job for _, job in asked], settings)
    rest = [row for row, out in enumerate(outside) if not out]
    found = [False] * len(asked)
    searched = found_searching(client, index, [asked[r] for r in rest], settings)
    for row, hit in zip(rest, searched, strict=True):
        found[row] = hit
    return found


def screen_benchmark(
    connection: Any, index: str, asked: Candidates, settings: RetrievalConfig, clients: int
) -> int:
    """`--screen`: candidates decided per second without the screen, with it counting by the
    full query, and with it counting by the partial query of `retrieval.screen_budget` (see
    the module); 1 when they disagree on a candidate."""
    client = make_client(connection)
    screening = settings.model_copy(update={"screen": True})
    outside = screened_out(client, index, [t for t, _ in asked], [j for _, j in asked], screening)
    variants = {
        "baseline: every query searched, the held-out job looked for": (
            found_searching,
            settings.model_copy(update={"screen": False}),
        ),
        "screened first (own score, full query's count), the rest searched": (
            found_screening,
            screening.model_copy(update={"screen_budget": 0.0}),
        ),
        f"subject: screened first, the count without clauses within {settings.screen_budget:g}": (
            found_screening,
            screening,
        ),
    }
    best, answers = alternated(variants, connection, index, asked, clients)
    baseline, *screened = (answers[name] for name in variants)
    print(f"  {'request':<78}{'candidates/s':>13}{'x baseline':>12}")
    first = best[next(iter(variants))]
    for name in variants:
        print(f"  {name:<78}{len(asked) / best[name]:>13.1f}{first / best[name]:>11.2f}x")
    differing = sum(
        any(a != b for b in others) for a, *others in zip(baseline, *screened, strict=True)
    )
    print(
        f"  best of 2 runs each; held-out job found for {sum(baseline):,} of {len(asked):,}; "
        f"the subject screened out {sum(outside):,} ({sum(outside) / len(asked):.1%}); "
        "candidates decided "
        f"differently: {differing}"
    )
    return 1 if differing else 0


Pooled = tuple[str, "np.ndarray | None", list[int]]  # (query text, profile vector, own jobs)


def hybrid_pools(
    client: Elasticsearch, index: str, asked: Sequence[Pooled], settings: RetrievalConfig
) -> list[list[PoolHit]]:
    """Each candidate's hybrid pool, as `recommend` searches it (no retries needed here: the
    benchmark fails on an error)."""
    texts = [text for text, _, _ in asked]
    vectors = [vector for _, vector, _ in asked]
    results = search_pools(
        client, index, texts, vectors, [own for _, _, own in asked], settings, "hybrid"
    )
    failed = [r.error for r in results if r.error]
    if failed:
        raise RuntimeError(f"{len(failed)} searches failed: {failed[0]}")
    return [r.hits or [] for r in results]


def hybrid_benchmark(
    config: JobrecConfig, connection: Any, index: str, count: int, clients: int
) -> int:
    """`--hybrid`: pools per second, the kNN jobs' BM25 scores from a request of their own
    (baseline) and from the BM25 search (subject); 1 when a pool differs."""
    spark = get_spark(config)
    inputs = ranking_inputs(spark, config, ship_tables=False)
    queries = (
        read_delta(spark, table_path(config, "silver", "queries"))
        .where("size(query_terms) > 0")
        .orderBy("candidate_id")
        .limit(count)
    )
    rows = (
        with_query_vectors(
            queries, spark_table(inputs.tokens), inputs.vectors_file, inputs.words_and_idf
        )
        .orderBy("candidate_id")
        .select("query_terms", QUERY_VECTOR, "own_job_ids")
        .collect()
    )
    asked: list[Pooled] = [
        (
            " ".join(row.query_terms),
            None if row[QUERY_VECTOR] is None else np.asarray(row[QUERY_VECTOR]),
            list(row.own_job_ids),
        )
        for row in rows
    ]
    settings = config.retrieval
    variants = {
        "baseline: the kNN jobs' BM25 from a request of their own": (
            hybrid_pools,
            settings.model_copy(update={"scored_in_search": 0}),
        ),
        "subject: the kNN jobs' BM25 from the BM25 search": (hybrid_pools, settings),
    }
    best, answers = alternated(variants, connection, index, asked, clients)
    baseline, subject = (answers[name] for name in variants)
    first = best[next(iter(variants))]
    print(f"  {'hybrid pool':<62}{'queries/s':>11}{'x baseline':>12}")
    for name in variants:
        print(f"  {name:<62}{len(asked) / best[name]:>11.1f}{first / best[name]:>11.2f}x")
    differing = sum(a != b for a, b in zip(baseline, subject, strict=True))
    print(f"  best of 2 runs each; pools differing (jobs, order or scores): {differing}")
    return 1 if differing else 0


def median_took(client: Elasticsearch, index: str, texts: list[str], body: Any) -> float:
    """The node's own time (`took`, ms) for queries sent one at a time, the median."""
    return statistics.median(
        int(client.search(index=index, **body(text))["took"]) for text in texts
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--queries", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=2, help="Spark tasks searching at once")
    parser.add_argument(
        "--budget", type=float, default=None, help="retrieval.bound_budget of the two passes"
    )
    parser.add_argument(
        "--screen", action="store_true", help="time build_pairs' screen (retrieval.screen) instead"
    )
    parser.add_argument(
        "--hybrid", action="store_true", help="time the hybrid pool's searches instead"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_config("local", [f"data.preset={args.preset}", *args.overrides], REPO / "conf")
    LocalElasticsearch(config.elasticsearch.local).start()
    connection = resolve_connection(config)
    index = serving_index(make_client(connection), config.elasticsearch.index_alias)
    queries = (
        read_delta(get_spark(config), table_path(config, "silver", "queries"))
        .where("size(query_terms) > 0")
        .orderBy("candidate_id")
        .limit(args.queries)
        .select("query_terms", "positive_job_id")
        .collect()
    )
    texts = [" ".join(row.query_terms) for row in queries]
    documents = make_client(connection).count(index=index)["count"]
    settings = config.retrieval
    terms = statistics.mean(len(row.query_terms) for row in queries)
    print(
        f"retrieval on {args.preset!r}: index {index} ({documents:,} jobs), {len(texts):,} "
        f"queries of {terms:.0f} terms on average, top {settings.top_k}, {args.clients} "
        f"clients x {settings.max_concurrent_searches} concurrent searches"
    )
    if args.hybrid:
        return hybrid_benchmark(config, connection, index, args.queries, args.clients)
    if args.screen:
        candidates = [
            (text, int(row.positive_job_id)) for text, row in zip(texts, queries, strict=True)
        ]
        return screen_benchmark(connection, index, candidates, settings, args.clients)
    budget = settings.bound_budget if args.budget is None else args.budget
    labels = {
        "baseline": "baseline: sorted on the node by _score, job_id",
        "one pass": "one pass: no sort, exhaustive, ties cut on the client",
        "two passes": f"two passes: common clauses (budget {budget:g}) second",
    }
    variants: dict[str, tuple[Searcher, RetrievalConfig]] = {
        "baseline": (baseline_search, settings),
        "one pass": (subject_search, settings.model_copy(update={"bound_budget": 0.0})),
        "two passes": (subject_search, settings.model_copy(update={"bound_budget": budget})),
    }
    best, answers = alternated(variants, connection, index, texts, args.clients)
    client = make_client(connection)
    sample = texts[:: max(1, len(texts) // 200)]
    asked = settings.top_k + settings.tie_margin
    took = {
        "baseline": median_took(client, index, sample, lambda t: baseline_body(t, settings)),
        "one pass": median_took(client, index, sample, lambda t: search_body(t, settings, asked)),
    }
    print(f"  {'request':<58}{'queries/s':>11}{'x baseline':>12}{'took p50 ms, alone':>20}")
    differing = 0
    for name, label in labels.items():
        rate = len(texts) / best[name]
        differing += sum(a != b for a, b in zip(answers["baseline"], answers[name], strict=True))
        alone = f"{took[name]:.0f}" if name in took else "-"
        print(f"  {label:<58}{rate:>11.1f}{best['baseline'] / best[name]:>11.2f}x{alone:>20}")
    print(
        f"  best of 2 runs each; top-{settings.top_k} lists differing from the baseline's: "
        f"{differing} of {len(texts) * (len(variants) - 1):,}"
    )
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
