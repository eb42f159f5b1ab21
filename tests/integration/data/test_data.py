"""The tiny preset end to end on real Spark and Delta: generate, ingest, profile."""

import ast
from pathlib import Path

import pytest

from jobrec_core.config import load_config
from jobrec_core.data.generate import DATE_COLUMNS, JOB_COLUMNS
from jobrec_core.data.report import format_profile, profile_dataset, save_plots
from jobrec_core.data.stage import generate_dataset
from jobrec_core.platform.tables import RawLocations, read_delta, table_path
from tests.helpers import REPO, state_overrides

pytestmark = pytest.mark.integration


def test_sizes_and_clean_ingest(tiny):
    config, counts, reports = tiny
    sizes = config.data.sizes()
    assert counts["jobs"] == sizes.jobs
    assert 0 < counts["labelled_real_ads"] < sizes.real_ads
    # on the timeline, a candidate with no interest by its last day is not written yet
    assert 0.7 * sizes.candidates < counts["candidates"] < sizes.candidates
    assert (reports["jobs"].read, reports["jobs"].bad) == (sizes.jobs, 0)
    assert (reports["candidates"].read, reports["candidates"].bad) == (counts["candidates"], 0)


def test_raw_candidates_are_in_the_paper_format(tiny):
    config, _, _ = tiny
    folder = Path(RawLocations.of(config).candidates)
    first_file = sorted(folder.glob("part-*"))[0]
    header, line = first_file.read_text().splitlines()[:2]
    assert header == "identifier\tsequence"
    identifier, sequence = line.split("\t")
    assert identifier.isdigit()
    assert sequence.startswith("[{'job_id': ")
    parsed = ast.literal_eval(sequence)
    assert all(set(e) == {"job_id", "score", "at"} for e in parsed)
    days = [e["at"] for e in parsed]
    assert days == sorted(days) and days[-1] <= config.data.timeline.end_date


def test_bronze_schemas(spark, tiny):
    config, _, _ = tiny
    jobs = read_delta(spark, table_path(config, "bronze", "jobs"))
    assert jobs.columns == [*JOB_COLUMNS, *DATE_COLUMNS]
    assert dict(jobs.dtypes)["job_id"] == "int"
    assert dict(jobs.dtypes)["posted_at"] == dict(jobs.dtypes)["expires_at"] == "date"
    candidates = read_delta(spark, table_path(config, "bronze", "candidates"))
    assert dict(candidates.dtypes) == {
        "candidate_id": "bigint",
        "sequence": "array<struct<job_id:int,score:int,at:date>>",
    }


def test_ground_truth_grades_occupations(spark, tiny):
    config, counts, _ = tiny
    truth = read_delta(spark, RawLocations.of(config).ground_truth).collect()
    assert len(truth) == counts["candidates"]
    for row in truth[:200]:
        expected = {row.primary_occupation: 2}
        if row.related_occupation:
            expected[row.related_occupation] = 1
        assert row.occupation_relevance == expected


def test_generation_is_deterministic(spark, tiny, tmp_path):
    config, _, _ = tiny
    again = load_config("local", [*state_overrides(tmp_path), "data.preset=tiny"], REPO / "conf")
    generate_dataset(spark, again)
    for name in ("jobs", "candidates"):
        first = spark.read.text(getattr(RawLocations.of(config), name))
        second = spark.read.text(getattr(RawLocations.of(again), name))
        assert first.exceptAll(second).count() == 0
        assert second.exceptAll(first).count() == 0


def test_profile_and_plot(spark, tiny, tmp_path):
    config, counts, _ = tiny
    profile = profile_dataset(spark, config)
    assert profile.candidates == counts["candidates"]
    timeline = profile.timeline
    assert timeline is not None and timeline.last == config.data.timeline.end_date
    assert 15 <= timeline.lifetime_median <= 30 and timeline.live_on_last_day > 0
    assert 0.2 < timeline.interest_within_2_days < timeline.interest_within_4_days < 0.8
    assert 0 < profile.pass_rules < profile.candidates
    assert sum(profile.jobs_per_occupation) == profile.labelled_jobs
    text = format_profile(profile, 3, 4)
    assert "pass the rules" in text and "ads posted a day" in text
    assert save_plots(profile, tmp_path).stat().st_size > 10_000


def test_undated_generation_writes_the_seed_format(spark, tmp_path):
    """With no timeline (`days: 0`), the seed's own format: no dates anywhere, every candidate
    written, and no export file that would date it."""
    config = load_config(
        "local",
        [*state_overrides(tmp_path), "data.preset=tiny", "data.presets.tiny.days=0"],
        REPO / "conf",
    )
    counts = generate_dataset(spark, config)
    raw = RawLocations.of(config)
    assert counts["candidates"] == config.data.sizes().candidates
    assert not Path(raw.export).exists()
    first_file = sorted(Path(raw.candidates).glob("part-*"))[0]
    sequence = first_file.read_text().splitlines()[1].split("\t")[1]
    assert all(set(e) == {"job_id", "score"} for e in ast.literal_eval(sequence))
    jobs = spark.read.json(raw.jobs)
    assert not set(DATE_COLUMNS) & set(jobs.columns)
