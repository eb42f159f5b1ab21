"""Stage 2: every job ad in Elasticsearch, written by the ES-Hadoop connector, behind an alias.

A build never touches what searchers use. It creates a new physical index
(`<alias>_v<UTC time>`) with refresh off, no replicas and asynchronous translog, writes the
documents from Spark, restores the serving settings, checks that the index holds exactly the
documents it should, and only then moves the alias in one atomic `_aliases` request. Older
versions are kept (`elasticsearch.keep_versions`) for rollback; failed builds are removed by
the next run.

Faults, and who handles them:

* Rejected bulks (HTTP 429/503): the connector retries the rejected documents
  (`indexing.bulk_retries`, `indexing.bulk_retry_wait_s`).
* Documents the cluster refuses (a mapping error): the connector's `es` error handler writes
  them to a dead-letter index; they are moved to the quarantine table with the error, and the
  job fails only past `quality.error_budget_fraction`. Documents still rejected as overload
  after the connector's retries are written again in the next attempt (quarantined when
  their job id is not a number, as they cannot be selected again).
* A node that stops or restarts: the write fails; the build waits for the cluster to be
  healthy again and repeats the write (`indexing.write_attempts`, doubling back-off). The
  document id is the job id, so a repeated write overwrites instead of duplicating.

The texts indexed are the cleaned tokens of stage 1 joined by spaces, analysed by a
tokenizer that splits them at the spaces again, so the terms of the index are exactly the
terms queries are built from (stage 3).

**Dated data** (`timeline.asof`) gets two versions as of the run's date, each a whole index
of its own so that BM25's statistics (IDF, average lengths) are those of its ads alone: the
ads live that day behind `elasticsearch.index_alias`, what recommendations search, and every
ad posted by then, expired ones included, behind `<alias>_history` (`history_alias`), what
the training data and the paper's evaluations search, since a candidate's past interest is
mostly in ads that have expired since. Undated data has one version, behind the alias.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from elasticsearch import Elasticsearch
from elasticsearch import helpers as es_helpers
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import IndexingConfig, JobrecConfig
from jobrec_core.indexing.documents import (
    DeadLetter,
    index_definition,
    job_documents,
    new_index_name,
    parse_dead_letter,
    serving_settings,
    with_job_vectors,
    writer_options,
)
from jobrec_core.platform import manifest
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.progress import eta_seconds, format_duration, periodic_log
from jobrec_core.platform.quarantine import (
    QualityReport,
    enforce_budget,
    has_quarantined,
    write_quarantine,
)
from jobrec_core.platform.tables import delta_version, read_delta, table_path
from jobrec_core.search.connection import (
    ES_FORMAT,
    connector_options,
    make_client,
    resolve_connection,
    wait_for_primaries,
)
from jobrec_core.search.index_versions import (
    DEAD_LETTER_SUFFIX,
    IndexBuildError,
    aliased_indices,
    history_alias,
    prune_versions,
    root_cause,
    swap_alias,
    wait_for_cluster,
)
from jobrec_core.text.vectors import broadcast_idf
from jobrec_core.timeline.asof import as_of, jobs_live_on, jobs_posted_by

log = logging.getLogger(__name__)

QUARANTINE_SOURCE = "index_jobs"


@dataclass
class IndexResult:
    alias: str
    index: str
    source_documents: int
    indexed: int
    quarantined: dict[str, int]
    attempts: int
    write_seconds: float
    previous: list[str]
    segments: int = 0  # the finished version's, primaries together
    removed: list[str] = field(default_factory=list)
    history: IndexResult | None = None  # dated data: the version of every ad posted by then

    @property
    def docs_per_second(self) -> float:
        return self.indexed / self.write_seconds if self.write_seconds else 0.0

    def format(self) -> str:
        lines = [
            f"index {self.index}: {self.indexed:,} of {self.source_documents:,} jobs indexed "
            f"in {self.write_seconds:.1f}s ({self.docs_per_second:,.0f} docs/s, "
            f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}, "
            f"{self.segments} segment{'s' if self.segments != 1 else ''})",
            f"alias {self.alias} -> {self.index} (was: {', '.join(self.previous) or 'none'})",
        ]
        if self.quarantined:
            lines.append(f"quarantined: {sum(self.quarantined.values()):,}")
            lines += [f"  {reason:<36} {n:>8,}" for reason, n in sorted(self.quarantined.items())]
        if self.removed:
            lines.append(f"removed old versions: {', '.join(self.removed)}")
        if self.history is not None:
            lines += ["", self.history.format()]
        return "\n".join(lines)


# --- what goes into the index ---------------------------------------------------------------


# --- the build ------------------------------------------------------------------------------


def build_index(
    spark: SparkSession,
    config: JobrecConfig,
    client: Elasticsearch,
    connection_options: dict[str, str],
    documents: DataFrame,
    source: dict[str, Any],
    alias: str | None = None,
) -> IndexResult:
    """Build a new version of `alias` (default `elasticsearch.index_alias`) from
    `documents`, check it, swap the alias, prune old versions.

    `source` describes the input (recorded in the index's `_meta`). Raises
    :class:`IndexBuildError` when the index cannot be completed and
    :class:`~jobrec_core.platform.quarantine.DataQualityError` past the error budget; in both
    cases the alias is untouched.
    """
    alias = alias or config.elasticsearch.index_alias
    settings = config.indexing
    name = new_index_name(alias)
    dead_letters = name + DEAD_LETTER_SUFFIX
    meta = {"alias": alias, "complete": False, "source": source}
    _reject_index_named_like_alias(client, alias)
    client.indices.create(index=name, **index_definition(config, meta))
    _create_dead_letter_index(client, dead_letters)
    wait_for_primaries(client, name)
    log.info("building %s (alias %s)", name, alias)
    try:
        # Computed once for the count, the write and any further attempt: the job vectors
        # are a Python pass over every document.
        documents = _with_partitions(documents, settings.write_partitions).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        source_count = documents.count()
        options = writer_options(connection_options, settings, name, dead_letters)
        started = time.perf_counter()
        invalid, attempts = _write_with_retries(
            client, documents, options, name, dead_letters, settings, source_count
        )
        write_seconds = time.perf_counter() - started
        log.info("%s: %s documents written in %.1fs", name, f"{source_count:,}", write_seconds)
        quarantined = _quarantine(spark, config, invalid)
        report = QualityReport(
            QUARANTINE_SOURCE, source_count, source_count - len(invalid), quarantined
        )
        enforce_budget(report, config.quality.error_budget_fraction)
        finishing = time.perf_counter()
        indexed = _finish(client, config, name, expected=source_count - len(invalid))
        log.info(
            "%s: serving settings restored, refreshed, count checked in %.1fs",
            name,
            time.perf_counter() - finishing,
        )
    finally:
        documents.unpersist()
        _delete_quietly(client, dead_letters)
    # what the alias names now is this version's rollback target (`index_versions.rollback`)
    replaced = aliased_indices(client, alias)
    client.indices.put_mapping(
        index=name,
        meta={"jobrec": {**meta, "complete": True, "documents": indexed, "replaced": replaced}},
    )
    segments = segment_count(client, name)
    previous = swap_alias(client, alias, name)
    return IndexResult(
        alias=alias,
        index=name,
        source_documents=source_count,
        indexed=indexed,
        quarantined=quarantined,
        attempts=attempts,
        write_seconds=write_seconds,
        previous=previous,
        segments=segments,
        removed=_prune_quietly(client, alias, config.elasticsearch.keep_versions, previous),
    )


def _prune_quietly(client: Elasticsearch, alias: str, keep: int, previous: list[str]) -> list[str]:
    """Prune old versions once the alias has moved, keeping `previous` (the versions it
    moved away from, the rollback target). The new version serves by now, so a failure here
    must not fail the build: the next run prunes what is left."""
    try:
        return prune_versions(client, alias, keep, also_keep=previous)
    except Exception as error:  # the cluster's errors, after the build has succeeded
        log.warning("could not remove old versions of %s (%s); the next run does", alias, error)
        return []


def _delete_quietly(client: Elasticsearch, index: str) -> None:
    """Delete a scratch index; if the cluster is down, the next run's pruning removes it."""
    try:
        client.options(ignore_status=404).indices.delete(index=index)
    except Exception as error:  # must not hide the failure being raised
        log.warning("could not delete %s (%s); the next run removes it", index, error)


def _reject_index_named_like_alias(client: Elasticsearch, alias: str) -> None:
    if client.indices.exists(index=alias) and not client.indices.exists_alias(name=alias):
        raise IndexBuildError(
            f"an index named {alias!r} exists, so the alias {alias!r} cannot be created; "
            f"reindex it into a versioned index or delete it"
        )


def _with_partitions(documents: DataFrame, partitions: int) -> DataFrame:
    """`partitions` write tasks (0: as read). Fewer by coalescing, which needs no shuffle."""
    if partitions == 0:
        return documents
    current = documents.rdd.getNumPartitions()
    if partitions < current:
        return documents.coalesce(partitions)
    return documents.repartition(partitions) if partitions > current else documents


def _write_with_retries(
    client: Elasticsearch,
    documents: DataFrame,
    options: dict[str, str],
    index: str,
    dead_letters: str,
    settings: IndexingConfig,
    total: int,
) -> tuple[list[DeadLetter], int]:
    """Write until every document is indexed or refused as invalid; (invalid, attempts)."""
    pending = documents
    backoff = settings.attempt_backoff_s
    refused: dict[str, DeadLetter] = {}
    for attempt in range(1, settings.write_attempts + 1):
        log.info("attempt %d/%d: writing into %s", attempt, settings.write_attempts, index)
        try:
            with _progress(client, index, total):
                pending.write.format(ES_FORMAT).options(**options).mode("append").save()
        except Exception as error:  # py4j raises the JVM's failure as a generic error
            reason = root_cause(error)
            if attempt == settings.write_attempts:
                raise IndexBuildError(
                    f"writing {index} failed after {attempt} attempts: {reason}. The alias "
                    f"still points to the previous version; rerun the job once the cluster "
                    f"is reachable."
                ) from None
            log.warning("attempt %d failed: %s; retrying in %.0fs", attempt, reason, backoff)
            time.sleep(backoff)
            backoff *= 2
            wait_for_cluster(client, settings.health_timeout_s)
            _drain_dead_letters(client, dead_letters)  # a partial attempt's; they will recur
            pending = documents
            continue
        letters = _drain_dead_letters(client, dead_letters)
        refused, retry_ids = sort_dead_letters(letters, refused)
        if not retry_ids:
            return list(refused.values()), attempt
        if attempt == settings.write_attempts:
            raise IndexBuildError(
                f"{len(retry_ids):,} documents were still rejected as overload after "
                f"{attempt} attempts ({_error_counts(letters)}); the cluster is too busy: "
                f"lower indexing.write_partitions or raise indexing.bulk_retries"
            )
        log.warning(
            "%d documents rejected as overload; writing them again in %.0fs",
            len(retry_ids),
            backoff,
        )
        time.sleep(backoff)
        backoff *= 2
        pending = documents.where(F.col("job_id").isin(retry_ids))
    raise AssertionError("unreachable: the loop returns or raises")


def sort_dead_letters(
    letters: list[DeadLetter], refused: dict[str, DeadLetter]
) -> tuple[dict[str, DeadLetter], list[int]]:
    """One attempt's dead letters with the documents `refused` by earlier attempts ->
    (every document refused so far, the job ids to write again).

    Refusals accumulate because a later attempt writes only the documents rejected as
    overload, so an earlier attempt's refusals do not recur; they are keyed by job id (the
    document when it has none) because a whole write repeated after a failure sends them
    again. A document rejected as overload whose job id is not a number cannot be selected
    for another write: it is refused too, so that it is quarantined rather than lost.
    """
    refused = dict(refused)
    retry_ids: set[int] = set()
    for letter in letters:
        if letter.transient and letter.job_id.isdigit():
            retry_ids.add(int(letter.job_id))
            refused.pop(letter.job_id, None)  # the next attempt decides
            continue
        if letter.transient:
            letter = replace(
                letter,
                message=f"rejected as overload, and without a numeric job id it cannot be "
                f"written again: {letter.message}",
            )
        refused[letter.job_id or letter.document] = letter
    return refused, sorted(retry_ids)


def _drain_dead_letters(client: Elasticsearch, index: str) -> list[DeadLetter]:
    """Every dead letter stored so far, removed from the dead-letter index."""
    client.indices.refresh(index=index)
    letters = [parse_dead_letter(hit["_source"]) for hit in es_helpers.scan(client, index=index)]
    if letters:
        client.indices.delete(index=index)
        _create_dead_letter_index(client, index)
    return letters


def _create_dead_letter_index(client: Elasticsearch, index: str) -> None:
    client.indices.create(index=index, settings={"number_of_replicas": 0})


def _error_counts(letters: list[DeadLetter]) -> str:
    return ", ".join(f"{e}: {n}" for e, n in Counter(d.error for d in letters).most_common())


def _quarantine(spark: SparkSession, config: JobrecConfig, invalid: list[DeadLetter]) -> dict:
    """Refused documents -> the dataset's quarantine table (replacing this stage's rows)."""
    path = table_path(config, "bronze", "quarantine")
    if not invalid and not has_quarantined(spark, path, QUARANTINE_SOURCE):
        return {}  # nothing to record and nothing stale to clear: skip a Delta commit
    rows = [(QUARANTINE_SOURCE, d.error, d.message, d.document) for d in invalid]
    frame = spark.createDataFrame(
        rows, "source STRING, reason STRING, detail STRING, record STRING"
    ).withColumn("quarantined_at", F.current_timestamp())
    write_quarantine(frame, path, QUARANTINE_SOURCE)
    if invalid:
        log.warning(
            "%d documents refused by Elasticsearch: %s", len(invalid), _error_counts(invalid)
        )
    return dict(Counter(d.error for d in invalid))


# How much longer than the server's wait for green health the client waits for its answer.
HEALTH_ANSWER_MARGIN_S = 30.0


def _finish(client: Elasticsearch, config: JobrecConfig, index: str, expected: int) -> int:
    """Refresh, merge (`indexing.force_merge_segments`), serving settings back, wait for the
    replicas, and check the count. The merge comes before the replicas, which then copy
    merged segments instead of merging again each."""
    client.indices.refresh(index=index)
    force_merge(client, index, config.indexing.force_merge_segments)
    client.indices.put_settings(index=index, settings=serving_settings(config))
    client.indices.flush(index=index)
    # A wait that times out is answered with HTTP 408 and the health as it is then, which the
    # client would raise; the client waits longer than the server, so the answer comes first.
    timeout_s = config.indexing.health_timeout_s
    health = client.options(
        ignore_status=408, request_timeout=timeout_s + HEALTH_ANSWER_MARGIN_S
    ).cluster.health(index=index, wait_for_status="green", timeout=f"{int(timeout_s)}s")
    if health["status"] == "red":
        raise IndexBuildError(f"{index} is red after the build: {health}")
    if health["status"] != "green":
        log.warning("%s is %s: replicas are not all allocated yet", index, health["status"])
    indexed = int(client.count(index=index)["count"])
    if indexed != expected:
        raise IndexBuildError(
            f"{index} holds {indexed:,} documents, expected {expected:,}; the alias was not "
            f"moved. Rerun the job."
        )
    return indexed


# A merge of the paper's 466k jobs took 12 s on 2 cores; the bound is for a node that stopped
# answering, not for a slow one.
FORCE_MERGE_TIMEOUT_S = 3600.0


def force_merge(client: Elasticsearch, index: str, segments: int) -> None:
    """Merge `index`'s shards down to `segments` segments each (0: leave them). Every search
    visits each segment, so a busy node answers faster from fewer: two clients' searches of
    the seed's index ran 1.3x faster from 1 segment than from the 9 the write left
    (docs/BENCHMARKS.md). A single searcher can lose, since Elasticsearch searches the
    segments of one query side by side on idle cores."""
    if segments <= 0:
        return
    before = segment_count(client, index)
    started = time.perf_counter()
    client.options(request_timeout=FORCE_MERGE_TIMEOUT_S).indices.forcemerge(
        index=index, max_num_segments=segments
    )
    client.indices.refresh(index=index)
    log.info(
        "%s: force-merged from %d to %d segments in %.1fs",
        index,
        before,
        segment_count(client, index),
        time.perf_counter() - started,
    )


def segment_count(client: Elasticsearch, index: str) -> int:
    """Segments of the index's primary shards, together (`index` may be an alias)."""
    stats = client.indices.stats(index=index, metric="segments")
    return int(stats["_all"]["primaries"]["segments"]["count"])


# --- versions and the alias -----------------------------------------------------------------


@contextmanager
def _progress(client: Elasticsearch, index: str, total: int) -> Iterator[None]:
    """Log documents indexed so far (index stats count them before any refresh)."""

    def describe(elapsed: float) -> str | None:
        try:
            stats = client.indices.stats(index=index, metric="indexing")
            done = int(stats["_all"]["primaries"]["indexing"]["index_total"])
        except Exception:  # the node may be restarting; the write itself will say so
            return None
        line = (
            f"{index}: {done:,}/{total:,} documents written ({100 * done / max(total, 1):.0f}%), "
            f"{done / elapsed:.0f} docs/s"
        )
        remaining = eta_seconds(done, total, elapsed)
        return line if remaining is None else f"{line}, about {format_duration(remaining)} left"

    with periodic_log(describe, logger=log):
        yield


# --- the stage ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionSource:
    """What a run's versions are built from: the tokenised jobs at one Delta version, and the
    embeddings' vectors for their `doc_vector` (`indexing.vectors`)."""

    jobs: DataFrame
    meta: dict[str, Any]  # recorded in every version's `_meta`
    tables: list[str]  # the Delta tables read, for MLflow
    vectors: tuple[str, Any] | None  # (vectors file, broadcast IDF)

    @staticmethod
    def of(spark: SparkSession, config: JobrecConfig) -> VersionSource:
        silver = table_path(config, "silver", "jobs")
        try:
            version = delta_version(spark, silver)
        except Exception as error:
            if "is not a Delta table" not in str(error) and "doesn't exist" not in str(error):
                raise
            raise IndexBuildError(
                f"no tokenised jobs at {silver}: run jobs/train_embeddings.py first"
            ) from None
        day = as_of(config).day
        meta: dict[str, Any] = {
            "dataset": config.data.preset,
            "table": silver,
            "table_version": version,
            "as_of": day.isoformat() if day else None,
        }
        tables, vectors = [silver], None
        if config.indexing.vectors:
            embeddings = manifest.current(config, "embeddings")
            tables.append(str(embeddings["idf"]))
            vectors = (local_path(embeddings["vectors"]), broadcast_idf(spark, embeddings))
            meta["vectors_embeddings"] = str(embeddings["version"])
        # The version recorded in the index's _meta, even if another run commits a newer one.
        return VersionSource(read_delta(spark, silver, version), meta, tables, vectors)


def build_version(
    spark: SparkSession,
    config: JobrecConfig,
    source: VersionSource,
    selected: DataFrame,
    view: str,
    alias: str | None = None,
) -> IndexResult:
    """A version of `alias` (default `elasticsearch.index_alias`) holding the jobs `selected`
    among `source.jobs` (`view` names which, in its `_meta`), with their vectors."""
    connection = resolve_connection(config)
    documents = job_documents(selected, config.indexing.fields)
    if source.vectors is not None:
        documents = with_job_vectors(documents, selected, config, *source.vectors)
    return build_index(
        spark,
        config,
        make_client(connection),
        connector_options(connection),
        documents,
        {**source.meta, "view": view},
        alias,
    )


def index_builder(
    spark: SparkSession, config: JobrecConfig
) -> Callable[[Callable[[DataFrame], DataFrame], str, str], tuple[str, int]]:
    """(a selection of the run's tokenised jobs, an alias, a view) -> (the version built of
    those jobs, its documents): a stage that needs an index of its own (the temporal
    evaluation's, `evaluation.stage.IndexBuilder`) gets this from the wiring, and never
    imports this stage."""
    source = VersionSource.of(spark, config)

    def build(select: Callable[[DataFrame], DataFrame], alias: str, view: str) -> tuple[str, int]:
        built = build_version(spark, config, source, select(source.jobs), view, alias)
        return built.index, built.indexed

    return build


def run_indexing(spark: SparkSession, config: JobrecConfig) -> IndexResult:
    """silver jobs -> a new version of the `jobs` alias (and, for dated data, of its history:
    see the module); recorded in the manifest and MLflow."""
    # MLflow is imported when used, as in the other stages: it is slow to import and only the
    # driver needs it.
    import mlflow

    from jobrec_core.platform.tracking import configure_mlflow, log_stage_inputs

    source = VersionSource.of(spark, config)
    timeline = as_of(config)
    history = None
    if timeline.dated:
        log.info("index_jobs: %s", timeline.describe())
        history = build_version(
            spark,
            config,
            source,
            jobs_posted_by(source.jobs, timeline.day),
            "history",
            history_alias(config.elasticsearch.index_alias),
        )
        result = build_version(
            spark, config, source, jobs_live_on(source.jobs, timeline.day), "live"
        )
        result.history = history
    else:
        result = build_version(spark, config, source, source.jobs, "all")
    manifest.record(
        config,
        "index",
        {
            "alias": result.alias,
            "index": result.index,
            "documents": result.indexed,
            "history_alias": history.alias if history else result.alias,
            "history_index": history.index if history else result.index,
            **source.meta,
        },
    )
    configure_mlflow(config)
    with mlflow.start_run(run_name=f"index_jobs {result.index}"):
        mlflow.set_tags(
            {"stage": "index_jobs", "index": result.index, "dataset": config.data.preset}
        )
        log_stage_inputs(spark, config, source.tables)
        mlflow.log_params(
            {f"indexing.{k}": v for k, v in config.indexing.model_dump().items()}
            | {"similarity.k1": config.elasticsearch.similarity.k1}
            | {"similarity.b": config.elasticsearch.similarity.b}
        )
        mlflow.log_metrics(
            {
                "documents": result.indexed,
                "quarantined": sum(result.quarantined.values()),
                "attempts": result.attempts,
                "write_seconds": result.write_seconds,
                "docs_per_second": result.docs_per_second,
                **({"history_documents": history.indexed} if history else {}),
            }
        )
    return result
