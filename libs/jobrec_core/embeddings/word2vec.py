"""word2vec and IDF over the tokenized jobs: the corpus, the version hash, the training."""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobrec_core.config import EmbeddingsConfig
from jobrec_core.text.tokens import JOB_TEXT_FIELDS, tokens_column


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
