"""BM25 retrieval from the `jobs` alias: the paper's query (Figure 3) and how it is sent.

The query is a `bool/should` around one `multi_match` of type `most_fields` over the five
indexed fields with the paper's boosts: a term matching in several fields scores in each of
them, which is how the paper ranks a job whose title, function and keywords all agree.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from elasticsearch import ApiError, Elasticsearch, TransportError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig, RetrievalConfig
from jobrec_core.platform.heap import freeze_long_lived
from jobrec_core.platform.quarantine import QualityReport, enforce_budget, write_quarantine
from jobrec_core.platform.tables import (
    append_delta,
    last_note,
    read_delta,
    table_path,
    write_delta,
)
from jobrec_core.search.bounded import (
    IDS_FROM_DOC_VALUES,
    Hits,
    contenders,
    exact_top,
    field_statistics,
    first_pass_body,
    first_pass_hits,
    hit_job_id,
    outranked,
    outscoring_count_body,
    partial_query,
    second_pass_body,
    split_common,
)
from jobrec_core.search.connection import EsConnection, make_client

log = logging.getLogger(__name__)


def multi_match_query(text: str, settings: RetrievalConfig) -> dict[str, Any]:
    """The paper's query for a bag of words given as one space-separated string."""
    return {
        "bool": {
            "should": [
                {
                    "multi_match": {
                        "query": text,
                        "type": settings.type,
                        "fields": [f"{name}^{boost:g}" for name, boost in settings.boosts.items()],
                        "auto_generate_synonyms_phrase_query": (
                            settings.auto_generate_synonyms_phrase_query
                        ),
                    }
                }
            ]
        }
    }


@dataclass(frozen=True)
class SearchResult:
    """The ranked (job id, BM25 score) list of one query, or why it failed for good."""

    hits: list[tuple[int, float]] | None
    error: str | None = None
    # `search_all`'s `also_score`: the BM25 score of each asked job that matches the query,
    # whether or not it is among the hits (an asked job missing here shares no word with the
    # query: 0). None where none was asked, or the answer could not carry them.
    scored: dict[int, float] | None = None


def search_body(text: str, settings: RetrievalConfig, size: int) -> dict[str, Any]:
    """The search request: the `size` best hits by score, counted exhaustively.

    No sort clause. Sorting by `_score` then `job_id` on the node made it collect by field
    sort, and Lucene's dynamic pruning (`track_total_hits: false`) costs more than it saves
    on the paper's ~350 term clauses (docs/BENCHMARKS.md, "Retrieval"). The tie order by job
    id is resolved by the client instead (:func:`ranked_hits`): equal scores would otherwise
    follow the index's segment layout, which differs between two builds of the same jobs,
    and so would the negative picked from them and the cut at `top_k`."""
    return {
        "query": multi_match_query(text, settings),
        "size": size,
        **IDS_FROM_DOC_VALUES,
        "track_total_hits": True,
    }


def ranked_hits(
    hits: list[tuple[int, float]], top_k: int, asked: int
) -> list[tuple[int, float]] | None:
    """`asked` hits in the node's order -> the `top_k` best by score, then job id; or None
    when the hits cannot tell: the tie at the cut may go on past the last hit returned, so
    its other members are unknown (ask again for more)."""
    if len(hits) == asked and len(hits) > top_k and hits[-1][1] == hits[top_k - 1][1]:
        return None
    return sorted(hits, key=lambda hit: (-hit[1], hit[0]))[:top_k]


# A search request from its query (a text, a vector, ...) and how many hits to ask for.
RequestBody = Callable[[Any, int], dict[str, Any]]
_SCORED = "scored"


def with_scores_of(body: dict[str, Any], jobs: Sequence[int]) -> dict[str, Any]:
    """`body` that also returns the score of each of `jobs` its query matches, hit or not:
    a `filter` bucket of those jobs whose `top_hits` keeps them all, by the same scorer as
    the hits (so the same floats). The search is exhaustive (`track_total_hits`), so the
    bucket costs a lookup per matching job, not another pass over the postings."""
    return {
        **body,
        "aggs": {
            _SCORED: {
                "filter": {"ids": {"values": [str(j) for j in jobs]}},
                "aggs": {"hits": {"top_hits": {"size": len(jobs), **IDS_FROM_DOC_VALUES}}},
            }
        },
    }


def scored_jobs(item: dict[str, Any]) -> dict[int, float] | None:
    """The scores an answer to :func:`with_scores_of` carries (None for another answer)."""
    bucket = item.get("aggregations", {}).get(_SCORED)
    if bucket is None:
        return None
    return {hit_job_id(h): float(h["_score"]) for h in bucket["hits"]["hits"]["hits"]}


def search_all(
    client: Elasticsearch,
    index: str,
    texts: Sequence[Any],
    settings: RetrievalConfig,
    body: RequestBody | None = None,
    also_score: Sequence[Sequence[int]] | None = None,
) -> list[SearchResult]:
    """Every query of `texts`, in `_msearch` batches of `retrieval.msearch_batch`: the paper's
    BM25 request (:func:`search_body`), or `body`'s for another kind of query (a kNN vector,
    `search.dense`), with the same tie handling, retries and errors.

    `also_score` names, for each query, jobs whose scores are wanted even outside its hits
    (the hybrid pool's kNN jobs, `search.dense`). A one-pass search carries them in the same
    request (:func:`with_scores_of`), in `SearchResult.scored`: the query's postings are read
    once, not again by a request restricted to those jobs. Where a query was answered by the
    two passes, or asks more than `retrieval.scored_in_search` jobs, `scored` is None.

    Each batch runs at most `retrieval.max_concurrent_searches` searches at once on the
    cluster. A batch that fails as a whole (timeout, connection, HTTP 429/5xx) and each query
    that fails inside a batch with a retryable status are retried with doubling back-off up to
    `retrieval.max_retries` times; a query refused as invalid is not retried. Either way a
    failure is returned as a result with its error, never dropped.
    """
    query_body = body or (lambda text, size: search_body(text, settings, size))

    def request(position: int, size: int) -> dict[str, Any]:
        built = query_body(texts[position], size)
        jobs = also_score[position] if also_score is not None else ()
        return with_scores_of(built, jobs) if 0 < len(jobs) <= settings.scored_in_search else built

    two_passes = body is None and settings.bound_budget > 0 and settings.type == "most_fields"
    results: list[SearchResult | None] = [None] * len(texts)
    for start in range(0, len(texts), settings.msearch_batch):
        batch = list(range(start, min(start + settings.msearch_batch, len(texts))))
        if two_passes:
            batch = _two_pass_batch(client, index, texts, batch, settings, results)
        # Ties at the cut that run past the hits asked for: ask those queries again for
        # twice as many, until the tie ends inside the answer (rare: equal BM25 scores).
        asked = settings.top_k + settings.tie_margin
        while batch:
            _search_batch(client, index, batch, settings, asked, results, request)
            batch = [position for position in batch if results[position] is _TIE_UNRESOLVED]
            asked *= 2
    return [r if r is not None else SearchResult(None, "not searched") for r in results]


def _two_pass_batch(
    client: Elasticsearch,
    index: str,
    texts: Sequence[str],
    batch: list[int],
    settings: RetrievalConfig,
    results: list[SearchResult | None],
) -> list[int]:
    """The batch's BM25 searches in two passes (`search.bounded`): fills `results` for the
    queries answered exactly, returns the others (undecided, or a pass failed) for the
    one-pass search with its retries and errors."""
    try:
        answered = _first_pass_then_full(client, index, texts, batch, settings)
    except (TransportError, ApiError) as error:
        log.debug("two-pass search failed (%s); one pass instead", error)
        return batch
    for position, (bound, first, full) in answered.items():
        ranked = exact_top(full, first, settings.bound_window, bound, settings.top_k)
        if ranked is not None:
            results[position] = SearchResult(ranked)
    return [position for position in batch if results[position] is None]


def screened_out(
    client: Elasticsearch,
    index: str,
    texts: Sequence[str],
    jobs: Sequence[int],
    settings: RetrievalConfig,
) -> list[bool]:
    """For each BM25 query of `texts`, whether `jobs`' job is certainly outside its top k
    (`search.bounded`'s screen, `retrieval.screen`): True only where the screen decided it;
    False where it could not, where it is off, and where a request failed (the full search
    then runs, with its retries)."""
    outside = [False] * len(texts)
    if not settings.screen:
        return outside
    for start in range(0, len(texts), settings.msearch_batch):
        batch = range(start, min(start + settings.msearch_batch, len(texts)))
        queries = {position: multi_match_query(texts[position], settings) for position in batch}
        try:
            own = _msearch(
                client,
                index,
                [second_pass_body(queries[p], [int(jobs[p])]) for p in batch],
                settings,
            )
            scores: dict[int, float] = {}
            for position, item in zip(batch, own, strict=True):
                hits = _answer_hits(item)
                if hits == []:  # the job matches no word of the query: never a hit
                    outside[position] = True
                elif hits:
                    scores[position] = hits[0][1]
            counted = _counted_queries(client, index, texts, list(scores), settings)
            counts = _msearch(
                client,
                index,
                [
                    outscoring_count_body(counted.get(p, queries[p]), score, settings.top_k)
                    for p, score in scores.items()
                ],
                settings,
                cached=False,  # each candidate's count is asked once
            )
        except (TransportError, ApiError) as error:
            log.debug("screen failed (%s): the full searches run", error)
            continue
        for position, item in zip(scores, counts, strict=True):
            outside[position] = "error" not in item and outranked(item, settings.top_k)
    return outside


def _counted_queries(
    client: Elasticsearch,
    index: str,
    texts: Sequence[str],
    positions: list[int],
    settings: RetrievalConfig,
) -> dict[int, dict[str, Any]]:
    """The partial queries the screen counts with (`retrieval.screen_budget`, a most_fields
    query): the queries of `positions` that keep a clause after their commonest ones leave;
    none when the budget is 0 (the full query counts)."""
    if settings.screen_budget <= 0 or settings.type != "most_fields" or not positions:
        return {}
    splits = _common_splits(client, index, texts, positions, settings, settings.screen_budget)
    return {
        position: partial_query(rare, settings.boosts, settings.auto_generate_synonyms_phrase_query)
        for position, (rare, _) in splits.items()
        if any(rare.values())
    }


def _common_splits(
    client: Elasticsearch,
    index: str,
    texts: Sequence[str],
    positions: Iterable[int],
    settings: RetrievalConfig,
    budget: float,
) -> dict[int, tuple[dict[str, list[str]], float]]:
    """`split_common` of each query of `positions` at `budget`, the index's statistics of
    their words looked up together."""
    words = {position: texts[position].split() for position in positions}
    statistics = field_statistics(
        client, index, (w for ws in words.values() for w in ws), list(settings.boosts)
    )
    return {
        position: split_common(ws, statistics, settings.boosts, budget)
        for position, ws in words.items()
    }


def _first_pass_then_full(
    client: Elasticsearch,
    index: str,
    texts: Sequence[str],
    batch: Iterable[int],
    settings: RetrievalConfig,
) -> dict[int, tuple[float, Hits, Hits]]:
    """`search.bounded`'s two requests for a batch of BM25 queries: a first pass without
    each query's commonest words (`split_common` at `retrieval.bound_budget`, which also
    gives `U`, the most they can add) names up to `retrieval.bound_window` jobs; then the full
    query scores exactly the contenders among them. Returns, for each query both passes
    answered, its `U` and both passes' hits. A pass that fails as a whole raises."""
    splits = _common_splits(client, index, texts, batch, settings, settings.bound_budget)
    first = _msearch(
        client,
        index,
        [
            first_pass_body(
                rare,
                settings.boosts,
                settings.bound_window,
                settings.auto_generate_synonyms_phrase_query,
            )
            for rare, _ in splits.values()
        ],
        settings,
    )
    firsts = {
        position: first_pass_hits(item)
        for position, item in zip(splits, first, strict=True)
        if "error" not in item
    }
    jobs = {
        position: contenders(hits, splits[position][1], settings.top_k)
        for position, hits in firsts.items()
    }
    asked = [position for position in firsts if jobs[position]]
    full = _msearch(
        client,
        index,
        [second_pass_body(multi_match_query(texts[p], settings), jobs[p]) for p in asked],
        settings,
    )
    return {
        position: (splits[position][1], firsts[position], hits)
        for position, item in zip(asked, full, strict=True)
        if (hits := _answer_hits(item)) is not None
    }


def _answer_hits(item: dict[str, Any]) -> Hits | None:
    """A `_msearch` answer's (job id, score) hits, in the answer's order; None if it failed."""
    if "error" in item:
        return None
    return [(hit_job_id(h), float(h["_score"])) for h in item["hits"]["hits"]]


def _msearch(
    client: Elasticsearch,
    index: str,
    bodies: list[dict[str, Any]],
    settings: RetrievalConfig,
    cached: bool = True,
) -> list[dict[str, Any]]:
    """One `_msearch` of `bodies` against `index`: its per-search answers, in order. Not
    `cached`: answers of `size: 0` that will not be asked again stay out of the shard request
    cache (it would keep them, evicting answers worth keeping)."""
    if not bodies:
        return []
    header: dict[str, Any] = {"index": index} | ({} if cached else {"request_cache": False})
    searches: list[dict[str, Any]] = []
    for request_body in bodies:
        searches += [header, request_body]
    response = client.options(request_timeout=settings.timeout_s).msearch(
        searches=searches, max_concurrent_searches=settings.max_concurrent_searches
    )
    return list(response["responses"])


# A query whose tie at the cut needs more hits (`ranked_hits`): searched again.
_TIE_UNRESOLVED = SearchResult(None, "tie past the hits asked for")


def _search_batch(
    client: Elasticsearch,
    index: str,
    pending: list[int],
    settings: RetrievalConfig,
    asked: int,
    results: list[SearchResult | None],
    request: Callable[[int, int], dict[str, Any]],
) -> None:
    backoff = settings.backoff_s
    last_error = ""
    for attempt in range(settings.max_retries + 1):
        if attempt:
            time.sleep(backoff)
            backoff *= 2
        try:
            responses = _msearch(
                client, index, [request(position, asked) for position in pending], settings
            )
        except (TransportError, ApiError) as error:
            status = getattr(error, "status_code", None) or getattr(error, "status", None)
            last_error = f"{type(error).__name__}: {error}"
            if isinstance(status, int) and status < 500 and status != 429:
                break  # the request itself is invalid: retrying cannot help
            continue
        retry = []
        for position, item in zip(pending, responses, strict=True):
            hits = _answer_hits(item)
            if hits is not None:
                ranked = ranked_hits(hits, settings.top_k, asked)
                results[position] = (
                    _TIE_UNRESOLVED
                    if ranked is None
                    else SearchResult(ranked, scored=scored_jobs(item))
                )
                continue
            status = int(item.get("status", 500))
            reason = f"HTTP {status}: {item['error'].get('type', item['error'])}"
            if status == 429 or status >= 500:
                retry.append(position)
                last_error = reason
            else:
                results[position] = SearchResult(None, reason)
        pending = retry
        if not pending:
            return
    for position in pending:
        results[position] = SearchResult(
            None, f"failed after {settings.max_retries} retries: {last_error}"
        )


HITS = "ARRAY<STRUCT<job_id: INT, score: FLOAT>>"


BOTH_QUERIES = {"query_terms": "full_hits", "negative_terms": "negative_hits"}
FULL_QUERY = {"query_terms": "full_hits"}


def retrieve(
    queries: DataFrame,
    connection: EsConnection,
    index: str,
    settings: RetrievalConfig,
    partitions: int,
    searches: dict[str, str] = BOTH_QUERIES,
    found: str | None = None,
) -> DataFrame:
    """Each query column of `searches` (terms column -> hits column) of every candidate
    against `index`: one client per partition, so at most `partitions` x
    `retrieval.max_concurrent_searches` searches run at once. `error` joins the failures.

    With `found` (a job id column), the searches after the first run only for the rows whose
    first search returned that job; the others get null hits. build_pairs keeps a candidate
    only when the full query finds their held-out job (9% of the seed's candidates): the
    less informative query of the other 91% would be searched for nothing. With
    `retrieval.screen_budget` too, the first search itself is skipped for the rows whose job
    the screen shows outside the top k (:func:`screened_out`): null hits for every query."""
    columns = list(searches)
    schema = ", ".join(
        ["candidate_id LONG", *(f"{hits} {HITS}" for hits in searches.values()), "error STRING"]
    )

    def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        freeze_long_lived()  # the searches' answers churn objects: keep the imports unscanned
        client = make_client(connection)
        try:
            for frame in frames:
                texts = _texts(frame[columns[0]])
                skipped = (
                    screened_out(client, index, texts, frame[found].tolist(), settings)
                    if found is not None
                    else [False] * len(frame)
                )
                searched = [row for row, out in enumerate(skipped) if not out]
                first = [SearchResult(None)] * len(frame)
                for row, result in zip(
                    searched,
                    search_all(client, index, [texts[row] for row in searched], settings),
                    strict=True,
                ):
                    first[row] = result
                rows = list(range(len(frame)))
                if found is not None:
                    rows = [
                        row
                        for row, (result, job) in enumerate(zip(first, frame[found], strict=True))
                        if any(hit == job for hit, _ in result.hits or [])
                    ]
                per_column = [first]
                for column in columns[1:]:
                    later = search_all(client, index, _texts(frame[column].iloc[rows]), settings)
                    results = [SearchResult(None)] * len(frame)
                    for row, result in zip(rows, later, strict=True):
                        results[row] = result
                    per_column.append(results)
                output = {"candidate_id": frame["candidate_id"]}
                for hits, column_results in zip(searches.values(), per_column, strict=True):
                    output[hits] = [_hits(r.hits) for r in column_results]
                output["error"] = [
                    "; ".join(r.error for r in row if r.error) or None
                    for row in zip(*per_column, strict=True)
                ]
                yield pd.DataFrame(output)
        finally:
            client.close()

    wanted = ["candidate_id", *searches, *([found] if found else [])]
    return queries.select(*wanted).repartition(partitions).mapInPandas(run, schema)


def _texts(terms: pd.Series) -> list[str]:
    return [" ".join(t) for t in terms]


def _hits(hits: list[tuple[int, float]] | None) -> list[dict[str, Any]] | None:
    return None if hits is None else [{"job_id": j, "score": s} for j, s in hits]


def serving_index(client: Elasticsearch, alias: str) -> str:
    """The physical index behind the alias now: a run searches one version throughout, even
    if the alias moves while it runs."""
    if not client.indices.exists_alias(name=alias):
        raise LookupError(f"no index behind the alias {alias!r}: run jobs/index_jobs.py first")
    return sorted(client.indices.get_alias(name=alias))[0]


def quarantine_failed_searches(
    config: JobrecConfig,
    queries: DataFrame,
    retrieved: DataFrame,
    source: str,
    query_columns: tuple[str, ...] = tuple(BOTH_QUERIES),
) -> int:
    """Failed searches (`error` set) -> the quarantine table, with their queries; their count."""
    failed = retrieved.where(F.col("error").isNotNull()).join(queries, "candidate_id")
    quarantine = failed.select(
        F.lit(source).alias("source"),
        F.lit("search_failed").alias("reason"),
        F.col("error").alias("detail"),
        F.to_json(F.struct("candidate_id", *query_columns)).alias("record"),
        F.current_timestamp().alias("quarantined_at"),
    )
    write_quarantine(quarantine, table_path(config, "bronze", "quarantine"), source)
    count = failed.count()
    if count:
        log.warning("%d candidates' searches failed; they are in the quarantine table", count)
    return count


# A retriever's searches: query rows -> `candidate_id`, its hits column(s), `error`.
Search = Callable[[DataFrame], DataFrame]

# The settings that change what a search returns (not how fast, nor how often it retries).
_RESULT_SETTINGS = {
    "top_k",
    "tie_margin",
    "type",
    "boosts",
    "auto_generate_synonyms_phrase_query",
    "retriever",
    "rrf_k",
}

QUERY_HASH = "query_hash"


def retrieval_fingerprint(index: str, settings: RetrievalConfig, *inputs: str) -> str:
    """What stored search results were computed from: the index version, the settings that
    change results, and whatever else the retriever reads (`inputs`: its kind, a vectors
    file). Results stored under another fingerprint are searched again."""
    described = [index, settings.model_dump(include=_RESULT_SETTINGS), *inputs]
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class RetrievalCheckpoint:
    """A retriever's sink for stages: the searches are written to `path` (a Delta table, so
    they run once however often the rest is recomputed), `retrieval.checkpoint_queries`
    queries per commit, so that a run stopped after hours of searching resumes where it
    stopped: a query whose row (hashed) and retriever (`retrieval_fingerprint`) are those of
    a stored result is not searched again, unless that search failed. Failed searches go to
    quarantine, and the run stops when they exceed the error budget; a rerun searches them
    again. The counts stay here for the stage's report."""

    config: JobrecConfig
    path: str
    source: str
    query_columns: tuple[str, ...] = tuple(FULL_QUERY)  # what a quarantined record shows
    searched: int = 0
    failed: int = 0
    resumed: int = 0

    def __call__(
        self, search: Search, searchable: DataFrame, queries: DataFrame, fingerprint: str
    ) -> DataFrame:
        spark = searchable.sparkSession
        hashed = searchable.withColumn(QUERY_HASH, F.xxhash64(*searchable.columns)).cache()
        total = hashed.count()
        keys = ["candidate_id", QUERY_HASH]
        fresh = last_note(spark, self.path) != fingerprint
        if not fresh:
            self._forget_failures(spark, fingerprint)
        done = 0 if fresh else self._stored(spark).join(hashed, keys, "left_semi").count()
        self.resumed = done
        if done:
            log.info("%s: resuming, %d of %d queries searched before", self.path, done, total)
        started = time.monotonic()
        while fresh or done < total:
            pending = hashed if fresh else hashed.join(self._stored(spark), keys, "left_anti")
            chunk = pending.orderBy("candidate_id").limit(self.config.retrieval.checkpoint_queries)
            chunk = chunk.cache()
            size = chunk.count()
            if size == 0 and not fresh:
                break  # rows stored by another run with these keys: nothing left to search
            results = search(chunk.drop(QUERY_HASH)).join(chunk.select(*keys), "candidate_id")
            if fresh:
                write_delta(results, self.path, note=fingerprint)
            else:
                append_delta(results, self.path, note=fingerprint)
            chunk.unpersist()
            fresh = False
            done += size
            rate = (done - self.resumed) / max(time.monotonic() - started, 1e-9)
            log.info(
                "%s: %d of %d queries searched (%.1f/s, %.0f s left)",
                self.path,
                done,
                total,
                rate,
                (total - done) / rate if rate else 0.0,
            )
        stored = self._stored(spark).join(hashed.select(*keys), keys, "left_semi").drop(QUERY_HASH)
        hashed.unpersist()
        self.searched = stored.count()
        self.failed = quarantine_failed_searches(
            self.config, queries, stored, self.source, self.query_columns
        )
        failures = {"search_failed": self.failed} if self.failed else {}
        enforce_budget(
            QualityReport(self.source, self.searched, self.searched - self.failed, failures),
            self.config.quality.error_budget_fraction,
        )
        return stored

    def _stored(self, spark: SparkSession) -> DataFrame:
        return read_delta(spark, self.path)

    def _forget_failures(self, spark: SparkSession, fingerprint: str) -> None:
        """Remove the stored failed searches (in one commit, under the same fingerprint) so
        that this run searches them again and stores their answers in their place: kept, an
        outage past the error budget would fail every rerun the same way. A run stopped after
        this commit finds them unsearched, so nothing is lost."""
        stored = self._stored(spark)
        failed = stored.where(F.col("error").isNotNull()).count()
        if failed:
            log.info("%s: searching again the %d queries whose search failed", self.path, failed)
            write_delta(
                spark.createDataFrame([], stored.schema),
                self.path,
                replace_where="error IS NOT NULL",
                note=fingerprint,
            )
