"""Raw -> bronze on the shipped corpus of bad records: every reason, counted, never lost."""

import json
import re
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from jobrec_core.config import load_config
from jobrec_core.data.stage import ingest_raw
from jobrec_core.platform import manifest
from jobrec_core.platform.quarantine import DataQualityError
from jobrec_core.platform.tables import RawLocations, delta_version, read_delta, table_path
from tests.helpers import REPO, state_overrides

pytestmark = pytest.mark.integration

CORPUS = REPO / "tests" / "data"
LAST_DATE = "2025-10-31"  # the corpus's export says so: its dated records are around October


def corpus(name: str) -> list[tuple[str, str]]:
    """(line as Spark decodes it, expected outcome) for each record of a corpus file."""
    lines = (CORPUS / name).read_bytes().decode("utf-8", errors="replace").splitlines()
    if name.endswith(".tsv"):
        lines = lines[1:]  # header
    expected = (CORPUS / name.rsplit(".", 1)[0]).with_suffix(".expected").read_text().split()
    assert len(lines) == len(expected)
    return list(zip(lines, expected, strict=True))


def corpus_config(root: Path, budget: float, *overrides: str):
    return load_config(
        "local",
        [
            *state_overrides(root),
            "data.preset=tiny",
            "ingest.max_field_chars=1000",
            "ingest.max_sequence_length=10",
            f"quality.error_budget_fraction={budget}",
            *overrides,
        ],
        REPO / "conf",
    )


def install_corpus(config) -> None:
    raw = RawLocations.of(config)
    Path(raw.jobs).mkdir(parents=True)
    Path(raw.candidates).mkdir(parents=True)
    (Path(raw.jobs) / "part-0.json").write_bytes((CORPUS / "bad_jobs.jsonl").read_bytes())
    (Path(raw.candidates) / "part-0.csv").write_bytes((CORPUS / "bad_candidates.tsv").read_bytes())
    Path(raw.export).write_text(json.dumps({"last_date": LAST_DATE}))


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
    assert sorted(r.job_id for r in jobs.collect()) == [1, 2, 3, 4, 5, 11, 13, 14, 15, 16, 17]
    assert dict(jobs.dtypes)["keywords"] == "array<string>"
    keywords = {r.job_id: r.keywords for r in jobs.collect()}
    assert keywords[16] == ["c++", "[remote]", 'a "quoted] word']
    candidates = {
        r.candidate_id: r.sequence
        for r in read_delta(spark, table_path(config, "bronze", "candidates")).collect()
    }
    assert sorted(candidates) == [10, 21, 24, 26, 30, 31, 45]
    assert [(e.job_id, e.score) for e in candidates[24]] == [(3, 2), (4, 6)]  # JSON input
    assert [(e.job_id, e.score) for e in candidates[10]] == [(1, 5), (2, 3)]  # Python literal
    assert candidates[26] == []
    assert [(e.job_id, e.score) for e in candidates[45]] == [(2, 1)]  # trailing blanks


def test_dates_reach_bronze_typed(spark, ingested):
    config, _ = ingested
    jobs = read_delta(spark, table_path(config, "bronze", "jobs"))
    assert jobs.columns[-2:] == ["posted_at", "expires_at"]
    assert (dict(jobs.dtypes)["posted_at"], dict(jobs.dtypes)["expires_at"]) == ("date", "date")
    dates = {r.job_id: (r.posted_at, r.expires_at) for r in jobs.collect()}
    assert dates[13] == (date(2025, 10, 1), date(2025, 10, 15))
    assert dates[14] == (date(2025, 10, 10), None)
    assert dates[15] == (None, date(2025, 11, 30))  # an ad may close after the last date
    assert dates[17] == (None, None)  # blank dates are absent ones
    assert dates[1] == (None, None)  # undated records stay undated
    candidates = read_delta(spark, table_path(config, "bronze", "candidates"))
    assert dict(candidates.dtypes)["sequence"] == ("array<struct<job_id:int,score:int,at:date>>")
    sequences = {r.candidate_id: r.sequence for r in candidates.collect()}
    assert [(e.job_id, e.score, e.at) for e in sequences[30]] == [
        (13, 3, date(2025, 10, 1)),
        (14, 2, date(2025, 10, 14)),
        (1, 5, date(2025, 10, 14)),
    ]
    assert [e.at for e in sequences[31]] == [date(2025, 10, 31)] * 2  # on the last date
    assert [e.at for e in sequences[10]] == [None, None]


def test_the_last_date_and_dating_are_in_the_manifest(ingested):
    config, _ = ingested
    assert manifest.current(config, "ingest") == {"last_date": LAST_DATE, "dated": True}


def test_quarantine_details_name_the_dates(spark, ingested):
    config, _ = ingested
    table = read_delta(spark, table_path(config, "bronze", "quarantine"))
    details = {r.reason: r.detail for r in table.where("record LIKE '41\t%'").collect()}
    assert details == {
        "interest_outside_ad_life": "interest in job 13 on 2025-10-15, outside its life "
        "(posted_at 2025-10-01, expires_at 2025-10-15)"
    }
    details = {
        r.record.split("\t")[0]: r.detail
        for r in table.where("reason IN ('malformed_line', 'date_after_last_date')").collect()
    }
    assert details["32"] == "3 tab-separated columns, expected 2"
    assert details["11 [{'job_id': 1, 'score': 5}]"] == "no tab between identifier and sequence"
    assert details["38"] == "an element is dated 2025-11-01, after the data's last date 2025-10-31"
    job = next(d for k, d in details.items() if '"job_id": 35' in k)
    assert job == "posted_at 2025-11-01 is after the data's last date 2025-10-31"


def test_rerun_replaces_instead_of_duplicating(spark, ingested):
    config, _ = ingested
    before = quarantined(spark, config, "candidates")
    ingest_raw(spark, config)
    assert quarantined(spark, config, "candidates") == before
    assert read_delta(spark, table_path(config, "bronze", "candidates")).count() == 7


def test_undated_input_ingests_as_before_with_null_dates(spark, tmp_path):
    """Records without dates: the same rows and values as before dates existed, their date
    columns null; without `ingest.last_date` or an export, the last date is today's (UTC)."""
    config = corpus_config(tmp_path, 1.0)
    raw = RawLocations.of(config)
    Path(raw.jobs).mkdir(parents=True)
    Path(raw.candidates).mkdir(parents=True)
    jobs = (CORPUS / "bad_jobs.jsonl").read_bytes().splitlines(keepends=True)[:5]
    (Path(raw.jobs) / "part-0.json").write_bytes(b"".join(jobs))
    (Path(raw.candidates) / "part-0.csv").write_text(
        "identifier\tsequence\n10\t[{'job_id': 1, 'score': 5}, {'job_id': 2, 'score': 3}]\n"
        '24\t[{"job_id": 3, "score": 2}]\n'
    )
    before = datetime.now(UTC).date()
    reports = {r.source: r for r in ingest_raw(spark, config)}
    after = datetime.now(UTC).date()

    assert [(r.read, r.bad) for r in reports.values()] == [(5, 0), (2, 0)]
    bronze = read_delta(spark, table_path(config, "bronze", "jobs")).orderBy("job_id").collect()
    assert [(r.job_id, r.keywords, r.posted_at, r.expires_at) for r in bronze] == [
        (n, ["spark", "sql"], None, None) for n in range(1, 6)
    ]
    candidates = read_delta(spark, table_path(config, "bronze", "candidates"))
    assert sorted(
        (r.candidate_id, [tuple(e) for e in r.sequence]) for r in candidates.collect()
    ) == [(10, [(1, 5, None), (2, 3, None)]), (24, [(3, 2, None)])]
    entry = manifest.current(config, "ingest")
    assert entry["dated"] is False
    assert entry["last_date"] in {before.isoformat(), after.isoformat()}


def test_over_budget_fails_clearly_and_keeps_the_evidence(spark, tmp_path):
    config = corpus_config(tmp_path, budget=0.05)
    install_corpus(config)
    with pytest.raises(
        DataQualityError, match=r"jobs: 22 of 33 records .* over the error budget of 5\.00%"
    ) as error:
        ingest_raw(spark, config)
    assert "malformed_record" in str(error.value)
    assert sum(quarantined(spark, config, "jobs").values()) == 22
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
    assert read_delta(spark, bronze["candidates"]).count() == 7
