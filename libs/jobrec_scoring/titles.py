"""The title normaliser (seed 001, issue 22): a character-level bidirectional LSTM that embeds
free-text job titles so that titles of one occupation lie close together, and the lookup that
names a title's occupation from its nearest known titles.

Like the DRMM, it imports only numpy, pandas and torch (and scipy, for the trigrams), so the
registered model (:mod:`jobrec_scoring.served_titles`) loads without the project and Spark
workers load it once each. Training (pairs, augmentations, the loss) and the choice of the
lookup live in `jobrec_core.titles`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from jobrec_scoring.spelling import edit_distances
from jobrec_scoring.trigrams import TrigramMatcher

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


# Known titles per input, nearest by the network's cosine, that the lookup scores again:
# a title further down would need a trigram cosine far above the nearest ones' to win.
SHORTLIST = 32


@dataclass(frozen=True)
class Lookup:
    """How a title's occupation is read from the known titles, chosen on validation titles
    (`jobrec_core.titles.lookup`). The :data:`SHORTLIST` known titles nearest by the
    network's cosine each score `(1 - trigram_weight) * cosine + trigram_weight * trigram
    cosine`; the `neighbours` best vote for their occupations with weight
    `exp((score - best score) / temperature)`. Temperature 0 is seed 001's lookup: the
    nearest title's occupation, by the cosine alone when the trigram weight is 0 too.

    With `spelling` above 0, a title whose edit distance to a shortlisted title is at most
    `spelling` edits per character (at least one edit) is read as a misspelling: only the
    shortlisted titles at its least distance take part. The network and the trigrams see a
    typo as a near-tie between its source and a look-alike a letter away ("agger": "bagger"
    or "ager"?); the count of edits does not blur like a cosine does."""

    trigram_weight: float = 0.0
    neighbours: int = 1
    temperature: float = 0.0
    spelling: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def vote(scores: np.ndarray, owners: np.ndarray, lookup: Lookup) -> np.ndarray:
    """Rows of scores of some known titles, and each title's occupation (same shape) -> the
    column chosen in each row: the best title of the occupation whose `lookup.neighbours`
    best titles weigh most (see :class:`Lookup`); ties go to the occupation of the better
    title."""
    rows = np.arange(len(scores))
    count = min(lookup.neighbours, scores.shape[1])
    if lookup.temperature <= 0 or count <= 1:
        return scores.argmax(axis=1)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :count]
    best_first = scores[rows[:, None], top]
    weights = np.exp((best_first - best_first[:, :1]) / lookup.temperature)
    voters = owners[rows[:, None], top]
    # each neighbour's occupation's total weight; the first maximum is that occupation's best
    totals = ((voters[:, :, None] == voters[:, None, :]) * weights[:, None, :]).sum(axis=2)
    return top[rows, totals.argmax(axis=1)]


def edit_budget(texts: list[str], spelling: float) -> np.ndarray:
    """Edits each text may be from a known title to be read as its misspelling: `spelling`
    per character, at least one."""
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    return np.maximum(1, np.floor(spelling * lengths)).astype(np.int64)


def misspelt(scores: np.ndarray, distances: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """`scores` (a row per text, a column per shortlisted title) where a text is within its
    `budget` of edits of some title: the titles at its least edit distance keep their score,
    the others get -inf; other rows unchanged (see :class:`Lookup`)."""
    least = distances.min(axis=1)
    misspelling = least <= budget
    keep = ~misspelling[:, None] | (distances == least[:, None])
    return np.where(keep, scores, -np.inf)


@dataclass
class TitleNormaliser:
    """A trained encoder and the titles it knows: the taxonomy's, then (optionally) the other
    labelled titles of its training, each with its vector and occupation, and the lookup."""

    encoder: TitleEncoder
    titles: list[str]
    """The known titles, canonical: the taxonomy's first."""
    occupations: np.ndarray
    """Occupation code (string) of each known title."""
    vectors: np.ndarray
    """Unit vector of each known title."""
    taxonomy_size: int
    """How many of `titles` are taxonomy titles (seed 001 looks up only those)."""
    lookup: Lookup = field(default_factory=Lookup)

    def __post_init__(self) -> None:
        _, inverse = np.unique(self.occupations.astype(str), return_inverse=True)
        self._occupation_ids = inverse.reshape(-1)
        self._lengths = np.fromiter(map(len, self.titles), np.int64, len(self.titles))
        self._trigrams: TrigramMatcher | None = None

    @classmethod
    def of(
        cls,
        encoder: TitleEncoder,
        titles: list[str],
        occupations: list[str],
        known: Sequence[tuple[str, str]] = (),
        lookup: Lookup | None = None,
    ) -> TitleNormaliser:
        """The normaliser of taxonomy `titles` (with their `occupations`) and the `known`
        (title, occupation) pairs beyond them."""
        max_chars = encoder.spec.max_chars
        every = [canonical(t, max_chars) for t in titles] + [
            canonical(t, max_chars) for t, _ in known
        ]
        return cls(
            encoder.eval(),
            every,
            np.asarray([*occupations, *(code for _, code in known)], dtype=object),
            encoder.embed(every),
            len(titles),
            lookup or Lookup(),
        )

    def with_lookup(self, lookup: Lookup) -> TitleNormaliser:
        return replace(self, lookup=lookup)

    def taxonomy_only(self) -> TitleNormaliser:
        """Seed 001's protocol: the nearest taxonomy title by the cosine."""
        size = self.taxonomy_size
        return TitleNormaliser(
            self.encoder,
            self.titles[:size],
            self.occupations[:size],
            self.vectors[:size],
            size,
            Lookup(),
        )

    def choose(
        self, texts: list[str], lookups: list[Lookup], chunk: int = 1024
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each lookup, the chosen known title of each canonical text and its score
        (see :class:`Lookup`). Each chunk of texts is embedded, shortlisted and its trigram
        cosines and edit distances computed once for all the lookups."""
        chosen = [
            (np.zeros(len(texts), dtype=np.int64), np.zeros(len(texts), dtype=np.float32))
            for _ in lookups
        ]
        mixed = any(lookup.trigram_weight > 0 for lookup in lookups)
        spelling = max(lookup.spelling for lookup in lookups)
        if mixed and self._trigrams is None:
            self._trigrams = TrigramMatcher(self.titles)
        known = torch.from_numpy(self.vectors)
        for start in range(0, len(texts), chunk):
            block = texts[start : start + chunk]
            rows = np.arange(len(block))
            queries = torch.from_numpy(self.encoder.embed(block))
            top = (queries @ known.T).topk(min(SHORTLIST, len(self.titles)), dim=1)
            cosine, shortlist = top.values.numpy(), top.indices.numpy()
            owners = self._occupation_ids[shortlist]
            trigram = (
                self._trigrams.pair_cosine(block, shortlist)
                if mixed and self._trigrams is not None
                else cosine
            )
            distances = self._edit_distances(block, shortlist, spelling) if spelling > 0 else None
            for (best, score), lookup in zip(chosen, lookups, strict=True):
                w = lookup.trigram_weight
                scores = cosine if w == 0 else (1.0 - w) * cosine + w * trigram
                if lookup.spelling > 0 and distances is not None:
                    scores = misspelt(scores, distances, edit_budget(block, lookup.spelling))
                found = vote(scores, owners, lookup)
                best[start : start + len(block)] = shortlist[rows, found]
                score[start : start + len(block)] = scores[rows, found]
        return chosen

    def _edit_distances(
        self, texts: list[str], shortlist: np.ndarray, spelling: float
    ) -> np.ndarray:
        """The edit distance of each text and each of its shortlisted titles where it may be
        within `spelling`'s budget (their lengths differ by no more); elsewhere a distance
        above any budget, without computing it."""
        budget = edit_budget(texts, spelling)
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        near = np.abs(self._lengths[shortlist] - lengths[:, None]) <= budget[:, None]
        rows, columns = np.nonzero(near)
        distances = np.full(shortlist.shape, np.iinfo(np.int64).max, dtype=np.int64)
        distances[rows, columns] = edit_distances(
            [texts[r] for r in rows], [self.titles[t] for t in shortlist[rows, columns]]
        )
        return distances

    def nearest(self, titles: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
        """For each free-text title, the index of the known title its lookup chooses, and
        that title's score (the cosine, with seed 001's lookup)."""
        texts = [canonical(t, self.encoder.spec.max_chars) for t in titles]
        return self.choose(texts, [self.lookup])[0]

    def normalise(self, titles: list[str | None]) -> pd.DataFrame:
        """`occupation` (the chosen known title's), `matched_title` (that title) and
        `confidence` (its score) per title, in order; an empty title gets nulls."""
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
                "taxonomy_size": self.taxonomy_size,
                "lookup": self.lookup.to_dict(),
            },
            target,
        )

    @classmethod
    def load(cls, source: str | Path | io.BytesIO) -> TitleNormaliser:
        saved = torch.load(source, map_location="cpu", weights_only=False)
        encoder = TitleEncoder(EncoderSpec(**saved["spec"]))
        encoder.load_state_dict(saved["model"])
        titles = list(saved["titles"])
        return cls(
            encoder.eval(),
            titles,
            np.asarray(saved["occupations"], dtype=object),
            np.asarray(saved["vectors"], dtype=np.float32),
            int(saved["taxonomy_size"]),
            Lookup(**saved["lookup"]),
        )
