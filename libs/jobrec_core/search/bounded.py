"""Exact BM25 top k with fewer postings read: the commonest clauses wait for a second pass.

The paper's query has about 300 term clauses (60 words x 5 fields). On the seed's index
(466k jobs) a handful of them match almost every job: O*NET's job-zone sentence ("occupations
usually require ... previous work related skill, knowledge or experience") is in nearly
every requirement summary, so "experience", "knowledge", "require", "skill", "occupations"
each have about 460k postings there. Those clauses cost half of a search's CPU and move a
score by little: a clause adds at most `boost * (k1 + 1) * idf`, and their idf is near 0.

So a search runs in two passes (`search.bm25.search_all`):

1. **Without the common clauses.** The clauses of the query's words in each field, taken from
   the most frequent down, leave the first pass while the sum of their largest possible
   contributions `U` stays within `retrieval.bound_budget`. The first pass returns the
   `retrieval.bound_window` best jobs by that partial score `p`, without a fetch phase.
2. **The full query, for the contenders only.** A job's full score lies in `[p, p + U]`. The
   contenders are the window's jobs whose `p + U` reaches the top-k-th best `p`; the full
   query, filtered to their ids, scores them as the one-pass search would (the same query,
   so the same float arithmetic: equal scores, checked on thousands of queries).

The answer is exact when the k-th best full score beats what any job outside the window can
reach (the window's last `p` plus `U`, or `U` alone when the window holds every job the first
pass matched). Otherwise the query goes through the one-pass search. Ties at the cut are
ordered by job id as in `search.bm25.ranked_hits`: a job left out of the contenders scores
strictly below the cut.

**The screen** (`retrieval.screen`) answers a narrower question, build_pairs': is the
candidate's held-out job in the query's top k at all? On the seed's index nine searched
candidates in ten learn that it is not. Two cheap requests decide it without the search:

1. the full query, filtered to the held-out job, gives the job's own score `s` (the same
   query, so the same float arithmetic as in the search); a job that matches no word of the
   query has no score and is never a hit;
2. the query again, with `min_score` just above `s` (beyond the float margins) and
   `size: 0`, counts the jobs that certainly outscore it, up to `track_total_hits: k`. The
   node stops counting at k: when the held-out job ranks far below the cut, the jobs above it
   are dense, and it scans a small part of the index (a median of 18 ms against 155 ms for
   the search on the seed's index). The count leaves out the commonest clauses within
   `retrieval.screen_budget`, as the first pass above does: a job's partial score never
   exceeds its full one, so a job it counts certainly outscores the held-out job, and it
   reads far fewer postings (a mean of 36 ms against 61 ms for the full query's count, a
   few more candidates left undecided).

When k jobs outscore it, it cannot be in the top k (whichever way ties at the cut go), and
the full search is skipped. Otherwise it runs as before: the screen decides only what the
search would decide.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from elasticsearch import Elasticsearch

ID_FIELD = "job_id"
# Every search names its hits' jobs from doc values, not from the stored `_id`: that skips
# the fetch phase, which decompresses a block of stored fields for each hit. It was a fifth
# of a demo BM25 search's `took` and half of a kNN search's (docs/BENCHMARKS.md).
IDS_FROM_DOC_VALUES: dict[str, Any] = {"stored_fields": "_none_", "docvalue_fields": [ID_FIELD]}

# Float sums of ~300 clauses in another grouping differ in the last bits: the bounds keep a
# margin of this much, relative, plus an absolute one.
RELATIVE_MARGIN = 1e-5
ABSOLUTE_MARGIN = 1e-6

Hits = list[tuple[int, float]]


@dataclass
class FieldStatistics:
    """An index version's per-field document counts and the document frequencies of the
    words seen so far (the same for every query: cached per process, `field_statistics`)."""

    saturation: float  # k1 + 1: the most a clause's tf part reaches in Elasticsearch's BM25
    documents: dict[str, int] = field(default_factory=dict)
    frequencies: dict[str, dict[str, int]] = field(default_factory=dict)

    def idf(self, word: str, field_name: str) -> float:
        """Lucene's BM25 idf of `word` in `field_name`; 0 for a word the field lacks (or one
        the analyzer does not index as it is: such a word never leaves the first pass)."""
        frequency = self.frequencies.get(word, {}).get(field_name, 0)
        if not frequency:
            return 0.0
        documents = self.documents.get(field_name, 0)
        return math.log(1 + (documents - frequency + 0.5) / (frequency + 0.5))


_STATISTICS: dict[str, FieldStatistics] = {}


def field_statistics(
    client: Elasticsearch, index: str, words: Iterable[str], fields: Sequence[str]
) -> FieldStatistics:
    """The statistics of `index` with every word of `words`: the words not seen before are
    looked up in one `_termvectors` request of an artificial document."""
    statistics = _STATISTICS.get(index)
    if statistics is None:
        statistics = FieldStatistics(saturation=_saturation(client, index))
        _STATISTICS[index] = statistics
    missing = sorted(set(words) - statistics.frequencies.keys())
    if missing:
        text = " ".join(missing)
        vectors = client.termvectors(
            index=index,
            doc={name: text for name in fields},
            term_statistics=True,
            field_statistics=True,
            positions=False,
            offsets=False,
            payloads=False,
        )["term_vectors"]
        for name in fields:
            counts = vectors.get(name, {}).get("field_statistics", {})
            statistics.documents[name] = int(counts.get("doc_count", 0))
        for word in missing:
            statistics.frequencies[word] = {
                name: int(vectors.get(name, {}).get("terms", {}).get(word, {}).get("doc_freq", 0))
                for name in fields
            }
    return statistics


def _saturation(client: Elasticsearch, index: str) -> float:
    """k1 + 1 of the index's BM25 (the jobs index defines its own similarity; Elasticsearch's
    default k1 is 1.2). Legacy BM25 multiplies the tf part, below 1, by k1 + 1; Lucene's own
    does not: k1 + 1 bounds both."""
    settings = client.indices.get_settings(index=index)[index]["settings"]["index"]
    k1s = [float(s["k1"]) for s in settings.get("similarity", {}).values() if "k1" in s]
    return max(k1s, default=1.2) + 1


def split_common(
    words: Sequence[str], statistics: FieldStatistics, boosts: dict[str, float], budget: float
) -> tuple[dict[str, list[str]], float]:
    """(each field's words for the first pass, `U`): the commonest (field, word) clauses
    leave it, most frequent first, while their largest contributions sum to at most
    `budget`."""
    counts = Counter(words)  # a word twice in the query is two clauses
    clauses = sorted(
        (
            (statistics.frequencies.get(word, {}).get(name, 0), name, word)
            for name in boosts
            for word in counts
        ),
        reverse=True,
    )
    bound = 0.0
    common: set[tuple[str, str]] = set()
    for frequency, name, word in clauses:
        if not frequency:
            break
        most = counts[word] * boosts[name] * statistics.saturation * statistics.idf(word, name)
        if bound + most > budget:
            break
        bound += most
        common.add((name, word))
    rare = {name: [w for w in words if (name, w) not in common] for name in boosts}
    return rare, bound


def partial_query(
    rare: dict[str, list[str]], boosts: dict[str, float], auto_generate_synonyms_phrase_query: bool
) -> dict[str, Any]:
    """The query without its common clauses (`split_common`): a job's score by it, its
    partial score, never exceeds its full score (beyond the float margins)."""
    should = [
        {
            "match": {
                name: {
                    "query": " ".join(words),
                    "boost": boosts[name],
                    "auto_generate_synonyms_phrase_query": auto_generate_synonyms_phrase_query,
                }
            }
        }
        for name, words in rare.items()
        if words
    ]
    return {"bool": {"should": should}}


def first_pass_body(
    rare: dict[str, list[str]],
    boosts: dict[str, float],
    window: int,
    auto_generate_synonyms_phrase_query: bool,
) -> dict[str, Any]:
    """The `window` best job ids by partial score, every match counted (exhaustive scoring is
    faster than pruning here, as for the full query), ids from doc values (no fetch
    phase)."""
    return {
        "query": partial_query(rare, boosts, auto_generate_synonyms_phrase_query),
        "size": window,
        **IDS_FROM_DOC_VALUES,
        "track_total_hits": True,
    }


def hit_job_id(hit: dict[str, Any]) -> int:
    """The job of a hit searched with `IDS_FROM_DOC_VALUES`."""
    return int(hit["fields"][ID_FIELD][0])


def first_pass_hits(response: dict[str, Any]) -> Hits:
    """(job id, partial score) of a first pass's answer, best first."""
    return [(hit_job_id(h), float(h["_score"])) for h in response["hits"]["hits"]]


def contenders(first: Hits, bound: float, top_k: int) -> list[int]:
    """The window's jobs that may still reach the top k: `p + U` at least the k-th best `p`
    (every job, when the window holds fewer than k)."""
    floor = first[top_k - 1][1] if len(first) >= top_k else 0.0
    least = floor * (1 - RELATIVE_MARGIN) - ABSOLUTE_MARGIN
    return [job for job, partial in first if partial + bound >= least]


def second_pass_body(full_query: dict[str, Any], jobs: list[int]) -> dict[str, Any]:
    """The full query, scored for `jobs` only."""
    return {
        "query": {"bool": {"must": [full_query], "filter": [{"terms": {ID_FIELD: jobs}}]}},
        "size": len(jobs),
        **IDS_FROM_DOC_VALUES,
        "track_total_hits": False,
    }


def outscoring_count_body(query: dict[str, Any], own: float, top_k: int) -> dict[str, Any]:
    """The screen's count: the jobs whose score by `query` (the full query, or a partial one:
    never more than the full score) certainly beats `own` (above it beyond the float margins:
    a tie is not counted, whichever id would win it), counted up to `top_k` only, so that the
    node stops scanning once it has found them."""
    return {
        "query": query,
        "min_score": own * (1 + RELATIVE_MARGIN) + ABSOLUTE_MARGIN,
        "size": 0,
        "track_total_hits": top_k,
    }


def outranked(count_answer: dict[str, Any], top_k: int) -> bool:
    """Whether a count of :func:`outscoring_count_body` found `top_k` jobs above the held-out
    job: then it is certainly outside the top k."""
    return int(count_answer["hits"]["total"]["value"]) >= top_k


def exact_top(full: Hits, first: Hits, window: int, bound: float, top_k: int) -> Hits | None:
    """The top k by full score, then job id, when no job outside the window can reach it;
    None when one might (search again in one pass)."""
    ranked = sorted(full, key=lambda hit: (-hit[1], hit[0]))[:top_k]
    outside = (first[-1][1] if len(first) == window else 0.0) + bound
    if len(ranked) == top_k and ranked[-1][1] > outside * (1 + RELATIVE_MARGIN) + ABSOLUTE_MARGIN:
        return ranked
    return None
