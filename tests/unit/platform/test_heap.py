"""`platform.heap`: garbage is collected before the freeze, what lives on is frozen, and what
comes later is collected as before."""

from __future__ import annotations

import gc
import weakref

from jobrec_core.platform.heap import freeze_long_lived


class _Node:
    """A container the collector tracks, able to form a cycle with itself."""

    def __init__(self) -> None:
        self.link: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    """A self-referencing node no one else holds: garbage only the collector can free."""
    node = _Node()
    node.link = node
    return weakref.ref(node)


def _in_a_generation(kept: object) -> bool:
    return any(any(o is kept for o in gc.get_objects(generation)) for generation in range(3))


def test_garbage_is_freed_the_living_frozen_and_later_cycles_still_collected() -> None:
    earlier = _cycle()
    kept = _Node()
    try:
        freeze_long_lived()
        assert earlier() is None  # collected, not frozen with the living
        assert gc.get_freeze_count() > 0
        assert not _in_a_generation(kept)  # out of every generation the collector scans
        later = _cycle()
        gc.collect()
        assert later() is None
    finally:
        gc.unfreeze()
    assert _in_a_generation(kept)
