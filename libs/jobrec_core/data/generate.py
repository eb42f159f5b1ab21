"""Synthetic jobs and candidates made of real material, with a known ground truth.

The original data (466,101 ads, 7,388,266 candidates) is proprietary; this module makes data
of the same shape and any size from O*NET (`taxonomy.onet`) and real job ads:

* every generated ad belongs to one occupation and is written from that occupation's real
  titles, task statements, job zone and technology skills, varied so that no two ads are
  copies, some long and noisy;
* every candidate has latent interests (a primary occupation, sometimes a related one) and
  shows interest in jobs of those occupations, plus a share of unrelated "noise" jobs: the
  behaviour the WMD filter exists to remove. What was injected is kept as ground truth.

Generation is partitioned into blocks (of jobs, of candidates) generated independently from
`(seed, block)`, so the result does not depend on how Spark schedules the blocks, and no
driver-side list ever holds a row per candidate. Job text is built per ad in Python (strings);
candidate sequences are built for a whole block at once with numpy and handed to Spark as
Arrow arrays.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.config import DataConfig
from jobrec_core.data.timeline import (
    AdCalendar,
    activity_days,
    ad_lifetimes,
    days_by_rank,
    iso_dates,
    place_interests,
)
from jobrec_core.taxonomy.onet import Catalogue, Occupation, match_title
from jobrec_core.taxonomy.titles import GeneratorTitles
from jobrec_core.text.tokens import clean_tokens, unique_in_order

log = logging.getLogger(__name__)


JOB_COLUMNS = (
    "job_id",
    "title",
    "function",
    "requirement_summary",
    "description",
    "keywords",
    "occupation_code",
)
DATE_COLUMNS = ("posted_at", "expires_at")  # ISO dates; null (left out of the JSON) undated
JOB_SCHEMA = (
    "job_id INT, title STRING, function STRING, requirement_summary STRING, "
    "description STRING, keywords ARRAY<STRING>, occupation_code STRING, "
    "posted_at STRING, expires_at STRING"
)
CANDIDATE_SCHEMA = (
    "identifier BIGINT, sequence ARRAY<STRUCT<job_id: INT, score: INT, at: DATE>>, "
    "primary_occupation STRING, related_occupation STRING, noise_job_ids ARRAY<INT>"
)
RELATED_CHOICES = 5  # a related interest is one of the closest related occupations
MAX_KEYWORDS = 15

_SENIORITY = ("Senior", "Junior", "Lead", "Assistant", "Trainee", "Principal", "Head")
_TITLE_SUFFIXES = (" - Full Time", " - Part Time", " (Remote)", " - Temporary", " (m/f/d)")
_INTROS = (
    "We are hiring {a_title}.",
    "Join our team as {a_title}.",
    "{company} is looking for {a_title}.",
    "{company} seeks an experienced {title} to join its team.",
    "As {title} you will:",
    "",
)
_COMPANIES = (
    "A growing company",
    "Our client",
    "A leading organisation",
    "A family-owned business",
    "A fast-growing startup",
    "An international group",
    "A public sector employer",
)
_BOILERPLATE = (
    "We offer a competitive salary and a comprehensive benefits package.",
    "We are an equal opportunity employer and value diversity at our company.",
    "Flexible working hours and the possibility to work from home two days a week.",
    "Our offices are located in the city centre, close to public transport.",
    "Please send your CV and a cover letter through our careers page.",
    "Only shortlisted candidates will be contacted.",
    "You will be part of a friendly and supportive team.",
    "Training and development opportunities are available for all employees.",
    "Free coffee, fruit and monthly team events.",
    "The position reports to the head of the department.",
    "Applications are reviewed on a rolling basis.",
    "Relocation assistance may be available for the right candidate.",
    "Private health insurance and a yearly performance bonus.",
    "Our company has been growing steadily for more than twenty years.",
)
_REQUIREMENT_HEADINGS = (
    "requirement",
    "qualification",
    "what you bring",
    "what you'll bring",
    "what you need",
    "what we're looking for",
    "what we are looking for",
    "you have",
    "about you",
    "who you are",
    "must have",
    "you might be a fit",
    "skills",
)


@dataclass(frozen=True)
class GenerationPlan:
    """What every executor needs to generate its blocks; broadcast once."""

    catalogue: Catalogue
    settings: DataConfig
    seed: int
    stopwords: frozenset[str]
    job_occupation: np.ndarray
    """Occupation index per job (job_id - 1); -1 for a real ad that matched no occupation."""
    titles: tuple[GeneratorTitles, ...]
    """Per occupation, the titles its generated ads may have (`taxonomy.titles`)."""
    calendar: AdCalendar | None = None
    """Every ad's posting and expiry day (`data.timeline`); None: undated data."""

    @property
    def codes(self) -> np.ndarray:
        return np.array([o.code for o in self.catalogue.occupations], dtype=object)

    @property
    def first_day(self) -> np.datetime64:
        """The date of the timeline's day 0 (a dated plan only)."""
        assert self.calendar is not None
        return self.calendar.first

    def with_dates(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Job rows (`job_id` ...) with their `DATE_COLUMNS`: ISO dates from the calendar,
        nulls without one."""
        if self.calendar is None:
            return frame.assign(**dict.fromkeys(DATE_COLUMNS))
        index = frame["job_id"].to_numpy(np.int64) - 1
        return frame.assign(
            posted_at=iso_dates(self.calendar.posted[index], self.first_day),
            expires_at=iso_dates(self.calendar.expires[index], self.first_day),
        )


def assign_job_occupations(
    n_jobs: int, catalogue: Catalogue, sigma: float, seed: int
) -> np.ndarray:
    """The occupation of each generated job: a lognormal popularity per occupation, so that
    some occupations have many ads and others few, as on a real job board."""
    rng = np.random.default_rng([seed, 1])
    popularity = rng.lognormal(0.0, sigma, len(catalogue))
    return rng.choice(len(catalogue), size=n_jobs, p=popularity / popularity.sum()).astype(np.int32)


def ad_calendar(
    job_occupation: np.ndarray,
    real_published: np.ndarray,
    settings: DataConfig,
    n_occupations: int,
    seed: int,
) -> AdCalendar | None:
    """Every ad's posting day and life on the preset's timeline (None: an undated preset):
    generated ads on uniformly drawn days, the real ads (the last `len(real_published)` jobs,
    published at `real_published`) in the order they were published (`data.timeline`)."""
    days = settings.sizes().days
    if days == 0:
        return None
    n_generated = len(job_occupation) - len(real_published)
    posted = np.empty(len(job_occupation), dtype=np.int32)
    posted[:n_generated] = np.random.default_rng([seed, 4]).integers(0, days, n_generated)
    posted[n_generated:] = days_by_rank(real_published, days)
    lifetimes = ad_lifetimes(
        np.random.default_rng([seed, 5]), len(job_occupation), settings.timeline
    )
    return AdCalendar.build(
        job_occupation, posted, lifetimes, n_occupations, days, settings.timeline
    )


# --- jobs ------------------------------------------------------------------------------------


def generate_job_blocks(
    blocks: Iterable[pd.DataFrame], plan: GenerationPlan
) -> Iterator[pd.DataFrame]:
    """`mapInPandas` body: each input row is a block id; yields the block's generated ads."""
    per_block = plan.settings.jobs_per_task
    n_generated = _generated_count(plan)
    for frame in blocks:
        for block in frame["block"].tolist():
            first = block * per_block
            last = min(first + per_block, n_generated)
            rng = random.Random(f"{plan.seed}:jobs:{block}")
            rows = [
                synthesize_job(
                    job_id + 1,
                    plan.catalogue.occupations[plan.job_occupation[job_id]],
                    plan.titles[plan.job_occupation[job_id]],
                    plan.catalogue,
                    rng,
                    plan.settings.long_ad_rate,
                    plan.stopwords,
                )
                for job_id in range(first, last)
            ]
            yield plan.with_dates(pd.DataFrame(rows, columns=list(JOB_COLUMNS)))


def _generated_count(plan: GenerationPlan) -> int:
    return plan.settings.sizes().generated_jobs


def synthesize_job(
    job_id: int,
    occupation: Occupation,
    titles: GeneratorTitles,
    catalogue: Catalogue,
    rng: random.Random,
    long_ad_rate: float,
    stopwords: frozenset[str],
) -> tuple:
    """One ad of `occupation`, in the paper's schema (plus the occupation code); its title is
    one of `titles`, the generator's side of the occupation's titles (`taxonomy.titles`)."""
    title = _title(titles, rng)
    function = occupation.function
    if rng.random() < 0.2:
        function = function.split(",")[0].split(" and ")[0]
    tasks = _sample(occupation.core_tasks, rng.randint(2, 5), rng) + _sample(
        occupation.supplemental_tasks, rng.randint(0, 1), rng
    )
    if not tasks:
        tasks = [occupation.title + "."]
    rng.shuffle(tasks)
    article = "an" if title[:1].lower() in "aeiou" else "a"
    intro = rng.choice(_INTROS).format(
        title=title, a_title=f"{article} {title}", company=rng.choice(_COMPANIES)
    )
    sentences = [intro, *tasks] if intro else tasks
    if rng.random() < long_ad_rate:
        stranger = catalogue.occupations[rng.randrange(len(catalogue))]
        sentences += _sample(stranger.core_tasks, rng.randint(1, 3), rng)
        sentences += rng.sample(_BOILERPLATE, rng.randint(3, 6))
        rng.shuffle(sentences)
    technologies = _weighted_technologies(occupation, rng.randint(3, 10), rng)
    keywords = unique_in_order(
        [w for name in technologies for w in clean_tokens(name, stopwords)]
        + clean_tokens(title, stopwords)
    )[:MAX_KEYWORDS]
    return (
        job_id,
        title,
        function,
        _requirements(occupation, catalogue, technologies, rng),
        " ".join(sentences),
        keywords,
        occupation.code,
    )


def _title(titles: GeneratorTitles, rng: random.Random) -> str:
    """An alternate title (60%), a reported one (25%) or the O*NET title, each source falling
    back to the next when the generator's side has none of it; sometimes with a seniority
    word or a suffix."""
    sources = [titles.alternate, titles.reported, (titles.official,) if titles.official else ()]
    draw = rng.random()
    first = 0 if draw < 0.6 else 1 if draw < 0.85 else 2
    choices = next(s for s in sources[first:] + sources[:first] if s)
    title = rng.choice(choices)
    if rng.random() < 0.15:
        title = f"{rng.choice(_SENIORITY)} {title}"
    if rng.random() < 0.05:
        title += rng.choice(_TITLE_SUFFIXES)
    return title


def _sample(items: tuple[str, ...], k: int, rng: random.Random) -> list[str]:
    return rng.sample(items, min(k, len(items)))


def _weighted_technologies(occupation: Occupation, k: int, rng: random.Random) -> list[str]:
    """Technology skills of the occupation, hot technologies three times as likely."""
    pool = list(occupation.hot_technologies) + list(occupation.other_technologies)
    if not pool:
        return []
    weights = [3.0] * len(occupation.hot_technologies) + [1.0] * len(occupation.other_technologies)
    chosen = rng.choices(pool, weights=weights, k=k)
    return unique_in_order(chosen)


def _requirements(
    occupation: Occupation, catalogue: Catalogue, technologies: list[str], rng: random.Random
) -> str:
    experience, education = catalogue.job_zones.get(occupation.job_zone, ("", ""))
    parts = [
        education.split(". ")[0].rstrip(".") + ".",
        experience.split(". ")[0].rstrip(".") + ".",
    ]
    tools = technologies[: rng.randint(1, 4)]
    if tools:
        listed = tools[0] if len(tools) == 1 else ", ".join(tools[:-1]) + " and " + tools[-1]
        parts.append(
            rng.choice(("Experience with {}.", "Knowledge of {}.", "Familiar with {}.")).format(
                listed
            )
        )
    rng.shuffle(parts)
    return " ".join(p for p in parts if p != ".")


# --- real ads --------------------------------------------------------------------------------


def real_ads_to_jobs(
    frames: Iterable[pd.DataFrame], plan: GenerationPlan, title_index: dict[str, int]
) -> Iterator[pd.DataFrame]:
    """`mapInPandas` body for the real ads (`job_id, title, department, descriptionPlain`):
    the ad text as it is, requirements and keywords derived from it, and an occupation where
    the title matches an O*NET title."""
    technology_words = _technology_vocabulary(plan)
    for frame in frames:
        rows = []
        for job_id, title, department, description in frame[
            ["job_id", "title", "department", "descriptionPlain"]
        ].itertuples(index=False):
            description = description or ""
            occupation = match_title(title or "", title_index)
            words = clean_tokens(description, plan.stopwords)
            keywords = unique_in_order(
                [w for w in words if w in technology_words] + clean_tokens(title, plan.stopwords)
            )[:MAX_KEYWORDS]
            rows.append(
                (
                    int(job_id),
                    title,
                    department,
                    extract_requirements(description),
                    description,
                    keywords,
                    plan.catalogue.occupations[occupation].code if occupation is not None else None,
                )
            )
        yield plan.with_dates(pd.DataFrame(rows, columns=list(JOB_COLUMNS)))


def extract_requirements(description: str, max_lines: int = 12) -> str:
    """The requirements section of a free-text ad: the lines under a heading such as
    "Requirements" or "What we're looking for"; failing that, the lines that mention
    experience or a degree."""
    lines = [line.strip(" -•*\t") for line in description.splitlines()]
    lines = [line for line in lines if line]
    for position, line in enumerate(lines):
        lowered = line.lower()
        if len(line) < 80 and any(h in lowered for h in _REQUIREMENT_HEADINGS):
            section = []
            for following in lines[position + 1 :]:
                if _looks_like_heading(following):
                    break
                section.append(following)
                if len(section) == max_lines:
                    break
            if section:
                return " ".join(section)
    mentions = [line for line in lines if any(k in line.lower() for k in ("experience", "degree"))]
    return " ".join(mentions[:max_lines])


def _looks_like_heading(line: str) -> bool:
    return len(line) < 60 and (
        line.endswith(":")
        or (line[:1].isupper() and not line.endswith(".") and " " in line and line.istitle())
    )


def _technology_vocabulary(plan: GenerationPlan) -> frozenset[str]:
    """Single words that name technologies (e.g. python, salesforce), taken from O*NET's hot
    technologies, without the generic words those names also contain."""
    generic = set(
        [
            "software",
            "system",
            "systems",
            "management",
            "data",
            "database",
            "enterprise",
            "office",
            "online",
            "web",
            "service",
            "services",
            "suite",
            "tools",
            "tool",
            "application",
            "applications",
            "studio",
            "cloud",
            "server",
            "platform",
            "business",
            "microsoft",
            "google",
            "oracle",
            "adobe",
            "apache",
            "ibm",
            "sap",
            "amazon",
            "project",
            "email",
        ]
    )
    words = {
        word
        for occupation in plan.catalogue.occupations
        for name in occupation.hot_technologies
        for word in clean_tokens(name, plan.stopwords)
    }
    return frozenset(w for w in words - generic if len(w) > 1)


# --- candidates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidatePools:
    """Index structures for drawing jobs by occupation, built once from `job_occupation`."""

    jobs_by_occupation: np.ndarray  # job ids sorted by occupation
    offsets: np.ndarray  # start of each occupation's slice
    counts: np.ndarray  # jobs per occupation
    primary_weights: np.ndarray  # P(primary interest = occupation), proportional to its jobs
    related: np.ndarray  # [occupation, RELATED_CHOICES] related occupations with jobs, -1 padded
    related_counts: np.ndarray

    @staticmethod
    def build(plan: GenerationPlan) -> CandidatePools:
        occupations = plan.job_occupation
        labelled = np.flatnonzero(occupations >= 0)
        order = labelled[np.argsort(occupations[labelled], kind="stable")]
        counts = np.bincount(occupations[labelled], minlength=len(plan.catalogue))
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        related = np.full((len(plan.catalogue), RELATED_CHOICES), -1, dtype=np.int64)
        for index, targets in enumerate(plan.catalogue.related):
            with_jobs = [t for t in targets if counts[t] > 0][:RELATED_CHOICES]
            related[index, : len(with_jobs)] = with_jobs
        return CandidatePools(
            jobs_by_occupation=(order + 1).astype(np.int32),
            offsets=offsets,
            counts=counts,
            primary_weights=counts / counts.sum(),
            related=related,
            related_counts=(related >= 0).sum(axis=1),
        )


def generate_candidate_block(
    block: int, plan: GenerationPlan, pools: CandidatePools
) -> pa.RecordBatch:
    """One block of candidates, vectorised over the whole block (no loop per candidate). On a
    timeline (`plan.calendar`), each interest also has a day and an ad live on it
    (`data.timeline`), and a candidate with no interest by the timeline's last day is left
    out: they have not arrived yet."""
    settings = plan.settings
    total = settings.sizes().candidates
    per_block = settings.candidates_per_task
    size = min(per_block, total - block * per_block)
    rng = np.random.default_rng([plan.seed, 2, block])
    n_occupations = len(pools.counts)

    primary = rng.choice(n_occupations, size=size, p=pools.primary_weights)
    has_related = (rng.random(size) < settings.related_rate) & (pools.related_counts[primary] > 0)
    pick = (rng.random(size) * np.maximum(pools.related_counts[primary], 1)).astype(np.int64)
    related = np.where(has_related, pools.related[primary, pick], -1)

    lengths = sample_sequence_lengths(rng, size, settings)
    owner = np.repeat(np.arange(size), lengths)
    n = owner.size
    noise = rng.random(n) < settings.noise_rate
    from_related = has_related[owner] & (rng.random(n) < settings.related_share)
    occupation = np.where(from_related, related[owner], primary[owner])
    stranger = rng.choice(n_occupations, size=n, p=pools.primary_weights)
    clash = (stranger == primary[owner]) | (stranger == related[owner])
    stranger = np.where(
        clash, (stranger + 1 + rng.integers(0, n_occupations - 1, n)) % n_occupations, stranger
    )
    stranger = _occupation_with_jobs(stranger, pools.counts)
    occupation = np.where(noise, stranger, occupation)
    if plan.calendar is None:
        slot = (rng.random(n) * pools.counts[occupation]).astype(np.int64)
        job_ids = pools.jobs_by_occupation[pools.offsets[occupation] + slot]
        day = np.zeros(n, dtype=np.int64)
    else:
        day = activity_days(
            rng, owner, size, plan.calendar.days, settings.timeline.interest_gap_days
        )
        job_ids = np.zeros(n, dtype=np.int32)
        reached = day < plan.calendar.days
        job_ids[reached] = place_interests(rng, plan.calendar, occupation[reached], day[reached])

    genuine_scores = rng.choice(10, size=n, p=_normalised(settings.scores.genuine)) + 1
    noise_scores = rng.choice(10, size=n, p=_normalised(settings.scores.noise)) + 1
    scores = np.where(noise, noise_scores, genuine_scores).astype(np.int32)

    # Each candidate's interests in order of their day (all day 0 undated), and a job once:
    # the first time (an interest that does not happen has job 0 and leaves).
    order = np.lexsort((np.arange(n), day, owner))
    owner, job_ids, scores, noise, day = (a[order] for a in (owner, job_ids, scores, noise, day))
    by_job = np.lexsort((np.arange(n), job_ids, owner))
    repeated = np.zeros(n, dtype=bool)
    repeated[by_job[1:]] = (owner[by_job[1:]] == owner[by_job[:-1]]) & (
        job_ids[by_job[1:]] == job_ids[by_job[:-1]]
    )
    keep = ~repeated & (job_ids > 0)
    owner, job_ids, scores, noise, day = (a[keep] for a in (owner, job_ids, scores, noise, day))
    lengths = np.bincount(owner, minlength=size)

    identifier = block * per_block * 2 + 2 * np.arange(size) + 1 + rng.integers(0, 2, size)
    codes = plan.codes
    at = (
        pa.nulls(owner.size, pa.date32())
        if plan.calendar is None
        else pa.array(plan.first_day + day.astype("timedelta64[D]"), pa.date32())
    )
    sequence = pa.ListArray.from_arrays(
        pa.array(_offsets(lengths)),
        pa.StructArray.from_arrays(
            [pa.array(job_ids.astype(np.int32)), pa.array(scores), at],
            names=["job_id", "score", "at"],
        ),
    )
    noise_ids = pa.ListArray.from_arrays(
        pa.array(_offsets(np.bincount(owner[noise], minlength=size))),
        pa.array(job_ids[noise].astype(np.int32)),
    )
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(identifier.astype(np.int64)),
            sequence,
            pa.array(codes[primary], pa.string()),
            pa.array(codes[np.maximum(related, 0)], pa.string(), mask=related < 0),
            noise_ids,
        ],
        names=[
            "identifier",
            "sequence",
            "primary_occupation",
            "related_occupation",
            "noise_job_ids",
        ],
    )
    return batch if plan.calendar is None else batch.filter(pa.array(lengths > 0))


def generate_candidate_blocks(
    batches: Iterable[pa.RecordBatch], plan: GenerationPlan
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: each input row is a block id."""
    pools = CandidatePools.build(plan)
    for batch in batches:
        for block in batch.column(0).to_pylist():
            yield generate_candidate_block(int(block), plan, pools)


def sample_sequence_lengths(
    rng: np.random.Generator, size: int, settings: DataConfig
) -> np.ndarray:
    """Jobs per candidate: P(1) and P(2) as configured, then 3 + a geometric tail with the
    configured mean, capped."""
    lengths_cfg = settings.sequence_length
    draw = rng.random(size)
    tail = 3 + rng.geometric(1.0 / (lengths_cfg.tail_mean - 2.0), size) - 1
    lengths = np.where(
        draw < lengths_cfg.p_one, 1, np.where(draw < lengths_cfg.p_one + lengths_cfg.p_two, 2, tail)
    )
    return np.minimum(lengths, lengths_cfg.max).astype(np.int64)


def _occupation_with_jobs(occupation: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Move occupations without jobs to the next occupation that has some."""
    with_jobs = np.flatnonzero(counts > 0)
    position = np.searchsorted(with_jobs, occupation) % with_jobs.size
    return with_jobs[position]


def _normalised(probabilities: list[float]) -> np.ndarray:
    weights = np.asarray(probabilities, dtype=float)
    return weights / weights.sum()


def _offsets(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


# --- orchestration ---------------------------------------------------------------------------


def format_raw_candidates(candidates: DataFrame) -> DataFrame:
    """The paper's raw format: `identifier`, and `sequence` as a Python literal with single
    quotes: [{'job_id': 481024, 'score': 2}, ...], each element with its date on a timeline
    (`'at': '2025-10-01'`)."""
    element = (
        "if(x.at IS NULL, format_string(\"{'job_id': %d, 'score': %d}\", x.job_id, x.score), "
        "format_string(\"{'job_id': %d, 'score': %d, 'at': '%s'}\", x.job_id, x.score, "
        "date_format(x.at, 'yyyy-MM-dd')))"
    )
    return candidates.select(
        "identifier",
        F.concat(
            F.lit("["), F.expr(f"array_join(transform(sequence, x -> {element}), ', ')"), F.lit("]")
        ).alias("sequence"),
    )


def ground_truth(candidates: DataFrame) -> DataFrame:
    """Per candidate: graded relevance of occupations (2 primary, 1 related; others 0) and the
    jobs injected as noise."""
    relevance = F.when(
        F.col("related_occupation").isNull(), F.create_map(F.col("primary_occupation"), F.lit(2))
    ).otherwise(
        F.create_map(F.col("primary_occupation"), F.lit(2), F.col("related_occupation"), F.lit(1))
    )
    return candidates.select(
        F.col("identifier").alias("candidate_id"),
        "primary_occupation",
        "related_occupation",
        relevance.alias("occupation_relevance"),
        "noise_job_ids",
    )
