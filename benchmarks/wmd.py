"""Per-pair cost of jobrec's exact WMD against gensim's `wmdistance`, on the same pairs.

    .venv/bin/python benchmarks/wmd.py [--pairs 2000] [--words 12]

The setup of shared/spec/STACK.md's baseline: a 5,000-word, 100-dimensional vocabulary and
documents of 12 words. Both sides get the same pairs; jobrec's documents are built once per
document (as the cleaning stage does, once per job), the pair loop is timed alone.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
from gensim.models import KeyedVectors

from jobrec_core.wmd import VectorTable, WmdDocument, centroid, centroid_bounds, wmd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--words", type=int, default=12)
    parser.add_argument("--vocabulary", type=int, default=5000)
    args = parser.parse_args()
    logging.getLogger("gensim").setLevel(logging.WARNING)

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(args.vocabulary)]
    keyed = KeyedVectors(100)
    keyed.add_vectors(words, rng.normal(size=(args.vocabulary, 100)).astype(np.float32))
    docs = [
        [words[i] for i in rng.integers(0, args.vocabulary, args.words)]
        for _ in range(2 * args.pairs)
    ]
    keyed.wmdistance(docs[0], docs[1])  # first call fills the norms

    started = time.perf_counter()
    expected = [keyed.wmdistance(docs[2 * i], docs[2 * i + 1]) for i in range(args.pairs)]
    gensim_s = (time.perf_counter() - started) / args.pairs

    table = VectorTable.from_vectors(keyed.vectors)
    ours = [WmdDocument.from_word_ids(np.array([keyed.key_to_index[w] for w in d])) for d in docs]
    started = time.perf_counter()
    got = [wmd(table, ours[2 * i], ours[2 * i + 1]) for i in range(args.pairs)]
    exact_s = (time.perf_counter() - started) / args.pairs
    centroids, norms = (np.array(x) for x in zip(*(centroid(table, d) for d in ours), strict=True))
    started = time.perf_counter()
    low, high = centroid_bounds(centroids[0::2], norms[0::2], centroids[1::2], norms[1::2])
    bounds_s = (time.perf_counter() - started) / args.pairs
    inside = np.mean((low <= np.array(got)) & (np.array(got) <= high))

    error = float(np.max(np.abs(np.array(got) - np.array(expected))))
    print(f"{args.pairs:,} pairs of {args.words}-word documents, {args.vocabulary:,} words x 100")
    print(f"  gensim wmdistance (baseline)   {gensim_s * 1e6:9.1f} us/pair")
    print(
        f"  jobrec exact WMD               {exact_s * 1e6:9.1f} us/pair   "
        f"{gensim_s / exact_s:6.1f}x   max |difference| {error:.1e}"
    )
    print(
        f"  jobrec centroid bounds         {bounds_s * 1e6:9.1f} us/pair   "
        f"{gensim_s / bounds_s:6.0f}x   (vectorised over all pairs; exact value inside: "
        f"{inside:.0%}; mean width {np.mean(high - low):.3f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
