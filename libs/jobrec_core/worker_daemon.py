"""Spark's Python worker daemon, with the libraries the project's UDFs use imported once.

Spark starts one daemon per Python executable and forks a worker from it for each concurrent
task; a worker serves task after task, but one idle for a minute is stopped (Spark's
`PythonWorkerFactory`, not configurable in 3.5). Forked from `pyspark.daemon`, a new worker
imports torch, pandas, pyarrow, POT and the project's scoring code the first time it
unpickles a UDF: 7-9 s of CPU per worker on 2 cores. A local pipeline idles its workers
between stages (training, the driver's own work), so every stage paid that again for each
core (docs/BENCHMARKS.md, "Spark's Python workers, started warm").

This module is `spark.python.daemon.module` (conf/local.yaml): it imports them once, freezes
what they built out of the garbage collector's scans (`platform.heap`, which also keeps
forked pages shared), then runs Spark's own daemon, so every worker it forks starts with them
in place. Imports are all it adds: what a task computes is unchanged. The one thread they
start is pyarrow's jemalloc background thread, which jemalloc's own fork handlers leave out
of the child; the BLAS libraries run one thread each (`spark.executorEnv.
OPENBLAS_NUM_THREADS`) and torch starts its pool on first use, so forking stays safe.
"""

from __future__ import annotations

# Imported for the workers the daemon forks, not used here: the ranking pipeline brings
# torch, pandas, pyarrow and the scoring code; the WMD filter brings POT.
import jobrec_core.ranking.pipeline
import jobrec_core.text.wmd  # noqa: F401
from jobrec_core.platform.heap import freeze_long_lived

if __name__ == "__main__":
    from pyspark.daemon import manager

    freeze_long_lived()
    manager()
