"""Peak memory of a process tree, sampled while work runs.

A local pipeline is several processes: the Python driver, the JVM it starts, Spark's Python
workers, torchrun's training processes. Their peak is what decides the machine a stage needs,
so :class:`TreeMemory` sums the resident memory of a process and all its descendants every
`interval_s` from a daemon thread, and keeps the largest sum. It reads `/proc` through psutil
and changes nothing it measures.
"""

from __future__ import annotations

import os
import threading
from types import TracebackType

import psutil

GIB = 1024**3


class TreeMemory:
    """`with TreeMemory() as memory: ...` then `memory.peak_bytes`; `pid` defaults to this
    process. `peak_workers_bytes` is the largest sum seen over Spark's Python workers alone
    (a maximum of its own, not necessarily at the moment of `peak_bytes`)."""

    def __init__(
        self, pid: int | None = None, interval_s: float = 0.5, exclude: frozenset[int] = frozenset()
    ) -> None:
        self.pid = pid if pid is not None else os.getpid()
        self.exclude = exclude  # processes left out with their children (a service it started)
        self._root: psutil.Process | None = None
        self.interval_s = interval_s
        self.peak_bytes = 0
        self.peak_workers_bytes = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="tree-memory", daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            self.sample()
            if self._done.wait(self.interval_s):
                return

    def sample(self) -> None:
        """One reading; a process that ends while it is read is skipped."""
        try:
            if self._root is None:
                self._root = psutil.Process(self.pid)
            tree = [self._root, *self._root.children(recursive=True)]
            left_out = {pid for p in tree if p.pid in self.exclude for pid in _subtree(p)}
        except psutil.Error:  # not started yet, or already gone
            return
        tree = [p for p in tree if p.pid not in left_out]
        total = workers = 0
        for process in tree:
            try:
                rss = process.memory_info().rss
                total += rss
                if "pyspark.daemon" in " ".join(process.cmdline()):
                    workers += rss
            except psutil.Error:
                continue
        self.peak_bytes = max(self.peak_bytes, total)
        self.peak_workers_bytes = max(self.peak_workers_bytes, workers)


def _subtree(process: psutil.Process) -> set[int]:
    return {process.pid, *(child.pid for child in process.children(recursive=True))}
