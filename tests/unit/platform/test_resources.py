"""CPU time by kind of process (`platform.resources.CpuTime`), read from real processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from jobrec_core.platform.resources import DRIVER, OTHER, PYTHON_WORKERS, CpuTime

# A fixed amount of work: its CPU time is whatever it costs here, never zero.
SPIN = "sum(i * i for i in range(3_000_000))"
# Wait for a line on stdin, spin, say so and wait to be killed: the work falls inside the
# block, and the process is alive for its last reading.
SPIN_THEN_WAIT = (
    f"import sys; sys.stdin.readline(); {SPIN}; print('done', flush=True); sys.stdin.readline()"
)


@contextmanager
def child(code: str, *arguments: str) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", code, *arguments],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def tell(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


def done(process: subprocess.Popen[str]) -> bool:
    assert process.stdout is not None
    return process.stdout.readline() == "done\n"


def test_this_process_counts_as_the_driver():
    with CpuTime() as cpu:
        eval(SPIN)
    assert cpu.seconds[DRIVER] > 0


def test_a_named_service_counts_under_its_name_and_a_child_as_other():
    with (
        child(SPIN_THEN_WAIT) as service,
        child(SPIN_THEN_WAIT) as helper,
        CpuTime(services={"search node": service.pid}) as cpu,
    ):
        tell(service)
        tell(helper)
        assert done(service) and done(helper)
    assert cpu.seconds["search node"] > 0
    assert cpu.seconds[OTHER] > 0


def test_a_worker_of_the_projects_spark_daemon_counts_as_a_python_worker():
    # One argument is the daemon module, as in `python -m jobrec_core.worker_daemon`; the
    # other process only carries the setting that names it, as Spark's JVM does.
    with (
        child(SPIN_THEN_WAIT, "jobrec_core.worker_daemon") as worker,
        child(SPIN_THEN_WAIT, "spark.python.daemon.module=jobrec_core.worker_daemon") as jvm,
        CpuTime() as cpu,
    ):
        tell(worker)
        tell(jvm)
        assert done(worker) and done(jvm)
    assert cpu.seconds[PYTHON_WORKERS] > 0
    assert cpu.seconds[OTHER] > 0


def test_what_a_process_spent_before_the_block_is_not_counted():
    with child(f"import sys; {SPIN}; print('done', flush=True); sys.stdin.readline()") as busy:
        assert done(busy)
        with CpuTime(services={"search node": busy.pid}) as cpu:
            pass  # it only waits for a line meanwhile
    assert cpu.seconds["search node"] < 0.05  # it spun before, and only waits inside
