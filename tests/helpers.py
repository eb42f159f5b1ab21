"""Helpers shared by the tests: paths, settings, reference implementations. Tests import
from here, never from one another."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from jobrec_core.serving.endpoint import REQUEST_TIMEOUT_S, RecommendServer, serve
from jobrec_core.text.wmd import WmdDocument

REPO = Path(__file__).resolve().parents[1]
WORDS = [f"w{i}" for i in range(2000)]
BINS = 30


def state_overrides(root: Path) -> list[str]:
    """Settings that move every piece of state of the local environment under `root`."""
    return [
        f"storage.root={root / 'store'}",
        f"elasticsearch.local.workdir={root / 'es'}",
        f"mlflow.tracking_uri=sqlite:///{root / 'mlflow.db'}",
        f"mlflow.artifact_root={root / 'artifacts'}",
        "spark.shuffle_partitions=4",
    ]


# A title normaliser trained for seconds, not minutes: the tests check what it is wired to,
# docs/TITLES.md what it learns.
QUICK_TITLES = ["titles.steps=40", "titles.log_every=20"]


def reference_histogram(query_vectors, query_words, doc_vectors, doc_words, bins=BINS):
    """One query term and one document term at a time."""
    histogram = np.zeros((len(query_words), bins + 1), dtype=np.int64)
    for i, (qv, qw) in enumerate(zip(query_vectors, query_words, strict=True)):
        for dv, dw in zip(doc_vectors, doc_words, strict=True):
            if qw == dw:
                histogram[i, bins] += 1
                continue
            cosine = float(np.dot(qv.astype(np.float64), dv.astype(np.float64)))
            histogram[i, min(int((cosine + 1.0) / 2.0 * bins), bins - 1)] += 1
    return histogram


def document(keyed, words):
    """What the pipeline gives: in-vocabulary word ids (OOV words dropped), repeats kept."""
    return WmdDocument.from_word_ids(
        np.array([keyed.key_to_index[w] for w in words if w in keyed.key_to_index], dtype=np.int64)
    )


def random_pairs(count, seed=3):
    rng = np.random.default_rng(seed)
    for n in range(count):
        first = [WORDS[i] for i in rng.integers(0, 80, rng.integers(1, 20))]
        second = [WORDS[i] for i in rng.integers(0, 80, rng.integers(1, 20))]
        if n % 10 == 0:
            first.append("not-in-vocabulary")
        yield first, second


@contextmanager
def serving(recommender: Any, timeout_s: float = REQUEST_TIMEOUT_S) -> Iterator[RecommendServer]:
    """The endpoint on a free local port, serving in a thread until the block ends."""
    running = serve(recommender, "127.0.0.1", 0, timeout_s)
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()
        thread.join()
