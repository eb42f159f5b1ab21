"""Matching histograms per second: jobrec's vectorised counts vs a per-pair implementation
written like MatchZoo-py's `MatchingHistogram` (one product per pair, then a Python loop over
every cell of the similarity matrix), on the same pairs, on one core.

    .venv/bin/python benchmarks/histograms.py

Shapes: the issue's reference (10 query terms x 100 document terms) and the stage's real
shape (50 x 500, the document cap). jobrec is timed one pair at a time (as in a triple: both
documents of a query in one call) and one query with 100 documents (a MAP set), which is how
build_pairs calls it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as an executor slot
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np

from jobrec_core.features.histograms import histogram_counts

BINS = 30


def matchzoo_style(vectors: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """MatchZoo-py's loop: a product, then one Python step per (query term, document term)."""
    histogram = np.zeros((len(left), BINS + 1), dtype=np.float32)
    matrix = vectors[left] @ vectors[right].T
    for (i, j), value in np.ndenumerate(matrix):
        histogram[i][
            BINS if left[i] == right[j] else min(int((value + 1.0) / 2.0 * BINS), BINS - 1)
        ] += 1
    return histogram


def measure_shape(
    vectors: np.ndarray, queries: list[np.ndarray], documents: list[np.ndarray], length: int
) -> list[tuple[str, float]]:
    """(implementation, seconds per pair) for the baseline and both ways jobrec is called."""
    expected = matchzoo_style(vectors, queries[0], documents[0])
    ours = histogram_counts(
        vectors[queries[0]],
        queries[0],
        vectors[documents[0]],
        documents[0],
        np.array([length]),
        BINS,
    )[0]
    np.testing.assert_array_equal(ours, expected)  # the same histograms

    def baseline() -> None:
        for q, d in zip(queries, documents, strict=True):
            matchzoo_style(vectors, q, d)

    def per_pair() -> None:
        for q, d in zip(queries, documents, strict=True):
            histogram_counts(vectors[q], q, vectors[d], d, np.array([length]), BINS)

    stacked = np.concatenate(documents[:100])
    groups = queries[: max(1, len(queries) // 100)]

    def per_query_of_100() -> None:
        for q in groups:
            histogram_counts(vectors[q], q, vectors[stacked], stacked, np.full(100, length), BINS)

    pairs = len(queries)
    return [
        ("MatchZoo-py style, per pair (baseline)", timed(baseline, 1) / pairs),
        ("jobrec histogram_counts, per pair", timed(per_pair, 3) / pairs),
        (
            "jobrec histogram_counts, 100 documents a query",
            timed(per_query_of_100, 3) / (len(groups) * 100),
        ),
    ]


def timed(run: Callable[[], object], repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        run()
    return (time.perf_counter() - started) / repeat


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--words", type=int, default=20_000)
    parser.add_argument("--dims", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=200)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(args.words, args.dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    print(
        f"{args.pairs} pairs per shape, {args.words:,} words x {args.dims}, {BINS}+1 bins, one core"
    )
    print(f"{'shape':<10}{'implementation':<46}{'per pair':>12}{'pairs/s':>12}{'speed-up':>10}")
    for terms, length in ((10, 100), (50, 500)):
        queries = [rng.integers(0, args.words, terms) for _ in range(args.pairs)]
        documents = [rng.integers(0, args.words, length) for _ in range(args.pairs)]
        rows = measure_shape(vectors, queries, documents, length)
        base = rows[0][1]
        for name, seconds in rows:
            print(
                f"{terms}x{length:<7}{name:<46}{seconds * 1e6:>9.0f} us{1 / seconds:>12,.0f}"
                f"{base / seconds:>9.1f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
