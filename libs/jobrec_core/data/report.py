"""What a dataset looks like: counts and distributions of the bronze tables, with plots, and
what the pipeline made of it (table sizes, quarantine reasons, cleaned candidates' examples,
how the job titles normalise once `titles.stage` ran).

`jobrec data report` prints the profile and saves the plots; `docs/DATA.md` shows them for the
demo preset; notebooks/01_data_exploration.py shows all of it. All aggregation happens in
Spark; only small distributions and examples reach the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig
from jobrec_core.features.occupations import TITLE_OCCUPATION, format_mapping, titles_mapping
from jobrec_core.platform.tables import Layer, RawLocations, is_delta_table, read_delta, table_path
from jobrec_core.taxonomy.onet import load_catalogue

# Every table of the pipeline, in the order the stages write them.
PIPELINE_TABLES: tuple[tuple[Layer, str], ...] = (
    ("bronze", "jobs"),
    ("bronze", "candidates"),
    ("bronze", "quarantine"),
    ("silver", "jobs"),
    ("silver", "candidates"),
    ("silver", "job_similarity"),
    ("silver", "queries"),
    ("silver", "retrieval"),
    ("gold", "pairs/triples"),
    ("gold", "pairs/map_sets"),
    ("gold", "recommendations"),
)


@dataclass(frozen=True)
class TimelineProfile:
    """A dated dataset over time (docs/DATA.md, "The timeline")."""

    first: str  # the first day an ad was posted
    last: str  # the last day anything was posted or shown
    ads_per_day: float
    lifetime_median: float  # days an ad stays live
    lifetime_mean: float
    live_on_last_day: int
    interest_within_2_days: float  # share of interest shown within 2 days of the ad's posting
    interest_within_4_days: float


@dataclass(frozen=True)
class DataProfile:
    dataset: str
    jobs: int
    labelled_jobs: int
    occupations: int
    candidates: int
    jobs_per_occupation: list[int]  # sorted, largest first
    sequence_lengths: dict[int, int]  # length -> candidates
    scores: dict[int, int]  # score -> occurrences
    pass_rules: int  # candidates with >= min_jobs jobs and a top score >= min_top_score
    noise_jobs: int
    interest_jobs: int
    timeline: TimelineProfile | None = None  # None: undated data


def timeline_profile(jobs: DataFrame, candidates: DataFrame) -> TimelineProfile | None:
    """How the ads and the interest spread over time; None for undated data."""
    dated = jobs.where(F.col("posted_at").isNotNull() & F.col("expires_at").isNotNull())
    life = F.datediff("expires_at", "posted_at")
    ads = dated.agg(
        F.min("posted_at").alias("first"),
        F.max("posted_at").alias("last"),
        F.count("*").alias("ads"),
        F.percentile_approx(life, 0.5).alias("median"),
        F.avg(life).alias("mean"),
    ).first()
    if ads is None or not ads["ads"]:
        return None
    interests = candidates.select(F.explode("sequence").alias("e")).where(F.col("e.at").isNotNull())
    age = F.datediff("e.at", "posted_at")
    shown = (
        interests.join(dated, F.col("e.job_id") == F.col("job_id"))
        .agg(
            F.max("e.at").alias("last"),
            F.avg((age < 2).cast("double")).alias("within_2"),
            F.avg((age < 4).cast("double")).alias("within_4"),
        )
        .first()
    )
    last = max(ads["last"], shown["last"]) if shown and shown["last"] else ads["last"]
    days = (last - ads["first"]).days + 1
    live = dated.where((F.col("posted_at") <= F.lit(last)) & (F.col("expires_at") > F.lit(last)))
    return TimelineProfile(
        first=ads["first"].isoformat(),
        last=last.isoformat(),
        ads_per_day=ads["ads"] / days,
        lifetime_median=float(ads["median"]),
        lifetime_mean=float(ads["mean"]),
        live_on_last_day=live.count(),
        interest_within_2_days=float(shown["within_2"] or 0.0) if shown else float("nan"),
        interest_within_4_days=float(shown["within_4"] or 0.0) if shown else float("nan"),
    )


def profile_dataset(spark: SparkSession, config: JobrecConfig) -> DataProfile:
    jobs = read_delta(spark, table_path(config, "bronze", "jobs"))
    candidates = read_delta(spark, table_path(config, "bronze", "candidates"))
    rules = config.cleaning
    job_stats = jobs.agg(
        F.count("*").alias("jobs"),
        F.count("occupation_code").alias("labelled"),
        F.countDistinct("occupation_code").alias("occupations"),
    ).first()
    assert job_stats is not None
    per_occupation = [
        int(r["count"])
        for r in jobs.where(F.col("occupation_code").isNotNull())
        .groupBy("occupation_code")
        .count()
        .orderBy(F.desc("count"))
        .collect()
    ]
    lengths = candidates.select(F.size("sequence").alias("n"))
    length_counts = {int(r["n"]): int(r["count"]) for r in lengths.groupBy("n").count().collect()}
    score_counts = {
        int(r["score"]): int(r["count"])
        for r in candidates.select(F.explode("sequence.score").alias("score"))
        .groupBy("score")
        .count()
        .collect()
    }
    passing = candidates.where(
        (F.size("sequence") >= rules.min_jobs)
        & (F.array_max("sequence.score") >= rules.min_top_score)
    ).count()
    # Only generated data has a ground truth (real data has no labelled noise).
    truth_path = RawLocations.of(config).ground_truth
    truth = (
        read_delta(spark, truth_path).agg(F.sum(F.size("noise_job_ids")).alias("noise")).first()
        if is_delta_table(spark, truth_path)
        else None
    )
    return DataProfile(
        dataset=config.data.preset,
        jobs=int(job_stats["jobs"]),
        labelled_jobs=int(job_stats["labelled"]),
        occupations=int(job_stats["occupations"]),
        candidates=sum(length_counts.values()),
        jobs_per_occupation=per_occupation,
        sequence_lengths=dict(sorted(length_counts.items())),
        scores=dict(sorted(score_counts.items())),
        pass_rules=passing,
        noise_jobs=int(truth["noise"] or 0) if truth is not None else 0,
        interest_jobs=sum(score_counts.values()),
        timeline=timeline_profile(jobs, candidates),
    )


def dataset_report(spark: SparkSession, config: JobrecConfig, folder: Path | None = None) -> str:
    """The data report as text, with its plots saved to `folder` (default: the dataset's
    `reports/data`): what `jobrec data report` and the pipeline's ingest step print."""
    profile = profile_dataset(spark, config)
    folder = folder or Path(table_path(config, "reports", "data"))
    text = format_profile(profile, config.cleaning.min_jobs, config.cleaning.min_top_score)
    silver = table_path(config, "silver", "jobs")
    if is_delta_table(spark, silver):
        jobs = read_delta(spark, silver)
        if TITLE_OCCUPATION in jobs.columns:  # the titles are normalised (`titles.stage`)
            names = {o.code: o.title for o in load_catalogue(config.data.reference_dir).occupations}
            mapping = titles_mapping(jobs, config.data.sizes().generated_jobs)
            text = f"{text}\n{format_mapping(mapping, names)}"
    return f"{text}\nplots: {save_plots(profile, folder)}"


def format_profile(profile: DataProfile, min_jobs: int, min_top_score: int) -> str:
    per_occ = profile.jobs_per_occupation
    lines = [
        f"Dataset {profile.dataset!r}",
        f"  jobs                 {profile.jobs:>12,}  "
        f"({profile.labelled_jobs:,} with an occupation)",
        f"  occupations          {profile.occupations:>12,}  jobs each: max {per_occ[0]:,}, "
        f"median {per_occ[len(per_occ) // 2]:,}, min {per_occ[-1]:,}"
        if per_occ
        else "  occupations                     0",
        f"  candidates           {profile.candidates:>12,}",
        f"  interests (jobs)     {profile.interest_jobs:>12,}  "
        f"({profile.noise_jobs / max(profile.interest_jobs, 1):.1%} injected noise)",
        f"  pass the rules       {profile.pass_rules:>12,}  "
        f"({profile.pass_rules / max(profile.candidates, 1):.1%}: >= {min_jobs} jobs and a top "
        f"score >= {min_top_score})",
        "  jobs per candidate   " + _distribution(profile.sequence_lengths, head=8),
        "  scores               " + _distribution(profile.scores, head=10),
    ]
    timeline = profile.timeline
    if timeline is not None:
        lines += [
            f"  timeline             {timeline.first} to {timeline.last}: "
            f"{timeline.ads_per_day:,.0f} ads posted a day, each live "
            f"{timeline.lifetime_median:.0f} days (median; mean {timeline.lifetime_mean:.1f}), "
            f"{timeline.live_on_last_day:,} live on the last day",
            f"  interest by ad age   {timeline.interest_within_2_days:.1%} within 2 days of "
            f"the posting, {timeline.interest_within_4_days:.1%} within 4",
        ]
    return "\n".join(lines)


def _distribution(counts: dict[int, int], head: int) -> str:
    total = sum(counts.values()) or 1
    shown = [f"{k}: {v / total:.1%}" for k, v in list(counts.items())[:head]]
    rest = sum(list(counts.values())[head:])
    if rest:
        shown.append(f"more: {rest / total:.1%}")
    return ", ".join(shown)


def save_plots(profile: DataProfile, folder: Path) -> Path:
    """One PNG with the three distributions; returns its path."""
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    figure = profile_figure(profile)
    path = folder / f"data_{profile.dataset}.png"
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def profile_figure(profile: DataProfile) -> Any:
    """Jobs per candidate, interest scores and jobs per occupation, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 4))
    lengths = {k: v for k, v in profile.sequence_lengths.items() if k <= 30}
    axes[0].bar(list(lengths), list(lengths.values()), color="#4472c4")
    axes[0].set(title="Jobs per candidate", xlabel="jobs", ylabel="candidates", yscale="log")
    axes[1].bar(list(profile.scores), list(profile.scores.values()), color="#ed7d31")
    axes[1].set(title="Interest scores", xlabel="score", ylabel="occurrences", yscale="log")
    axes[2].plot(range(1, len(profile.jobs_per_occupation) + 1), profile.jobs_per_occupation)
    axes[2].set(title="Jobs per occupation", xlabel="occupation rank", ylabel="jobs", yscale="log")
    figure.suptitle(f"Dataset '{profile.dataset}'")
    figure.tight_layout()
    return figure


def layer_counts(spark: SparkSession, config: JobrecConfig) -> pd.DataFrame:
    """Rows of every pipeline table that exists yet (layer, table, rows)."""
    rows = [
        (layer, name, read_delta(spark, path).count())
        for layer, name in PIPELINE_TABLES
        if is_delta_table(spark, path := table_path(config, layer, name))
    ]
    return pd.DataFrame(rows, columns=["layer", "table", "rows"])


def quarantine_reasons(spark: SparkSession, config: JobrecConfig) -> pd.DataFrame:
    """Quarantined records per stage (source) and reason, most frequent first."""
    path = table_path(config, "bronze", "quarantine")
    if not is_delta_table(spark, path):
        return pd.DataFrame(columns=["source", "reason", "records"])
    counts = read_delta(spark, path).groupBy("source", "reason").agg(F.count("*").alias("records"))
    return pd.DataFrame(counts.orderBy(F.desc("records")).toPandas())


def candidate_examples(
    spark: SparkSession, config: JobrecConfig, count: int, seed: int
) -> pd.DataFrame:
    """`count` cleaned candidates (a seeded choice) job by job, as ingested: score, title,
    their mean WM similarity to the candidate's other jobs, and whether cleaning kept the job.

    The similarity is the upper bound the filter stored: exact, except where pruning
    (`cleaning.wmd_prune`) decided a job by its bounds alone."""
    columns = ["candidate_id", "position", "score", "title", "wm_similarity", "kept"]
    cleaned_path = table_path(config, "silver", "candidates")
    if not is_delta_table(spark, cleaned_path):  # before the first cleaning run
        return pd.DataFrame(columns=columns)
    cleaned = read_delta(spark, cleaned_path)
    chosen = (
        cleaned.select("candidate_id", F.col("sequence.job_id").alias("kept"))
        .orderBy(F.hash("candidate_id", F.lit(seed)))
        .limit(count)
    )
    jobs = read_delta(spark, table_path(config, "bronze", "jobs")).select("job_id", "title")
    similarity = read_delta(spark, table_path(config, "silver", "job_similarity")).select(
        "candidate_id", "job_id", F.col("mean_high").alias("wm_similarity")
    )
    examples = (
        read_delta(spark, table_path(config, "bronze", "candidates"))
        .join(chosen, "candidate_id")
        .select("candidate_id", "kept", F.posexplode("sequence").alias("position", "entry"))
        .select(
            "candidate_id",
            "position",
            F.col("entry.job_id").alias("job_id"),
            F.col("entry.score").alias("score"),
            F.array_contains("kept", F.col("entry.job_id")).alias("kept"),
        )
        .join(jobs, "job_id", "left")
        .join(similarity, ["candidate_id", "job_id"], "left")
        .orderBy("candidate_id", "position")
    )
    return pd.DataFrame(examples.select(*columns).toPandas())
