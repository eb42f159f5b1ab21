"""Edit distances of many title pairs at once (`jobrec_scoring.spelling`), against the
textbook recurrence."""

import random

import pytest

from jobrec_scoring.spelling import BLOCK, edit_distances


def levenshtein(first: str, second: str) -> int:
    """The textbook dynamic programme, one cell at a time."""
    previous = list(range(len(second) + 1))
    for i, a in enumerate(first, start=1):
        current = [i]
        for j, b in enumerate(second, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1]


def test_known_distances_including_empty_texts():
    first = ["kitten", "", "abc", "flaw", "agger", "same"]
    second = ["sitting", "abc", "", "lawn", "ager", "same"]
    assert edit_distances(first, second).tolist() == [3, 3, 3, 2, 1, 0]


def test_random_pairs_across_several_blocks_equal_the_textbook_recurrence():
    rng = random.Random(7)

    def text() -> str:
        return "".join(rng.choice("ab c") for _ in range(rng.randint(0, 25)))

    first = [text() for _ in range(BLOCK + 500)]
    second = [text() for _ in range(BLOCK + 500)]
    expected = [levenshtein(a, b) for a, b in zip(first, second, strict=True)]
    assert edit_distances(first, second).tolist() == expected


def test_no_pairs_and_unequal_lists():
    assert edit_distances([], []).shape == (0,)
    with pytest.raises(ValueError, match="1 first texts against 2"):
        edit_distances(["a"], ["a", "b"])


def test_texts_holding_the_padding_byte_are_compared_as_they_are():
    # pairs of several lengths in one block: the shorter ones are padded with zero bytes
    first = ["ab", "a", "\x00", "abc\x00"]
    second = ["ab\x00", "a\x00\x00", "", "abc"]
    assert edit_distances(first, second).tolist() == [1, 2, 1, 1]
