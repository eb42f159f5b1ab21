"""Raw -> bronze on the shipped corpus of bad records: every reason, counted, never lost."""

import re
from collections import Counter
from pathlib import Path

import pytest

from jobrec_core.config import load_config
from jobrec_core.data.stage import ingest_raw
from jobrec_core.platform.quarantine import DataQualityError
from jobrec_core.platform.tables import RawLocations, delta_version, read_delta, table_path
from tests.helpers import REPO, state_overrides

pytestmark = pytest.mark.integration

CORPUS = REPO / "tests" / "data"


def corpus(name: str) -> list[tuple[str, str]]:
    """(line as Spark decodes it, expected outcome) for each record of a corpus file."""
    lines = (CORPUS / name).read_bytes().decode("utf-8", errors="replace").splitlines()
    if name.endswith(".tsv"):
        lines = lines[1:]  # header
    expected = (CORPUS / name.rsplit(".", 1)[0]).with_suffix(".expected").read_text().split()
    assert len(lines) == len(expected)
    return list(zip(lines, expected, strict=True))


def corpus_config(root: Path, budget: float):
    return load_config(
        "local",
        [
            *state_overrides(root),
            "data.preset=tiny",
            "ingest.max_field_chars=1000",
            "ingest.max_sequence_length=10",
            f"quality.error_budget_fraction={budget}",
        ],
        REPO / "conf",
    )


def install_corpus(config) -> None:
    raw = RawLocations.of(config)
    Path(raw.jobs).mkdir(parents=True)
    Path(raw.candidates).mkdir(parents=True)
    (Path(raw.jobs) / "part-0.json").write_bytes((CORPUS / "bad_jobs.jsonl").read_bytes())
    (Path(raw.candidates) / "part-0.csv").write_bytes((CORPUS / "bad_candidates.tsv").read_bytes())


@pytest.fixture(scope="module")
def ingested(spark, tmp_path_factory):
    config = corpus_config(tmp_path_factory.mktemp("corpus"), budget=1.0)
    install_corpus(config)
    reports = {r.source: r for r in ingest_raw(spark, config)}
    return config, reports


def quarantined(spark, config, source: str) -> Counter:
    table = read_delta(spark, table_path(config, "bronze", "quarantine"))
    rows = table.where(f"source = '{source}'").select("record", "reason").collect()
    return Counter((r.record, r.reason) for r in rows)


@pytest.mark.parametrize(
    ("source", "file"), [("jobs", "bad_jobs.jsonl"), ("candidates", "bad_candidates.tsv")]
)
def test_every_bad_record_is_quarantined_with_its_reason(spark, ingested, source, file):
    config, reports = ingested
    expected = Counter((line, outcome) for line, outcome in corpus(file) if outcome != "valid")
    assert quarantined(spark, config, source) == expected
    report = reports[source]
    assert report.quarantined == dict(Counter(outcome for _, outcome in expected))
    assert report.read == len(corpus(file))
    assert report.valid + report.bad == report.read


def test_valid_records_reach_bronze_typed(spark, ingested):
    config, _ = ingested
    jobs = read_delta(spark, table_path(config, "bronze", "jobs"))
    assert sorted(r.job_id for r in jobs.collect()) == [1, 2, 3, 4, 5, 11]
    assert dict(jobs.dtypes)["keywords"] == "array<string>"
    candidates = {
        r.candidate_id: r.sequence
        for r in read_delta(spark, table_path(config, "bronze", "candidates")).collect()
    }
    assert sorted(candidates) == [10, 21, 24, 26]
    assert [(e.job_id, e.score) for e in candidates[24]] == [(3, 2), (4, 6)]  # JSON input
    assert [(e.job_id, e.score) for e in candidates[10]] == [(1, 5), (2, 3)]  # Python literal
    assert candidates[26] == []


def test_rerun_replaces_instead_of_duplicating(spark, ingested):
    config, _ = ingested
    before = quarantined(spark, config, "candidates")
    ingest_raw(spark, config)
    assert quarantined(spark, config, "candidates") == before
    assert read_delta(spark, table_path(config, "bronze", "candidates")).count() == 4


def test_over_budget_fails_clearly_and_keeps_the_evidence(spark, tmp_path):
    config = corpus_config(tmp_path, budget=0.05)
    install_corpus(config)
    with pytest.raises(
        DataQualityError, match=r"jobs: 13 of 19 records .* over the error budget of 5\.00%"
    ) as error:
        ingest_raw(spark, config)
    assert "malformed_record" in str(error.value)
    assert sum(quarantined(spark, config, "jobs").values()) == 13
    assert not Path(table_path(config, "bronze", "jobs")).exists()


def test_an_empty_input_is_refused_before_anything_is_written(spark, tmp_path):
    """Nothing read is nothing bad: without the check, empty files would pass any budget and
    replace good bronze tables with empty ones."""
    config = corpus_config(tmp_path, budget=1.0)
    install_corpus(config)
    ingest_raw(spark, config)
    bronze = {
        name: table_path(config, "bronze", name) for name in ("jobs", "candidates", "quarantine")
    }
    versions = {name: delta_version(spark, path) for name, path in bronze.items()}
    raw = RawLocations.of(config)

    (Path(raw.candidates) / "part-0.csv").write_text("identifier\tsequence\n\n  \n")
    with pytest.raises(
        DataQualityError,
        match=rf"candidates: no records in {re.escape(raw.candidates)} \(3 header or blank lines",
    ):
        ingest_raw(spark, config)

    (Path(raw.jobs) / "part-0.json").unlink()
    with pytest.raises(DataQualityError, match=rf"jobs: no records in {re.escape(raw.jobs)};"):
        ingest_raw(spark, config)

    assert {name: delta_version(spark, path) for name, path in bronze.items()} == versions
    assert read_delta(spark, bronze["candidates"]).count() == 4
