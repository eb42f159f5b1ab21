"""Stage 1c: job-title normalisation (seed 001, issue 22; `docs/TITLES.md`). The only module
of `titles/` that reads or writes.

* :func:`train_title_normaliser`: O*NET's titles (the normaliser's side of
  `taxonomy.titles`) and the real ads -> a trained character-level Siamese encoder, its lookup
  chosen on the validation sets (`titles.lookup`), scored on seed 001's four test sets next
  to its trigram baseline and to seed 001's own lookup, logged to MLflow and registered;
  the champion alias moves to it. A normaliser registered with the same settings and
  reference data (any dataset's) is used again. The table is `reports/titles/TITLES.md`.
* :func:`normalise_job_titles`: silver jobs -> the same rows with `title_occupation` and
  `title_confidence` from the normaliser just trained, computed in Spark; with how the
  titles map (`features.occupations.titles_mapping`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from pyspark.sql import SparkSession

from jobrec_core.config import JobrecConfig
from jobrec_core.features.occupations import (
    TITLE_CONFIDENCE,
    TITLE_OCCUPATION,
    NormalisedTitles,
    ShippedNormaliser,
    titles_mapping,
    with_title_occupations,
)
from jobrec_core.platform import manifest
from jobrec_core.platform.tables import read_delta, table_path, write_delta
from jobrec_core.taxonomy.onet import ONET_DIR, load_catalogue
from jobrec_core.taxonomy.real_ads import REAL_ADS_FILE, read_real_ads
from jobrec_core.taxonomy.titles import split_titles
from jobrec_core.titles.lookup import LookupScore, accuracies, choose_lookup, lookup_candidates
from jobrec_core.titles.sets import TEST_SETS, Labelled, RealAd, TitleSets, build_title_sets
from jobrec_core.titles.training import TrainingSettings, train_encoder
from jobrec_scoring.titles import EncoderSpec, Lookup, TitleEncoder, TitleNormaliser
from jobrec_scoring.trigrams import TrigramMatcher

log = logging.getLogger(__name__)

MANIFEST_ENTRY = "titles"
FINGERPRINT_TAG = "titles_fingerprint"  # a registered version's `normaliser_fingerprint`
REPORT_ARTIFACT = "titles.md"  # the run's table (:func:`format_scores`)
# Seed 001's table 3: its n-gram matcher and its best model (3), for the report.
PAPER = {
    "n-gram (seed 001)": dict(typos=0.99, composition=0.61, extra_words=1.00, annotations=0.83),
    "best model (seed 001)": dict(typos=1.0, composition=0.84, extra_words=0.76, annotations=0.87),
}
SET_NAMES = {
    "typos": "Typos",
    "composition": "Composition",
    "extra_words": "Extra words",
    "annotations": "Annotations",
}


@dataclass(frozen=True)
class TitleScore:
    size: int
    model: float  # the normaliser, with its chosen lookup
    nearest: float  # the same encoder, with seed 001's lookup: the nearest taxonomy title
    baseline: float  # the trigram matcher


@dataclass(frozen=True)
class TitleTraining:
    version: str
    scores: dict[str, TitleScore]
    table: str
    """:func:`format_scores`: the scores as seed 001's table, and the chosen lookup."""
    taxonomy: int
    members: int
    seconds: float
    report: Path


def title_sets(spark: SparkSession, config: JobrecConfig) -> TitleSets:
    """The normaliser's taxonomy, training members and test sets (`titles.sets`)."""
    settings = config.titles
    catalogue = load_catalogue(config.data.reference_dir)
    ads = [
        RealAd(r.title or "", r.location or "", r.team or r.department or "")
        for r in read_real_ads(spark, config.data.reference_dir)
        .select("title", "location", "team", "department")
        .collect()
    ]
    split = split_titles(catalogue, [ad.title for ad in ads], settings.split_seed)
    return build_title_sets(
        split.normaliser,
        catalogue,
        ads,
        seed=settings.split_seed,
        max_chars=settings.max_chars,
        typo_share=settings.test_typo_share,
        composition_test_share=settings.composition_test_share,
        extra_words_test_share=settings.extra_words_test_share,
        synonym_support=settings.synonym_support,
        validation_share=settings.validation_share,
    )


def encoder_spec(config: JobrecConfig) -> EncoderSpec:
    s = config.titles
    return EncoderSpec(s.layers, s.hidden, s.char_dim, s.output_dim, s.dropout, s.max_chars)


def training_settings(config: JobrecConfig) -> TrainingSettings:
    s = config.titles
    return TrainingSettings(
        steps=s.steps,
        batch_occupations=s.batch_occupations,
        pairs_per_occupation=s.pairs_per_occupation,
        learning_rate=s.learning_rate,
        margin=s.margin,
        negative_weight=s.negative_weight,
        typo_rate=s.typo_rate,
        typo_substitute=s.typo_substitute,
        typo_delete=s.typo_delete,
        extra_words_rate=s.extra_words_rate,
        augmented_rate=s.augmented_rate,
        confusable_share=s.confusable_share,
        seed=config.run.seed,
        log_every=s.log_every,
    )


def score_sets(normaliser: TitleNormaliser, sets: TitleSets) -> dict[str, TitleScore]:
    """Accuracy on each test set of the normaliser, of its encoder with seed 001's lookup,
    and of the trigram matcher."""
    reference = [t.text for t in sets.taxonomy]
    labels = np.asarray([t.occupation for t in sets.taxonomy], dtype=object)
    matcher = TrigramMatcher(reference)

    def baseline(items: tuple[Labelled, ...]) -> float:
        found = labels[matcher.nearest([i.text for i in items])]
        return float(np.mean(found == np.asarray([i.occupation for i in items], dtype=object)))

    paper_lookup = normaliser.taxonomy_only()
    return {
        name: TitleScore(
            len(items),
            accuracies(normaliser, items, [normaliser.lookup])[0],
            accuracies(paper_lookup, items, [paper_lookup.lookup])[0],
            baseline(items),
        )
        for name, items in sets.tests.items()
    }


def describe(lookup: Lookup) -> str:
    if lookup.temperature <= 0:
        vote = "the nearest known title"
    else:
        vote = f"a vote of the {lookup.neighbours} nearest (temperature {lookup.temperature:g})"
    spelling = (
        f", a misspelling within {lookup.spelling:g} edits per character"
        if lookup.spelling > 0
        else ""
    )
    return f"trigram weight {lookup.trigram_weight:g}, {vote}{spelling}"


def format_scores(scores: dict[str, TitleScore], lookup: Lookup) -> str:
    """Seed 001's table 3 for jobrec: accuracy per test set, ours next to the paper's."""
    header = "| model | " + " | ".join(
        f"{SET_NAMES[n]} (N = {scores[n].size:,})" for n in TEST_SETS
    )
    lines = [header + " |", "|---|" + "---|" * len(TEST_SETS)]
    for name, figures in PAPER.items():
        lines.append(f"| {name} | " + " | ".join(f"{figures[n]:.2f}" for n in TEST_SETS) + " |")
    lines.append(
        "| n-gram (jobrec) | " + " | ".join(f"{scores[n].baseline:.3f}" for n in TEST_SETS) + " |"
    )
    lines.append(
        "| Siamese BiLSTM (jobrec), seed 001's lookup | "
        + " | ".join(f"{scores[n].nearest:.3f}" for n in TEST_SETS)
        + " |"
    )
    lines.append(
        "| **Siamese BiLSTM (jobrec), chosen lookup** | "
        + " | ".join(f"**{scores[n].model:.3f}**" for n in TEST_SETS)
        + " |"
    )
    lines.append(
        "\nSeed 001's lookup: the nearest taxonomy title by the cosine. The chosen lookup, on "
        f"the validation sets: {describe(lookup)}, over the taxonomy and the training titles."
    )
    return "\n".join(lines)


def format_validation(scores: list[LookupScore], chosen: Lookup) -> str:
    """Every lookup candidate's validation accuracy; the chosen one in bold."""
    names = list(scores[0].accuracy) if scores else []
    lines = [
        "| lookup | " + " | ".join(SET_NAMES[n] for n in names) + " | mean |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for score in scores:
        mark = "**" if score.lookup == chosen else ""
        cells = [f"{score.accuracy[n]:.3f}" for n in names] + [f"{score.mean:.3f}"]
        lines.append(f"| {mark}{describe(score.lookup)}{mark} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def normaliser_fingerprint(config: JobrecConfig) -> str:
    """What a trained normaliser is a function of: its settings (not how often it logs, nor
    where it is registered), the run's seed, and the reference data's bytes (O*NET and the
    real ads). Two trainings with the same fingerprint give the same model."""
    settings = config.titles.model_dump(exclude={"log_every", "model_name"})
    digest = hashlib.sha256(json.dumps([settings, config.run.seed], sort_keys=True).encode())
    reference = Path(config.data.reference_dir)
    for path in sorted([*(reference / ONET_DIR).glob("*.txt"), reference / REAL_ADS_FILE]):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def train_title_normaliser(spark: SparkSession, config: JobrecConfig) -> TitleTraining:
    """Train, score, log and register a title normaliser (see the module); when the registry
    already holds one of the same fingerprint (:func:`normaliser_fingerprint`: the same
    settings and reference data, on any dataset), that one is used again instead."""
    import mlflow

    from jobrec_core.models.titles import log_title_normaliser
    from jobrec_core.platform.tracking import configure_mlflow, registry_client

    started = time.perf_counter()
    configure_mlflow(config)
    client = registry_client(config)
    name = config.titles.model_name
    fingerprint = normaliser_fingerprint(config)
    same = registered_with(client, name, fingerprint)
    if same is not None:
        log.info("titles: %s v%s has fingerprint %s: used again", name, same.version, fingerprint)
        run = client.get_run(str(same.run_id))
        scores = {
            n: TitleScore(
                int(run.data.metrics[f"titles.{n}.size"]),
                run.data.metrics[f"titles.{n}.accuracy"],
                run.data.metrics[f"titles.{n}.nearest_accuracy"],
                run.data.metrics[f"titles.{n}.ngram_accuracy"],
            )
            for n in TEST_SETS
        }
        return _registered(
            config,
            str(same.version),
            scores,
            mlflow.artifacts.load_text(f"runs:/{same.run_id}/{REPORT_ARTIFACT}"),
            int(run.data.params["titles.taxonomy"]),
            int(run.data.params["titles.members"]),
            started,
        )

    sets = title_sets(spark, config)
    members = sum(len(m) for m in sets.members.values())
    log.info(
        "titles: %d taxonomy titles, %d training members in %d occupations; test sets %s",
        len(sets.taxonomy),
        members,
        len(sets.members),
        ", ".join(f"{SET_NAMES[n]} {len(sets.tests[n]):,}" for n in TEST_SETS),
    )

    def progress(step: int, loss: float, seconds: float, _: TitleEncoder) -> None:
        log.info("titles: step %d/%d, loss %.4f, %.0f s", step, config.titles.steps, loss, seconds)

    trained = train_encoder(sets, encoder_spec(config), training_settings(config), progress)
    s = config.titles
    candidates = lookup_candidates(
        s.lookup_neighbours, s.lookup_trigram_weights, s.lookup_temperatures, s.lookup_spelling
    )
    lookup, tried = choose_lookup(trained, sets.validation, candidates)
    log.info(
        "titles: lookup %s (validation %s)",
        describe(lookup),
        ", ".join(f"{SET_NAMES[n]} {len(items):,}" for n, items in sets.validation.items()),
    )
    normaliser = trained.with_lookup(lookup)
    scores = score_sets(normaliser, sets)
    table = format_scores(scores, lookup)
    with mlflow.start_run(run_name="train_titles"):
        mlflow.set_tags({"stage": "train_titles", "dataset": config.data.preset})
        mlflow.log_params({f"titles.{k}": v for k, v in s.model_dump().items()})
        mlflow.log_params({"titles.taxonomy": len(sets.taxonomy), "titles.members": members})
        mlflow.log_params({f"titles.lookup.{k}": v for k, v in lookup.to_dict().items()})
        mlflow.log_metrics(
            {
                **{f"titles.{n}.accuracy": s.model for n, s in scores.items()},
                **{f"titles.{n}.nearest_accuracy": s.nearest for n, s in scores.items()},
                **{f"titles.{n}.ngram_accuracy": s.baseline for n, s in scores.items()},
                **{f"titles.{n}.size": s.size for n, s in scores.items()},
            }
        )
        mlflow.log_text(table, REPORT_ARTIFACT)
        mlflow.log_text(format_validation(tried, lookup), "titles_validation.md")
        version = log_title_normaliser(normaliser, name)
    client.set_model_version_tag(name, version, FINGERPRINT_TAG, fingerprint)
    return _registered(config, version, scores, table, len(sets.taxonomy), members, started)


def registered_with(client: MlflowClient, name: str, fingerprint: str) -> ModelVersion | None:
    """The newest registered version of `name` tagged with `fingerprint`, if any."""
    try:
        versions = client.search_model_versions(f"name='{name}'")
    except MlflowException:  # no such registered model yet
        return None
    same = [v for v in versions if (v.tags or {}).get(FINGERPRINT_TAG) == fingerprint]
    return max(same, key=lambda v: int(v.version), default=None)


def _registered(
    config: JobrecConfig,
    version: str,
    scores: dict[str, TitleScore],
    table: str,
    taxonomy: int,
    members: int,
    started: float,
) -> TitleTraining:
    """`version` made the champion and recorded in the manifest; its table written."""
    from jobrec_core.platform.tracking import registry_client

    name = config.titles.model_name
    registry_client(config).set_registered_model_alias(name, config.mlflow.champion_alias, version)
    manifest.record(
        config, MANIFEST_ENTRY, {"model": f"models:/{name}/{version}", "version": version}
    )
    report = Path(table_path(config, "reports", "titles")) / "TITLES.md"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(f"# Title normalisation\n\n{table}\n", encoding="utf-8")
    return TitleTraining(
        version=version,
        scores=scores,
        table=table,
        taxonomy=taxonomy,
        members=members,
        seconds=time.perf_counter() - started,
        report=report,
    )


def normalise_job_titles(spark: SparkSession, config: JobrecConfig) -> NormalisedTitles:
    """silver jobs -> the same rows with `title_occupation` and `title_confidence`, from the
    normaliser the manifest records (the last one trained here)."""
    from jobrec_core.models.titles import load_title_normaliser

    entry = manifest.current(config, MANIFEST_ENTRY)
    silver = table_path(config, "silver", "jobs")
    jobs = read_delta(spark, silver)
    if TITLE_OCCUPATION in jobs.columns:  # a rerun: normalised again, with today's model
        jobs = jobs.drop(TITLE_OCCUPATION, TITLE_CONFIDENCE)
    shipped = ShippedNormaliser.of(spark, load_title_normaliser(str(entry["model"])))
    normalised = with_title_occupations(jobs, shipped)
    # Delta reads the version it started from while the new one is written.
    write_delta(normalised, silver, note=f"titles {entry['version']}")
    return titles_mapping(read_delta(spark, silver), config.data.sizes().generated_jobs)


def occupation_names(config: JobrecConfig) -> dict[str, str]:
    """O*NET's occupation titles by code, for reports."""
    return {o.code: o.title for o in load_catalogue(config.data.reference_dir).occupations}
