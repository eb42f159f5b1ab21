"""Dense and hybrid retrieval (seed 004): kNN over the jobs' vectors, fused with BM25 in the
client.

Every job of the index carries `doc_vector`, its TF-IDF-weighted word2vec centroid
(`features.profile.document_vectors`), indexed `flat`: the kNN search compares the query with
every vector, so it is exact and the same on every build of the same jobs (an HNSW graph
depends on the order documents arrived in). A candidate's query vector is the centroid of
their own jobs' profile (`features.profile.profile_vector`), so a job's kNN score is its
`profile_w2v` feature.

The two lists are fused here, not by the cluster: the local node has no x-pack `rrf`, and a
production cluster may not have it either. Reciprocal-rank fusion (Cormack, Clarke and
Büttcher, 2009) needs no score calibration between BM25 and cosine, and its one constant is
the paper's 60, not tuned on our data.

A job the kNN list brings in may have no BM25 score among BM25's hits; the re-rankers read
BM25 (a feature, and the mix). The kNN search runs first, so the BM25 search asks the scores
of the kNN jobs too, in the same request (`search.bm25.with_scores_of`). Where that request
could not carry them (two-pass BM25, more kNN jobs than a bucket returns), one more request
scores exactly the jobs still missing with the same BM25 query, restricted to their ids
(:func:`rescore_body`). Every feature of a pool then comes from the same query, whichever
list found the job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from elasticsearch import Elasticsearch

from jobrec_core.config import RetrievalConfig
from jobrec_core.search.bm25 import SearchResult, multi_match_query, search_all
from jobrec_core.search.bounded import IDS_FROM_DOC_VALUES

VECTOR_FIELD = "doc_vector"
Retriever = Literal["bm25", "dense", "hybrid"]
HYBRID_HITS = "ARRAY<STRUCT<job_id: INT, score: FLOAT, bm25: FLOAT, bm25_rank: INT>>"


def vector_mapping(dims: int) -> dict[str, Any]:
    """The `doc_vector` field: cosine similarity, exact (`flat`) kNN."""
    return {
        "type": "dense_vector",
        "dims": dims,
        "index": True,
        "similarity": "cosine",
        "index_options": {"type": "flat"},
    }


def knn_body(vector: Sequence[float], size: int) -> dict[str, Any]:
    """The `size` jobs whose vectors are closest to `vector` (cosine)."""
    return {
        "knn": {
            "field": VECTOR_FIELD,
            "query_vector": [float(x) for x in vector],
            "k": size,
            "num_candidates": size,
        },
        "size": size,
        **IDS_FROM_DOC_VALUES,
    }


def rescore_body(text: str, job_ids: Sequence[int], settings: RetrievalConfig) -> dict[str, Any]:
    """The paper's BM25 query for `text`, restricted to `job_ids`: each one's BM25 score
    (0 where it shares no word with the query, as the filter alone then matches it)."""
    query = multi_match_query(text, settings)
    query["bool"]["filter"] = [{"ids": {"values": [str(j) for j in job_ids]}}]
    return {"query": query, "size": len(job_ids), **IDS_FROM_DOC_VALUES}


def reciprocal_rank_fusion(
    lists: Sequence[Sequence[int]], k: int, top: int
) -> list[tuple[int, float]]:
    """(job id, Σ 1 / (k + rank)) over the ranked `lists` (ranks from 1), the best `top`;
    equal sums by the lower job id. The lists are added in their given order, so the sums,
    floats, are the same on every run."""
    fused: dict[int, float] = {}
    for ranked in lists:
        for rank, job in enumerate(ranked, start=1):
            fused[job] = fused.get(job, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:top]


@dataclass(frozen=True)
class PoolHit:
    """One job of a fused pool: its place in the pool's order, and BM25's view of it."""

    job_id: int
    score: float  # the fused score (hybrid) or the cosine (dense)
    bm25: float
    bm25_rank: int | None  # in BM25's own list (own jobs counted), None when not in it

    def as_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "score": self.score,
            "bm25": self.bm25,
            "bm25_rank": self.bm25_rank,
        }


@dataclass(frozen=True)
class PoolResult:
    hits: list[PoolHit] | None
    error: str | None = None


def search_pools(
    client: Elasticsearch,
    index: str,
    texts: Sequence[str],
    vectors: Sequence[np.ndarray | None],
    own_jobs: Sequence[Sequence[int]],
    settings: RetrievalConfig,
    retriever: Retriever,
) -> list[PoolResult]:
    """Each query's pool of at most `retrieval.top_k` jobs, the candidate's own jobs left out:
    the kNN list of its vector (`dense`), or that list fused with BM25's (`hybrid`), with the
    BM25 score of every member. A query whose vector is missing or zero has an empty kNN
    list. A failed search fails its query only, with the error."""
    if retriever == "bm25":
        raise ValueError("search_pools builds dense and hybrid pools; BM25's is search.bm25's")
    searchable = [v is not None and bool(np.any(v)) for v in vectors]
    dense = _dense_lists(client, index, vectors, searchable, settings)
    excluded = [{int(j) for j in own} for own in own_jobs]
    dense_kept = [
        [(j, s) for j, s in result.hits or [] if j not in left_out]
        for result, left_out in zip(dense, excluded, strict=True)
    ]
    bm25 = (
        search_all(
            client, index, texts, settings, also_score=[[j for j, _ in kept] for kept in dense_kept]
        )
        if retriever == "hybrid"
        else [SearchResult([]) for _ in texts]
    )
    pools: list[list[tuple[int, float]] | None] = []
    errors: list[str | None] = []
    for dense_result, bm25_result, left_out, kept in zip(
        dense, bm25, excluded, dense_kept, strict=True
    ):
        error = "; ".join(e for e in (dense_result.error, bm25_result.error) if e) or None
        errors.append(error)
        if error:
            pools.append(None)
            continue
        bm25_kept = [j for j, _ in bm25_result.hits or [] if j not in left_out]
        pools.append(
            kept[: settings.top_k]
            if retriever == "dense"
            else reciprocal_rank_fusion(
                [bm25_kept, [j for j, _ in kept]], settings.rrf_k, settings.top_k
            )
        )
    bm25_scores = _bm25_of_pools(client, index, texts, pools, bm25, dense_kept, settings)
    results = []
    for pool, bm25_result, scored, error in zip(pools, bm25, bm25_scores, errors, strict=True):
        if pool is None or scored.hits is None:
            results.append(PoolResult(None, error or f"BM25 of the pool: {scored.error}"))
            continue
        listed = {j: rank for rank, (j, _) in enumerate(bm25_result.hits or [], start=1)}
        scores = dict(scored.hits)
        results.append(PoolResult([PoolHit(j, s, scores[j], listed.get(j)) for j, s in pool]))
    return results


def _dense_lists(
    client: Elasticsearch,
    index: str,
    vectors: Sequence[np.ndarray | None],
    searchable: list[bool],
    settings: RetrievalConfig,
) -> list[SearchResult]:
    asked = [v for v, ok in zip(vectors, searchable, strict=True) if ok]
    found = iter(search_all(client, index, asked, settings, knn_body))
    return [next(found) if ok else SearchResult([]) for ok in searchable]


def _bm25_of_pools(
    client: Elasticsearch,
    index: str,
    texts: Sequence[str],
    pools: list[list[tuple[int, float]] | None],
    bm25: list[SearchResult],
    dense_kept: list[list[tuple[int, float]]],
    settings: RetrievalConfig,
) -> list[SearchResult]:
    """Each pool's BM25 scores as hits (job id, score): from BM25's own answer where it has
    the job (a hit, or a kNN job it scored, 0 where it matched none of its words), otherwise
    from one restricted request per query (:func:`rescore_body`); the request's error where
    that failed."""
    known = [
        dict(result.hits or [])
        | ({j: result.scored.get(j, 0.0) for j, _ in kept} if result.scored is not None else {})
        for result, kept in zip(bm25, dense_kept, strict=True)
    ]
    missing = [
        [j for j, _ in pool if j not in scores] if pool is not None else []
        for pool, scores in zip(pools, known, strict=True)
    ]
    asked = [i for i, jobs in enumerate(missing) if jobs]
    rescored = dict(
        zip(
            asked,
            search_all(
                client,
                index,
                [(texts[i], missing[i]) for i in asked],
                settings,
                lambda query, _size: rescore_body(query[0], query[1], settings),
            ),
            strict=True,
        )
    )
    scores = []
    for i, (base, jobs) in enumerate(zip(known, missing, strict=True)):
        result = rescored.get(i, SearchResult([]))
        if result.hits is None:
            scores.append(result)
            continue
        found = dict(result.hits)
        scores.append(SearchResult(list((base | {j: found.get(j, 0.0) for j in jobs}).items())))
    return scores
