"""The query bag of words of a candidate (paper §6), as plain Python over token lists.

A candidate's query is made of the words of their jobs other than the positive one, from the
fields `queries.fields` (title, function, requirement summary, keywords), stop words already
removed by stage 1's tokenisation. Words keep the order in which they first appear (jobs in
the candidate's chronological order, fields in configured order), so a query is the same on
every run.

The cap (`queries.max_terms`, 300), in the paper's order:

1. Only when the query is too long: drop every word that comes *only* from the fields in
   `queries.drop_first_fields` (requirement summary), the least descriptive field.
2. If it is still too long: drop the words with the lowest IDF first, except the words that
   appear in two or more of the candidate's jobs ("shared" words), which say most about what
   the candidate wants. Ties are broken by the word itself, so the result is deterministic.
3. If the shared words alone exceed the cap (rare: a candidate with many long, similar
   jobs), the cap still holds: the shared words with the highest IDF are kept.

The protection of shared words applies to step 2, as in the paper ("we make sure to keep the
words that appear in multiple job ids even if their idf is small"); step 1 drops a
requirement-summary-only word even when it is shared.

Before all this, the query's jobs are chosen (`queries.min_coherence`, :func:`coherent_jobs`;
0 keeps every job, the paper's query). A share of any candidate's interest is noise: jobs
unlike the rest, from another occupation. Their words fill the query, so BM25's pool fills
with their kind of job. A job whose whole text (`queries.coherence_fields`, descriptions
included) has a mean TF-IDF cosine with the candidate's other jobs below the floor leaves the
query; the two most coherent jobs always stay, since with two jobs that disagree neither is
known to be the stray one. The floor was chosen on the dev candidates' held-out-interest MRR
(the measure then; `jobs/choose_query_floor.py` now pairs the log-rank score), never on the
ground truth (docs/RETRIEVAL.md). The candidate-profile features still read every
own job, each weighed by the same coherence (`features.profile.coherence_weights`).

The negative query keeps a random `queries.negative_fraction` (1/6) of the terms, at least
one, drawn with a generator seeded by the run seed and the candidate id.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import pandas as pd
from pyspark import Broadcast
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.config import QueriesConfig
from jobrec_core.features.profile import mean_cosines_to_others, word_tfidf_rows
from jobrec_core.text.tokens import tokens_column
from jobrec_core.text.vectors import words_and_idf_of, worker_cached

JobFields = Mapping[str, Sequence[str]]  # field name -> that field's cleaned tokens


@dataclass(frozen=True)
class QueryTerm:
    term: str
    fields: frozenset[str]  # the fields it came from, over all the candidate's jobs
    jobs: int  # in how many of the candidate's jobs it appears


def collect_terms(jobs: Sequence[JobFields], fields: Sequence[str]) -> list[QueryTerm]:
    """Distinct words of `jobs` (in first-appearance order) with where they came from."""
    order: dict[str, None] = {}
    sources: dict[str, set[str]] = {}
    job_counts: dict[str, int] = {}
    for job in jobs:
        seen_in_job: set[str] = set()
        for field in fields:
            for term in job.get(field, ()):
                order.setdefault(term)
                sources.setdefault(term, set()).add(field)
                seen_in_job.add(term)
        for term in seen_in_job:
            job_counts[term] = job_counts.get(term, 0) + 1
    return [QueryTerm(t, frozenset(sources[t]), job_counts[t]) for t in order]


def cap_terms(
    terms: Sequence[QueryTerm],
    idf: Mapping[str, float],
    max_terms: int,
    drop_first_fields: Sequence[str],
) -> list[str]:
    """The words of the query after the paper's cap, in their original order."""
    if len(terms) <= max_terms:
        return [t.term for t in terms]
    droppable = frozenset(drop_first_fields)
    kept = [t for t in terms if not t.fields <= droppable]
    if len(kept) <= max_terms:
        return [t.term for t in kept]
    shared = [t for t in kept if t.jobs >= 2]
    if len(shared) >= max_terms:
        survivors = _highest_idf(shared, idf, max_terms)
    else:
        single = [t for t in kept if t.jobs < 2]
        survivors = {t.term for t in shared} | _highest_idf(single, idf, max_terms - len(shared))
    return [t.term for t in kept if t.term in survivors]


def _highest_idf(terms: Sequence[QueryTerm], idf: Mapping[str, float], count: int) -> set[str]:
    """The `count` terms with the highest IDF; among equal IDFs, the alphabetically first."""
    ranked = sorted(terms, key=lambda t: (-idf.get(t.term, 0.0), t.term))
    return {t.term for t in ranked[:count]}


def build_query(
    jobs: Sequence[JobFields],
    fields: Sequence[str],
    idf: Mapping[str, float],
    max_terms: int,
    drop_first_fields: Sequence[str],
) -> tuple[list[str], list[float]]:
    """A candidate's query words from their jobs other than the positive one, and for each
    word the share of those jobs it appears in (1: every one of them), which the DRMM's
    term gating can read (`DrmmSpec.gate_share`): a word the candidate's jobs keep repeating
    says more about what they want than one that came with a single ad."""
    terms = collect_terms(jobs, fields)
    kept = cap_terms(terms, idf, max_terms, drop_first_fields)
    in_jobs = {t.term: t.jobs for t in terms}
    return kept, [in_jobs[t] / len(jobs) for t in kept]


# The jobs a query always keeps, however little they agree with each other (`coherent_jobs`).
ALWAYS_KEPT = 2


def coherent_jobs(
    jobs: Sequence[JobFields], idf: Mapping[str, float], settings: QueriesConfig
) -> list[JobFields]:
    """The jobs the query is built from, in their order: those whose mean TF-IDF cosine with
    the others, over `settings.coherence_fields`, is at least `settings.min_coherence`, and
    the `ALWAYS_KEPT` most coherent (the first among equals) whatever their score."""
    if settings.min_coherence <= 0 or len(jobs) <= ALWAYS_KEPT:
        return list(jobs)
    texts = [
        list(chain.from_iterable(job.get(f, ()) for f in settings.coherence_fields)) for job in jobs
    ]
    coherence = mean_cosines_to_others(word_tfidf_rows(texts, idf))
    kept = coherence >= settings.min_coherence
    kept[np.argsort(-coherence, kind="stable")[:ALWAYS_KEPT]] = True
    return [job for job, keep in zip(jobs, kept, strict=True) if keep]


def candidate_query(
    jobs: Sequence[JobFields], idf: Mapping[str, float], settings: QueriesConfig
) -> tuple[list[str], list[float]]:
    """:func:`build_query` of the :func:`coherent_jobs` among `jobs`, with `settings`."""
    return build_query(
        coherent_jobs(jobs, idf, settings),
        settings.fields,
        idf,
        settings.max_terms,
        settings.drop_first_fields,
    )


def candidate_rng(seed: int, candidate_id: int, purpose: str) -> np.random.Generator:
    """A generator that depends only on the run seed, the candidate and what it is for."""
    return np.random.default_rng([seed, candidate_id, zlib.crc32(purpose.encode())])


def negative_query(terms: Sequence[str], fraction: float, rng: np.random.Generator) -> list[str]:
    """A less informative query: a random `fraction` of the terms (at least one), in order."""
    if not terms:
        return []
    size = max(1, round(len(terms) * fraction))
    chosen = np.sort(rng.choice(len(terms), size=size, replace=False))
    return [terms[i] for i in chosen]


QUERY_SCHEMA = (
    "candidate_id LONG, positive_job_id INT, own_job_ids ARRAY<INT>, "
    "query_terms ARRAY<STRING>, query_job_share ARRAY<FLOAT>, negative_terms ARRAY<STRING>"
)


def query_inputs(candidates: DataFrame, jobs: DataFrame, settings: QueriesConfig) -> DataFrame:
    """Per candidate, the tokens of `settings.text_fields` of each job other than the
    positive (every job when `positive_job_id` is null, as for recommendations), in the
    candidate's order: `candidate_id, positive_job_id, own_job_ids, jobs`."""
    fields = settings.text_fields
    elements = candidates.select(
        "candidate_id",
        "positive_job_id",
        F.transform("sequence", lambda e: e["job_id"]).alias("own_job_ids"),
        F.posexplode("sequence").alias("pos", "e"),
    ).where(~F.col("e.job_id").eqNullSafe(F.col("positive_job_id")))
    tokens = jobs.select("job_id", *[F.col(tokens_column(f)).alias(f) for f in fields])
    return (
        elements.join(tokens, elements["e.job_id"] == tokens["job_id"])
        .groupBy("candidate_id", "positive_job_id", "own_job_ids")
        .agg(F.array_sort(F.collect_list(F.struct("pos", *fields))).alias("jobs"))
    )


def idf_lookup(
    version: str, words_and_idf: Broadcast | tuple[list[str], list[float]]
) -> dict[str, float]:
    """word -> IDF of embeddings `version` from the broadcast (words, idf) or the pair itself,
    built once per Python worker (Spark reuses workers across tasks)."""

    def build() -> dict[str, float]:
        words, idf = words_and_idf_of(words_and_idf)
        return dict(zip(words, idf, strict=True))

    return worker_cached("idf_lookup", version, build)


def build_queries(
    inputs: DataFrame, version: str, idf: Broadcast, settings: QueriesConfig, seed: int
) -> DataFrame:
    """`query_inputs` -> the query and the negative query of each candidate (`idf`: the
    broadcast (words, idf) of the embeddings' IDF table)."""
    fields = settings.text_fields

    def run(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        weights = idf_lookup(version, idf)
        for frame in frames:
            queries, shares, negatives = [], [], []
            for candidate, jobs in zip(frame["candidate_id"], frame["jobs"], strict=True):
                terms, share = candidate_query(
                    [{f: job[f] for f in fields} for job in jobs], weights, settings
                )
                rng = candidate_rng(seed, int(candidate), "negative query")
                queries.append(terms)
                shares.append(share)
                negatives.append(negative_query(terms, settings.negative_fraction, rng))
            yield pd.DataFrame(
                {
                    "candidate_id": frame["candidate_id"],
                    "positive_job_id": frame["positive_job_id"],
                    "own_job_ids": frame["own_job_ids"],
                    "query_terms": queries,
                    "query_job_share": shares,
                    "negative_terms": negatives,
                }
            )

    return inputs.mapInPandas(run, QUERY_SCHEMA)


def request_query(
    candidate_id: int,
    job_ids: Sequence[int],
    jobs: Sequence[JobFields],
    weights: Mapping[str, float],
    settings: QueriesConfig,
) -> pd.DataFrame:
    """The queries frame of one candidate given as `job_ids` in their order, each with the
    tokens of `settings.text_fields` in `jobs`: :func:`candidate_queries`'s row (all the jobs,
    none held out) built in this process, for a request answered without Spark. The shares
    are float32, as Spark stores them, so the model reads the same numbers."""
    terms, share = candidate_query(jobs, weights, settings)
    own = [int(j) for j in job_ids]
    return pd.DataFrame(
        {
            "candidate_id": [int(candidate_id)],
            "own_job_ids": [own],
            "sequence_job_ids": [own],
            "query_terms": [terms],
            "query_job_share": [np.asarray(share, dtype=np.float32)],
        }
    )


def candidate_queries(
    candidates: DataFrame,
    jobs: DataFrame,
    version: str,
    words_and_idf: Broadcast,
    settings: QueriesConfig,
    seed: int,
    hold_out: bool = False,
) -> DataFrame:
    """`candidate_id, sequence` -> `candidate_id, own_job_ids, sequence_job_ids,
    query_terms, query_job_share`: the query of all of each candidate's jobs, as
    recommendations ask it (`sequence_job_ids`: every job of the candidate's interest row,
    which the profile features leave out of the interest graph, `features.profile`).

    With `hold_out`, each candidate's `positive_job_id` (the cleaning's highest-scored job) is
    held out: the query comes from the other jobs, the held-out job stays eligible in the pool
    (it leaves `own_job_ids`), and `held_out_job_id` names it, for the evaluation to find."""
    positive = F.col("positive_job_id") if hold_out else F.lit(None).cast("int")
    inputs = query_inputs(
        candidates.select("candidate_id", "sequence", positive.alias("positive_job_id")),
        jobs,
        settings,
    )
    queries = build_queries(inputs, version, words_and_idf, settings, seed)
    if not hold_out:
        return queries.select(
            "candidate_id",
            "own_job_ids",
            F.col("own_job_ids").alias("sequence_job_ids"),
            "query_terms",
            "query_job_share",
        )
    return queries.select(
        "candidate_id",
        F.filter("own_job_ids", lambda job: job != F.col("positive_job_id")).alias("own_job_ids"),
        F.col("own_job_ids").alias("sequence_job_ids"),
        "query_terms",
        "query_job_share",
        F.col("positive_job_id").alias("held_out_job_id"),
    )
