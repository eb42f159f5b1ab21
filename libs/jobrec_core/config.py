"""Typed configuration: `conf/base.yaml`, environment overlays in order, then `--set` overrides.

Every job reads its settings through :func:`load_config`, so that local runs and Databricks
workflows execute the same code with different files. Overlays layer: a Databricks workflow
runs with `--env databricks --env prod`, what every workspace shares and then what its bundle
target sets (docs/DEPLOY.md). Validation is strict on purpose: a typo in a key or a string
where a number belongs fails at start-up with the key and the file that set it, instead of
silently falling back to a default hours into a run.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

ENV_CONF_DIR = "JOBREC_CONF_DIR"
BASE_FILE = "base.yaml"
BASE_ENV = "base"  # `--env base`: no overlay, base.yaml alone
# URL schemes a storage root may carry: both name a local path (`platform.tables.local_path`).
LOCAL_SCHEMES = ("dbfs", "file")
# A number in scientific notation without a decimal point (`1e-3`): YAML 1.1, which PyYAML
# reads, wants `1.0e-3` and takes `1e-3` for a string (`_parse_override`).
SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
# What `load_config` sets itself, after the overrides: `--set` refuses them, saying what sets each.
DERIVED_KEYS = {
    "env": "the overlays' names: choose them with --env (e.g. --env databricks --env prod)",
    "project_root": "the parent of the conf folder: choose it with --conf-dir",
}


class ConfigError(ValueError):
    """A configuration file is missing, unreadable, or does not match the schema."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# `run.as_of`: the data's last date, that date less some days, or a date (`timeline.asof`).
AS_OF = re.compile(r"latest(-(?P<days>\d+)d)?|(?P<date>\d{4}-\d{2}-\d{2})")


def _date_text(value: Any) -> Any:
    """YAML (a file, or `--set run.as_of=2025-10-17`) reads an unquoted date as a date: the
    same date as text, which the fields hold."""
    return value.isoformat() if isinstance(value, date) else value


def _iso_date(value: str) -> str:
    """`value` if it is a calendar date written YYYY-MM-DD, else a ValueError saying so."""
    try:
        date.fromisoformat(value)
    except ValueError:
        raise ValueError("not a date written YYYY-MM-DD") from None
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError("not a date written YYYY-MM-DD")
    return value


class RunConfig(_Section):
    seed: int
    # The date every stage runs as of (`timeline.asof`): only what was posted or shown by then
    # is read. `latest`: the data's last date; `latest-14d`: 14 days before it; or a date.
    # Undated data has no last date: every record counts, as before dates existed.
    as_of: str = "latest"

    _as_of_text = field_validator("as_of", mode="before")(_date_text)

    @field_validator("as_of")
    @classmethod
    def _as_of_form(cls, as_of: str) -> str:
        match = AS_OF.fullmatch(as_of)
        if match is None:
            raise ValueError("expected latest, latest-<days>d (e.g. latest-14d) or YYYY-MM-DD")
        if match.group("date"):
            _iso_date(as_of)
        return as_of


class StorageConfig(_Section):
    root: str

    @field_validator("root")
    @classmethod
    def _local_root(cls, root: str) -> str:
        # Spark reads any URL, but Petastorm's reader (pyarrow), the training checkpoints and
        # the gensim files open the root with Python's file functions: with an object-store URL
        # the checkpoints land in a local folder named after its scheme (issue 20).
        if not root.strip():
            raise ValueError(
                "empty: on Databricks, the bundle target's overlay sets it "
                "(--env databricks --env <dev|staging|prod>)"
            )
        scheme, separator, _ = root.partition("://")
        if separator and scheme.lower() not in LOCAL_SCHEMES:
            raise ValueError(
                "a remote URL, but training (Petastorm, the checkpoints) and the embeddings "
                "(gensim) open the storage root as a local path: use a Unity Catalog volume, "
                "/Volumes/<catalog>/<schema>/<volume>, or another local path"
            )
        return root


class SparkConfig(_Section):
    master: str | None
    app_name: str
    jars_dir: str | None
    shuffle_partitions: int = Field(gt=0)
    conf: dict[str, str]


class EsAuthConfig(_Section):
    username_env: str
    password_env: str
    api_key_env: str
    secret_scope: str | None


class Bm25Config(_Section):
    k1: float = Field(ge=0)
    b: float = Field(ge=0, le=1)


class LocalEsConfig(_Section):
    enabled: bool
    port: int = Field(ge=0, le=65535)
    heap: str
    workdir: str
    jars_dir: str
    start_timeout_s: float = Field(gt=0)
    settings: dict[str, str]


class ElasticsearchConfig(_Section):
    nodes: list[str]
    index_alias: str
    auth: EsAuthConfig
    verify_certs: bool
    request_timeout_s: float = Field(gt=0)
    similarity: Bm25Config
    shards: int = Field(gt=0)
    replicas: int = Field(ge=0)
    keep_versions: int = Field(ge=1)
    local: LocalEsConfig


class IndexingConfig(_Section):
    fields: list[str]
    refresh_interval: str
    write_partitions: int = Field(ge=0)
    batch_entries: int = Field(gt=0)
    batch_bytes: str
    bulk_retries: int = Field(ge=-1)
    bulk_retry_wait_s: float = Field(ge=0)
    write_attempts: int = Field(ge=1)
    attempt_backoff_s: float = Field(ge=0)
    health_timeout_s: float = Field(gt=0)
    # Segments a finished version is merged down to before the alias moves to it; 0 leaves
    # them as the write left them. The same hits and scores either way (no deleted documents,
    # exact kNN), so a runtime setting; fewer segments, less work a search on a busy node.
    force_merge_segments: int = Field(default=1, ge=0)
    # Each job's TF-IDF-weighted word2vec centroid as a `dense_vector` (dense and hybrid
    # retrieval, `search.dense`), from the embeddings the jobs were tokenised with.
    vectors: bool = True


class MlflowConfig(_Section):
    tracking_uri: str
    registry_uri: str | None
    artifact_root: str | None
    experiment: str
    model_name: str
    champion_alias: str
    challenger_alias: str


class PresetConfig(_Section):
    jobs: int = Field(gt=0)
    candidates: int = Field(gt=0)
    real_ads: int = Field(ge=0)
    # The timeline's length (`data.timeline`): ads posted and interest shown over this many
    # days up to `data.timeline.end_date`; 0: undated data, in the seed's own format.
    days: int = Field(default=0, ge=0)

    @property
    def generated_jobs(self) -> int:
        """Jobs the generator writes, ids 1 to this; the real ads take the ids after them."""
        return self.jobs - self.real_ads


class SequenceLengthConfig(_Section):
    p_one: float = Field(ge=0, le=1)
    p_two: float = Field(ge=0, le=1)
    tail_mean: float = Field(gt=3)
    max: int = Field(ge=3)


class ScoreDistributionConfig(_Section):
    genuine: list[float] = Field(min_length=10, max_length=10)
    noise: list[float] = Field(min_length=10, max_length=10)


class TimelineConfig(_Section):
    """How a dated dataset's ads and interest spread over time (docs/DATA.md, "The
    timeline"); the preset's `days` says how long it is."""

    end_date: str  # the data's last date: nothing is posted or shown after it
    # An ad's life in days, lognormal (median, sigma), clipped to [min, max]
    lifetime_median_days: float = Field(gt=0)
    lifetime_sigma: float = Field(ge=0)
    lifetime_min_days: int = Field(ge=1)
    lifetime_max_days: int = Field(ge=1)
    # How interest in an ad falls with its age: a mixture of two exponential decays, the
    # first days' rush (its share, its mean age) and a slower tail (its mean age)
    rush_share: float = Field(ge=0, le=1)
    rush_mean_days: float = Field(gt=0)
    tail_mean_days: float = Field(gt=0)
    # A candidate arrives on a uniform day and shows one interest after another, this many
    # days apart on average (exponential gaps)
    interest_gap_days: float = Field(gt=0)

    _end_text = field_validator("end_date", mode="before")(_date_text)

    @field_validator("end_date")
    @classmethod
    def _end_is_date(cls, end_date: str) -> str:
        return _iso_date(end_date)

    @model_validator(mode="after")
    def _lifetimes(self) -> TimelineConfig:
        if self.lifetime_min_days > self.lifetime_max_days:
            raise ValueError("lifetime_min_days must not exceed lifetime_max_days")
        return self


class DataConfig(_Section):
    # `presets` before `preset`, so that the preset's validator sees them (`info.data`)
    presets: dict[str, PresetConfig]
    preset: str
    reference_dir: str
    occupation_popularity_sigma: float = Field(ge=0)
    related_rate: float = Field(ge=0, le=1)
    related_share: float = Field(ge=0, le=1)
    noise_rate: float = Field(ge=0, lt=1)
    long_ad_rate: float = Field(ge=0, le=1)
    sequence_length: SequenceLengthConfig
    scores: ScoreDistributionConfig
    candidates_per_task: int = Field(gt=0)
    jobs_per_task: int = Field(gt=0)
    timeline: TimelineConfig

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, preset: str, info: ValidationInfo) -> str:
        # At start-up, not when a stage first asks for the sizes, minutes into a run.
        presets = info.data.get("presets")  # absent when they are invalid themselves
        if presets is not None and preset not in presets:
            raise ValueError(f"unknown preset (known: {', '.join(sorted(presets))})")
        return preset

    def sizes(self) -> PresetConfig:
        """The sizes of the selected preset."""
        return self.presets[self.preset]


class IngestConfig(_Section):
    max_sequence_length: int = Field(gt=0)
    max_field_chars: int = Field(gt=0)
    max_keywords: int = Field(gt=0)
    # The data's last date: a record dated after it is quarantined. null: the export's own
    # (`raw/export.json`, which the generator writes), else today's date (UTC).
    last_date: str | None = None

    _last_text = field_validator("last_date", mode="before")(_date_text)

    @field_validator("last_date")
    @classmethod
    def _last_is_date(cls, last_date: str | None) -> str | None:
        return None if last_date is None else _iso_date(last_date)


class TextConfig(_Section):
    stopword_languages: list[str]
    fields: list[str]


class EmbeddingsConfig(_Section):
    vector_size: int = Field(gt=0)
    window: int = Field(gt=0)
    min_count: int = Field(ge=1)
    epochs: int = Field(gt=0)
    sg: Literal[0, 1]
    workers: int = Field(gt=0)


class CleaningConfig(_Section):
    min_jobs: int = Field(ge=1)
    min_top_score: int
    high_interest_score: int
    max_score: int
    wmd_fields: list[str]
    wmd_similarity_threshold: float = Field(ge=0, le=1)
    wmd_prune: bool
    reapply_rules_after_wmd: bool


class QueriesConfig(_Section):
    fields: list[str]
    max_terms: int = Field(gt=0)
    drop_first_fields: list[str]
    negative_fraction: float = Field(gt=0, le=1)
    # The query's jobs (`features.queries.coherent_jobs`): a job whose mean TF-IDF cosine with
    # the candidate's other jobs, over `coherence_fields`, is below this leaves the query
    # (0: every job, the paper's query); the two most coherent jobs always stay.
    min_coherence: float = Field(default=0.0, ge=0, lt=1)
    coherence_fields: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _coherence_has_text(self) -> QueriesConfig:
        if self.min_coherence > 0 and not self.coherence_fields:
            raise ValueError(
                "queries.min_coherence > 0 needs queries.coherence_fields, the text it compares"
            )
        return self

    @property
    def text_fields(self) -> list[str]:
        """The job fields a query reads: its own `fields`, then the coherence's others."""
        extra = self.coherence_fields if self.min_coherence > 0 else []
        return [*self.fields, *[f for f in extra if f not in self.fields]]


class RetrievalConfig(_Section):
    top_k: int = Field(gt=0)
    # Hits asked for beyond `top_k`, so that a tie at the cut is seen whole and ordered by
    # job id on the client (`search.bm25.ranked_hits`); a longer tie asks again.
    tie_margin: int = Field(default=10, gt=0)
    type: Literal["most_fields", "best_fields", "cross_fields"]
    boosts: dict[str, float]
    auto_generate_synonyms_phrase_query: bool
    msearch_batch: int = Field(gt=0)
    max_concurrent_searches: int = Field(gt=0)
    timeout_s: float = Field(gt=0)
    max_retries: int = Field(ge=0)
    backoff_s: float = Field(ge=0)
    # Queries searched per commit of a stage's stored searches (`search.bm25.RetrievalCheckpoint`):
    # what a stopped run loses at most; a rerun searches only the queries not stored.
    checkpoint_queries: int = Field(default=5000, gt=0)
    # Two-pass BM25 (`search.bounded`): the commonest clauses leave the first pass while their
    # largest contributions sum to at most this (0: one pass); the first pass keeps this many.
    bound_budget: float = Field(default=0.0, ge=0)
    bound_window: int = Field(default=300, gt=0)
    # build_pairs' screen (`search.bounded`): the held-out job's own score, then a count of the
    # jobs above it that stops at `top_k`; when it reaches `top_k`, the candidate's full search
    # is skipped (it could not keep the candidate). The count leaves out the commonest clauses
    # within `screen_budget` (0: the full query counts), as the two passes' first does.
    screen: bool = False
    screen_budget: float = Field(default=8.0, ge=0)
    # What fills the pool a re-ranker sees (`search.dense`): the paper's BM25 query, the kNN
    # of the candidate's profile vector, or both fused by reciprocal rank (constant `rrf_k`).
    retriever: Literal["bm25", "dense", "hybrid"] = "bm25"
    rrf_k: int = Field(default=60, gt=0)
    # A hybrid pool's kNN jobs get their BM25 scores inside the BM25 search, as a `top_hits`
    # bucket of at most this many (`search.bm25.with_scores_of`): the cluster's
    # `index.max_inner_result_window`, 100 unless set. More, or 0: a request of their own.
    scored_in_search: int = Field(default=100, ge=0)


class HistogramsConfig(_Section):
    bins: int = Field(gt=1)
    variant: Literal["ch", "nh", "lch"]
    doc_fields: list[str]
    # The leading `doc_fields` whose matches get a histogram of their own (DRMM-fields): a
    # model with `field_histograms` then tells a title match from a description match.
    lead_fields: list[str] = []
    doc_max_terms: int = Field(gt=0)
    map_queries_per_batch: int = Field(gt=0)
    # The features' job tables (text, interest graph) are shipped to every worker and looked up
    # there, in the features' pass, when the index has at most this many jobs (the demo's
    # 30,000: about 60 MiB in each Python worker); above, or 0, they are joined in Spark.
    worker_tables_max_jobs: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _lead_fields_lead(self) -> HistogramsConfig:
        if self.lead_fields != self.doc_fields[: len(self.lead_fields)]:
            raise ValueError(
                f"histograms.lead_fields {self.lead_fields} must be the first fields of "
                f"histograms.doc_fields {self.doc_fields}"
            )
        return self


class PairsConfig(_Section):
    candidates_limit: int | None = Field(gt=0)
    train: int = Field(ge=0)
    dev: int = Field(ge=0)
    test: int = Field(ge=0)
    map_dev: int = Field(ge=0)
    map_test: int = Field(ge=0)
    # The share of the hash space whose candidates no pair is built from: the evaluations'
    # (`pairs.splits.SplitRule`).
    evaluation_share: float = Field(gt=0, lt=1)
    map_positives: int = Field(gt=0)
    map_negatives: int = Field(gt=0)
    pool_negatives: int = Field(gt=0)
    pool_lists: int = Field(default=1, ge=1)
    # Per fold of candidates, the dimensions of the jobs' behaviour vectors
    # (`features.behaviour`); 0: none, and `profile_behaviour` is 0 everywhere.
    behaviour_dimensions: int = Field(default=128, ge=0)
    # The ads most like each job by text, of those someone showed interest in, whose
    # behaviour features a job nobody else wanted carries (`features.carried`); 0: none.
    carried_neighbours: int = Field(default=10, ge=0)


ExtraFeature = Literal[
    "unigrams",
    "bigrams",
    "bm25",
    "profile_tfidf",
    "profile_w2v",
    "co_interest",
    "profile_behaviour",
    "occupation_agreement",
]


class ModelVersionConfig(_Section):
    """One of the named DRMM configurations: the paper's (§8.2) and ours (docs/TRAINING.md)."""

    examples: Literal["paper", "pool"] = "paper"  # the paper's triples | pairs from the pool
    architecture: Literal["drmm", "knrm", "tks"] = "drmm"  # what reads a term's similarities
    extras: list[ExtraFeature] = []
    extras_keep: float = Field(default=1.0, gt=0, le=1)
    two_phase: bool = False
    phase2_keep: dict[ExtraFeature, float] = {}
    # Mix the trained model with BM25 in its rankings, the weight chosen on dev
    # (`ranking.interpolation`); off, the model ranks alone.
    bm25_mix: bool = False
    # The loss: the paper's pairwise hinge, or a softmax over each training list, which
    # spends its gradient on the negatives the model ranks highest (`examples: pool` only:
    # its pairs come in lists; docs/TRAINING.md, "The listwise loss").
    loss: Literal["hinge", "listwise"] = "hinge"
    # The term gate also reads each query term's share of the candidate's jobs.
    gate_share: bool = False
    # Each query term's histogram is split in two, matches in `histograms.lead_fields` and
    # in the other fields, side by side (DRMM-fields; DRMM's architecture only).
    field_histograms: bool = False

    @model_validator(mode="after")
    def _fields_need_drmm(self) -> ModelVersionConfig:
        if self.field_histograms and self.architecture != "drmm":
            raise ValueError("field_histograms needs architecture drmm")
        if self.loss == "listwise" and self.examples != "pool":
            raise ValueError("loss listwise needs examples: pool (lists of pool pairs)")
        return self


class ModelConfig(_Section):
    version: str
    mlp_layers: int = Field(ge=1)
    mlp_width: int = Field(ge=1)
    gating: Literal["idf", "embedding"]
    versions: dict[str, ModelVersionConfig]

    @model_validator(mode="after")
    def _known_version(self) -> ModelConfig:
        if self.version not in self.versions:
            raise ValueError(
                f"model.version {self.version!r} is not one of model.versions "
                f"({', '.join(sorted(self.versions))})"
            )
        return self

    @property
    def selected(self) -> ModelVersionConfig:
        return self.versions[self.version]


class TrainingConfig(_Section):
    max_epochs: int = Field(gt=0)
    early_stop_patience: int = Field(gt=0)
    early_stop_min_gain: float = Field(ge=0)
    optimizer: Literal["adam", "adagrad", "sgd"]
    learning_rate: float = Field(gt=0)
    batch_size: int = Field(gt=0)
    # `examples: pool` configurations: an epoch is at least this many optimisation steps per
    # process; on fewer training pairs the batches shrink (docs/TRAINING.md)
    min_epoch_steps: int = Field(ge=0)
    hinge_margin: float = Field(gt=0)
    launcher: Literal["distributor", "torchrun", "single"]
    num_processes: int = Field(gt=0)
    # torchrun's elastic restarts: a failed worker restarts every process, which resume from
    # the last checkpoint (the launcher `torchrun` only; TorchDistributor has none).
    max_restarts: int = Field(ge=0)
    use_gpu: bool
    shuffle_buffer_rows: int = Field(gt=0)
    prefetch_batches: int = Field(ge=0)
    decode_workers: int = Field(ge=0)
    eval_batch_size: int = Field(gt=0)
    learning_curve_sizes: list[int]


class PromotionConfig(_Section):
    # The sanity floor, even for a first model and even over a champion: the challenger's mean
    # held-out log-rank score on the test pools minus the retriever's own order's.
    min_gain_over_retriever: float
    bootstrap_resamples: int = Field(ge=100)
    # the chance that any of a run's gates promotes on noise (`training.promotion.gate_alpha`)
    family_alpha: float = Field(gt=0, lt=1)


class TemporalEvaluationConfig(_Section):
    """Experiment 6 (`evaluation.temporal`): the pipeline's as-of date is the cut; candidates
    are judged by what they did in the days after it (docs/EVALUATION.md)."""

    window_days: int = Field(gt=0)  # the judged window after the cut
    candidates: int = Field(ge=0)  # judged candidates at most (a seeded sample); 0: skipped


class EvaluationConfig(_Section):
    k: int = Field(gt=0)
    learning_curve: bool
    ground_truth_candidates: int = Field(ge=0)
    baselines: list[str]
    models: list[str]  # the DRMM configurations (`model.versions`) compared (and the demo trains)
    # The ranker every other is paired against on the ground truth, besides BM25: the strong
    # untrained baseline by default, a model ("DRMM v5") to measure what another adds to it.
    paired_baseline: str
    curve_model: str  # the configuration the learning curve trains
    held_out_candidates: int = Field(ge=0)
    bootstrap_resamples: int = Field(ge=100)
    # Experiment 5: the ground truth's candidates through each retriever's pool, in its own
    # order and re-ranked by the champion (bm25 is the reference; without a champion, the
    # own orders alone); fewer than two: skipped.
    retrievers: list[Literal["bm25", "dense", "hybrid"]] = []
    retriever_candidates: int = Field(default=5000, ge=0)  # for each of its two parts
    # Committed sections the report appends verbatim: a heavier preset's snapshot
    # (`jobrec snapshot`), so that the demo's RESULTS.md carries it and stays reproducible.
    report_appendices: list[str] = []
    temporal: TemporalEvaluationConfig

    @field_validator("baselines")
    @classmethod
    def _bm25_first(cls, baselines: list[str]) -> list[str]:
        # The first ranker is the reference every other is paired against, and the reports
        # and MLflow metrics call that reference BM25 (`vs_bm25`): another one first would be
        # printed under BM25's name.
        if not baselines or baselines[0] != "BM25":
            raise ValueError(
                "the first baseline must be BM25, the reference every ranker is paired "
                "against and the reports name; list the others after it, e.g. "
                "--set 'evaluation.baselines=[BM25, WMD]'"
            )
        return baselines


class KnnConfig(_Section):
    """kNN-augmented scoring (seed 003, `features.neighbours`)."""

    memory_candidates: int = Field(gt=0)  # past candidates in the memory (a seeded sample)
    probes: int = Field(gt=0)  # IVF lists searched per query
    k_grid: list[int] = Field(min_length=1)  # neighbours tried on dev
    dev_candidates: int = Field(ge=0)  # dev held-out queries λ and k are chosen on; 0: no kNN


class TitlesConfig(_Section):
    """Job-title normalisation (seed 001, issue 22; `docs/TITLES.md`)."""

    # Which O*NET titles the generator writes and which the normaliser learns
    # (`taxonomy.titles`): changing it changes the generated data too.
    split_seed: int
    model_name: str  # the registered normaliser; its champion alias normalises the jobs
    max_chars: int = Field(gt=0)  # of a title the encoder reads
    layers: int = Field(gt=0)  # bidirectional LSTM layers (seed 001: 4)
    hidden: int = Field(gt=0)  # units per direction (seed 001: 64)
    char_dim: int = Field(gt=0)
    output_dim: int = Field(gt=0)  # the projection (seed 001: 128)
    dropout: float = Field(ge=0, lt=1)  # between LSTM layers
    steps: int = Field(gt=0)  # Adam steps; the learning rate decays linearly to a tenth
    batch_occupations: int = Field(gt=1)  # P occupations per step
    pairs_per_occupation: int = Field(gt=0)  # positive pairs of each per step
    learning_rate: float = Field(gt=0)
    margin: float = Field(ge=-1, lt=1)  # a negative pair costs only above this cosine
    negative_weight: float = Field(gt=0)  # seed 001's 4:1 negative to positive pairs
    # Shares of the positive pairs (`titles.training.PairSampler`); the rest: two titles of
    # one occupation.
    typo_rate: float = Field(ge=0, le=1)  # a title and its typos (seed 001: 10%)
    typo_substitute: float = Field(ge=0, le=1)  # their characters substituted (seed 001: 20%)
    typo_delete: float = Field(ge=0, le=1)  # and deleted (seed 001: 5%)
    extra_words_rate: float = Field(ge=0, le=1)  # a title and itself with extra words
    augmented_rate: float = Field(ge=0, le=1)  # a variant or real title and its taxonomy title
    confusable_share: float = Field(ge=0, le=1)  # of a batch's occupations: hard negatives
    test_typo_share: float = Field(gt=0, le=1)  # the Typos test's edits (seed 001: 5%)
    composition_test_share: float = Field(ge=0, le=1)  # variants held out (seed 001: 7,909 of them)
    synonym_support: int = Field(gt=0)  # shared words an induced synonym needs (`titles.sets`)
    extra_words_test_share: float = Field(ge=0, le=1)  # held-out real titles with extra words
    # Of the training variants and real titles with extra words (and fresh typos of that
    # share of the taxonomy): the validation sets that choose the lookup (`titles.lookup`).
    validation_share: float = Field(gt=0, lt=1)
    lookup_neighbours: int = Field(gt=0)  # known titles that vote for their occupation
    lookup_trigram_weights: list[float] = Field(min_length=1)  # candidates, each in [0, 1]
    lookup_temperatures: list[float] = Field(min_length=1)  # candidates; 0: the nearest title
    lookup_spelling: list[float] = Field(min_length=1)  # candidates, edits per character; 0: off
    log_every: int = Field(gt=0)  # steps between progress lines

    @model_validator(mode="after")
    def _views(self) -> TitlesConfig:
        if self.typo_rate + self.extra_words_rate + self.augmented_rate > 1:
            raise ValueError(
                "typo_rate + extra_words_rate + augmented_rate are shares of the pairs: at most 1"
            )
        if not all(0 <= w <= 1 for w in self.lookup_trigram_weights):
            raise ValueError("lookup_trigram_weights: each is a share of the score, in [0, 1]")
        if not all(t >= 0 for t in self.lookup_temperatures):
            raise ValueError("lookup_temperatures: each is 0 (the nearest title) or more")
        if not all(0 <= s < 1 for s in self.lookup_spelling):
            raise ValueError("lookup_spelling: each is 0 (off) or edits per character below 1")
        return self


class QualityConfig(_Section):
    error_budget_fraction: float = Field(ge=0, le=1)


class ServingConfig(_Section):
    # The day an online answer keeps ads live on (dated data): `wall`, today's (UTC) at each
    # request; `as_of`, the run's as-of date, for a dataset replayed from its past (the demo's
    # dates are in 2025, when all of its ads have long closed by the wall clock's).
    clock: Literal["wall", "as_of"]


class JobrecConfig(_Section):
    """The whole configuration; one attribute per section of `conf/base.yaml`."""

    run: RunConfig
    storage: StorageConfig
    spark: SparkConfig
    elasticsearch: ElasticsearchConfig
    indexing: IndexingConfig
    mlflow: MlflowConfig
    data: DataConfig
    ingest: IngestConfig
    text: TextConfig
    embeddings: EmbeddingsConfig
    cleaning: CleaningConfig
    queries: QueriesConfig
    retrieval: RetrievalConfig
    histograms: HistogramsConfig
    pairs: PairsConfig
    model: ModelConfig
    training: TrainingConfig
    promotion: PromotionConfig
    evaluation: EvaluationConfig
    knn: KnnConfig
    titles: TitlesConfig
    quality: QualityConfig
    serving: ServingConfig

    env: str = "base"
    project_root: str = "."

    @model_validator(mode="after")
    def _known_models(self) -> JobrecConfig:
        named = [*self.evaluation.models, self.evaluation.curve_model]
        unknown = [name for name in named if name not in self.model.versions]
        if unknown:
            raise ValueError(
                f"evaluation.models/curve_model {unknown} are not in model.versions "
                f"({', '.join(sorted(self.model.versions))})"
            )
        fields = [
            name
            for name in dict.fromkeys([self.model.version, *named])
            if self.model.versions[name].field_histograms
        ]
        if fields and not self.histograms.lead_fields:
            raise ValueError(
                f"{', '.join(fields)} read per-field histograms, which need "
                "histograms.lead_fields (e.g. --set 'histograms.lead_fields=[title]')"
            )
        return self

    def path(self, relative: str) -> str:
        """A location under `storage.root` (tables, artifacts), as a string Spark understands."""
        return f"{self.storage.root.rstrip('/')}/{relative.lstrip('/')}"


def default_conf_dir() -> Path:
    """`$JOBREC_CONF_DIR`, else `./conf`, else the `conf/` of the checkout this package is in."""
    from_env = os.environ.get(ENV_CONF_DIR)
    if from_env:
        return Path(from_env)
    cwd_conf = Path.cwd() / "conf"
    if (cwd_conf / BASE_FILE).is_file():
        return cwd_conf
    return Path(__file__).resolve().parents[2] / "conf"


def load_config(
    env: str | Sequence[str] = "local",
    overrides: Iterable[str] = (),
    conf_dir: str | Path | None = None,
) -> JobrecConfig:
    """Load `base.yaml`, merge each overlay `<env>.yaml` over it in order, apply `key=value`
    overrides, validate.

    `env` names the overlays: one name, a comma-separated list (`"databricks,prod"`, what a
    notebook widget can hold) or a sequence of either (repeated `--env`); `base` alone means
    none. Relative local paths (storage root, jar folders, a sqlite tracking store) are
    resolved against the project root (the parent of the conf folder), so jobs behave the same
    from any working directory.
    """
    directory = Path(conf_dir) if conf_dir is not None else default_conf_dir()
    names = overlay_names(env)
    origins: dict[tuple[str, ...], str] = {}
    merged = _read_yaml(directory / BASE_FILE)
    _record_origins(merged, (), str(directory / BASE_FILE), origins)
    for name in names:
        overlay_file = directory / f"{name}.yaml"
        if not overlay_file.is_file():
            known = sorted(p.stem for p in directory.glob("*.yaml") if p.name != BASE_FILE)
            raise ConfigError(
                f"unknown configuration overlay {name!r}: no {overlay_file} "
                f"(overlays: {', '.join(known) or 'none'})"
            )
        overlay = _read_yaml(overlay_file)
        deep_merge(merged, overlay, _origin_recorder(str(overlay_file), origins))
    defined = _model_versions(merged)
    for override in overrides:
        key, value = _parse_override(override)
        deep_merge(merged, _nest(key, value), _origin_recorder(f"--set {override}", origins))
    _refuse_new_versions(merged, defined, origins)
    merged["env"] = ",".join(names) or BASE_ENV
    merged["project_root"] = str(directory.resolve().parent)
    try:
        config = JobrecConfig.model_validate(merged)
    except ValidationError as error:
        raise ConfigError(_describe(error, origins, directory / BASE_FILE)) from None
    return _resolve_local_paths(config)


def overlay_names(env: str | Sequence[str]) -> list[str]:
    """The overlays `env` names, in the order they apply (`base` names none)."""
    given = [env] if isinstance(env, str) else list(env)
    names = [name.strip() for item in given for name in item.split(",")]
    if not all(names):
        raise ConfigError(f"--env {','.join(given)!r}: an empty overlay name")
    return [name for name in names if name != BASE_ENV]


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"configuration file not found: {path}")
    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return content


def _record_origins(
    tree: Mapping[str, Any], prefix: tuple[str, ...], source: str, origins: dict
) -> None:
    for key, value in tree.items():
        path = (*prefix, str(key))
        origins[path] = source
        if isinstance(value, Mapping):
            _record_origins(value, path, source, origins)


def deep_merge(
    target: dict[str, Any],
    overlay: Mapping[str, Any],
    on_set: Callable[[tuple[str, ...], Any], None] | None = None,
    prefix: tuple[str, ...] = (),
) -> dict[str, Any]:
    """`overlay` onto `target`, in place: a non-empty mapping merges key by key into a mapping,
    anything else replaces (a copy); `on_set(path, value)` hears of each replacement (the
    configuration records where each value came from). Used by the configuration and by the
    bundle check, which merges targets the same way."""
    for key, value in overlay.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and isinstance(target.get(key), dict) and value:
            deep_merge(target[key], value, on_set, path)
        else:
            target[key] = copy.deepcopy(value)
            if on_set is not None:
                on_set(path, value)
    return target


def _origin_recorder(source: str, origins: dict) -> Callable[[tuple[str, ...], Any], None]:
    def record(path: tuple[str, ...], value: Any) -> None:
        origins[path] = source
        if isinstance(value, Mapping):
            _record_origins(value, path, source, origins)

    return record


def _parse_override(override: str) -> tuple[str, Any]:
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {override!r}: expected section.key=value")
    name = key.strip().split(".")[0]
    if name in DERIVED_KEYS:
        raise ConfigError(f"--set {override!r}: {name} is {DERIVED_KEYS[name]}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    # ValueError: a scalar YAML reads as a date that is none (2025-13-01)
    except (yaml.YAMLError, ValueError) as error:
        raise ConfigError(f"--set {override!r}: value is not valid YAML: {error}") from None
    # `--set training.learning_rate=1e-3` means the number, as YAML 1.2 reads it; a quoted
    # '1e-3' stays a string (the plain scalar alone is the raw text unchanged).
    if isinstance(value, str) and value == raw.strip() and SCIENTIFIC.fullmatch(value):
        value = float(value)
    return key.strip(), value


def _nest(dotted_key: str, value: Any) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    node = tree
    parts = _key_names(dotted_key)
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return tree


def _key_names(dotted_key: str) -> list[str]:
    """The names along `dotted_key`, split at its dots; under a mapping of plain values
    (`spark.conf`, `elasticsearch.local.settings`) the rest is one name, dots and all, since
    Spark's and Elasticsearch's own keys have dots (`spark.conf.spark.driver.memory`)."""
    parts = dotted_key.split(".")
    section: type[BaseModel] = JobrecConfig
    index = 0
    while index < len(parts) - 1:
        field = section.model_fields.get(parts[index])
        if field is None:
            break  # an unknown key: validation names it
        annotation = field.annotation
        if get_origin(annotation) is dict:
            entry = get_args(annotation)[1]
            if not (isinstance(entry, type) and issubclass(entry, BaseModel)):
                return [*parts[: index + 1], ".".join(parts[index + 1 :])]
            section, index = entry, index + 2  # the entry's name, then its own keys
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            section, index = annotation, index + 1
        else:
            break
    return parts


def _model_versions(merged: Mapping[str, Any]) -> set[str]:
    model = merged.get("model")
    versions = model.get("versions") if isinstance(model, Mapping) else None
    return set(versions) if isinstance(versions, Mapping) else set()


def _refuse_new_versions(merged: Mapping[str, Any], defined: set[str], origins: dict) -> None:
    """A model version named only by `--set` (a typo, `model.versions.v5x.bm25_mix=true`)
    would be a new configuration that no file records: it must be added in conf/."""
    for name in sorted(_model_versions(merged) - defined):
        source = _origin_of(("model", "versions", name), origins)
        raise ConfigError(
            f"model.versions.{name}: not a version of the configuration files "
            f"({', '.join(sorted(defined))}) [in {source}]; a new version is added in conf/"
        )


def _describe(error: ValidationError, origins: dict, base_file: Path) -> str:
    lines = ["invalid configuration:"]
    for problem in error.errors():
        loc = tuple(str(part) for part in problem["loc"])
        key = ".".join(loc)
        source = _origin_of(loc, origins) or str(base_file)
        if problem["type"] == "extra_forbidden":
            message = "unknown key"
        elif problem["type"] == "missing":
            message = "missing key"
        else:
            # A validator's own message needs no "Value error, " before it.
            reason = problem["msg"].removeprefix("Value error, ")
            message = f"{reason} (got {problem.get('input')!r})"
        lines.append(f"  {key}: {message} [in {source}]")
    return "\n".join(lines)


def _origin_of(loc: tuple[str, ...], origins: dict) -> str | None:
    for length in range(len(loc), 0, -1):
        if loc[:length] in origins:
            return str(origins[loc[:length]])
    return None


def _has_scheme(location: str) -> bool:
    return "://" in location or location.startswith(("dbfs:", "file:"))


def _absolute(location: str | None, root: Path) -> str | None:
    if location is None or _has_scheme(location) or Path(location).is_absolute():
        return location
    return str((root / location).resolve())


def _resolve_local_paths(config: JobrecConfig) -> JobrecConfig:
    root = Path(config.project_root)
    tracking = config.mlflow.tracking_uri
    prefix = "sqlite:///"
    if tracking.startswith(prefix) and not tracking.startswith(prefix + "/"):
        tracking = prefix + str((root / tracking[len(prefix) :]).resolve())
    return config.model_copy(
        update={
            "storage": config.storage.model_copy(
                update={"root": _absolute(config.storage.root, root)}
            ),
            "spark": config.spark.model_copy(
                update={"jars_dir": _absolute(config.spark.jars_dir, root)}
            ),
            "elasticsearch": config.elasticsearch.model_copy(
                update={
                    "local": config.elasticsearch.local.model_copy(
                        update={
                            "workdir": _absolute(config.elasticsearch.local.workdir, root),
                            "jars_dir": _absolute(config.elasticsearch.local.jars_dir, root),
                        }
                    )
                }
            ),
            "data": config.data.model_copy(
                update={"reference_dir": _absolute(config.data.reference_dir, root)}
            ),
            "mlflow": config.mlflow.model_copy(
                update={
                    "tracking_uri": tracking,
                    "artifact_root": _absolute(config.mlflow.artifact_root, root),
                }
            ),
        }
    )
