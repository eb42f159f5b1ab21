"""Peak memory and CPU time of a process tree, sampled while work runs.

A local pipeline is several processes: the Python driver, the JVM it starts, Spark's Python
workers, torchrun's training processes, and beside them a service such as the local
Elasticsearch node. Their peak is what decides the machine a stage needs, so
:class:`TreeMemory` sums the resident memory of a process and all its descendants every
`interval_s` from a daemon thread, and keeps the largest sum. Where the cores go is what
decides which part to make cheaper, so :class:`CpuTime` adds up each kind of process's CPU
seconds over the same tree and the named services. Both read `/proc` through psutil and
change nothing they measure.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
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


DRIVER = "driver"
PYTHON_WORKERS = "Spark's Python workers"
JVM = "JVM"
OTHER = "other"


class CpuTime:
    """`with CpuTime(services={"Elasticsearch node": pid}) as cpu: ...` then `cpu.seconds`:
    the CPU seconds (user and system) each kind of process spent inside the block. Kinds:
    the process `pid` itself (:data:`DRIVER`, this one by default), Spark's Python workers,
    a JVM among its descendants (Spark's), any other descendant, and each named service,
    which is counted under its name wherever it runs, inside the tree or not.

    A process running at the start counts from what it had spent then; one started inside the
    block counts whole. Readings are `interval_s` apart, and a final one is taken at the end:
    a process that ends between two readings loses at most its last `interval_s` of CPU
    (Spark's workers and JVM live through a job, so only short-lived helpers can)."""

    def __init__(
        self,
        pid: int | None = None,
        interval_s: float = 0.2,
        services: Mapping[str, int] | None = None,
    ) -> None:
        self.pid = pid if pid is not None else os.getpid()
        self.services = {service_pid: name for name, service_pid in (services or {}).items()}
        self.interval_s = interval_s
        # (pid, start time) -> (kind, CPU seconds at the start or 0, the latest reading)
        self._spent: dict[tuple[int, float], tuple[str, float, float]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="cpu-time", daemon=True)

    def __enter__(self) -> CpuTime:
        self.sample(starting=True)
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
        self.sample()

    @property
    def seconds(self) -> dict[str, float]:
        """CPU seconds by kind of process, most first."""
        totals: dict[str, float] = {}
        for kind, first, latest in self._spent.values():
            totals[kind] = totals.get(kind, 0.0) + latest - first
        return dict(sorted(totals.items(), key=lambda item: -item[1]))

    def _sample(self) -> None:
        while not self._done.wait(self.interval_s):
            self.sample()

    def sample(self, starting: bool = False) -> None:
        """One reading of every process; one that ends while it is read is skipped."""
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        known = {process.pid for process in tree}
        for service_pid in self.services:
            if service_pid not in known:
                try:
                    tree.append(psutil.Process(service_pid))
                except psutil.Error:
                    continue
        for process in tree:
            try:
                key = (process.pid, process.create_time())
                times = process.cpu_times()
                spent = times.user + times.system
                kind = self._kind(process)
            except psutil.Error:
                continue
            first = self._spent[key][1] if key in self._spent else (spent if starting else 0.0)
            self._spent[key] = (kind, first, spent)

    def _kind(self, process: psutil.Process) -> str:
        if process.pid in self.services:
            return self.services[process.pid]
        if process.pid == self.pid:
            return DRIVER
        command = " ".join(process.cmdline())
        if "pyspark.daemon" in command or "pyspark.worker" in command:
            return PYTHON_WORKERS
        if process.name().startswith("java"):
            return JVM
        return OTHER
