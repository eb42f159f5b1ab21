"""Stage 1a on the tiny preset: the embeddings' version and its reuse, on real Spark and Delta."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from jobrec_core.embeddings.stage import build_embeddings
from jobrec_core.platform.paths import local_path

pytestmark = pytest.mark.integration


def test_a_rerun_on_the_same_jobs_keeps_and_reuses_the_embeddings(
    spark, tiny, tiny_embeddings, caplog
):
    """The same jobs give the same version, whose vectors are reused, not written again under
    processes that memory-map them."""
    vectors = Path(local_path(tiny_embeddings.version.vectors_file))
    written = vectors.stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="jobrec_core.embeddings.stage"):
        again = build_embeddings(spark, tiny[0])
    assert again.version == tiny_embeddings.version
    assert (again.jobs, again.vocabulary, again.terms) == (
        tiny_embeddings.jobs,
        tiny_embeddings.vocabulary,
        tiny_embeddings.terms,
    )
    assert vectors.stat().st_mtime_ns == written
    assert "reused" in caplog.text
