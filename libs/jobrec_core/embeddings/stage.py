"""Tokenised jobs, word2vec embeddings and IDF: the text representation every stage shares.

* :func:`tokenize_jobs` cleans each text field in the JVM (Spark ML's `RegexTokenizer` and
  `StopWordsRemover`): lowercase letter runs without stop words, the same words as
  `jobrec_core.text.tokens.clean_tokens` gives in Python.
* :func:`train_word2vec` trains gensim's word2vec on one line per job (all fields) written
  by Spark to a corpus file, gensim's fastest input path. One worker thread and a stable
  hash make the vectors a function of the seed alone.
* :func:`compute_idf` gives `log(N / df)` per term over the jobs (§3.1), in Spark.

Every job is tokenised (a job's tokens are its own); word2vec and the IDF learn only from
the ads posted by the run's as-of date (`timeline.asof`), so that no later ad's words shape
the vectors or the weights.

The vectors are saved with gensim's `KeyedVectors.save`, whose arrays executors can
memory-map, under a version named after the corpus' content, the settings and the seed:
rerunning on the same jobs gives the same version, whose complete files are reused rather
than written again, and every later stage records the version it used.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobrec_core.config import JobrecConfig
from jobrec_core.embeddings.word2vec import (
    all_tokens,
    compute_idf,
    single_text_file,
    train_word2vec,
    version_of,
)
from jobrec_core.platform import manifest
from jobrec_core.platform.tables import (
    content_fingerprint,
    local_path,
    read_delta,
    table_path,
    write_delta,
)
from jobrec_core.text.tokens import load_stopwords, tokenize_jobs
from jobrec_core.text.vectors import keyed_vectors
from jobrec_core.timeline.asof import as_of, jobs_posted_by

log = logging.getLogger(__name__)

# Written into a version's folder once its vectors and IDFs are all there.
COMPLETE_FILE = "_COMPLETE"


@dataclass(frozen=True)
class EmbeddingsVersion:
    name: str
    folder: str

    @property
    def vectors_file(self) -> str:
        return f"{self.folder}/vectors.kv"

    @property
    def idf_table(self) -> str:
        return f"{self.folder}/idf"

    @property
    def corpus_file(self) -> str:
        return f"{self.folder}/corpus"


@dataclass(frozen=True)
class EmbeddingsResult:
    version: EmbeddingsVersion
    jobs: int
    vocabulary: int
    terms: int
    seconds: float


def build_embeddings(spark: SparkSession, config: JobrecConfig) -> EmbeddingsResult:
    """bronze jobs -> silver jobs (tokenised), word2vec vectors and IDF, recorded in the
    manifest and logged to MLflow."""
    # MLflow is imported here, not at the top: executors import this module (tokens_column)
    # and need none of it.
    import mlflow

    from jobrec_core.platform.tracking import configure_mlflow, log_stage_inputs

    started = time.perf_counter()
    bronze = table_path(config, "bronze", "jobs")
    silver = table_path(config, "silver", "jobs")
    stopwords = load_stopwords(tuple(config.text.stopword_languages))
    write_delta(tokenize_jobs(read_delta(spark, bronze), stopwords), silver)
    timeline = as_of(config)
    corpus = jobs_posted_by(read_delta(spark, silver), timeline.day)
    # Named after the corpus itself, not the table's version: a rerun on the same jobs (a new
    # Delta version of the same rows) keeps the name, so the champion trained on these
    # embeddings still matches them.
    name = version_of(
        config.embeddings,
        {"dataset": config.data.preset, "corpus": content_fingerprint(all_tokens(corpus))},
        config.run.seed,
    )
    version = EmbeddingsVersion(name, table_path(config, "silver", f"embeddings/{name}"))
    complete = Path(local_path(version.folder)) / COMPLETE_FILE
    if complete.is_file():
        # The same corpus, settings and seed: the same vectors and IDFs. Reused, not written
        # again under processes that memory-map them (a running `jobrec serve`).
        log.info("embeddings %s: built from this very corpus before, reused", name)
        vocabulary = len(keyed_vectors(version.vectors_file))
    else:
        log.info("embeddings %s: writing the corpus (%s)", name, timeline.describe())
        (
            all_tokens(corpus)
            .orderBy("job_id")
            .select(F.concat_ws(" ", "tokens").alias("value"))
            .coalesce(1)
            .write.mode("overwrite")
            .text(version.corpus_file)
        )
        log.info("embeddings %s: training word2vec", name)
        model = train_word2vec(
            single_text_file(local_path(version.corpus_file)), config.embeddings, config.run.seed
        )
        # Arrays always in separate .npy files, which executors memory-map.
        model.wv.save(local_path(version.vectors_file), sep_limit=0)
        write_delta(compute_idf(corpus), version.idf_table)
        complete.write_text(name, encoding="utf-8")  # last: a failed build is built again
        vocabulary = len(model.wv)
    result = EmbeddingsResult(
        version=version,
        jobs=corpus.count(),
        vocabulary=vocabulary,
        terms=read_delta(spark, version.idf_table).count(),
        seconds=time.perf_counter() - started,
    )
    manifest.record(
        config,
        "embeddings",
        {
            "version": name,
            "vectors": version.vectors_file,
            "idf": version.idf_table,
            "jobs": silver,
        },
    )
    configure_mlflow(config)
    with mlflow.start_run(run_name=f"train_embeddings {name}"):
        mlflow.set_tags(
            {"stage": "train_embeddings", "embeddings_version": name, "dataset": config.data.preset}
        )
        log_stage_inputs(spark, config, [bronze])
        mlflow.log_params({f"embeddings.{k}": v for k, v in config.embeddings.model_dump().items()})
        mlflow.log_metrics(
            {
                "jobs": result.jobs,
                "vocabulary": result.vocabulary,
                "idf_terms": result.terms,
                "seconds": result.seconds,
            }
        )
        mlflow.log_dict(manifest.read_manifest(config), "manifest.json")
    return result
