"""The generator's timeline: ads posted every day that expire, and interest only in live ads,
most of it in an ad's first days."""

import numpy as np
import pytest

from jobrec_core.config import load_config
from jobrec_core.data.generate import (
    CandidatePools,
    GenerationPlan,
    ad_calendar,
    assign_job_occupations,
    generate_candidate_block,
)
from jobrec_core.data.timeline import (
    AdCalendar,
    ad_lifetimes,
    age_weights,
    days_by_rank,
    place_interests,
)
from jobrec_core.taxonomy.onet import load_catalogue
from jobrec_core.taxonomy.titles import split_titles
from jobrec_core.text.tokens import load_stopwords
from tests.helpers import REPO


@pytest.fixture(scope="module")
def config():
    return load_config(
        "local", ["data.preset=tiny", "data.candidates_per_task=1000"], REPO / "conf"
    )


@pytest.fixture(scope="module")
def plan(config):
    catalogue = load_catalogue(config.data.reference_dir)
    sizes = config.data.sizes()
    occupations = np.full(sizes.jobs, -1, dtype=np.int32)
    generated = sizes.generated_jobs
    occupations[:generated] = assign_job_occupations(generated, catalogue, 1.0, config.run.seed)
    occupations[generated::3] = occupations[: len(occupations[generated::3])]  # some real ads
    # the real ads' publication times, in reverse of their ids
    published = np.array([f"2025-{12 - i % 12:02d}-01" for i in range(sizes.real_ads)])
    calendar = ad_calendar(occupations, published, config.data, len(catalogue), config.run.seed)
    titles = split_titles(catalogue, [], config.titles.split_seed).generator
    return GenerationPlan(
        catalogue, config.data, config.run.seed, load_stopwords(), occupations, titles, calendar
    )


def test_lifetimes_are_weeks_long_and_clipped(config):
    settings = config.data.timeline
    lives = ad_lifetimes(np.random.default_rng(0), 50_000, settings)
    assert lives.min() >= settings.lifetime_min_days and lives.max() <= settings.lifetime_max_days
    assert abs(np.median(lives) - settings.lifetime_median_days) <= 1


def test_real_ads_keep_their_order_over_the_timeline():
    days = days_by_rank(np.array(["2025-10-02", "2019-11-14", "2025-10-01", "2025-10-03"]), 100)
    assert days.tolist() == [50, 0, 25, 75]


def test_an_ads_interest_falls_with_its_age(config):
    weights = age_weights(config.data.timeline)
    assert np.all(np.diff(weights) < 0) and 0.99 < weights.sum() <= 1.0
    assert weights[:2].sum() > 0.4  # the rush: most interest in the first days


def test_every_ad_is_posted_on_the_timeline_and_expires_after(plan, config):
    calendar = plan.calendar
    assert isinstance(calendar, AdCalendar)
    days = config.data.sizes().days
    assert calendar.posted.min() >= 0 and calendar.posted.max() < days
    assert np.all(calendar.expires > calendar.posted)
    assert str(calendar.first) == "2025-09-02"  # 60 days up to 2025-10-31


def test_an_interest_goes_to_a_live_ad_of_its_occupation(plan):
    calendar = plan.calendar
    assert calendar is not None
    rng = np.random.default_rng(1)
    occupation = plan.job_occupation[rng.integers(0, 2000, 5000)]
    day = rng.integers(0, calendar.days, 5000)
    jobs = place_interests(rng, calendar, occupation, day)
    found = jobs > 0
    assert found.mean() > 0.5
    assert np.all(plan.job_occupation[jobs[found] - 1] == occupation[found])
    assert np.all(calendar.live_on(jobs[found], day[found]))
    # where nothing is found, the occupation has no ad live that day
    for o, d in zip(occupation[~found][:200], day[~found][:200], strict=True):
        of_it = np.flatnonzero(plan.job_occupation == o) + 1
        assert not calendar.live_on(of_it, np.full(of_it.size, d)).any()


def test_a_candidates_interests_are_dated_in_order_within_the_ads_lives(plan, config):
    pools = CandidatePools.build(plan)
    batch = generate_candidate_block(0, plan, pools).to_pylist()
    assert 0 < len(batch) < 1000  # those not arrived by the last day are left out
    end = np.datetime64(config.data.timeline.end_date)
    calendar = plan.calendar
    assert calendar is not None
    for candidate in batch:
        sequence = candidate["sequence"]
        days = np.array([np.datetime64(e["at"]) - calendar.first for e in sequence]).astype(int)
        jobs = np.array([e["job_id"] for e in sequence])
        assert np.all(np.diff(days) >= 0) and days[-1] <= (end - calendar.first).astype(int)
        assert np.all(calendar.live_on(jobs, days))
        assert len(set(jobs)) == len(jobs)
    assert generate_candidate_block(0, plan, pools).equals(generate_candidate_block(0, plan, pools))
