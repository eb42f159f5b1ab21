"""Online recommendations: one candidate's jobs in, their top 10 out, in one process.

The pipeline is the batch recommendations' (`ranking.factory.rerank_pipeline`: the configured
retriever, the features, the champion, the top `evaluation.k`), run in its pandas form. It is
built on `ranking.factory.InMemoryInputs`, so a request starts no Spark job: the job texts,
the interest graph and the IDF were collected once, at start-up (`serving.stage.
online_recommender`); what a request costs is its query, the searches on Elasticsearch, the
features of about 100 jobs and one pass of the network. The same candidate gets the same top
10 here as from `jobs/recommend.py`, since the two engines of the pipeline run the same code.

A request is a candidate's jobs with their interest scores, as the platform records them:

    {"jobs": [{"job_id": 17, "score": 9}, {"job_id": 42, "score": 6}], "candidate_id": 86494}

(`candidate_id` is optional: it only labels the answer and the log line). The jobs are taken
as they are, in their order: the cleaning stage's filters are the batch's business, not the
request's. The scores are checked (1-10) but do not change the ranking, as in the batch path:
the query and the profile features read the jobs, not how much each one interested.
"""

from __future__ import annotations

import json
import reprlib
import time
from collections.abc import Container, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from jobrec_core.config import JobrecConfig
from jobrec_core.features.queries import request_query
from jobrec_core.ranking.pipeline import (
    Bm25Retriever,
    Columns,
    Cutoff,
    Pipeline,
    PoolRetriever,
    Reranker,
    Step,
)
from jobrec_core.text.tokens import tokens_column

MIN_SCORE, MAX_SCORE = 1, 10  # the platform's interest scores
PARTS = ("query", "retrieval", "features", "scoring", "formatting")


class RequestError(ValueError):
    """A request the endpoint refuses, with the HTTP status that says why (4xx)."""

    def __init__(self, status: int, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.details = details

    def as_json(self) -> dict[str, Any]:
        return {"error": str(self), **self.details}


@dataclass(frozen=True)
class Interest:
    job_id: int
    score: int


@dataclass(frozen=True)
class RecommendRequest:
    jobs: tuple[Interest, ...]
    candidate_id: int = 0


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is no id


# How a refused value is quoted back: enough to recognise it, never the client's whole input
# (the message goes into the answer and the log line, and a field may hold a megabyte).
def _short_repr() -> reprlib.Repr:
    quote = reprlib.Repr()  # its keyword arguments are Python 3.12's
    quote.maxstring = quote.maxother = 40
    quote.maxlist = quote.maxdict = 3
    quote.maxlevel = 2
    return quote


_QUOTE = _short_repr()


def parse_request(body: bytes, known_jobs: Container[int], max_jobs: int) -> RecommendRequest:
    """A request body -> the request, or a :class:`RequestError`: 400 for what is not a
    well-formed request (JSON, shape, types, a score outside 1-10, no jobs, more than
    `max_jobs`: the batch path's `ingest.max_sequence_length`, since a request's cost grows
    with the square of its jobs), 422 for job ids the catalogue does not have (well formed,
    but nothing can be recommended from them)."""
    try:
        payload = json.loads(body)
    # `ValueError` covers undecodable bytes and malformed JSON, and also an integer of more
    # digits than Python converts; `RecursionError`, arrays nested thousands deep
    except (ValueError, RecursionError) as error:
        reason = "it is nested too deeply" if isinstance(error, RecursionError) else error
        raise RequestError(400, f"the body is not JSON: {reason}") from error
    if not isinstance(payload, dict):
        raise RequestError(400, 'the body must be a JSON object: {"jobs": [...]}')
    unexpected = sorted(set(payload) - {"jobs", "candidate_id"})
    if unexpected:
        raise RequestError(400, f"unknown fields {unexpected}; expected jobs, candidate_id")
    candidate_id = payload.get("candidate_id", 0)
    if not _integer(candidate_id):
        raise RequestError(400, "candidate_id must be an integer")
    jobs = payload.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise RequestError(400, 'jobs must be a non-empty list of {"job_id": int, "score": 1-10}')
    if len(jobs) > max_jobs:
        raise RequestError(400, f"{len(jobs)} jobs; a request takes at most {max_jobs}")
    interests = []
    for position, job in enumerate(jobs):
        if not isinstance(job, dict) or set(job) != {"job_id", "score"}:
            expected = '{"job_id": int, "score": int}'
            raise RequestError(400, f"jobs[{position}] must be {expected}, got {_QUOTE.repr(job)}")
        job_id, score = job["job_id"], job["score"]
        if not _integer(job_id):
            raise RequestError(400, f"jobs[{position}].job_id must be an integer")
        if not _integer(score) or not MIN_SCORE <= score <= MAX_SCORE:
            raise RequestError(
                400,
                f"jobs[{position}].score must be an integer from {MIN_SCORE} to {MAX_SCORE}, "
                f"got {_QUOTE.repr(score)}",
            )
        interests.append(Interest(job_id, score))
    unknown = sorted({j.job_id for j in interests if j.job_id not in known_jobs})
    if unknown:
        raise RequestError(422, "unknown job ids", unknown_job_ids=unknown)
    return RecommendRequest(tuple(interests), candidate_id)


@dataclass(frozen=True)
class Recommendation:
    rank: int
    job_id: int
    title: str
    score: float
    bm25: float
    bm25_rank: int | None  # None: only the kNN list of a dense or hybrid pool found it


@dataclass(frozen=True)
class RecommendResult:
    candidate_id: int
    recommendations: list[Recommendation]
    model: str
    index: str
    retriever: str
    timings_ms: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe_timings(self) -> str:
        """`total 41.2 ms (query 1.0, retrieval 12.3, ...)`: the log line's part."""
        parts = ", ".join(f"{part} {self.timings_ms[part]:.1f}" for part in PARTS)
        return f"total {self.timings_ms['total']:.1f} ms ({parts})"


def part_of(step: Step) -> str:
    """Which part of a request's time a pipeline step counts in."""
    if isinstance(step, (Bm25Retriever, PoolRetriever)):
        return "retrieval"
    if isinstance(step, (Reranker, Cutoff, Columns)):
        return "scoring"
    return "features"


@dataclass(frozen=True)
class OnlineRecommender:
    """The batch recommendations' pipeline for one request at a time, on in-memory inputs.
    Safe to share between threads: it keeps no state between requests."""

    config: JobrecConfig
    pipeline: Pipeline  # built on `InMemoryInputs`: no Spark job per request
    catalogue: pd.DataFrame  # by `job_id`: `title` and `<field>_tokens` of `queries.text_fields`
    idf: Mapping[str, float]  # word -> IDF of the run's embeddings, for the query's cap
    model: str
    index: str

    def parse(self, body: bytes) -> RecommendRequest:
        return parse_request(body, self.catalogue.index, self.config.ingest.max_sequence_length)

    def recommend(self, request: RecommendRequest) -> RecommendResult:
        """The request's top `evaluation.k`, best first, with the time of each part."""
        timings = dict.fromkeys(PARTS, 0.0)
        started = time.perf_counter()
        fields = self.config.queries.text_fields
        ids = [j.job_id for j in request.jobs]
        own = self.catalogue.loc[ids, [tokens_column(f) for f in fields]]
        frame = request_query(
            request.candidate_id,
            ids,
            [dict(zip(fields, row, strict=True)) for row in own.itertuples(index=False)],
            self.idf,
            self.config.queries,
        )
        if not len(frame["query_terms"].iloc[0]):
            # nothing to search with: the retrievers would fail on an empty query
            raise RequestError(
                422, "these jobs' query fields have no words to search with", job_ids=ids
            )
        timings["query"] = _elapsed_ms(started)
        for step in self.pipeline.steps:
            begun = time.perf_counter()
            frame = step.transform(frame)
            timings[part_of(step)] += _elapsed_ms(begun)
        begun = time.perf_counter()
        titles = self.catalogue["title"]
        recommendations = [
            Recommendation(
                rank=int(row.rank),
                job_id=int(row.job_id),
                title=str(titles.at[row.job_id]),
                score=float(row.score),
                bm25=float(row.bm25),
                bm25_rank=None if pd.isna(row.bm25_rank) else int(row.bm25_rank),
            )
            for row in frame.sort_values("rank").itertuples()
        ]
        timings["formatting"] = _elapsed_ms(begun)
        timings["total"] = _elapsed_ms(started)
        return RecommendResult(
            request.candidate_id,
            recommendations,
            self.model,
            self.index,
            self.config.retrieval.retriever,
            timings,
        )

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "model": self.model,
            "index": self.index,
            "retriever": self.config.retrieval.retriever,
            "jobs": len(self.catalogue),
        }


def _elapsed_ms(since: float) -> float:
    return (time.perf_counter() - since) * 1e3
