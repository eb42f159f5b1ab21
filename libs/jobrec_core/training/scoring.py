"""A model's accuracy on triples and MAP@k on MAP sets, streamed from Petastorm: the two numbers
training selects on and promotion compares."""

from __future__ import annotations

import numpy as np
import torch

from jobrec_core.models.drmm import Drmm
from jobrec_core.ranking.metrics import mean_average_precision, pairwise_accuracy
from jobrec_core.training.batches import DocumentStream, ReaderSettings, TripleStream, loader


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


@torch.no_grad()
def map_of(model: Drmm, settings: ReaderSettings, device: torch.device, k: int) -> float:
    """MAP@k of the model's re-ranking of the MAP sets in `settings.files`."""
    model.eval()
    queries, documents, labels, scores = [], [], [], []
    for batch in loader(DocumentStream(settings, model.spec, model.query_vectors)):
        scores.append(model.score(batch.inputs.to(device)).cpu().numpy())
        queries.append(batch.candidate_id)
        documents.append(batch.job_id)
        labels.append(batch.label)
    return mean_average_precision(
        _joined(queries), _joined(scores), _joined(labels), _joined(documents), k
    )


def evaluate(
    model: Drmm,
    triple_files: list[str],
    map_files: list[str],
    batch_size: int,
    k: int,
    device: torch.device | None = None,
) -> dict[str, float]:
    """Accuracy on triples and MAP@k on MAP sets, the two numbers training and promotion
    compare."""
    device = device or torch.device("cpu")
    positive, negative = score_triples(
        model, ReaderSettings(tuple(triple_files), batch_size), device
    )
    return {
        "accuracy": pairwise_accuracy(positive, negative),
        "map": map_of(model, ReaderSettings(tuple(map_files), batch_size), device, k),
        "triples": float(len(positive)),
    }


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0)
