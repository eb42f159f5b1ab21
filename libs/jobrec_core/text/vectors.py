"""The one word-vector loader, and the per-worker cache of what is built from the vectors.

The embeddings stage saves gensim `KeyedVectors` (named after their version) and the IDF
table. Every consumer, the WMD filter, the histogram features, the WMD re-ranker and DRMM's
embedding gating, loads the vectors through :func:`keyed_vectors` (memory-mapped, so executors
on one machine share the pages) and keeps what it derives from them in :func:`worker_cached`:
a Spark Python worker serves many tasks, and rebuilding a 40k-word table per task would cost
more than the task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from jobrec_core.platform.heap import freeze_long_lived

if TYPE_CHECKING:  # Spark is imported where it runs: a training worker may have none
    from pyspark import Broadcast
    from pyspark.sql import SparkSession

T = TypeVar("T")

_WORKER_CACHE: dict[tuple[str, str], Any] = {}


def keyed_vectors(path: str) -> Any:
    """gensim's `KeyedVectors` at `path`, memory-mapped, loaded once per Python process."""

    def load() -> Any:
        from gensim.models import KeyedVectors

        return KeyedVectors.load(path, mmap="r")

    return worker_cached("keyed_vectors", path, load)


def worker_cached(kind: str, key: str, build: Callable[[], T]) -> T:
    """`build()` once per Python process for each (`kind`, `key`); `key` names an embeddings
    version (its vectors file), so a new version never reuses an old entry. What the build
    made and imported is kept for the process's life: frozen out of the garbage collector's
    scans (`platform.heap`)."""
    if (kind, key) not in _WORKER_CACHE:
        _WORKER_CACHE[(kind, key)] = build()
        freeze_long_lived()
    return _WORKER_CACHE[(kind, key)]


def broadcast_idf(spark: SparkSession, embeddings: dict[str, Any]) -> Broadcast:
    """The (words, IDF) of an embeddings version (its manifest entry), broadcast once for
    the queries and the histogram features."""
    from jobrec_core.platform.tables import read_delta

    rows = read_delta(spark, embeddings["idf"]).select("term", "idf").collect()
    return spark.sparkContext.broadcast(
        ([r["term"] for r in rows], [float(r["idf"]) for r in rows])
    )


def words_and_idf_of(source: Broadcast | tuple[list[str], list[float]]) -> tuple[Any, Any]:
    """The (words, IDF) pair of a broadcast (on executors) or of the plain value (a request
    scored on the driver)."""
    return source if isinstance(source, tuple) else source.value
