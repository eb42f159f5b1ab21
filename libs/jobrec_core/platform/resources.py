"""Peak memory and CPU time of a process tree, sampled while work runs.

A local pipeline is several processes: the Python driver, the JVM it starts, Spark's Python
workers, torchrun's training processes, and beside them a service such as the local
Elasticsearch node. Their peak is what decides the machine a stage needs, so
:class:`TreeMemory` sums the resident memory of a process and all its descendants every
`interval_s` from a daemon thread, and keeps the largest sum. Where the cores go is what
decides which part to make cheaper, so :class:`CpuTime` adds up each kind of process's CPU
seconds over the same tree and the named services. Both read `/proc` through psutil; their
sampling thread's own CPU is the driver's.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

import psutil

GIB = 1024**3


class _Sampler:
    """Readings of the process tree of `pid` (this process by default) while a `with` block
    runs: one as it starts, one every `interval_s` from a daemon thread, one as it ends."""

    def __init__(self, pid: int | None, interval_s: float, name: str) -> None:
        self.pid = pid if pid is not None else os.getpid()
        self.interval_s = interval_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name=name, daemon=True)

    def __enter__(self) -> Self:
        self.sample()
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

    def _sample(self) -> None:
        while not self._done.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        raise NotImplementedError


class TreeMemory(_Sampler):
    """`with TreeMemory() as memory: ...` then `memory.peak_bytes`; `pid` defaults to this
    process. `peak_workers_bytes` is the largest sum seen over Spark's Python workers alone
    (a maximum of its own, not necessarily at the moment of `peak_bytes`)."""

    def __init__(
        self, pid: int | None = None, interval_s: float = 0.5, exclude: frozenset[int] = frozenset()
    ) -> None:
        super().__init__(pid, interval_s, "tree-memory")
        self.exclude = exclude  # processes left out with their children (a service it started)
        self._root: psutil.Process | None = None
        self.peak_bytes = 0
        self.peak_workers_bytes = 0

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
                if _is_python_worker(process):
                    workers += rss
            except psutil.Error:
                continue
        self.peak_bytes = max(self.peak_bytes, total)
        self.peak_workers_bytes = max(self.peak_workers_bytes, workers)


def _subtree(process: psutil.Process) -> set[int]:
    return {process.pid, *(child.pid for child in process.children(recursive=True))}


# The modules Spark's Python workers run as (`python -m <module>`): Spark's own, and the
# daemon the local configuration names (`spark.python.daemon.module`,
# `jobrec_core/worker_daemon.py`). A whole argument, not a substring: the JVM's own command
# line carries `spark.python.daemon.module=jobrec_core.worker_daemon`.
WORKER_MODULES = frozenset({"pyspark.daemon", "pyspark.worker", "jobrec_core.worker_daemon"})


def _is_python_worker(process: psutil.Process) -> bool:
    """Whether `process` is one of Spark's Python workers (or their daemon, which forks them)."""
    return any(argument in WORKER_MODULES for argument in process.cmdline())


DRIVER = "driver"
PYTHON_WORKERS = "Spark's Python workers"
JVM = "JVM"
OTHER = "other processes"  # e.g. training's torchrun workers


def process_identity(pid: int) -> str | None:
    """What tells a process from a later one with the same pid: the boot it runs in and its
    start time (clock ticks after boot, field 22 of /proc/<pid>/stat), which, unlike a start
    time in seconds since the epoch, no change of the wall clock moves. None where /proc
    cannot tell (not Linux, or the process is gone)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return f"{boot}:{stat.rsplit(') ', 1)[1].split()[19]}"
    except (OSError, IndexError):
        return None


def most_first(seconds: Mapping[str, float]) -> dict[str, float]:
    """`seconds` by kind, the largest first."""
    return dict(sorted(seconds.items(), key=lambda item: -item[1]))


class CpuTime(_Sampler):
    """`with CpuTime(services={"Elasticsearch node": pid}) as cpu: ...` then `cpu.seconds`:
    the CPU seconds (user and system) each kind of process spent inside the block. Kinds:
    the process `pid` itself (:data:`DRIVER`, this one by default, the sampling thread
    included), Spark's Python workers, a JVM among its descendants (Spark's), any other
    descendant, and each named service with its own child processes, counted under its name
    wherever it runs, inside the tree or not.

    A process that started before the block counts from its first reading (at the start,
    where it was running then); one started inside the block counts whole. Readings are
    `interval_s` apart, plus one at the end: a process that ends between two readings loses
    what it spent since the last one (up to `interval_s` a busy thread; all of it, for one
    that starts and ends between them). Spark's JVM and the node live through a step; its
    Python workers through a job, and a minute idle after it."""

    def __init__(
        self,
        pid: int | None = None,
        interval_s: float = 0.5,
        services: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(pid, interval_s, "cpu-time")
        self._name_by_pid = {service_pid: name for name, service_pid in (services or {}).items()}
        self._began = time.time()
        # (pid, `process_identity`) -> (kind, CPU seconds at the first reading or 0, latest)
        self._spent: dict[tuple[int, str], tuple[str, float, float]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        self._began = time.time()
        return super().__enter__()

    @property
    def seconds(self) -> dict[str, float]:
        """CPU seconds by kind of process, the largest first."""
        totals: dict[str, float] = {}
        with self._lock:
            for kind, first, latest in self._spent.values():
                totals[kind] = totals.get(kind, 0.0) + latest - first
        return most_first(totals)

    def sample(self) -> None:
        """One reading of every process; one that ends while it is read is skipped."""
        for process, kind in self._processes():
            try:
                started = process.create_time()
                key = (process.pid, process_identity(process.pid) or str(started))
                times = process.cpu_times()
            except psutil.Error:
                continue
            spent = times.user + times.system
            with self._lock:
                known = self._spent.get(key)
                first = known[1] if known else (spent if started < self._began else 0.0)
                self._spent[key] = (kind, first, spent)

    def _processes(self) -> list[tuple[psutil.Process, str]]:
        """The processes to read now, each with its kind: the services' subtrees under their
        names, then the rest of `pid`'s tree."""
        found: dict[int, tuple[psutil.Process, str]] = {}
        for service_pid, name in self._name_by_pid.items():
            try:
                service = psutil.Process(service_pid)
                for process in [service, *service.children(recursive=True)]:
                    found[process.pid] = (process, name)
            except psutil.Error:
                continue
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for process in tree:
            if process.pid not in found:
                found[process.pid] = (process, self._kind(process))
        return list(found.values())

    def _kind(self, process: psutil.Process) -> str:
        try:
            if process.pid == self.pid:
                return DRIVER
            if _is_python_worker(process):
                return PYTHON_WORKERS
            return JVM if process.name().startswith("java") else OTHER
        except psutil.Error:
            return OTHER
