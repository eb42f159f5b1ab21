"""BM25 retrieval from the `jobs` alias: the seed's query (Figure 3) and how it is sent.

The query is a `bool/should` around one `multi_match` of type `most_fields` over the five
indexed fields with the seed's boosts: a term matching in several fields scores in each of
them, which is how the seed ranks a job whose title, function and keywords all agree.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elasticsearch import ApiError, Elasticsearch, TransportError

from jobrec_core.config import RetrievalConfig


def multi_match_query(text: str, settings: RetrievalConfig) -> dict[str, Any]:
    """The seed's query for a bag of words given as one space-separated string."""
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


def search_body(text: str, settings: RetrievalConfig) -> dict[str, Any]:
    """The search request. Equal scores are ordered by job id: otherwise their order follows
    the index's segment layout, which differs between two builds of the same jobs, and so
    would the negative picked from them and the cut at `top_k`."""
    return {
        "query": multi_match_query(text, settings),
        "size": settings.top_k,
        "sort": [{"_score": "desc"}, {"job_id": "asc"}],
        "track_scores": True,
        "_source": False,
        "track_total_hits": False,
    }


def search_all(
    client: Elasticsearch, index: str, texts: Sequence[str], settings: RetrievalConfig
) -> list[SearchResult]:
    """Every query of `texts`, in `_msearch` batches of `retrieval.msearch_batch`.

    Each batch runs at most `retrieval.max_concurrent_searches` searches at once on the
    cluster. A batch that fails as a whole (timeout, connection, HTTP 429/5xx) and each query
    that fails inside a batch with a retryable status are retried with doubling back-off up to
    `retrieval.max_retries` times; a query refused as invalid is not retried. Either way a
    failure is returned as a result with its error, never dropped.
    """
    results: list[SearchResult | None] = [None] * len(texts)
    for start in range(0, len(texts), settings.msearch_batch):
        batch = range(start, min(start + settings.msearch_batch, len(texts)))
        _search_batch(client, index, texts, list(batch), settings, results)
    return [r if r is not None else SearchResult(None, "not searched") for r in results]


def _search_batch(
    client: Elasticsearch,
    index: str,
    texts: Sequence[str],
    pending: list[int],
    settings: RetrievalConfig,
    results: list[SearchResult | None],
) -> None:
    backoff = settings.backoff_s
    last_error = ""
    for attempt in range(settings.max_retries + 1):
        if attempt:
            time.sleep(backoff)
            backoff *= 2
        searches: list[dict[str, Any]] = []
        for position in pending:
            searches += [{"index": index}, search_body(texts[position], settings)]
        try:
            response = client.options(request_timeout=settings.timeout_s).msearch(
                searches=searches,
                max_concurrent_searches=settings.max_concurrent_searches,
            )
        except (TransportError, ApiError) as error:
            status = getattr(error, "status_code", None) or getattr(error, "status", None)
            last_error = f"{type(error).__name__}: {error}"
            if isinstance(status, int) and status < 500 and status != 429:
                break  # the request itself is invalid: retrying cannot help
            continue
        retry = []
        for position, item in zip(pending, response["responses"], strict=True):
            if "error" not in item:
                results[position] = SearchResult(
                    [(int(h["_id"]), float(h["_score"])) for h in item["hits"]["hits"]]
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
