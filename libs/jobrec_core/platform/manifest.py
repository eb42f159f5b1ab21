"""The dataset's manifest: which version of each artifact the pipeline currently uses.

A small JSON document at `storage.root/<dataset>/manifest.json`. Stages that build an
artifact (embeddings, the search index, training data) record its version here; stages that
use one read it from here and log it to MLflow, so every model names the exact inputs it was
trained on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobrec_core.config import JobrecConfig
from jobrec_core.platform.paths import local_path


def manifest_path(config: JobrecConfig) -> Path:
    return Path(local_path(config.path(f"{config.data.preset}/manifest.json")))


def read_manifest(config: JobrecConfig) -> dict[str, Any]:
    path = manifest_path(config)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def record(config: JobrecConfig, artifact: str, entry: dict[str, Any]) -> None:
    """Set the manifest entry of `artifact` (written whole, then renamed into place)."""
    manifest = read_manifest(config)
    manifest[artifact] = entry
    path = manifest_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    scratch.replace(path)


def current(config: JobrecConfig, artifact: str) -> dict[str, Any]:
    entry = read_manifest(config).get(artifact)
    if entry is None:
        raise LookupError(
            f"no {artifact} recorded in {manifest_path(config)}: run the stage that builds it "
            f"first (e.g. jobs/train_embeddings.py for embeddings)"
        )
    return dict(entry)
