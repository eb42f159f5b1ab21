"""Evidence carried from similar older ads to new ones (issue 93, `docs/PAIRS.md`).

The interest graph knows an ad only once candidates have shown interest in it. An ad posted
this morning has no link in it: its `co_interest` and `profile_behaviour` are those of an ad
nobody wanted, and a ranker that reads them puts every new ad below the older ones. What the
platform does know of a new ad is its text. So each job gets the `k` ads most like it by text
among those that have had the time to draw interest (`carried_from`, the cosine of their
document vectors, `features.profile.document_vector`; `carried_weights`, those cosines
normalised to sum to 1; which ads are chosen from: `pairs.stage.exposed_jobs`). Where the
graph holds nothing of an ad for a candidate (nobody else has shown interest in it), its
behaviour features are the weighted mean of those ads' own, each computed for the same
candidate by the same code (`features.profile`): what the interest shown in ads like this
one says about it, the ads that drew nobody counting as such.

The neighbours are found once per interest graph, with faiss' exact inner-product search
(one thread: the same every time) over unit vectors; a job is never its own neighbour.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CARRIED_FROM = "carried_from"
CARRIED_WEIGHTS = "carried_weights"
CARRIED_COLUMNS = (CARRIED_FROM, CARRIED_WEIGHTS)
# Seen ads searched at once: faiss holds their scores against every seen ad meanwhile.
SEARCH_CHUNK = 16_384


def carried_neighbours(
    job_ids: np.ndarray,
    vectors: np.ndarray,
    reference: np.ndarray,
    k: int,
    wanted: np.ndarray | None = None,
) -> pd.DataFrame:
    """`job_id, carried_from, carried_weights` for each of `job_ids` (rows of `vectors`, the
    jobs' document vectors; an all-zero row has no text to compare and gets none): its `k`
    most similar jobs among the `reference` ones (a boolean per row), itself left out,
    weighted by their cosine (those not above 0 dropped), normalised; only for the `wanted`
    rows (a boolean per row, default all), the others get none."""
    import faiss

    faiss.omp_set_num_threads(1)
    unit = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(unit, axis=1)
    unit = unit / np.maximum(norms, 1e-12)[:, None]
    reference = np.flatnonzero(reference & (norms > 0))
    empty = pd.DataFrame(
        {
            "job_id": np.asarray(job_ids, dtype=np.int32),
            CARRIED_FROM: [np.zeros(0, dtype=np.int32)] * len(job_ids),
            CARRIED_WEIGHTS: [np.zeros(0, dtype=np.float32)] * len(job_ids),
        }
    )
    if k <= 0 or reference.size == 0:
        return empty
    index = faiss.IndexFlatIP(unit.shape[1])
    index.add(unit[reference])
    hits_asked = min(k + 1, reference.size)  # one more: a reference job finds itself first
    froms = [np.zeros(0, dtype=np.int32)] * len(unit)
    weights = [np.zeros(0, dtype=np.float32)] * len(unit)
    asked = np.flatnonzero(wanted if wanted is not None else np.ones(len(unit), dtype=bool))
    for first in range(0, asked.size, SEARCH_CHUNK):
        rows = asked[first : first + SEARCH_CHUNK]
        scores, found = index.search(unit[rows], hits_asked)
        for row, score, hits in zip(rows, scores, found, strict=True):
            keep = (hits >= 0) & (reference[np.maximum(hits, 0)] != row) & (score > 0)
            chosen, cosine = reference[hits[keep]][:k], score[keep][:k]
            if norms[row] == 0 or cosine.size == 0:
                continue
            froms[row] = np.asarray(job_ids, dtype=np.int32)[chosen]
            weights[row] = (cosine / cosine.sum()).astype(np.float32)
    return empty.assign(**{CARRIED_FROM: froms, CARRIED_WEIGHTS: weights})


def carried_means(
    pool_from: list[np.ndarray],
    pool_weights: list[np.ndarray],
    scored_jobs: np.ndarray,
    scores: np.ndarray,
) -> np.ndarray:
    """Per pool row, the weighted mean of the `scores` of its `carried_from` jobs (each
    job of `scored_jobs` scored once; a neighbour not among them counts 0): the carried
    value of a behaviour feature. A row with no neighbours gets 0."""
    lengths = np.fromiter((len(f) for f in pool_from), dtype=np.int64, count=len(pool_from))
    if not lengths.sum():
        return np.zeros(len(pool_from), dtype=np.float32)
    flat_from = np.concatenate(pool_from).astype(np.int64)
    flat_weights = np.concatenate(pool_weights).astype(np.float64)
    order = np.argsort(scored_jobs, kind="stable")
    sorted_jobs = scored_jobs[order]
    at = np.clip(np.searchsorted(sorted_jobs, flat_from), 0, max(len(sorted_jobs) - 1, 0))
    hit = sorted_jobs.size > 0
    found = (sorted_jobs[at] == flat_from) if hit else np.zeros(len(flat_from), dtype=bool)
    values = np.where(found, scores[order][at] if hit else 0.0, 0.0) * flat_weights
    rows = np.repeat(np.arange(len(pool_from)), lengths)
    return np.bincount(rows, weights=values, minlength=len(pool_from)).astype(np.float32)
