"""The run's as-of date and the dated tables' views at a date."""

from datetime import date

import pytest

from jobrec_core.config import ConfigError, load_config
from jobrec_core.timeline.asof import (
    interest_between,
    interest_by,
    jobs_live_on,
    jobs_posted_by,
    live_between,
    posted_between,
    resolve_as_of,
)
from tests.helpers import REPO

LAST = date(2025, 10, 31)


@pytest.mark.parametrize(
    ("setting", "day"),
    [("latest", LAST), ("latest-14d", date(2025, 10, 17)), ("2025-09-01", date(2025, 9, 1))],
)
def test_as_of_names_a_day_of_dated_data(setting, day):
    assert resolve_as_of(setting, LAST) == day


def test_undated_data_has_no_as_of_day():
    assert resolve_as_of("latest-14d", None) is None


def test_an_as_of_date_after_the_data_is_refused():
    with pytest.raises(ValueError, match="after the data's last date"):
        resolve_as_of("2025-11-01", LAST)


@pytest.mark.parametrize("setting", ["yesterday", "latest-14", "2025-13-01", "2025-9-1"])
def test_the_configuration_refuses_what_is_not_an_as_of_date(setting):
    with pytest.raises(ConfigError, match=r"run\.as_of"):
        load_config("local", [f"run.as_of={setting}"], REPO / "conf")


def test_an_unquoted_date_reads_as_the_date():
    config = load_config("local", ["run.as_of=2025-10-01"], REPO / "conf")
    assert config.run.as_of == "2025-10-01"


JOBS = [
    (1, date(2025, 10, 1), date(2025, 10, 10)),  # live 1-9 October
    (2, date(2025, 10, 5), date(2025, 10, 6)),  # live 5 October only
    (3, date(2025, 10, 20), date(2025, 11, 20)),  # posted after the 10th
    (4, None, None),  # undated: always live
]


@pytest.fixture(scope="module")
def jobs(spark):
    return spark.createDataFrame(JOBS, "job_id INT, posted_at DATE, expires_at DATE")


def test_an_ad_is_live_from_its_posting_to_the_day_before_it_expires(jobs):
    def ids(frame):
        return sorted(r["job_id"] for r in frame.collect())

    assert ids(jobs_live_on(jobs, date(2025, 10, 5))) == [1, 2, 4]
    assert ids(jobs_live_on(jobs, date(2025, 10, 6))) == [1, 4]  # 2 expired that morning
    assert ids(jobs_live_on(jobs, date(2025, 10, 10))) == [4]
    assert ids(jobs_posted_by(jobs, date(2025, 10, 10))) == [1, 2, 4]  # expired ones exist
    assert ids(jobs_live_on(jobs, None)) == [1, 2, 3, 4]  # undated: every ad
    window = jobs.where(live_between(date(2025, 10, 9), date(2025, 10, 25)))
    assert ids(window) == [1, 3, 4]
    fresh = jobs.where(posted_between(date(2025, 10, 9), date(2025, 10, 25)))
    assert ids(fresh) == [3]  # an undated ad was never posted in a window


def test_interest_counts_only_by_its_day(spark):
    candidates = spark.createDataFrame(
        [
            (7, [(1, 5, date(2025, 10, 2)), (2, 3, date(2025, 10, 5)), (3, 4, date(2025, 10, 21))]),
            (8, [(3, 6, date(2025, 10, 22))]),  # no interest by the 10th: not arrived yet
            (9, [(1, 2, None)]),  # undated interest counts at any date
        ],
        "candidate_id LONG, sequence ARRAY<STRUCT<job_id: INT, score: INT, at: DATE>>",
    )
    by_tenth = {
        r["candidate_id"]: r["sequence"]
        for r in interest_by(candidates, date(2025, 10, 10)).collect()
    }
    assert sorted(by_tenth) == [7, 9]
    assert [e["job_id"] for e in by_tenth[7]] == [1, 2]
    after = interest_between(candidates, date(2025, 10, 11), date(2025, 10, 24)).collect()
    assert {r["candidate_id"]: [e["job_id"] for e in r["sequence"]] for r in after} == {
        7: [3],
        8: [3],
    }
    assert interest_by(candidates, None).count() == 3
