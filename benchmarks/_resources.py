"""Wall time and peak memory of a command and all of its processes (the JVM included)."""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Measured:
    seconds: float
    peak_rss_bytes: int
    returncode: int
    output: str
    peak_workers_rss_bytes: int = 0  # Spark's Python workers alone (the executor side)


def run_measured(command: list[str], interval_s: float = 0.5) -> Measured:
    """Run `command`, sampling the summed RSS of its process tree every `interval_s`."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = 0
    peak_workers = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, peak_workers
        root = psutil.Process(process.pid)
        while not done.is_set():
            try:
                tree = [p for p in [root, *root.children(recursive=True)] if p.is_running()]
                peak = max(peak, sum(p.memory_info().rss for p in tree))
                workers = [p for p in tree if "pyspark.daemon" in " ".join(p.cmdline())]
                peak_workers = max(peak_workers, sum(p.memory_info().rss for p in workers))
            except psutil.Error:
                pass
            time.sleep(interval_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    done.set()
    sampler.join()
    return Measured(time.perf_counter() - started, peak, process.returncode, output, peak_workers)
