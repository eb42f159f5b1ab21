"""Per-pair cost of jobrec's exact WMD against gensim's `wmdistance`, on the same pairs.

    .venv/bin/python benchmarks/wmd.py [--pairs 2000] [--words 12] [--repeat 3]
    .venv/bin/python benchmarks/wmd.py --zipf --vocabulary 41401
    .venv/bin/python benchmarks/wmd.py --sizes 12,24,40,60,20x60,50x130,50x300 --zipf

The last form compares the compiled solver with POT's network simplex, pair for pair, by
document length: it sets `jobrec_core.text.wmd.COMPILED_MAX_CELLS`, beyond which POT is used.

The setup of shared/spec/STACK.md's baseline: a 5,000-word, 100-dimensional vocabulary and
documents of 12 words (`--vocabulary 41401` is the paper's). Both sides get the same pairs;
jobrec's documents are built once per document (as the cleaning stage does, once per job) and
packed as the cleaning stage gets them from Arrow; the pair loop is timed alone.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np
from gensim.models import KeyedVectors

from jobrec_core.text.transport import transport_batch
from jobrec_core.text.wmd import (
    DocumentBatch,
    VectorTable,
    WmdDocument,
    centroid,
    centroid_bounds,
    wmd,
    wmd_pairs,
)

T = TypeVar("T")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--words", type=int, default=12)
    parser.add_argument("--vocabulary", type=int, default=5000)
    parser.add_argument(
        "--zipf",
        action="store_true",
        help="documents of 4 to 19 words drawn by Zipf's law (repeats, unequal lengths), "
        "instead of --words distinct-ish words drawn uniformly",
    )
    parser.add_argument("--repeat", type=int, default=5, help="each figure: the fastest run")
    parser.add_argument(
        "--sizes", default=None, help="comma-separated document lengths: N, or NxM for N against M"
    )
    args = parser.parse_args()
    logging.getLogger("gensim").setLevel(logging.WARNING)
    if args.sizes:
        shapes = [tuple(int(n) for n in x.split("x")) for x in args.sizes.split(",")]
        return compare_solvers([(shape[0], shape[-1]) for shape in shapes], args)

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(args.vocabulary)]
    keyed = KeyedVectors(100)
    keyed.add_vectors(words, rng.normal(size=(args.vocabulary, 100)).astype(np.float32))
    docs = [[words[i] for i in draw] for draw in _word_draws(rng, 2 * args.pairs, args)]
    keyed.wmdistance(docs[0], docs[1])  # first call fills the norms

    def per_pair(run: Callable[[], T]) -> tuple[T, float]:
        """`run`'s result and its fastest time over `--repeat` runs, per pair."""
        fastest = np.inf
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = run()
            fastest = min(fastest, time.perf_counter() - started)
        return result, fastest / args.pairs

    pairs = range(args.pairs)
    expected, gensim_s = per_pair(
        lambda: [keyed.wmdistance(docs[2 * i], docs[2 * i + 1]) for i in pairs]
    )
    table = VectorTable.from_vectors(keyed.vectors)
    ours = [WmdDocument.from_word_ids(np.array([keyed.key_to_index[w] for w in d])) for d in docs]
    got, exact_s = per_pair(lambda: [wmd(table, ours[2 * i], ours[2 * i + 1]) for i in pairs])
    first, second = np.arange(0, 2 * args.pairs, 2), np.arange(1, 2 * args.pairs, 2)
    packed = DocumentBatch.from_documents(ours)
    wmd_pairs(table, packed, first[:2], second[:2])  # compiles the kernel (once per process)
    batched, batch_s = per_pair(lambda: wmd_pairs(table, packed, first, second))
    centroids, norms = (np.array(x) for x in zip(*(centroid(table, d) for d in ours), strict=True))
    (low, high), bounds_s = per_pair(
        lambda: centroid_bounds(centroids[0::2], norms[0::2], centroids[1::2], norms[1::2])
    )
    inside = np.mean((low <= np.array(got)) & (np.array(got) <= high))

    error = float(np.max(np.abs(np.array(got) - np.array(expected))))
    sizes = np.array([d.ids.size for d in ours])
    shape = "Zipf-drawn documents" if args.zipf else f"{args.words}-word documents"
    print(
        f"{args.pairs:,} pairs of {shape} ({sizes.mean():.1f} distinct words on average), "
        f"{args.vocabulary:,} words x 100; fastest of {args.repeat} runs"
    )
    print(f"  gensim wmdistance (baseline)   {gensim_s * 1e6:9.1f} us/pair")
    print(
        f"  jobrec exact WMD, one by one    {exact_s * 1e6:9.1f} us/pair   "
        f"{gensim_s / exact_s:6.1f}x   max |difference| {error:.1e}"
    )
    batch_error = float(np.max(np.abs(batched - np.array(expected))))
    print(
        f"  jobrec exact WMD, compiled batch {batch_s * 1e6:7.1f} us/pair   "
        f"{gensim_s / batch_s:6.1f}x   max |difference| {batch_error:.1e}"
    )
    print(
        f"  jobrec centroid bounds         {bounds_s * 1e6:9.1f} us/pair   "
        f"{gensim_s / bounds_s:6.0f}x   (vectorised over all pairs; exact value inside: "
        f"{inside:.0%}; mean width {np.mean(high - low):.3f})"
    )
    return 0


def _word_draws(rng: np.random.Generator, count: int, args: argparse.Namespace) -> list[np.ndarray]:
    """Word ids of `count` documents: `--words` uniform draws each, or with `--zipf` 4 to 19
    draws by Zipf's law over the vocabulary (job titles repeat common words)."""
    if not args.zipf:
        return [rng.integers(0, args.vocabulary, args.words) for _ in range(count)]
    return [_zipf(rng, args.vocabulary, rng.integers(4, 20)) for _ in range(count)]


def _zipf(rng: np.random.Generator, vocabulary: int, size: int) -> np.ndarray:
    """`size` word ids drawn by Zipf's law (frequency 1 / rank) from `vocabulary` words."""
    frequencies = 1.0 / np.arange(1, vocabulary + 1)
    return rng.choice(vocabulary, size, p=frequencies / frequencies.sum())


def compare_solvers(sizes: list[tuple[int, int]], args: argparse.Namespace) -> int:
    """Per pair, the compiled batch (every problem, whatever its size) against POT one by one.
    With `--zipf`, words repeat and the weights differ, which costs the compiled solver about
    one shortest path per word: it is what decides `COMPILED_MAX_CELLS`."""
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(args.vocabulary, 100)).astype(np.float32)
    table = VectorTable.from_vectors(vectors)
    count = max(args.pairs // 10, 50)
    draws = "Zipf-drawn" if args.zipf else "uniform"
    print(f"{count} pairs per length, {draws} words, {args.vocabulary:,} words x 100")
    print("    words   cells   POT one by one   compiled batch   left to POT")
    for size in sizes:
        docs = [
            WmdDocument.from_word_ids(
                _zipf(rng, args.vocabulary, size[k % 2])
                if args.zipf
                else rng.integers(0, args.vocabulary, size[k % 2])
            )
            for k in range(2 * count)
        ]
        first = np.arange(0, 2 * count, 2)
        packed = DocumentBatch.from_documents(docs)

        def compiled(pairs: np.ndarray, packed=packed):
            return transport_batch(
                table.unit,
                table.squared_norms,
                packed.ids,
                packed.weights,
                packed.offsets,
                pairs,
                pairs + 1,
                10**9,
            )

        compiled(first[:2])
        started = time.perf_counter()
        got = compiled(first)
        compiled_s = (time.perf_counter() - started) / count
        started = time.perf_counter()
        expected = [wmd(table, docs[k], docs[k + 1]) for k in first]
        pot_s = (time.perf_counter() - started) / count
        solved = ~np.isnan(got)  # NaN: over the compiled solver's budget (POT solves them)
        assert np.allclose(got[solved], np.array(expected)[solved], rtol=0, atol=1e-9)
        cells = np.mean([docs[k].ids.size * docs[k + 1].ids.size for k in first])
        label = f"{size[0]}" if size[0] == size[1] else f"{size[0]}x{size[1]}"
        print(
            f"  {label:>7}  {cells:6.0f}   {pot_s * 1e6:9.1f} us     {compiled_s * 1e6:9.1f} us"
            f"     {np.count_nonzero(~solved):5d}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
