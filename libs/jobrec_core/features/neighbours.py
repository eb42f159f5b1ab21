"""kNN-augmented scoring (seed 003's kNN-BE): what candidates like this one were interested in.

Seed 003 adds to a bi-encoder's score the votes of the `k` nearest labelled examples in a
memory: `(1 − λ)·s(x, y) + λ·Σ_{(x_i, y_i) ∈ N_k(x)} 1[y_i = y]·sim(x, x_i) / k`. Here:

* **the memory** holds past candidates (a seeded sample of the cleaned ones,
  `knn.memory_candidates`): each one's profile vector (`features.profile.profile_vector`,
  the dense query of docs/RETRIEVAL.md) and the jobs they showed interest in;
* **a query** is a candidate's profile vector; its `k` nearest memory candidates by cosine
  (never the candidate themself: their own row holds the very interest a held-out query
  hides, so it is skipped by id, as the interest graph skips it) vote for each pool job
  they were interested in, with their similarity, divided by `k` (:func:`neighbour_votes`);
* **the index** is faiss' inverted file (IVF) over the memory's vectors, as in the seed
  (128 lists, 16 probed there; here about √n lists, `knn.probes` probed), trained with
  faiss' fixed k-means seed on one thread, so the same memory gives the same neighbours.

The mix with the re-ranker's score is `ranking.scorers.ColumnMix` on the `knn` column, with
λ and `k` chosen on the dev candidates' held-out interest (`ranking.interpolation`).
Plain numpy over flat arrays: no loop per neighbour or per job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

KNN = "knn"  # the votes' column


@dataclass(frozen=True)
class InterestMemory:
    """Past candidates: ids, unit profile vectors (float32, one row each) and their jobs as
    a CSR list (`job_starts` has one more entry than candidates)."""

    candidate_ids: np.ndarray
    vectors: np.ndarray
    job_starts: np.ndarray
    job_ids: np.ndarray

    def __len__(self) -> int:
        return len(self.candidate_ids)

    @staticmethod
    def of(frame: pd.DataFrame) -> InterestMemory:
        """`candidate_id, query_vector, job_ids` rows (a null vector: left out), by id."""
        kept = frame[frame["query_vector"].notna()].sort_values("candidate_id")
        lengths = kept["job_ids"].map(len).to_numpy(dtype=np.int64)
        return InterestMemory(
            kept["candidate_id"].to_numpy(dtype=np.int64),
            np.asarray(np.stack(kept["query_vector"].to_list()), dtype=np.float32)
            if len(kept)
            else np.zeros((0, 0), dtype=np.float32),
            np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            np.concatenate([np.asarray(j, dtype=np.int64) for j in kept["job_ids"]])
            if len(kept)
            else np.zeros(0, dtype=np.int64),
        )


def ivf_index(memory: InterestMemory, probes: int) -> Any:
    """faiss' IVF index (inner product of unit vectors: cosine) over the memory: about √n
    lists, `probes` of them searched. Built on one thread, so it is the same every time."""
    import faiss

    faiss.omp_set_num_threads(1)
    dims = memory.vectors.shape[1]
    lists = max(1, min(int(np.sqrt(len(memory))), len(memory) // 39 or 1))
    quantizer = faiss.IndexFlatIP(dims)
    index = faiss.IndexIVFFlat(quantizer, dims, lists, faiss.METRIC_INNER_PRODUCT)
    index.train(memory.vectors)
    index.add(memory.vectors)
    index.nprobe = min(probes, lists)
    return index


def nearest(
    memory: InterestMemory, index: Any, candidates: np.ndarray, vectors: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """(memory rows, similarities), each (queries, k): every query's `k` nearest memory
    candidates other than itself, best first; -1 and 0 where fewer were found."""
    if len(candidates) == 0 or len(memory) == 0:
        return np.full((len(candidates), k), -1), np.zeros((len(candidates), k))
    similarity, rows = index.search(np.ascontiguousarray(vectors, dtype=np.float32), k + 1)
    found = rows >= 0
    itself = found & (memory.candidate_ids[np.maximum(rows, 0)] == candidates[:, None])
    keep = found & ~itself
    # the kept neighbours first, in the index's order (stable), then cut at k
    order = np.argsort(~keep, axis=1, kind="stable")[:, :k]
    rows = np.where(np.take_along_axis(keep, order, 1), np.take_along_axis(rows, order, 1), -1)
    similarity = np.where(rows >= 0, np.take_along_axis(similarity, order, 1), 0.0)
    return rows, similarity.astype(np.float64)


def neighbour_votes(
    memory: InterestMemory,
    rows: np.ndarray,
    similarity: np.ndarray,
    k: int,
    candidates: np.ndarray,
    pool_candidates: np.ndarray,
    pool_jobs: np.ndarray,
) -> np.ndarray:
    """Each pool row's (`pool_candidates[i]`, `pool_jobs[i]`) votes: the similarities of its
    candidate's first `k` neighbours (:func:`nearest`, query `j` is `candidates[j]`) that were
    interested in the job, divided by `k`."""
    if len(pool_jobs) == 0:
        return np.zeros(0, dtype=np.float64)
    rows, similarity = rows[:, :k], similarity[:, :k]
    query, neighbour = np.nonzero(rows >= 0)
    member = rows[query, neighbour]
    starts, ends = memory.job_starts[member], memory.job_starts[member + 1]
    lengths = ends - starts
    offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    votes = pd.DataFrame(
        {
            "candidate_id": np.repeat(candidates[query], lengths),
            "job_id": memory.job_ids[np.repeat(starts, lengths) + offsets],
            KNN: np.repeat(similarity[query, neighbour], lengths) / k,
        }
    )
    totals = votes.groupby(["candidate_id", "job_id"], sort=False)[KNN].sum()
    wanted = pd.MultiIndex.from_arrays(
        [np.asarray(pool_candidates, dtype=np.int64), np.asarray(pool_jobs, dtype=np.int64)]
    )
    return totals.reindex(wanted, fill_value=0.0).to_numpy(dtype=np.float64)
