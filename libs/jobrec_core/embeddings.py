"""Tokenised jobs, word2vec embeddings and IDF: the text representation every stage shares.

* :func:`tokenize_jobs` cleans each text field in the JVM (Spark ML's `RegexTokenizer` and
  `StopWordsRemover`): lowercase letter runs without stop words, the same words as
  `jobrec_core.text.clean_tokens` gives in Python.
* :func:`train_word2vec` trains gensim's word2vec on one line per job (all fields) written
  by Spark to a corpus file, gensim's fastest input path. One worker thread and a stable
  hash make the vectors a function of the seed alone.
* :func:`compute_idf` gives `log(N / df)` per term over the jobs (§3.1), in Spark.

The vectors are saved with gensim's `KeyedVectors.save`, whose arrays executors can
memory-map, under a version derived from the inputs and settings: rerunning with the same
inputs gives the same version, and every later stage records the version it used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.ml.feature import RegexTokenizer, StopWordsRemover
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobrec_core import manifest
from jobrec_core.config import EmbeddingsConfig, JobrecConfig
from jobrec_core.io import delta_version, local_path, read_delta, table_path, write_delta
from jobrec_core.text import load_stopwords

log = logging.getLogger(__name__)

JOB_TEXT_FIELDS = ("title", "function", "requirement_summary", "description", "keywords")
LETTER_RUNS = r"(?U)[^\W\d_]+"  # letters of any script (Unicode classes), as jobrec_core.text


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


def tokens_column(field: str) -> str:
    return f"{field}_tokens"


def tokenize_jobs(jobs: DataFrame, stopwords: frozenset[str]) -> DataFrame:
    """Adds `<field>_tokens` (array of cleaned words) for every text field of the jobs."""
    frame = jobs.withColumn("_keywords_text", F.concat_ws(" ", "keywords"))
    for field in JOB_TEXT_FIELDS:
        source = "_keywords_text" if field == "keywords" else field
        raw = f"_{field}_raw"
        frame = RegexTokenizer(
            inputCol=source, outputCol=raw, pattern=LETTER_RUNS, gaps=False, toLowercase=True
        ).transform(frame.fillna("", subset=[source]))
        frame = (
            StopWordsRemover(
                inputCol=raw,
                outputCol=tokens_column(field),
                stopWords=sorted(stopwords),
                caseSensitive=True,
            )
            .transform(frame)
            .drop(raw)
        )
    return frame.drop("_keywords_text")


def all_tokens(frame: DataFrame) -> DataFrame:
    """One array per job with the words of every field, in field order."""
    return frame.select(
        "job_id", F.concat(*[tokens_column(f) for f in JOB_TEXT_FIELDS]).alias("tokens")
    )


def compute_idf(tokenized: DataFrame) -> DataFrame:
    """`term, df, idf` with idf = log(N / df), N the number of jobs (§3.1)."""
    documents = all_tokens(tokenized)
    total = documents.count()
    return (
        documents.select(F.explode(F.array_distinct("tokens")).alias("term"))
        .groupBy("term")
        .agg(F.count("*").alias("df"))
        .withColumn("idf", F.log(F.lit(float(total)) / F.col("df")))
    )


def version_of(settings: EmbeddingsConfig, inputs: dict[str, object], seed: int) -> str:
    """A short stable name for embeddings trained on these inputs with these settings."""
    payload = json.dumps(
        {"settings": settings.model_dump(), "inputs": inputs, "seed": seed}, sort_keys=True
    )
    return "w2v-" + hashlib.sha256(payload.encode()).hexdigest()[:12]


def stable_hash(text: str) -> int:
    """gensim seeds each word's initial vector with `hashfxn(word + seed)`; Python's `hash`
    changes between processes (PYTHONHASHSEED), so training would not be reproducible."""
    return zlib.crc32(text.encode("utf-8"))


def train_word2vec(corpus_file: str, settings: EmbeddingsConfig, seed: int) -> Any:
    """gensim word2vec on a corpus file (one job per line, words separated by spaces)."""
    from gensim.models import Word2Vec

    return Word2Vec(
        corpus_file=corpus_file,
        vector_size=settings.vector_size,
        window=settings.window,
        min_count=settings.min_count,
        sg=settings.sg,
        epochs=settings.epochs,
        workers=settings.workers,
        seed=seed,
        hashfxn=stable_hash,
    )


def single_text_file(folder: str) -> str:
    """The one part file Spark wrote into `folder` (written with a single partition)."""
    parts = sorted(Path(folder).glob("part-*"))
    if len(parts) != 1:
        raise RuntimeError(f"expected one part file in {folder}, found {len(parts)}")
    return str(parts[0])


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

    from jobrec_core.tracking import configure_mlflow

    started = time.perf_counter()
    bronze = table_path(config, "bronze", "jobs")
    silver = table_path(config, "silver", "jobs")
    stopwords = load_stopwords(tuple(config.text.stopword_languages))
    write_delta(tokenize_jobs(read_delta(spark, bronze), stopwords), silver)
    tokenized = read_delta(spark, silver)
    name = version_of(
        config.embeddings,
        {"dataset": config.data.preset, "jobs_version": delta_version(spark, bronze)},
        config.run.seed,
    )
    version = EmbeddingsVersion(name, table_path(config, "silver", f"embeddings/{name}"))
    log.info("embeddings %s: writing the corpus", name)
    (
        all_tokens(tokenized)
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
    idf = compute_idf(tokenized)
    write_delta(idf, version.idf_table)
    result = EmbeddingsResult(
        version=version,
        jobs=tokenized.count(),
        vocabulary=len(model.wv),
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
