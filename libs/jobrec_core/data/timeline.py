"""When the generated platform's ads are posted and expire, and when candidates show interest.

A job board is a stream: ads are posted every day and expire within weeks, and a candidate
shows interest only in ads that are live, most of it in an ad's first days. Days are counted
from 0, the timeline's first day, to `days - 1`, its last (`data.timeline.end_date`);
:func:`iso_dates` names them. An ad is live on the days `posted <= day < expires`.

* **Ads.** Generated ads are posted on uniformly drawn days; the real ads keep the order of
  their `publishedAt` and are spread over the timeline by rank (:func:`days_by_rank`: the
  collection was made while they were still open, so their own dates favour long-lived ads,
  38% of them in its last month). Every ad's life is lognormal, clipped
  (:func:`ad_lifetimes`).
* **Interest** (:func:`activity_days`, :func:`place_interests`). A candidate arrives on a
  uniformly drawn day and shows their interests one after another, exponential gaps apart
  (interests after the timeline's last day have not happened yet and are left out).
  On that day the candidate picks a live ad of the wanted occupation, each ad weighted by how
  much interest an ad of its age draws (:func:`age_weights`: a first days' rush and a slower
  tail), so that most of an ad's interest comes early, as the application flows measured by
  Davis and Samaniego de la Parra (docs/DATA.md) do. An occupation with no ad live that day
  gets no interest that day.

Everything here is numpy over whole blocks: no loop per ad or per interest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np

from jobrec_core.config import TimelineConfig

# Interests drawn at once: each holds a row of `lifetime_max_days` weights while it is drawn.
DRAW_CHUNK = 32_768


def first_date(days: int, end_date: str) -> np.datetime64:
    """The date of day 0 of a timeline of `days` days that ends on `end_date`."""
    return np.datetime64(date.fromisoformat(end_date) - timedelta(days=days - 1), "D")


def iso_dates(day: np.ndarray, first: np.datetime64) -> np.ndarray:
    """Timeline days as ISO dates (strings), day 0 being `first`."""
    return (first + day.astype("timedelta64[D]")).astype(str)


def ad_lifetimes(rng: np.random.Generator, count: int, settings: TimelineConfig) -> np.ndarray:
    """Whole days each ad stays live: lognormal with the configured median and spread,
    clipped to [`lifetime_min_days`, `lifetime_max_days`]."""
    drawn = rng.lognormal(np.log(settings.lifetime_median_days), settings.lifetime_sigma, count)
    return np.clip(np.rint(drawn), settings.lifetime_min_days, settings.lifetime_max_days).astype(
        np.int32
    )


def days_by_rank(published: np.ndarray, days: int) -> np.ndarray:
    """Posting days for ads published at `published` (any sortable values): their order kept
    (ties by position), spread evenly over the `days` by rank."""
    order = np.argsort(published, kind="stable")
    ranks = np.empty(len(published), dtype=np.int64)
    ranks[order] = np.arange(len(published))
    return (ranks * days // max(len(published), 1)).astype(np.int32)


def age_weights(settings: TimelineConfig) -> np.ndarray:
    """The share of an ad's interest that falls on each day of its life, day 0 the day it is
    posted (up to `lifetime_max_days`): a mixture of two exponential decays, the rush
    (`rush_share`, mean `rush_mean_days`) and the tail, each integrated over the day."""
    edges = np.arange(settings.lifetime_max_days + 1, dtype=np.float64)

    def decay(mean: float) -> np.ndarray:
        survival = np.exp(-edges / mean)
        return survival[:-1] - survival[1:]

    share = settings.rush_share
    return share * decay(settings.rush_mean_days) + (1 - share) * decay(settings.tail_mean_days)


@dataclass(frozen=True)
class AdCalendar:
    """Every job's posting day and first day not live, and the jobs of each occupation in
    groups by posting day, each group in order of expiry: what :func:`place_interests` draws
    live ads from (a real ad that matched no occupation is never drawn)."""

    posted: np.ndarray  # by job_id - 1
    expires: np.ndarray  # by job_id - 1: posted + lifetime
    days: int
    first: np.datetime64  # the date of day 0
    max_life: int
    weights: np.ndarray  # `age_weights`
    jobs: np.ndarray  # job ids sorted by (occupation, posting day, expiry day)
    keys: np.ndarray  # the same order's (group, expiry) as one sortable number
    day_starts: np.ndarray  # [occupation, day]: where that day's group starts in `jobs`
    day_counts: np.ndarray  # [occupation, day]: how many jobs the group holds

    @staticmethod
    def build(
        occupations: np.ndarray,
        posted: np.ndarray,
        lifetimes: np.ndarray,
        n_occupations: int,
        days: int,
        settings: TimelineConfig,
    ) -> AdCalendar:
        """From each job's occupation (-1: never drawn), posting day and lifetime."""
        expires = (posted + lifetimes).astype(np.int64)
        labelled = np.flatnonzero(occupations >= 0)
        group = occupations[labelled].astype(np.int64) * days + posted[labelled]
        order = np.lexsort((labelled, expires[labelled], group))
        counts = np.bincount(group, minlength=n_occupations * days)
        return AdCalendar(
            posted=posted.astype(np.int32),
            expires=expires.astype(np.int32),
            days=days,
            first=first_date(days, settings.end_date),
            max_life=settings.lifetime_max_days,
            weights=age_weights(settings),
            jobs=(labelled[order] + 1).astype(np.int32),
            keys=group[order] * _KEY_SPAN + expires[labelled][order],
            day_starts=(np.cumsum(counts) - counts).reshape(n_occupations, days),
            day_counts=counts.reshape(n_occupations, days),
        )

    def live_on(self, job_ids: np.ndarray, day: np.ndarray) -> np.ndarray:
        """Whether each job is live on its day."""
        index = job_ids - 1
        return (self.posted[index] <= day) & (day < self.expires[index])


# Above any expiry day: a group's expiries stay within its span of `AdCalendar.keys`.
_KEY_SPAN = 1 << 24


def place_interests(
    rng: np.random.Generator,
    calendar: AdCalendar,
    occupation: np.ndarray,
    day: np.ndarray,
) -> np.ndarray:
    """For each interest (an occupation wanted on a day), a live ad of that occupation drawn
    with the weight of its age that day (:func:`age_weights`); 0 where the occupation has no
    ad live that day (the interest does not happen).

    Exactly, in two draws: a posting day in the `max_life` days up to the day, weighted by
    how many of the occupation's ads posted then are still live and by their age's weight;
    then one of those live ads, uniformly. The live ones of a day's group are its last, as a
    group is in order of expiry."""
    if day.size == 0:
        return np.zeros(0, dtype=np.int32)
    return np.concatenate(
        [
            _draw_by_age(rng, calendar, occupation[part], day[part])
            for part in np.array_split(np.arange(day.size), -(-day.size // DRAW_CHUNK))
        ]
    )


def _draw_by_age(
    rng: np.random.Generator, calendar: AdCalendar, occupation: np.ndarray, day: np.ndarray
) -> np.ndarray:
    """:func:`place_interests` for one chunk of interests."""
    ages = np.arange(calendar.max_life)
    posting = day[:, None] - ages[None, :]  # [interest, age]: the posting day of that age
    valid = posting >= 0
    safe = np.where(valid, posting, 0)
    start = calendar.day_starts[occupation[:, None], safe]
    end = start + np.where(valid, calendar.day_counts[occupation[:, None], safe], 0)
    group = occupation[:, None].astype(np.int64) * calendar.days + safe
    first_live = np.maximum(
        np.searchsorted(calendar.keys, group * _KEY_SPAN + day[:, None], side="right"), start
    )
    live = np.maximum(end - first_live, 0)
    cumulative = np.cumsum(live * calendar.weights[None, : calendar.max_life], axis=1)
    total = cumulative[:, -1]
    target = rng.random(day.size) * total
    age = np.minimum((cumulative <= target[:, None]).sum(axis=1), calendar.max_life - 1)
    rows = np.arange(day.size)
    chosen_first, chosen_live = first_live[rows, age], live[rows, age]
    offset = (rng.random(day.size) * np.maximum(chosen_live, 1)).astype(np.int64)
    jobs = calendar.jobs[np.minimum(chosen_first + offset, calendar.jobs.size - 1)]
    return np.where((total > 0) & (chosen_live > 0), jobs, 0).astype(np.int32)


def activity_days(
    rng: np.random.Generator, owner: np.ndarray, candidates: int, days: int, mean_gap: float
) -> np.ndarray:
    """The day of each interest of candidates `owner` (their index in the block, in order):
    each candidate arrives on a uniform day and shows their interests one after another,
    exponential gaps apart, so that a candidate with many interests stays longer; a day past
    the timeline (>= `days`) is one the data does not reach yet."""
    arrival = rng.integers(0, days, candidates)
    gaps = rng.exponential(mean_gap, owner.size)
    first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if owner.size else owner
    gaps[first] = 0.0  # the first interest falls on the day of arrival
    elapsed = np.cumsum(gaps)
    elapsed -= np.repeat(elapsed[first], np.diff(np.r_[first, owner.size]))
    return (arrival[owner] + np.floor(elapsed)).astype(np.int64)
