"""A trained DRMM as a file or bytes: its spec, weights and query vectors, written atomically."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import torch

from jobrec_core.features.query_vectors import QueryVectors
from jobrec_core.models.drmm import Drmm, DrmmSpec

FINAL_MODEL = "model.pt"


def atomic_save(payload: dict[str, Any], target: Path) -> None:
    scratch = target.with_name(target.name + ".tmp")
    torch.save(payload, scratch)
    os.replace(scratch, target)


def _model_payload(model: Drmm) -> dict[str, Any]:
    payload: dict[str, Any] = {"spec": model.spec.to_dict(), "model": model.state_dict()}
    if model.query_vectors is not None:
        payload["query_vectors"] = model.query_vectors.to_state()
    return payload


def save_model(model: Drmm, target: Path) -> None:
    """The trained network: its spec and weights (what the registry's model wraps)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_save(_model_payload(model), target)


def save_model_bytes(model: Drmm) -> bytes:
    """What :func:`save_model` writes, in memory: for a broadcast to Spark's executors."""
    buffer = io.BytesIO()
    torch.save(_model_payload(model), buffer)
    return buffer.getvalue()


def load_model(source: str | Path | io.BytesIO, device: torch.device | str = "cpu") -> Drmm:
    saved = torch.load(source, map_location=device, weights_only=False)
    model = Drmm(DrmmSpec.from_dict(saved["spec"]))
    model.load_state_dict(saved["model"])
    if "query_vectors" in saved:
        model.query_vectors = QueryVectors.from_state(saved["query_vectors"])
    return model.to(device).eval()
