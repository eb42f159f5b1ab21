"""The background producer of training batches: same items in the same order, errors raised
where the batches are used, and nothing left running when the consumer stops early."""

import threading
from collections.abc import Iterator

import pytest

from jobrec_core.training.batches import prefetched


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_prefetching_keeps_every_item_in_order(depth):
    assert list(prefetched(range(50), depth)) == list(range(50))


def test_items_are_produced_by_another_thread():
    producers = set()

    def items() -> Iterator[int]:
        for number in range(5):
            producers.add(threading.current_thread().name)
            yield number

    assert list(prefetched(items(), 2)) == [0, 1, 2, 3, 4]
    assert producers == {"batch-prefetch"}


def test_an_error_while_producing_is_raised_to_the_consumer():
    def items() -> Iterator[int]:
        yield 1
        raise ValueError("row group 7 is corrupt")

    got = []
    with pytest.raises(ValueError, match="row group 7"):
        for item in prefetched(items(), 2):
            got.append(item)
    assert got == [1]


def test_a_consumer_that_stops_early_stops_and_closes_the_producer():
    closed = threading.Event()

    def items() -> Iterator[int]:
        try:
            number = 0
            while True:
                yield number
                number += 1
        finally:
            closed.set()  # where the Petastorm reader is stopped

    stream = prefetched(items(), 2)
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    assert closed.wait(5)
    assert not any(t.name == "batch-prefetch" for t in threading.enumerate())
