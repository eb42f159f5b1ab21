"""The title normaliser (seed 001, issue 22): a character-level bidirectional LSTM that embeds
free-text job titles so that titles of one occupation lie close together, and the lookup that
names a title's occupation by its nearest taxonomy title.

Like the DRMM, it imports only numpy, pandas and torch, so the registered model
(:mod:`jobrec_scoring.served_titles`) loads without the project and Spark workers load it
once each. Training (pairs, augmentations, the loss) lives in `jobrec_core.titles`.
"""

from __future__ import annotations

import io
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

NORMALISER_ARTIFACT = "title_normaliser"
# Characters the encoder reads. Other characters become spaces: punctuation that separates a
# title from what surrounds it ("Data Engineer - Remote", "(m/f/d)") is kept.
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 +#&()|,:/.-"
_OUTSIDE = re.compile(r"[^a-z0-9+#&()|,:/.\-]+")
_SPACES = re.compile(r"\s+")


def canonical(title: str | None, max_chars: int) -> str:
    """What the encoder reads of a title: lowercase, characters outside :data:`ALPHABET` as
    spaces, runs of spaces as one, at most `max_chars` characters."""
    text = _SPACES.sub(" ", _OUTSIDE.sub(" ", (title or "").lower())).strip()
    return text[:max_chars].rstrip()


@dataclass(frozen=True)
class EncoderSpec:
    """The network's shape (seed 001: 4 layers of 64 units, a 128-wide projection)."""

    layers: int
    hidden: int
    char_dim: int
    output_dim: int
    dropout: float
    max_chars: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def char_ids(texts: list[str], max_chars: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Canonical titles -> padded character ids (0: padding; unknown characters cannot occur
    after :func:`canonical`) and lengths (at least 1: an empty title reads as one space)."""
    table = np.zeros(128, dtype=np.int64)
    for position, char in enumerate(ALPHABET, start=1):
        table[ord(char)] = position
    encoded = [
        np.frombuffer((t[:max_chars] or " ").encode("ascii", "replace"), np.uint8) for t in texts
    ]
    lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=len(encoded))
    ids = np.zeros((len(texts), int(lengths.max(initial=1))), dtype=np.int64)
    for row, chars in enumerate(encoded):
        ids[row, : len(chars)] = table[np.minimum(chars, 127)]
    return torch.from_numpy(ids), torch.from_numpy(lengths)


class TitleEncoder(nn.Module):
    """Characters -> a unit vector: a stack of bidirectional LSTMs, the last layer's outputs
    averaged over the title's characters, one dense projection (seed 001, §3.1)."""

    def __init__(self, spec: EncoderSpec) -> None:
        super().__init__()
        self.spec = spec
        self.chars = nn.Embedding(len(ALPHABET) + 1, spec.char_dim, padding_idx=0)
        self.lstm = nn.LSTM(
            spec.char_dim,
            spec.hidden,
            num_layers=spec.layers,
            bidirectional=True,
            batch_first=True,
            dropout=spec.dropout if spec.layers > 1 else 0.0,
        )
        self.project = nn.Linear(2 * spec.hidden, spec.output_dim)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(
            self.chars(ids), lengths, batch_first=True, enforce_sorted=False
        )
        outputs, _ = self.lstm(packed)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True)
        mask = torch.arange(outputs.shape[1])[None, :] < lengths[:, None]
        mean = (outputs * mask[..., None]).sum(1) / lengths[:, None].to(outputs.dtype)
        return nn.functional.normalize(self.project(mean), dim=-1)

    @torch.inference_mode()
    def embed(self, texts: list[str], batch_size: int = 1024) -> np.ndarray:
        """Unit vectors of canonical titles, in order; the longest titles are batched together
        so that little padding is computed."""
        if self.training:
            self.eval()
        vectors = np.zeros((len(texts), self.spec.output_dim), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            ids, lengths = char_ids([texts[i] for i in rows], self.spec.max_chars)
            vectors[rows] = self(ids, lengths).numpy()
        return vectors


@dataclass
class TitleNormaliser:
    """A trained encoder and its taxonomy: every taxonomy title's vector and occupation."""

    encoder: TitleEncoder
    titles: list[str]
    """The taxonomy's titles, canonical."""
    occupations: np.ndarray
    """Occupation code (string) of each taxonomy title."""
    vectors: np.ndarray
    """Unit vector of each taxonomy title."""

    @classmethod
    def of(
        cls, encoder: TitleEncoder, titles: list[str], occupations: list[str]
    ) -> TitleNormaliser:
        canonical_titles = [canonical(t, encoder.spec.max_chars) for t in titles]
        return cls(
            encoder.eval(),
            canonical_titles,
            np.asarray(occupations, dtype=object),
            encoder.embed(canonical_titles),
        )

    def nearest(self, titles: list[str | None], chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
        """For each free-text title, the index of its nearest taxonomy title (cosine) and that
        cosine."""
        texts = [canonical(t, self.encoder.spec.max_chars) for t in titles]
        queries = self.encoder.embed(texts)
        best = np.zeros(len(texts), dtype=np.int64)
        similarity = np.zeros(len(texts), dtype=np.float32)
        for start in range(0, len(texts), chunk):
            scores = queries[start : start + chunk] @ self.vectors.T
            best[start : start + chunk] = scores.argmax(axis=1)
            similarity[start : start + chunk] = scores.max(axis=1)
        return best, similarity

    def normalise(self, titles: list[str | None]) -> pd.DataFrame:
        """`occupation` (the nearest taxonomy title's), `matched_title` (that title) and
        `confidence` (their cosine) per title, in order; an empty title gets nulls."""
        best, similarity = self.nearest(titles)
        empty = np.array([not canonical(t, self.encoder.spec.max_chars) for t in titles], bool)
        frame = pd.DataFrame(
            {
                "occupation": self.occupations[best],
                "matched_title": np.asarray(self.titles, dtype=object)[best],
                "confidence": similarity.astype(np.float32),
            }
        )
        frame.loc[empty, ["occupation", "matched_title"]] = None
        frame.loc[empty, "confidence"] = np.nan
        return frame

    def save(self, target: str | Path | io.BytesIO) -> None:
        torch.save(
            {
                "spec": self.encoder.spec.to_dict(),
                "model": self.encoder.state_dict(),
                "titles": self.titles,
                "occupations": self.occupations.tolist(),
                "vectors": self.vectors,
            },
            target,
        )

    @classmethod
    def load(cls, source: str | Path | io.BytesIO) -> TitleNormaliser:
        saved = torch.load(source, map_location="cpu", weights_only=False)
        encoder = TitleEncoder(EncoderSpec(**saved["spec"]))
        encoder.load_state_dict(saved["model"])
        return cls(
            encoder.eval(),
            list(saved["titles"]),
            np.asarray(saved["occupations"], dtype=object),
            np.asarray(saved["vectors"], dtype=np.float32),
        )
