"""Keep Python's cyclic garbage collector off what a process holds for its whole life.

A Spark Python worker, the driver or a serving process imports torch, pandas, numba and the
Spark and Elasticsearch clients, then builds its caches (the word vectors, the vocabulary,
the model): about half a million objects the collector tracks. Every full collection walks
all of them, about 0.2 s each, and the short-lived objects of steady work (the searches'
JSON answers, each request's frames) trigger one every hundred candidates or so: on the pool
retrieval, half of the client side's CPU (docs/BENCHMARKS.md, "The garbage collector").

:func:`freeze_long_lived` moves what is alive at that point into the permanent generation
that no collection visits (`gc.freeze`, the standard library's own advice for long-lived
servers). Later objects are collected as before, and so are cycles among them; a frozen
object that dies is still freed by its reference count. Values never depend on it.
"""

from __future__ import annotations

import gc


def freeze_long_lived() -> None:
    """Collect what is garbage now, then freeze everything left out of later collections.

    Call it where a process has just built what it keeps: after a cache is filled, at the
    start of a partition's work, after a server's start-up. After the first call, a call
    costs a collection of what was allocated since the last one (objects already frozen are
    not visited), so calling it once per task is cheap."""
    gc.collect()
    gc.freeze()
