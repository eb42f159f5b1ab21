"""Wall time and peak memory of a command and all of its processes (the JVM included)."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from jobrec_core.platform.resources import TreeMemory


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
    with TreeMemory(process.pid, interval_s) as memory:
        output, _ = process.communicate()
    return Measured(
        time.perf_counter() - started,
        memory.peak_bytes,
        process.returncode,
        output,
        memory.peak_workers_bytes,
    )
