"""A model's numbers on the stored splits, streamed from Petastorm: the paper's accuracy on
triples and MAP@k on MAP sets, and the rank of each held-out interest
(`pairs.splits.held_out_documents`), whose log-rank score training selects epochs on and the
promotion gate compares models on (`ranking.metrics.log_rank_score`); its MRR is reported
beside it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from jobrec_core.ranking.interpolation import best_alpha, interpolate
from jobrec_core.ranking.metrics import (
    first_relevant_rank,
    log_rank_scores_of,
    mean_average_precision,
    pairwise_accuracy,
    rank_within_queries,
    reciprocal_of_ranks,
)
from jobrec_core.training.batches import DocumentStream, ReaderSettings, TripleStream, loader
from jobrec_scoring.network import Drmm


@torch.no_grad()
def score_triples(
    model: Drmm, settings: ReaderSettings, device: torch.device
) -> tuple[np.ndarray, np.ndarray]:
    """Scores of the positive and the negative document of every triple in `settings.files`."""
    model.eval()
    positives, negatives = [], []
    for batch in loader(TripleStream(settings, model.spec, model.query_vectors)):
        positives.append(model.score(batch.positive.to(device)).cpu().numpy())
        negatives.append(model.score(batch.negative.to(device)).cpu().numpy())
    return _joined(positives), _joined(negatives)


@dataclass(frozen=True)
class PoolScores:
    """Every stored pool row of some files, flat: what ranking metrics read."""

    query: np.ndarray
    document: np.ndarray
    label: np.ndarray
    score: np.ndarray  # the network's own score
    bm25: np.ndarray

    def ranking_score(self, alpha: float) -> np.ndarray:
        """What orders a pool: the network's score, or its mix with BM25 (`alpha` < 1,
        `ranking.interpolation`), as every ranking of the model does."""
        return self.score if alpha >= 1.0 else interpolate(self.query, self.score, self.bm25, alpha)


@torch.no_grad()
def score_documents(model: Drmm, settings: ReaderSettings, device: torch.device) -> PoolScores:
    """Every stored pool row in `settings.files`, with the model's score."""
    model.eval()
    queries, documents, labels, scores, bm25 = [], [], [], [], []
    for batch in loader(DocumentStream(settings, model.spec, model.query_vectors)):
        scores.append(model.score(batch.inputs.to(device)).cpu().numpy())
        queries.append(batch.candidate_id)
        documents.append(batch.job_id)
        labels.append(batch.label)
        bm25.append(batch.bm25)
    return PoolScores(*(_joined(parts) for parts in (queries, documents, labels, scores, bm25)))


def map_of(model: Drmm, settings: ReaderSettings, device: torch.device, k: int) -> float:
    """MAP@k of the model's re-ranking of the MAP sets in `settings.files`."""
    pools = score_documents(model, settings, device)
    score = pools.ranking_score(model.spec.bm25_alpha)
    return mean_average_precision(pools.query, score, pools.label, pools.document, k)


def held_out_ranks(model: Drmm, settings: ReaderSettings, device: torch.device) -> np.ndarray:
    """Per held-out candidate, in candidate-id order (so two models' arrays pair up): the
    rank (from 1) the model gives the held-out job in its pool. A stored held-out pool always
    holds its held-out job (`pairs.splits.held_out_documents` keeps only those), so every rank
    is within the pool."""
    pools = score_documents(model, settings, device)
    if len(pools.query) == 0:
        return np.zeros(0)
    score = pools.ranking_score(model.spec.bm25_alpha)
    ranked = rank_within_queries(pools.query, score, pools.label, pools.document)
    return first_relevant_rank(ranked, len(pools.query))


def tune_bm25_alpha(
    model: Drmm, held_out_files: list[str], batch_size: int, resamples: int, seed: int
) -> tuple[float, dict[float, float]]:
    """The mix with BM25 that ranks the held-out jobs of `held_out_files` (the dev
    candidates') best, if significantly better than the model alone, and the mean log-rank
    score of every weight tried (`ranking.interpolation.best_alpha`)."""
    pools = score_documents(
        model, ReaderSettings(tuple(held_out_files), batch_size), torch.device("cpu")
    )
    return best_alpha(
        pools.query, pools.score, pools.bm25, pools.label, pools.document, resamples, seed
    )


@dataclass(frozen=True)
class SplitScores:
    """A model on one split's files: the paper's protocol and the held-out interest."""

    accuracy: float
    map: float
    # the held-out job's rank (from 1) per held-out candidate, in candidate-id order
    held_out_ranks: np.ndarray = field(repr=False)

    @property
    def log_rank_scores(self) -> np.ndarray:
        """-ln rank per candidate: what models are selected and compared on."""
        return log_rank_scores_of(self.held_out_ranks)

    @property
    def held_out_log_rank(self) -> float:
        return _mean(self.log_rank_scores)

    @property
    def held_out_mrr(self) -> float:
        return _mean(reciprocal_of_ranks(self.held_out_ranks))


def evaluate(
    model: Drmm,
    triple_files: list[str],
    map_files: list[str],
    held_out_files: list[str],
    batch_size: int,
    k: int,
    device: torch.device | None = None,
    keep: bool = False,
) -> SplitScores:
    """Accuracy on triples, MAP@k on MAP sets (the paper's protocol) and the held-out
    jobs' ranks (the judge), on one split's files; with `keep`, the files stay decoded
    in memory for the next call (the dev sets, scored every epoch)."""
    device = device or torch.device("cpu")

    def settings(files: list[str]) -> ReaderSettings:
        return ReaderSettings(tuple(files), batch_size, keep_in_memory=keep)

    positive, negative = score_triples(model, settings(triple_files), device)
    return SplitScores(
        accuracy=pairwise_accuracy(positive, negative),
        map=map_of(model, settings(map_files), device, k),
        held_out_ranks=held_out_ranks(model, settings(held_out_files), device),
    )


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0)
