"""Re-rankers over BM25's candidates: one scoring pass, any number of models side by side.

A re-ranker scores rows of the MAP-set shape (`features.matching.MAP_SCHEMA`: one row per query and
document, with the query's terms and IDFs, the document's histogram, length, extra features,
profile features and BM25 score), plus `doc_tokens` for WMD. Three kinds, as in PyTerrier's
retrieve-then-rerank pipelines, all with the same `score(frame) -> ndarray` interface:

* :class:`ColumnScorer`: one feature as the score: BM25's own order (the order a re-ranker
  is compared with), the profile's TF-IDF cosine, the co-interest walks;
* :class:`WmdScorer`: the paper's baseline, Word Mover's similarity of the query's words and the
  document's words (`jobrec_core.text.wmd`, equal to gensim's `wmdistance`);
* :class:`DrmmScorer`: a trained DRMM, shipped to the executors as bytes in a broadcast (its
  spec, weights and word vectors), so executors need no access to the model registry;
  :func:`drmm_scorer` wraps it in :class:`Bm25Mix` when the model mixes with BM25.

The ranking pipeline's `ScoreColumns` step runs any number of them in one `mapInPandas` pass
and keeps only small columns; `Reranker` orders a pool by one of them. Each scorer's model is
loaded once per Python worker.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
import pandas as pd
import torch
from pyspark import Broadcast
from pyspark.sql import SparkSession

from jobrec_core.features.histograms import Vocabulary
from jobrec_core.models.model_io import save_model_bytes
from jobrec_core.ranking.interpolation import interpolate
from jobrec_core.text.vectors import keyed_vectors, worker_cached
from jobrec_core.text.wmd import DocumentBatch, VectorTable, WmdDocument, similarity, wmd_pairs
from jobrec_scoring.model import input_columns, load_model
from jobrec_scoring.network import Drmm

DOC_TOKENS = "doc_tokens"


class Scorer(Protocol):
    """Scores stored-shape rows; higher is better. `reads` names the stored columns the
    score depends on: the paper's protocol leaves out what a scorer that reads `bm25`
    cannot be measured on fairly (`evaluation.protocols`)."""

    @property
    def name(self) -> str: ...

    @property
    def reads(self) -> frozenset[str]: ...

    def score(self, frame: pd.DataFrame) -> np.ndarray: ...


BM25_COLUMN = "bm25"


def reads_bm25(scorer: Scorer) -> bool:
    """Whether `scorer`'s score depends on a row's BM25 score."""
    return BM25_COLUMN in scorer.reads


def score_column(scorer: Scorer) -> str:
    """`score_<name>`, lower case with underscores: the scorer's column in scored frames."""
    return score_column_of(scorer.name)


def score_column_of(name: str) -> str:
    """The score column of the scorer called `name`."""
    return "score_" + re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


# The untrained re-rankers, by the name `evaluation.baselines` gives them; each is built by
# `ranking.factory.baseline_scorers` from the run's `RankingInputs`, every field but `name`
# taken from the attribute of the same name (e.g. `vectors_file`).
UNTRAINED: dict[str, type] = {}

ScorerClass = TypeVar("ScorerClass", bound=type)


def untrained(name: str) -> Callable[[ScorerClass], ScorerClass]:
    """Registers a scorer class under `name`: what adding a re-ranker takes, with the name in
    `evaluation.baselines`."""

    def register(cls: ScorerClass) -> ScorerClass:
        UNTRAINED[name] = cls
        return cls

    return register


@dataclass(frozen=True)
class ColumnScorer:
    """One feature column as the score, untrained."""

    name: str
    column: ClassVar[str]

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({self.column})

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        return frame[self.column].to_numpy(dtype=np.float64)


@untrained("BM25")
@dataclass(frozen=True)
class Bm25Scorer(ColumnScorer):
    """The retrieval score itself: BM25's own order."""

    name: str = "BM25"
    column: ClassVar[str] = BM25_COLUMN


RETRIEVAL_ORDER = "retrieval"


@dataclass(frozen=True)
class RetrievalOrderScorer(ColumnScorer):
    """The pool's own order (`score`): BM25's, the kNN cosine's, or the fused one's. Not a
    baseline of its own: it names no retriever, the pool it scores does."""

    name: str = RETRIEVAL_ORDER
    column: ClassVar[str] = "score"


# The strong untrained baseline a learned re-ranker must beat (issue 18): the evaluation
# compares every other ranker with it too.
PROFILE_BASELINE = "profile-tfidf"


@untrained(PROFILE_BASELINE)
@dataclass(frozen=True)
class ProfileTfidfScorer(ColumnScorer):
    """The mean TF-IDF cosine of a job to the candidate's own jobs, all fields, each own job
    weighed by its agreement with the others (`features.profile`)."""

    name: str = PROFILE_BASELINE
    column: ClassVar[str] = "profile_tfidf"


@untrained("co-interest")
@dataclass(frozen=True)
class CoInterestScorer(ColumnScorer):
    """Two-step walks from the candidate's own jobs over the interest graph
    (`features.profile`): what other candidates' interest alone says."""

    name: str = "co-interest"
    column: ClassVar[str] = "co_interest"


@untrained("behaviour")
@dataclass(frozen=True)
class BehaviourScorer(ColumnScorer):
    """The cosine of a job's behaviour vector with the candidate's own jobs' mean
    (`features.behaviour`): who wanted what, beyond two steps of the interest graph."""

    name: str = "behaviour"
    column: ClassVar[str] = "profile_behaviour"


@untrained("WMD")
@dataclass(frozen=True)
class WmdScorer:
    """Word Mover's similarity, 1 / (1 + WMD), between the query's terms and `doc_tokens`."""

    vectors_file: str
    name: str = "WMD"

    @property
    def reads(self) -> frozenset[str]:
        return frozenset({"query_terms", DOC_TOKENS})

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        vocabulary, table = _wmd_vocabulary(self.vectors_file)
        queries = _nbows(vocabulary, frame["query_terms"])
        documents = _nbows(vocabulary, frame[DOC_TOKENS])
        rows = np.arange(len(queries), dtype=np.int64)
        batch = DocumentBatch.from_documents([*queries, *documents])
        distances = wmd_pairs(table, batch, rows, rows + len(queries))
        return np.asarray(similarity(distances), dtype=np.float64)


def _wmd_vocabulary(vectors_file: str) -> tuple[Vocabulary, VectorTable]:
    """The word vectors of one embeddings version, built once per Python worker."""

    def build() -> tuple[Vocabulary, VectorTable]:
        keyed = keyed_vectors(vectors_file)
        words = np.asarray(keyed.index_to_key, dtype=str)
        vectors = np.asarray(keyed.vectors)
        vocabulary = Vocabulary(words, vectors, np.zeros(len(words), dtype=np.float32))
        return vocabulary, VectorTable.from_vectors(vocabulary.vectors)

    return worker_cached("wmd_vocabulary", vectors_file, build)


def _nbows(vocabulary: Vocabulary, texts: Iterable[Any]) -> list[WmdDocument]:
    """Each text's nBOW over its in-vocabulary words, with one vectorised lookup for all the
    texts; a text repeated on consecutive rows (a query and its 100 documents) is built once."""
    texts = list(texts)
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    words = np.concatenate([np.asarray(t, dtype=str) for t in texts]) if texts else []
    ids = np.split(vocabulary.ids(words), np.cumsum(lengths)[:-1]) if texts else []
    documents: list[WmdDocument] = []
    for position, word_ids in enumerate(ids):
        if position and lengths[position] and _same(texts[position], texts[position - 1]):
            documents.append(documents[-1])
        else:
            documents.append(WmdDocument.from_word_ids(word_ids[word_ids >= 0]))
    return documents


def _same(a: Any, b: Any) -> bool:
    return len(a) == len(b) and bool(np.array_equal(np.asarray(a), np.asarray(b)))


@dataclass(frozen=True)
class DrmmScorer:
    """A trained DRMM as the bytes of `training.save_model`: broadcast for Spark's
    executors, or the bytes themselves where one process scores requests."""

    name: str
    model_bytes: Broadcast | bytes
    digest: str  # of the bytes: the worker's cache key
    reads: frozenset[str]  # the model's input columns, known where the model was

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        from jobrec_scoring.model import score_frame

        return score_frame(self._model(), frame).astype(np.float64)

    def _model(self) -> Drmm:
        """The network, deserialised once per Python worker."""
        if self.digest not in _MODELS:
            torch.set_num_threads(1)  # one task per core: no oversubscription
            payload = self.model_bytes
            _MODELS[self.digest] = load_model(
                io.BytesIO(payload.value if isinstance(payload, Broadcast) else payload)
            )
        return _MODELS[self.digest]


_MODELS: dict[str, Drmm] = {}


@dataclass(frozen=True)
class Bm25Mix:
    """A scorer's score mixed with BM25's, each z-normalised within its query, with the
    weight `alpha` on the scorer (`ranking.interpolation`). It needs every row of a query at
    once: `ScoreColumns` scores `inner` row by row and mixes per query afterwards."""

    inner: Scorer
    alpha: float

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def reads(self) -> frozenset[str]:
        return self.inner.reads | {"candidate_id", BM25_COLUMN}

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        """`frame` holds whole queries (`candidate_id`) with their `bm25`."""
        return interpolate(
            frame["candidate_id"].to_numpy(),
            self.inner.score(frame),
            frame[BM25_COLUMN].to_numpy(),
            self.alpha,
        )


def drmm_scorer(spark: SparkSession | None, name: str, model: Drmm) -> Scorer:
    """A trained DRMM as a re-ranker, broadcast to the executors (kept in this process
    without `spark`: the online endpoint); mixed with BM25 when its spec says so
    (`DrmmSpec.bm25_alpha`), so evaluation and serving rank it alike."""
    payload = save_model_bytes(model)
    digest = hashlib.sha256(payload).hexdigest()
    shipped = payload if spark is None else spark.sparkContext.broadcast(payload)
    scorer = DrmmScorer(name, shipped, digest, frozenset(input_columns(model)))
    alpha = model.spec.bm25_alpha
    return Bm25Mix(scorer, alpha) if alpha < 1.0 else scorer
