"""What a DRMM reads, decoded from stored rows: ragged query columns, padded into tensors with
one vectorised pass per batch (no Python loop per query term or per bin).

A ragged column's rows come either as the bytes of their values (`to_bytes`: the training
reader's transform, since Petastorm's batch reader refuses ragged lists) or as the values
themselves (a list column of a pandas frame, as the registered model and the re-ranker get
it). Both decode with the same code; scoring does not turn its arrays into bytes and back.

Shared by training (Petastorm batches) and scoring (the registered pyfunc, the re-ranker)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any, Literal

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
    # each triple's training list within the batch (0, 1, ...), for a listwise loss; None
    # when triples are read one by one
    lists: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.positive.hist.shape[0])

    def pin_memory(self) -> TripleBatch:
        lists = None if self.lists is None else self.lists.pin_memory()
        return TripleBatch(self.positive.pin_memory(), self.negative.pin_memory(), lists)


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
            frame[column] = [_joined_terms(terms) for terms in frame[column]]
    return frame


def _joined_terms(terms: Any) -> bytes:
    """A query's words as one UTF-8 string, `TERM_SEPARATOR` between them (`to_bytes`)."""
    if isinstance(terms, bytes):
        return terms
    return TERM_SEPARATOR.decode("ascii").join(terms).encode("utf-8")


def pad_queries(
    rows: np.ndarray | Sequence[Any], dtype: type, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row `terms * width` values -> (B, T, width) zero-padded and (B, T) mask. Each row
    is the bytes of its values (`to_bytes`) or the values themselves (an array or a list)."""
    values, sizes = _flat_values(rows, dtype)
    return _padded(values.reshape(-1, width), sizes // width)


def _padded(per_term: np.ndarray, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every row's terms one after another, (sum(terms), width) -> (B, T, width), zero-padded,
    and the (B, T) mask. When every row has the same number of terms (one query's
    documents, as when a pool is re-ranked), the values are reshaped in place of the
    padding."""
    width = per_term.shape[1]
    longest = int(terms.max()) if len(terms) else 0
    if len(terms) and int(terms.min()) == longest:
        same = per_term.reshape(len(terms), longest, width)  # read-only when read from bytes
        return (same if same.flags.writeable else same.copy()), np.ones(same.shape[:2], bool)
    padded: np.ndarray = np.zeros((len(terms), longest, width), dtype=per_term.dtype)
    mask = np.arange(longest)[None, :] < terms[:, None]
    padded[mask] = per_term
    return padded, mask


_SIZE = attrgetter("size")


def _flat_values(rows: np.ndarray | Sequence[Any], dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """(every row's values one after another, as `dtype`; how many each row has): one `join`
    and one `frombuffer` for rows of bytes, one `concatenate` for rows of values."""
    if len(rows) and isinstance(rows[0], bytes):
        sizes = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        return np.frombuffer(b"".join(rows), dtype=dtype), sizes // np.dtype(dtype).itemsize
    if len(rows) and set(map(type, rows)) == {np.ndarray}:
        # rows of numbers (not of nested objects, whose `size` counts items): one concatenation.
        # `map` keeps the checks in C: a Python test per row cost 30 us a request.
        flat = np.concatenate(list(rows), axis=None)
        if flat.dtype.kind in "biuf":
            sizes = np.fromiter(map(_SIZE, rows), dtype=np.int64, count=len(rows))
            return flat.astype(dtype, copy=False), sizes
    # the conversion `to_bytes` makes, row by row: the same values as its bytes
    arrays: list[np.ndarray] = [np.asarray(row, dtype=dtype).ravel() for row in rows]
    sizes = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    return (np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)), sizes


def document_inputs(
    columns: Columns,
    prefix: str,
    spec: DrmmSpec,
    gate: np.ndarray,
    mask: np.ndarray,
    stored_counts: bool = False,
) -> DrmmInputs:
    """One document side of a decoded batch -> model inputs (`prefix` "pos_", "neg_" or "").

    `stored_counts`: the histograms stay the stored int16 counts, padded, for
    :func:`histogram_input` to turn into the variant where the model runs (half the bytes
    to copy, and no table lookup on the host that feeds a GPU)."""
    # Histograms are stored for every query term (zeros where the document matches nothing),
    # so they pad to the same T as the query. The variant is computed on the stored values
    # before padding: it maps zero to zero, and the padding is most of a batch's cells.
    width = spec.bins + 1
    counts, sizes = _flat_values(columns[f"{prefix}hist"], np.int16)
    terms = sizes // width
    counts = counts.reshape(-1, width)
    lengths = np.repeat(np.asarray(columns[f"{prefix}doc_len"]), terms)  # per term, for NH
    variant: Variant = spec.histogram  # type: ignore[assignment]
    if stored_counts and not reads_stored_counts(spec):
        raise ValueError(f"the {variant!r} histogram needs document lengths: decoded on the host")
    if spec.field_histograms:  # the lead fields' matches, then the others'
        lead = _flat_values(columns[f"{prefix}{LEAD_HIST}"], np.int16)[0].reshape(-1, width)
        parts = (lead, counts - lead)
        per_term = np.concatenate(
            parts if stored_counts else [transform(c, lengths, variant) for c in parts], axis=1
        )
    else:
        per_term = counts if stored_counts else transform(counts, lengths, variant)
    hist, _ = _padded(np.asarray(per_term, dtype=np.int16 if stored_counts else np.float32), terms)
    extras = np.zeros((len(mask), len(spec.extras)), dtype=np.float32)
    for position, name in enumerate(spec.extras):
        extras[:, position] = columns[f"{prefix}{name}"]
    return DrmmInputs(
        hist=torch.from_numpy(np.ascontiguousarray(hist)),
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
        rows = columns[QUERY_TERMS]
        found = (_joined_terms(rows[row]) for row in np.flatnonzero(mask.any(axis=1)))
        words = TERM_SEPARATOR.join(found).split(TERM_SEPARATOR) if mask.any() else []
        gate = np.zeros((*mask.shape, vectors.dim), dtype=np.float32)
        gate[mask] = vectors.lookup(words)
    if spec.gate_share:
        share, _ = pad_queries(columns[JOB_SHARE], np.float32, 1)
        gate = np.concatenate([gate, share], axis=2)
    return gate, mask


def decode_triples(
    columns: Columns, spec: DrmmSpec, vectors: QueryVectors | None, stored_counts: bool = False
) -> TripleBatch:
    """A batch of triples; `stored_counts` as in :func:`document_inputs`."""
    gate, mask = query_gate(columns, spec, vectors)
    return TripleBatch(
        document_inputs(columns, "pos_", spec, gate, mask, stored_counts),
        document_inputs(columns, "neg_", spec, gate, mask, stored_counts),
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
        # a table: log1p costs ~10x more. torch's `index_select` takes int32 positions where
        # numpy's `take` first widens them to int64: 107 us against 165 for a 100-job
        # request's 161,000 counts, same values.
        positions = counts.astype(np.int32)  # a copy: `counts` may be read-only
        np.bitwise_and(positions, 0xFFFF, out=positions)
        return _log1p_lookup(torch.from_numpy(positions)).numpy()
    return np.log1p(counts, dtype=np.float32)


def reads_stored_counts(spec: DrmmSpec) -> bool:
    """Whether the model's histogram variant follows from the stored counts alone (CH, LCH),
    so that :func:`histogram_input` can compute it where the model runs; NH divides by each
    document's length."""
    return spec.histogram in ("ch", "lch")


def histogram_input(inputs: DrmmInputs, spec: DrmmSpec) -> DrmmInputs:
    """Inputs decoded with `stored_counts` (int16 counts) -> the variant the model reads, on
    the inputs' device, the same float32 values as the host's :func:`transform`; inputs
    whose histograms are already the variant are returned unchanged."""
    if inputs.hist.dtype != torch.int16:
        return inputs
    counts = inputs.hist.to(torch.int32)
    if spec.histogram == "ch":
        return replace(inputs, hist=counts.float())
    return replace(inputs, hist=_log1p_lookup(counts.bitwise_and_(0xFFFF)))


def _log1p_lookup(positions: torch.Tensor) -> torch.Tensor:
    """ln(1 + c) by table for int32 counts already in [0, 65536) (`& 0xFFFF` reads a
    negative int16 count as uint16 would), on the counts' device."""
    table = _LOG1P_INT16.get(positions.device)
    if table is None:
        table = _LOG1P_INT16[positions.device] = _LOG1P_INT16[_CPU].to(positions.device)
    return torch.index_select(table, 0, positions.reshape(-1)).reshape(positions.shape)


# ln(1 + c) for every int16 count (the stored type), so LCH is a lookup, one table a device;
# counts are never negative, the upper half of the table is never read.
_CPU = torch.device("cpu")
_LOG1P_INT16 = {
    _CPU: torch.from_numpy(np.log1p(np.arange(1 << 16, dtype=np.float32), dtype=np.float32))
}
