"""The index definition, connector settings and dead-letter parsing, without a cluster."""

from datetime import UTC, datetime

from jobrec_core.config import load_config
from jobrec_core.indexing.documents import (
    ANALYZER,
    SIMILARITY,
    index_definition,
    new_index_name,
    parse_dead_letter,
    serving_settings,
    writer_options,
)
from jobrec_core.search.bm25 import multi_match_query

# As the connector's `es` error handler stored a document refused by the mapping.
REFUSED_EVENT = {
    "@timestamp": "2026-11-22T13:45:14.634Z",
    "message": "Encountered Bulk Failure",
    "error": {
        "code": "document_parsing_exception",
        "message": "[1:11] failed to parse field [job_id] of type [integer] in document with "
        "id 'x3'. Preview of field's value: 'x3'",
    },
    "event": {
        "category": "error",
        "type": "bulk_failure",
        "raw": '{"index":{"_id":"x3"}}\n{"job_id":"x3","title":"bad id"}\n',
    },
}


def test_definition_carries_the_configured_bm25_shards_and_fields():
    config = load_config(
        "local",
        [
            "elasticsearch.similarity.k1=0.9",
            "elasticsearch.similarity.b=0.4",
            "elasticsearch.shards=3",
        ],
    )
    body = index_definition(config, {"alias": "jobs"})
    index = body["settings"]["index"]
    assert index["similarity"][SIMILARITY] == {"type": "BM25", "k1": 0.9, "b": 0.4}
    assert index["number_of_shards"] == 3
    mappings = body["mappings"]
    assert mappings["dynamic"] == "strict"
    assert mappings["_meta"] == {"jobrec": {"alias": "jobs"}}
    assert mappings["properties"]["job_id"] == {"type": "integer"}
    assert mappings["properties"]["title_occupation"] == {"type": "keyword"}
    assert mappings["properties"]["title_confidence"] == {"type": "float"}
    for name in ("title", "function", "requirement_summary", "keywords", "description"):
        field = mappings["properties"][name]
        assert (field["type"], field["similarity"], field["analyzer"]) == (
            "text",
            SIMILARITY,
            ANALYZER,
        )


def test_a_build_starts_unsearchable_and_ends_with_the_serving_settings():
    config = load_config("local", ["elasticsearch.replicas=2", "indexing.refresh_interval=30s"])
    building = index_definition(config, {})["settings"]["index"]
    assert (building["number_of_replicas"], building["refresh_interval"]) == (0, "-1")
    serving = serving_settings(config)["index"]
    assert serving == {
        "refresh_interval": "30s",
        "number_of_replicas": 2,
        "translog": {"durability": "request"},
    }


def test_version_names_sort_by_age():
    older = new_index_name("jobs", datetime(2026, 11, 22, 9, 5, 1, 7, tzinfo=UTC))
    newer = new_index_name("jobs", datetime(2026, 11, 22, 10, 0, 0, 0, tzinfo=UTC))
    assert older == "jobs_v20261122-090501-000007"
    assert sorted([newer, older]) == [older, newer]


def test_writer_options_idempotent_ids_no_refresh_and_a_dead_letter_index():
    config = load_config("local", ["indexing.batch_entries=1234", "indexing.bulk_retry_wait_s=1.5"])
    options = writer_options({"es.nodes": "n1"}, config.indexing, "jobs_v1", "jobs_v1-rejected")
    assert options["es.nodes"] == "n1"
    assert options["es.resource"] == "jobs_v1"
    assert options["es.mapping.id"] == "job_id"
    assert options["es.index.auto.create"] == "false"
    assert options["es.batch.write.refresh"] == "false"
    assert options["es.batch.size.entries"] == "1234"
    assert options["es.batch.write.retry.wait"] == "1500ms"
    assert options["es.write.rest.error.handlers"] == "es"
    assert options["es.write.rest.error.handler.es.client.resource"] == "jobs_v1-rejected"


def test_a_refused_document_is_invalid_with_its_id_error_and_body():
    letter = parse_dead_letter(REFUSED_EVENT)
    assert letter.job_id == "x3"
    assert letter.error == "document_parsing_exception"
    assert "failed to parse field [job_id]" in letter.message
    assert letter.document == '{"job_id":"x3","title":"bad id"}'
    assert not letter.transient


def test_an_overload_rejection_is_transient():
    event = {**REFUSED_EVENT, "error": {"code": "es_rejected_execution_exception", "message": ""}}
    assert parse_dead_letter(event).transient


def test_a_malformed_event_still_parses():
    letter = parse_dead_letter({"event": {"raw": "not json"}})
    assert (letter.job_id, letter.error) == ("", "unknown")


def test_the_paper_query_figure_3():
    config = load_config("local")
    query = multi_match_query("python developer", config.retrieval)
    (clause,) = query["bool"]["should"]
    match = clause["multi_match"]
    assert match["query"] == "python developer"
    assert match["type"] == "most_fields"
    assert match["auto_generate_synonyms_phrase_query"] is False
    assert sorted(match["fields"]) == sorted(
        ["function^1.5", "title^1.5", "requirement_summary^1.2", "keywords^1.5", "description^1"]
    )
