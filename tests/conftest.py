"""Shared fixtures: one configuration, one Spark session and one Elasticsearch node per run.

Everything is real: the session is local Spark with Delta and the ES-Hadoop connector, the node
is the project's own Elasticsearch, MLflow writes to a sqlite store. All state lives in a
temporary folder, so tests never touch a developer's `.jobrec/`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobrec_core.config import JobrecConfig, load_config
from jobrec_core.search.local_node import LocalElasticsearch, NodeState
from tests.helpers import QUICK_TITLES, REPO, state_overrides


@pytest.fixture(scope="session")
def state_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("jobrec")


@pytest.fixture(scope="session")
def config(state_root: Path) -> JobrecConfig:
    return load_config("local", state_overrides(state_root), REPO / "conf")


@pytest.fixture(scope="session")
def es_node(config: JobrecConfig) -> Iterator[NodeState]:
    node = LocalElasticsearch(config.elasticsearch.local)
    state = node.start()
    yield state
    node.stop(purge=True)


@pytest.fixture(scope="session")
def spark(config: JobrecConfig):
    from jobrec_core.platform.spark import get_spark

    session = get_spark(config)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def tiny_overrides(state_root: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The `--set` overrides of the tiny preset's configuration: its own state folder, and
    the session's Elasticsearch node (when a test starts it)."""
    return [
        *state_overrides(tmp_path_factory.mktemp("tiny")),
        "data.preset=tiny",
        f"elasticsearch.local.workdir={state_root / 'es'}",
        "evaluation.baselines=[BM25, WMD, profile-tfidf, co-interest]",  # the demo leaves WMD out
        "histograms.lead_fields=[title]",  # the demo leaves per-field histograms out (v9)
        *QUICK_TITLES,
    ]


@pytest.fixture(scope="session")
def tiny(spark, tiny_overrides):
    """The tiny preset generated and ingested once: (config, generation counts, reports)."""
    from jobrec_core.data.stage import generate_dataset, ingest_raw

    config = load_config("local", tiny_overrides, REPO / "conf")
    counts = generate_dataset(spark, config)
    reports = {r.source: r for r in ingest_raw(spark, config)}
    return config, counts, reports


@pytest.fixture(scope="session")
def tiny_embeddings(spark, tiny):
    """Stage 1's tokenised jobs (silver), word2vec and IDF of the tiny preset."""
    from jobrec_core.embeddings.stage import build_embeddings

    return build_embeddings(spark, tiny[0])


@pytest.fixture(scope="session")
def tiny_titles(spark, tiny, tiny_embeddings):
    """Stage 1c: a (quick) title normaliser trained and registered, and the tiny preset's
    silver jobs normalised with it: (training, mapping)."""
    from jobrec_core.titles.stage import normalise_job_titles, train_title_normaliser

    trained = train_title_normaliser(spark, tiny[0])
    return trained, normalise_job_titles(spark, tiny[0])


@pytest.fixture(scope="session")
def tiny_cleaned(spark, tiny, tiny_embeddings, tiny_titles):
    """Stage 1's cleaned candidates (silver) of the tiny preset: the funnel."""
    from jobrec_core.cleaning.stage import run_cleaning

    return run_cleaning(spark, tiny[0])


@pytest.fixture(scope="session")
def tiny_indexed(spark, tiny, tiny_embeddings, tiny_titles, es_node):
    """Stage 2: the tiny preset's jobs behind the `jobs` alias of the session's node."""
    from jobrec_core.indexing.stage import run_indexing

    return run_indexing(spark, tiny[0])


@pytest.fixture(scope="session")
def tiny_pairs(spark, tiny, tiny_cleaned, tiny_indexed):
    """Stage 3: the tiny preset's triples and MAP sets (the funnel)."""
    from jobrec_core.pairs.stage import run_build_pairs

    return run_build_pairs(spark, tiny[0])
