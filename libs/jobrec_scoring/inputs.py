"""What a DRMM reads, decoded from stored rows: ragged query columns as bytes, padded into
tensors with one vectorised pass per batch (no Python loop per query term or per bin).

Shared by training (Petastorm batches) and scoring (the registered pyfunc, the re-ranker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import torch

from jobrec_scoring.network import DrmmInputs, DrmmSpec
from jobrec_scoring.vectors import TERM_SEPARATOR, QueryVectors

Columns = dict[str, np.ndarray]
Variant = Literal["ch", "nh", "lch"]


@dataclass
class TripleBatch:
    positive: DrmmInputs
    negative: DrmmInputs

    def __len__(self) -> int:
        return int(self.positive.hist.shape[0])


@dataclass
class DocumentBatch:
    """MAP-set rows: one (query, document) pair each, with what ranking metrics need."""

    inputs: DrmmInputs
    candidate_id: np.ndarray
    job_id: np.ndarray
    label: np.ndarray
    bm25_rank: np.ndarray
    bm25: np.ndarray

    def __len__(self) -> int:
        return len(self.candidate_id)


def query_columns(spec: DrmmSpec) -> list[str]:
    """The IDFs always (their count is the query's length); the words for embedding gating;
    each word's share of the candidate's jobs when the gate reads it."""
    words = [QUERY_TERMS] if spec.gating == "embedding" else []
    return ["query_idf", *words, *([JOB_SHARE] if spec.gate_share else [])]


def triple_columns(spec: DrmmSpec) -> list[str]:
    sides = [f"{side}_{c}" for side in ("pos", "neg") for c in doc_columns(spec)]
    return [*query_columns(spec), *sides]


def document_columns(spec: DrmmSpec) -> list[str]:
    return [
        "candidate_id",
        "job_id",
        "label",
        "bm25_rank",
        *query_columns(spec),
        *dict.fromkeys(["bm25", *doc_columns(spec)]),  # BM25 for the mix, once
    ]


def doc_columns(spec: DrmmSpec) -> list[str]:
    """A document's columns the model reads (the pyfunc's input, with `query_columns`)."""
    return ["hist", *([LEAD_HIST] if spec.field_histograms else []), "doc_len", *spec.extras]


LEAD_HIST = "lead_hist"


JOB_SHARE = "query_job_share"

RAGGED_TYPES: dict[str, type] = {
    "query_idf": np.float32,
    JOB_SHARE: np.float32,
    "hist": np.int16,
    "pos_hist": np.int16,
    "neg_hist": np.int16,
    LEAD_HIST: np.int16,
    f"pos_{LEAD_HIST}": np.int16,
    f"neg_{LEAD_HIST}": np.int16,
}


QUERY_TERMS = "query_terms"


def to_bytes(frame: pd.DataFrame) -> pd.DataFrame:
    """Reader transform: ragged list columns -> the bytes of their values (the query's words
    joined by `TERM_SEPARATOR`)."""
    for column in frame.columns:
        dtype = RAGGED_TYPES.get(column)
        if dtype is not None:
            frame[column] = [np.asarray(v, dtype=dtype).tobytes() for v in frame[column]]
        elif column == QUERY_TERMS:
            separator = TERM_SEPARATOR.decode("ascii")
            frame[column] = [separator.join(terms).encode("utf-8") for terms in frame[column]]
    return frame


def pad_queries(blobs: np.ndarray, dtype: type, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-row bytes of `terms * width` values -> (B, T, width) zero-padded and (B, T) mask."""
    itemsize = np.dtype(dtype).itemsize
    terms = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
    terms //= itemsize * width
    flat: np.ndarray = np.frombuffer(b"".join(blobs), dtype=dtype).reshape(-1, width)
    longest = int(terms.max()) if len(terms) else 0
    padded: np.ndarray = np.zeros((len(blobs), longest, width), dtype=dtype)
    mask = np.arange(longest)[None, :] < terms[:, None]
    padded[mask] = flat
    return padded, mask


def document_inputs(
    columns: Columns, prefix: str, spec: DrmmSpec, gate: np.ndarray, mask: np.ndarray
) -> DrmmInputs:
    """One document side of a decoded batch -> model inputs (`prefix` "pos_", "neg_" or "")."""
    # Histograms are stored for every query term (zeros where the document matches nothing),
    # so they pad to the same T as the query.
    counts, _ = pad_queries(columns[f"{prefix}hist"], np.int16, spec.bins + 1)
    lengths = columns[f"{prefix}doc_len"]
    variant: Variant = spec.histogram  # type: ignore[assignment]
    if spec.field_histograms:  # the lead fields' matches, then the others'
        lead, _ = pad_queries(columns[f"{prefix}{LEAD_HIST}"], np.int16, spec.bins + 1)
        hist = np.concatenate(
            [transform(lead, lengths, variant), transform(counts - lead, lengths, variant)],
            axis=2,
        )
    else:
        hist = transform(counts, lengths, variant)
    extras = np.zeros((len(mask), len(spec.extras)), dtype=np.float32)
    for position, name in enumerate(spec.extras):
        extras[:, position] = columns[f"{prefix}{name}"]
    return DrmmInputs(
        hist=torch.from_numpy(np.ascontiguousarray(hist, dtype=np.float32)),
        mask=torch.from_numpy(mask),
        gate=torch.from_numpy(gate),
        extras=torch.from_numpy(extras),
    )


def query_gate(
    columns: Columns, spec: DrmmSpec, vectors: QueryVectors | None
) -> tuple[np.ndarray, np.ndarray]:
    """(B, T, 1) IDFs, or (B, T, dim) word vectors with `vectors`, then each term's share of
    the candidate's jobs as one more channel with `spec.gate_share`; and the (B, T) mask."""
    idf, mask = pad_queries(columns["query_idf"], np.float32, 1)
    gate = idf
    if vectors is not None:
        blobs = columns[QUERY_TERMS]
        found = blobs[mask.any(axis=1)]
        words = TERM_SEPARATOR.join(found).split(TERM_SEPARATOR) if mask.any() else []
        gate = np.zeros((*mask.shape, vectors.dim), dtype=np.float32)
        gate[mask] = vectors.lookup(words)
    if spec.gate_share:
        share, _ = pad_queries(columns[JOB_SHARE], np.float32, 1)
        gate = np.concatenate([gate, share], axis=2)
    return gate, mask


def decode_triples(columns: Columns, spec: DrmmSpec, vectors: QueryVectors | None) -> TripleBatch:
    gate, mask = query_gate(columns, spec, vectors)
    return TripleBatch(
        document_inputs(columns, "pos_", spec, gate, mask),
        document_inputs(columns, "neg_", spec, gate, mask),
    )


def decode_documents(
    columns: Columns, spec: DrmmSpec, vectors: QueryVectors | None
) -> DocumentBatch:
    gate, mask = query_gate(columns, spec, vectors)
    return DocumentBatch(
        document_inputs(columns, "", spec, gate, mask),
        candidate_id=np.asarray(columns["candidate_id"], dtype=np.int64),
        job_id=np.asarray(columns["job_id"], dtype=np.int64),
        label=np.asarray(columns["label"], dtype=np.int64),
        bm25_rank=np.asarray(columns["bm25_rank"], dtype=np.int64),
        bm25=np.asarray(columns["bm25"], dtype=np.float64),
    )


def transform(counts: np.ndarray, doc_lengths: np.ndarray, variant: Variant) -> np.ndarray:
    """CH as stored -> the variant the model reads: CH, NH (by document length) or LCH."""
    if variant == "ch":
        return counts.astype(np.float32)
    if variant == "nh":
        lengths = np.maximum(np.asarray(doc_lengths, dtype=np.float32), 1.0)
        return counts / lengths.reshape(-1, *([1] * (counts.ndim - 1)))
    if np.issubdtype(counts.dtype, np.integer) and counts.dtype.itemsize <= 2:
        return _LOG1P_INT16[counts.astype(np.int64) & 0xFFFF]  # a table: log1p costs ~10x more
    return np.log1p(counts, dtype=np.float32)


# ln(1 + c) for every int16 count (the stored type), so LCH is a lookup; counts are never
# negative, the upper half of the table is never read.
_LOG1P_INT16 = np.log1p(np.arange(1 << 16, dtype=np.float32), dtype=np.float32)
