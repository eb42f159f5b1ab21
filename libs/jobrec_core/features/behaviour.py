"""Behaviour vectors: each job as a point of the low-rank structure of who wanted what
(issue 18, docs/TRAINING.md, "Behaviour vectors").

`co_interest` follows the interest graph two steps from the candidate's own jobs; most
pool jobs of the candidate's own kind are not two steps away from any of them. A truncated
SVD of the candidate x job interest matrix carries behaviour further: two jobs get close
vectors when the candidates who want them want the same other jobs, linked or not. The
matrix is binary (a candidate wants a job or not, however they scored it), each job's column
divided by the square root of its candidate count, so that a popular job does not take the
first dimensions; a job's vector is its row of V S, unit length.

**Folds, so that no candidate finds their own jobs through themselves.** The candidates are
split into :data:`BEHAVIOUR_FOLDS` folds by a hash of their id (:func:`candidate_folds`);
fold f's vectors are fitted without fold f's rows. A candidate's `behaviour` feature is
always read from their own fold's vectors, in training, selection, evaluation and serving
alike: the interest held out of a query (or the ground truth's latent one) never shaped the
vectors it is scored with, and a candidate served tomorrow is treated as the one trained on
today. Each fit sees three quarters of the candidates.

The fit is a randomized subspace iteration (Halko, Martinsson and Tropp 2011), products of
the sparse matrix with a block of `dimensions + 32` columns, orthonormalised through their
small Gram matrix: the whole step (collect, four fits, the table back) took 23 s on the
noisier dataset's 100,000 candidates and 23,251 jobs, on 2 cores shared with the test suite,
where ARPACK's `svds` took 90 s a fold on a matrix of that size. Seeded, so the same rows and
seed give the same vectors.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import reduce
from operator import iadd

import numpy as np
import pandas as pd
import scipy.sparse as sp
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.platform.spark import arrow_to_pandas, spark_setting

log = logging.getLogger(__name__)

# The interest graph's column: a job's vectors, one per fold, fold-major.
BEHAVIOUR_VECTORS = "behaviour_vectors"
BEHAVIOUR_FOLDS = 4
# Where a row's `candidate_id` stands for something else (a further training list's id,
# `pairs.splits.more_held_out_jobs`), the candidate it belongs to, whose fold it reads.
FOLD_OWNER = "owner_id"
_OVERSAMPLING = 32  # more columns than dimensions kept: the last kept ones converge too
_POWER_ITERATIONS = 4  # products with A^T A: an interest spectrum decays slowly
_RANK_TOLERANCE = 1e-10  # directions whose Gram eigenvalue is below this share are dropped
_ROWS_PER_BLOCK = 1 << 19  # candidates per product block: 0.7 GB dense at 160 columns
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier: 2^64 / golden ratio


def candidate_folds(candidate_ids: np.ndarray, folds: int = BEHAVIOUR_FOLDS) -> np.ndarray:
    """Each candidate's fold, from the high bits of a multiplicative hash of their id (the
    low bits of consecutive ids would cycle through the folds in order)."""
    ids = np.asarray(candidate_ids, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        mixed = ids * _GOLDEN
    return ((mixed >> np.uint64(32)) % np.uint64(folds)).astype(np.int64)


def top_singular_vectors(
    matrix: sp.csr_matrix, dimensions: int, seed: int, rows_per_block: int = _ROWS_PER_BLOCK
) -> tuple[np.ndarray, np.ndarray]:
    """(the `dimensions` largest singular values, descending; their right singular vectors
    as columns), approximately, by randomized subspace iteration. Fewer where the matrix's
    rank is lower. The products run over blocks of `rows_per_block` rows (`_row_blocks`)."""
    rows, columns = matrix.shape
    width = min(dimensions + _OVERSAMPLING, rows, columns)
    if width == 0 or matrix.nnz == 0:
        return np.zeros(0), np.zeros((columns, 0))
    basis = _orthonormal(np.random.default_rng(seed).standard_normal((columns, width)))
    for _ in range(_POWER_ITERATIONS):
        blocks = _row_blocks(matrix, basis, rows_per_block)
        basis = _orthonormal(reduce(iadd, (part.T @ product for part, product in blocks)))
    # Rayleigh-Ritz on A^T A
    blocks = _row_blocks(matrix, basis, rows_per_block)
    gram = reduce(iadd, (product.T @ product for _, product in blocks))  # summed in place
    values, rotation = np.linalg.eigh(gram)
    kept = np.argsort(values)[::-1][:dimensions]
    kept = kept[values[kept] > _RANK_TOLERANCE * max(values.max(), 1e-300)]
    return np.sqrt(values[kept]), basis @ rotation[:, kept]


def _row_blocks(
    matrix: sp.csr_matrix, basis: np.ndarray, rows: int
) -> Iterator[tuple[sp.csr_matrix, np.ndarray]]:
    """`(A_b, A_b @ basis)` for consecutive blocks `A_b` of `rows` rows of A. `A @ basis` is
    dense, candidates x width: 9.5 GB for the seed preset's 7.4M candidates, which killed the
    driver; a block's is at most `rows` x width. A matrix of at most `rows` rows is one block,
    so its products are exactly those of the whole matrix."""
    for start in range(0, matrix.shape[0], rows):
        part = matrix[start : start + rows]
        yield part, part @ basis


def _orthonormal(block: np.ndarray) -> np.ndarray:
    """An orthonormal basis of `block`'s columns through its Gram matrix's eigenvectors,
    twice (once leaves errors of the order of the condition number times the precision);
    directions the block does not span are dropped."""
    for _ in range(2):
        values, vectors = np.linalg.eigh(block.T @ block)
        spanned = values > _RANK_TOLERANCE * max(values.max(), 1e-300)
        block = block @ (vectors[:, spanned] / np.sqrt(values[spanned]))
    return block


def behaviour_vectors(
    candidate_ids: np.ndarray,
    job_ids: np.ndarray,
    dimensions: int,
    seed: int,
    folds: int = BEHAVIOUR_FOLDS,
) -> tuple[np.ndarray, np.ndarray]:
    """(candidate, job) interest pairs (repeats allowed) -> (the distinct job ids, sorted;
    per job its vectors of every fold, `folds x dimensions` float32, fold-major). Fold f's
    slice is fitted without the candidates of fold f; a job none of the others wanted has a
    zero slice there, as has every dimension beyond the fit's rank."""
    jobs, job_column = np.unique(np.asarray(job_ids, dtype=np.int64), return_inverse=True)
    candidates, candidate_row = np.unique(
        np.asarray(candidate_ids, dtype=np.int64), return_inverse=True
    )
    fold_of_pair = candidate_folds(candidates, folds)[candidate_row]
    vectors = np.zeros((len(jobs), folds, dimensions), dtype=np.float32)
    for fold in range(folds):
        fitted = fold_of_pair != fold
        interest = sp.csr_matrix(
            (np.ones(int(fitted.sum())), (candidate_row[fitted], job_column[fitted])),
            shape=(len(candidates), len(jobs)),
        )
        interest.sum_duplicates()
        interest.data[:] = 1.0  # wanted or not, however often scored
        wanted_by = np.asarray(interest.getnnz(axis=0), dtype=np.float64)
        scaled = interest @ sp.diags(1.0 / np.sqrt(np.maximum(wanted_by, 1.0)))
        singular, right = top_singular_vectors(scaled.tocsr(), dimensions, seed + fold)
        vectors[:, fold, : len(singular)] = unit_rows(right * singular)
    return jobs, vectors.reshape(len(jobs), folds * dimensions)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; zero rows stay zero."""
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return np.where(norms > 1e-12, matrix / np.maximum(norms, 1e-12), 0.0)


def behaviour_similarity(
    own_vectors: list[np.ndarray],
    pool_vectors: list[np.ndarray],
    fold: int,
    own_weights: np.ndarray | None = None,
    folds: int = BEHAVIOUR_FOLDS,
) -> np.ndarray:
    """Per pool job, the cosine of its fold-`fold` vector with the candidate's profile, the
    mean of their own jobs' vectors weighted by `own_weights` (the text profile's coherence
    weights: a stray interest pulls little). 0 for a job without a vector (outside the graph,
    or wanted by nobody outside the fold) and for a candidate whose own jobs have none."""
    own, pool = _fold_slices(own_vectors, fold, folds), _fold_slices(pool_vectors, fold, folds)
    if own.shape[1] != pool.shape[1] or not own.size or not pool.size:
        return np.zeros(len(pool_vectors), dtype=np.float32)
    weights = np.ones(len(own)) if own_weights is None else np.asarray(own_weights, float)
    if len(weights) != len(own):
        raise ValueError(f"{len(weights)} weights for {len(own)} own jobs")
    profile = weights @ own
    norm = np.linalg.norm(profile)
    if norm < 1e-12:
        return np.zeros(len(pool), dtype=np.float32)
    return (pool @ (profile / norm)).astype(np.float32)


def has_fold_vector(
    vectors: list[np.ndarray], fold: int, folds: int = BEHAVIOUR_FOLDS
) -> np.ndarray:
    """Whether each job has a non-zero fold-`fold` vector: someone outside the fold showed
    interest in it (`features.carried` carries the others' from their neighbours)."""
    return np.asarray(np.any(_fold_slices(vectors, fold, folds) != 0, axis=1))


def _fold_slices(vectors: list[np.ndarray], fold: int, folds: int) -> np.ndarray:
    """The jobs' fold-`fold` slices as rows (float64); zeros for a job without vectors. All
    vectors must have the same length, a multiple of `folds`."""
    lengths = {len(v) for v in vectors if len(v)}
    if len(lengths) > 1:
        raise ValueError(f"behaviour vectors of different lengths: {sorted(lengths)}")
    length = lengths.pop() if lengths else 0
    if length % folds:
        raise ValueError(f"a behaviour vector of {length} values is not {folds} folds")
    width = length // folds
    rows = np.zeros((len(vectors), width))
    present = np.flatnonzero(np.fromiter(map(len, vectors), dtype=np.int64, count=len(vectors)))
    if present.size:
        stacked = np.stack([vectors[i] for i in present])
        rows[present] = stacked[:, fold * width : (fold + 1) * width]
    return rows


# --- in Spark ---------------------------------------------------------------------------------


def behaviour_table(rows: DataFrame, dimensions: int, seed: int) -> DataFrame:
    """`candidate_id, sequence` -> `job_id, behaviour_vectors` (`features.behaviour`),
    fitted on the driver: the interest pairs collected through Arrow (the demo's 100,000
    candidates: 0.5 M pairs, 4 MB), the vectors sent back as one small table (30,000 jobs x
    4 folds x 128 dimensions: 61 MB). With `dimensions` 0 no job has vectors."""
    spark = rows.sparkSession
    schema = f"job_id INT, {BEHAVIOUR_VECTORS} ARRAY<FLOAT>"
    if dimensions == 0:
        return spark.createDataFrame([], schema)
    interests = rows.select(
        "candidate_id", F.explode(F.array_distinct("sequence.job_id")).alias("job_id")
    )
    pairs = arrow_to_pandas(interests.where(F.col("job_id").isNotNull()))
    jobs, vectors = behaviour_vectors(
        pairs["candidate_id"].to_numpy(), pairs["job_id"].to_numpy(), dimensions, seed
    )
    log.info(
        "behaviour vectors: %d jobs, %d candidates, %d dimensions per fold",
        len(jobs),
        pairs["candidate_id"].nunique(),
        dimensions,
    )
    frame = pd.DataFrame({"job_id": jobs.astype(np.int32), BEHAVIOUR_VECTORS: list(vectors)})
    with spark_setting(spark, "spark.sql.execution.arrow.pyspark.enabled", "true", "false"):
        return spark.createDataFrame(frame, schema)
