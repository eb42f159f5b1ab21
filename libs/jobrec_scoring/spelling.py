"""Edit distances between titles, for the title normaliser's spelling rule
(`jobrec_scoring.titles.Lookup.spelling`): a title a few typed characters away from a known
title is that title misspelt.

Many pairs are compared at once: the Levenshtein recurrence runs one row (one character of
the first title) at a time over every pair, and the row's insertions, a running minimum along
the row, are one `np.minimum.accumulate`. Pairs are sorted by length and cut into blocks, so
that a block's width is its own longest title, not the longest of all.
"""

from __future__ import annotations

import numpy as np

# Pairs per block: enough that a row's numpy calls dwarf their overhead, few enough that a
# block's rows stay in cache.
BLOCK = 4096


def _codes(texts: list[str], width: int) -> np.ndarray:
    """Texts as rows of byte codes, padded with zeros to `width`."""
    codes = np.zeros((len(texts), width), dtype=np.uint8)
    for row, text in enumerate(texts):
        codes[row, : len(text)] = np.frombuffer(text.encode("ascii", "replace"), np.uint8)
    return codes


def _block_distances(first: list[str], second: list[str]) -> np.ndarray:
    lengths_first = np.fromiter(map(len, first), np.int64, len(first))
    lengths_second = np.fromiter(map(len, second), np.int64, len(second))
    width_first = int(lengths_first.max(initial=0))
    width_second = int(lengths_second.max(initial=0))
    # A pair's distance is read at its own lengths, and a cell depends only on the cells above
    # and to its left: what the padding holds never reaches it.
    a = _codes(first, width_first)
    b = _codes(second, width_second)
    offsets = np.arange(width_second + 1, dtype=np.int16)
    row = np.broadcast_to(offsets, (len(first), width_second + 1)).copy()
    candidate = np.empty_like(row)
    pairs = np.arange(len(first))
    distances = np.where(lengths_first == 0, lengths_second, 0)
    for i in range(1, width_first + 1):
        substitution = row[:, :-1] + (a[:, i - 1, None] != b)
        candidate[:, 0] = i
        np.minimum(substitution, row[:, 1:] + 1, out=candidate[:, 1:])  # or a deletion
        # insertions: row[j] = min over k <= j of candidate[k] + (j - k)
        candidate -= offsets
        np.minimum.accumulate(candidate, axis=1, out=row)
        row += offsets
        ended = lengths_first == i
        distances[ended] = row[pairs[ended], lengths_second[ended]]
    return distances


def edit_distances(first: list[str], second: list[str]) -> np.ndarray:
    """The Levenshtein distance (substitutions, insertions, deletions, each 1) of each
    `first[p]` and `second[p]` (ASCII texts of at most 32,767 characters)."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first texts against {len(second)} second texts")
    order = np.argsort(
        np.fromiter((max(len(x), len(y)) for x, y in zip(first, second, strict=True)), np.int64),
        kind="stable",
    )
    distances = np.zeros(len(first), dtype=np.int64)
    for start in range(0, len(order), BLOCK):
        pairs = order[start : start + BLOCK]
        distances[pairs] = _block_distances([first[p] for p in pairs], [second[p] for p in pairs])
    return distances
