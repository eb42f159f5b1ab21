"""Time to fit one fold's behaviour vectors (`features.behaviour.top_singular_vectors`, the
randomized subspace iteration) against the baseline it replaced, ARPACK's truncated SVD
(`scipy.sparse.linalg.svds`), on the same sparse interest matrix, and how close the two
fits' singular values are.

    .venv/bin/python benchmarks/behaviour.py
    .venv/bin/python benchmarks/behaviour.py --candidates 75000 --jobs 23000 --dimensions 128

The matrix is synthetic, the shape of one fold of the demo's store (three quarters of
100,000 candidates, about 5 interests each, Zipf-popular jobs), binary with columns scaled
by 1/sqrt(candidates per job), as `behaviour_vectors` builds it.
"""

from __future__ import annotations

import argparse
import time

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds

from jobrec_core.features.behaviour import top_singular_vectors


def interest_matrix(candidates: int, jobs: int, per_candidate: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(candidates), per_candidate)
    popularity = 1.0 / np.arange(1, jobs + 1) ** 0.8
    columns = rng.choice(jobs, len(rows), p=popularity / popularity.sum())
    matrix = sp.csr_matrix((np.ones(len(rows)), (rows, columns)), shape=(candidates, jobs))
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    wanted_by = np.maximum(np.asarray(matrix.getnnz(axis=0), dtype=np.float64), 1.0)
    return (matrix @ sp.diags(1.0 / np.sqrt(wanted_by))).tocsr()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=75_000)
    parser.add_argument("--jobs", type=int, default=23_000)
    parser.add_argument("--interests", type=int, default=5, help="per candidate")
    parser.add_argument("--dimensions", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    matrix = interest_matrix(args.candidates, args.jobs, args.interests, args.seed)
    print(f"matrix {matrix.shape[0]:,} x {matrix.shape[1]:,}, {matrix.nnz:,} non-zeros")

    start = time.perf_counter()
    values, _ = top_singular_vectors(matrix, args.dimensions, args.seed)
    randomized = time.perf_counter() - start
    start = time.perf_counter()
    exact = np.sort(svds(matrix, k=args.dimensions, random_state=args.seed)[1])[::-1]
    arpack = time.perf_counter() - start

    error = np.abs(values - exact[: len(values)]) / exact[: len(values)]
    print(f"{'fit':<42} {'wall s':>8}")
    print(f"{'top_singular_vectors (randomized, subject)':<42} {randomized:>8.1f}")
    print(f"{'scipy svds (ARPACK, baseline)':<42} {arpack:>8.1f}")
    print(f"speed-up x{arpack / randomized:.1f}; singular values' relative error: ", end="")
    print(f"top {error[0]:.1e}, median {np.median(error):.1e}, last {error[-1]:.1e}")


if __name__ == "__main__":
    main()
