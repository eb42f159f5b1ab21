"""What goes into the jobs index: documents, mapping and settings, the index name, the
connector's writer options and its dead letters. Pure functions of the configuration."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.config import IndexingConfig, JobrecConfig
from jobrec_core.features.matching import WordsAndIdf, document_tokens
from jobrec_core.features.occupations import TITLE_CONFIDENCE, TITLE_OCCUPATION
from jobrec_core.features.profile import DOCUMENT_VECTOR, with_document_vectors
from jobrec_core.search.dense import VECTOR_FIELD, vector_mapping
from jobrec_core.text.tokens import tokens_column

# The node's core analyzer (Unicode word boundaries, lowercase). On the cleaned tokens, which
# are lowercase letter runs separated by spaces, it yields exactly those tokens.
ANALYZER = "standard"


SIMILARITY = "jobrec_bm25"


@dataclass(frozen=True)
class DeadLetter:
    """One document the cluster refused, as the connector's `es` error handler stored it."""

    job_id: str
    error: str
    message: str
    document: str

    @property
    def transient(self) -> bool:
        return self.error in TRANSIENT_ERRORS


def job_documents(tokenized_jobs: DataFrame, fields: list[str]) -> DataFrame:
    """`job_id`, one text per field (the field's cleaned tokens joined by single spaces) and,
    once the titles are normalised (`titles.stage`), the title's occupation and confidence."""
    normalised = [c for c in (TITLE_OCCUPATION, TITLE_CONFIDENCE) if c in tokenized_jobs.columns]
    return tokenized_jobs.select(
        F.col("job_id").cast("int").alias("job_id"),
        *[F.concat_ws(" ", tokens_column(f)).alias(f) for f in fields],
        *normalised,
    )


def with_job_vectors(
    documents: DataFrame,
    tokenized_jobs: DataFrame,
    config: JobrecConfig,
    vectors_file: str,
    words_and_idf: WordsAndIdf,
) -> DataFrame:
    """:func:`job_documents` rows with `doc_vector`: the TF-IDF-weighted word2vec centroid of
    the text the features read (`histograms.doc_fields`), null when no word has a vector (the
    field is then left out of the document)."""
    tokens = document_tokens(tokenized_jobs, config.histograms).select(
        F.col("job_id").cast("int").alias("job_id"), "doc_tokens"
    )
    vectors = with_document_vectors(tokens, vectors_file, words_and_idf).select(
        "job_id", F.col(DOCUMENT_VECTOR).alias(VECTOR_FIELD)
    )
    return documents.join(vectors, "job_id", "left")


def index_definition(config: JobrecConfig, meta: dict[str, Any]) -> dict[str, Any]:
    """Settings and mappings of a new version, in its build state (refresh off, no replicas).

    `dynamic: strict` makes a document with an unexpected field an error instead of a silent
    mapping change; `_meta.jobrec` marks the index as ours and records what it was built from.
    """
    es = config.elasticsearch
    text = {"type": "text", "analyzer": ANALYZER, "similarity": SIMILARITY, "norms": True}
    return {
        "settings": {
            "index": {
                "number_of_shards": es.shards,
                "number_of_replicas": 0,
                "refresh_interval": "-1",
                "translog": {"durability": "async"},
                "similarity": {
                    SIMILARITY: {"type": "BM25", "k1": es.similarity.k1, "b": es.similarity.b}
                },
            }
        },
        "mappings": {
            "dynamic": "strict",
            "_meta": {"jobrec": meta},
            "properties": {
                "job_id": {"type": "integer"},
                TITLE_OCCUPATION: {"type": "keyword"},
                TITLE_CONFIDENCE: {"type": "float"},
                **{name: dict(text) for name in config.indexing.fields},
                **(
                    {VECTOR_FIELD: vector_mapping(config.embeddings.vector_size)}
                    if config.indexing.vectors
                    else {}
                ),
            },
        },
    }


def serving_settings(config: JobrecConfig) -> dict[str, Any]:
    """What a finished version serves with: the configured refresh and replicas, durable."""
    return {
        "index": {
            "refresh_interval": config.indexing.refresh_interval,
            "number_of_replicas": config.elasticsearch.replicas,
            "translog": {"durability": "request"},
        }
    }


def new_index_name(alias: str, now: datetime | None = None) -> str:
    """`<alias>_v<UTC timestamp>`: unique per run, and sorting by name sorts by age."""
    moment = now or datetime.now(UTC)
    return f"{alias}_v{moment:%Y%m%d-%H%M%S-%f}"


def writer_options(
    base: dict[str, str], settings: IndexingConfig, index: str, dead_letters: str
) -> dict[str, str]:
    """Connector settings for writing documents into `index` (`base`: the connection's)."""
    return {
        **base,
        "es.resource": index,
        "es.mapping.id": "job_id",
        "es.write.operation": "index",
        "es.index.auto.create": "false",
        "es.batch.size.entries": str(settings.batch_entries),
        "es.batch.size.bytes": settings.batch_bytes,
        "es.batch.write.retry.count": str(settings.bulk_retries),
        "es.batch.write.retry.wait": f"{int(settings.bulk_retry_wait_s * 1000)}ms",
        "es.batch.write.refresh": "false",
        "es.write.rest.error.handlers": "es",
        "es.write.rest.error.handler.es.client.resource": dead_letters,
    }


def parse_dead_letter(event: dict[str, Any]) -> DeadLetter:
    """A dead-letter event (ECS document of the connector's `es` handler) -> its fields.

    `event.raw` is the bulk entry as sent: the action line with the `_id`, then the document.
    """
    raw = str(event.get("event", {}).get("raw", ""))
    action, _, document = raw.partition("\n")
    try:
        job_id = str(next(iter(json.loads(action).values())).get("_id", ""))
    except (ValueError, StopIteration, AttributeError):
        job_id = ""
    error = event.get("error", {})
    return DeadLetter(
        job_id=job_id,
        error=str(error.get("code", "unknown")),
        message=str(error.get("message", "")),
        document=document.strip(),
    )


# Bulk item errors that mean "try again later", not "this document is invalid".
TRANSIENT_ERRORS = frozenset(
    {
        "es_rejected_execution_exception",
        "circuit_breaking_exception",
        "unavailable_shards_exception",
        "cluster_block_exception",
        "process_cluster_event_timeout_exception",
    }
)
