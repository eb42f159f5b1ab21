"""A saved DRMM (spec, weights, query vectors) and how it scores stored-shape rows; the MLflow
pyfunc around it is :mod:`jobrec_scoring.served`, so a training worker needs no MLflow.

The registered model's input is what `build_pairs` stores per (query, document), one row
each: `query_idf` and `hist` (the flattened count histograms) as lists, `lead_hist` too with
`field_histograms`, `doc_len`, the extra features the version uses, and `query_terms` for
embedding gating; its output is one score per row. So the recommender and any serving
endpoint feed it rows of the MAP-set shape, with no torch code of their own.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from jobrec_scoring.inputs import doc_columns, document_inputs, query_columns, query_gate
from jobrec_scoring.network import Drmm, DrmmSpec
from jobrec_scoring.vectors import QueryVectors

MODEL_ARTIFACT = "drmm"


def model_payload(model: Drmm) -> dict[str, Any]:
    """What a saved model holds: its spec (JSON-able), weights and query vectors."""
    payload: dict[str, Any] = {"spec": model.spec.to_dict(), "model": model.state_dict()}
    if model.query_vectors is not None:
        payload["query_vectors"] = model.query_vectors.to_state()
    return payload


def load_model(source: str | Path | io.BytesIO, device: torch.device | str = "cpu") -> Drmm:
    """The network :func:`model_payload` saved, in eval mode on `device`."""
    saved = torch.load(source, map_location=device, weights_only=False)
    model = Drmm(DrmmSpec.from_dict(saved["spec"]))
    model.load_state_dict(saved["model"])
    if "query_vectors" in saved:
        model.query_vectors = QueryVectors.from_state(saved["query_vectors"])
    return model.to(device).eval()


def input_columns(model: Drmm) -> list[str]:
    return [*query_columns(model.spec), *doc_columns(model.spec)]


@torch.inference_mode()
def score_frame(model: Drmm, frame: pd.DataFrame) -> np.ndarray:
    """Scores of stored-shape rows (see the module), in their order. The list columns are
    decoded as they are (`inputs.pad_queries`), not copied into bytes first.

    Rows are scored query by query (rows with the same `query_idf`), so nothing is padded: a
    batch of many queries would otherwise pad every row to its longest query (a batch's
    histograms grew 3-4 times), and a row's score would depend, in its last bits, on the
    other queries it was batched with. Here it depends on its own query's rows alone, as
    when one request is scored."""
    # `to_numpy`, not `np.asarray`: numpy's probes for array interfaces go through pandas'
    # slow attribute lookup, two per column
    columns = {c: frame[c].to_numpy() for c in input_columns(model)}
    if model.training:
        model.eval()
    keys = _query_keys(columns["query_idf"])
    if len(keys) and (keys == keys[0]).all():  # one query, as in a request: no grouping
        groups = [np.arange(len(keys))]
    else:
        queries = pd.Series(keys)
        groups = list(queries.groupby(queries, sort=False).indices.values())
    scores = np.zeros(len(frame), dtype=np.float32)
    for rows in groups:
        group = {name: values[rows] for name, values in columns.items()}
        gate, mask = query_gate(group, model.spec, model.query_vectors)
        scores[rows] = model.score(document_inputs(group, "", model.spec, gate, mask)).numpy()
    return scores


def _query_keys(idf: np.ndarray) -> np.ndarray:
    """Each row's query as bytes (its IDFs): rows of one query share the key. A request's
    rows hold one array, the same object in every row: one key for all."""
    first = idf[0] if len(idf) else None
    if first is not None and all(v is first for v in idf):
        return np.full(len(idf), _key(first), dtype=object)
    return np.array([_key(v) for v in idf], dtype=object)


def _key(idf: Any) -> bytes:
    return idf if isinstance(idf, bytes) else np.asarray(idf, dtype=np.float32).tobytes()
