"""A trained DRMM as a file or bytes, in the format :mod:`jobrec_scoring.model` loads,
written atomically."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import torch

from jobrec_scoring.model import model_payload
from jobrec_scoring.network import Drmm

FINAL_MODEL = "model.pt"


def atomic_save(payload: dict[str, Any], target: Path) -> None:
    scratch = target.with_name(target.name + ".tmp")
    torch.save(payload, scratch)
    os.replace(scratch, target)


def save_model(model: Drmm, target: Path) -> None:
    """The trained network: its spec and weights (what the registry's model wraps)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_save(model_payload(model), target)


def save_model_bytes(model: Drmm) -> bytes:
    """What :func:`save_model` writes, in memory: for a broadcast to Spark's executors."""
    buffer = io.BytesIO()
    torch.save(model_payload(model), buffer)
    return buffer.getvalue()
