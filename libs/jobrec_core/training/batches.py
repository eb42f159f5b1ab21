"""Training and evaluation batches streamed from the stored pairs with Petastorm.

`build_pairs` writes `gold/pairs/triples` and `gold/pairs/map_sets` as Delta tables. Their
current snapshot is a list of Parquet files (:func:`snapshot_files`; the folder also holds
files of overwritten versions, so it is never read whole). Petastorm's batch reader streams
those files row group by row group, shuffled and sharded per process; nothing holds the
dataset in memory, only the row group being read and a shuffle buffer.

Queries have different lengths, so the histogram and IDF columns are ragged lists, which
Petastorm's batch reader refuses. A transform in the reader turns each into the raw
bytes of its values; :func:`pad_queries` then decodes a whole batch at once (one `join`, one
`frombuffer`, one scatter) into padded tensors and a mask. No Python loop runs per query term
or per bin.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, fields, is_dataclass, replace
from itertools import pairwise
from typing import Any, TypeVar

import numpy as np
import torch
from petastorm import make_batch_reader
from petastorm.transform import TransformSpec
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from jobrec_core.platform.paths import local_path
from jobrec_core.platform.quiet import quiet_petastorm
from jobrec_scoring.inputs import (
    QUERY_TERMS,
    RAGGED_TYPES,
    Columns,
    DocumentBatch,
    TripleBatch,
    decode_documents,
    decode_triples,
    document_columns,
    histogram_input,
    reads_stored_counts,
    to_bytes,
    triple_columns,
)
from jobrec_scoring.network import DrmmInputs, DrmmSpec
from jobrec_scoring.vectors import QueryVectors

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class ReaderSettings:
    """How one process streams a table: its shard, the shuffle, and what bounds memory."""

    files: tuple[str, ...]
    batch_size: int
    shuffle: bool = False
    seed: int = 0
    shard: int = 0
    shards: int = 1
    shuffle_buffer_rows: int = 20000
    # Evaluation sets are read unchanged every epoch: keep them decoded in this process's
    # memory (within KEEP_LIMIT_BYTES) instead of reading and decoding them again.
    keep_in_memory: bool = False
    # Rows that share `LIST_KEY` are one training list (a pool's held-out job against its
    # drawn jobs): shuffled, sharded and batched whole, for a listwise loss. build_pairs
    # writes a list's rows next to each other; only a list stored across the end of a
    # shuffle buffer's fill would be split in two.
    lists: bool = False


# A pool pair's list: its candidate and the job held out (`gold/pairs/pool_triples`).
LIST_KEY = ("candidate_id", "pos_job_id")


# --- columns ----------------------------------------------------------------------------------


def _bytes_transform(columns: list[str]) -> TransformSpec:
    return TransformSpec(
        to_bytes,
        edit_fields=[
            (c, np.bytes_, (), False) for c in columns if c in RAGGED_TYPES or c == QUERY_TERMS
        ],
    )


# --- decoding ---------------------------------------------------------------------------------


# --- streaming --------------------------------------------------------------------------------


ROW_GROUPS_PER_SHARD = 4


def row_groups(files: Iterable[str]) -> int:
    """Row groups in Parquet files, from their footers."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(local_path(f)).num_row_groups for f in files)


def row_count(files: Iterable[str]) -> int:
    """Rows in Parquet files, from their footers."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(local_path(f)).metadata.num_rows for f in files)


def stream_columns(settings: ReaderSettings, columns: list[str]) -> Iterator[Columns]:
    """This process's shard as column arrays (ragged columns as bytes), one row group at a
    time.

    With enough row groups (`ROW_GROUPS_PER_SHARD` per process) Petastorm gives each process
    its own row groups, so each reads only its share. With fewer, whole row groups would
    leave processes idle or empty, so every process reads all of them and keeps every
    `shards`-th row; with `lists`, always so, keeping every `shards`-th list."""
    if not settings.files:
        return
    quiet_petastorm()
    # Whole lists (`lists`) are shared out by their key, never by row group: a list could
    # end one row group and start the next.
    by_row_group = (
        settings.shards > 1
        and not settings.lists
        and row_groups(settings.files) >= ROW_GROUPS_PER_SHARD * settings.shards
    )
    by_row = settings.shards > 1 and not by_row_group
    reader = make_batch_reader(
        list(settings.files),
        schema_fields=columns,
        # The synchronous pool: petastorm 0.13.1's thread pool can end a read before its
        # first row group under CPU contention (an unsynchronised end-of-work check; seen in 2
        # of 3 runs on a busy 2-core machine), which would silently train on nothing. The
        # decoding is vectorised, so the extra threads bought little.
        reader_pool_type="dummy",
        shuffle_row_groups=settings.shuffle,
        seed=settings.seed if settings.shuffle else None,
        cur_shard=settings.shard if by_row_group else None,
        shard_count=settings.shards if by_row_group else None,
        num_epochs=1,
        transform_spec=_bytes_transform(columns),
    )
    try:
        for group in reader:
            values = {c: np.asarray(getattr(group, c)) for c in columns}
            yield _take(values, row_share(values, settings)) if by_row else values
    finally:
        # Not `with reader`: its exit prints "Cache cleanup complete." to stdout, where jobs
        # print their results. There is no cache to clean (cache_type "null").
        reader.stop()
        reader.join()


def row_share(columns: Columns, settings: ReaderSettings) -> slice | np.ndarray:
    """This shard's rows of a row group every shard reads: every `shards`-th row, or with
    `lists` every row of every `shards`-th list (by its key), so that no list is split."""
    if not settings.lists:
        return slice(settings.shard, None, settings.shards)
    return np.flatnonzero(_list_hash(columns) % settings.shards == settings.shard)


def _list_hash(columns: Columns) -> np.ndarray:
    """A non-negative integer per row, the same for the rows of one list on every machine
    (splitmix64's finaliser over the key)."""
    candidate, job = (columns[c].astype(np.uint64) for c in LIST_KEY)
    with np.errstate(over="ignore"):  # uint64 products wrap around, as intended
        mixed = candidate * np.uint64(0x9E3779B97F4A7C15) + job
        for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
            mixed = (mixed ^ (mixed >> np.uint64(shift))) * np.uint64(factor)
        mixed ^= mixed >> np.uint64(31)
    return mixed >> np.uint64(1)


def list_index(columns: Columns) -> np.ndarray:
    """Each row's list within a batch of whole lists (rows of a list adjacent): 0, 1, ..."""
    key = _list_hash(columns)
    starts = np.concatenate([[False], key[1:] != key[:-1]])
    return np.cumsum(starts, dtype=np.int64)


# What a process keeps of evaluation sets, decoded, in all. The demo's dev sets take about
# 1.1 GB decoded (the histograms as float32, padded per batch); at the seed's scale they would
# not fit, and are read and decoded every epoch.
KEEP_LIMIT_BYTES = 2 << 30
_kept: dict[tuple[Any, ...], tuple[Any, list[Any]]] = {}
_too_large: set[tuple[Any, ...]] = set()  # sets that did not fit: not collected again
_kept_bytes = 0


def kept(key: tuple[Any, ...], anchor: Any, batches: Iterable[Any]) -> Iterator[Any]:
    """`batches`, kept in memory after the first pass while everything kept stays within
    `KEEP_LIMIT_BYTES`. Evaluation sets are scored every epoch by the same model
    configuration: decoding them once saves about 40% of a demo epoch's evaluation. Snapshot
    files are immutable (a new table version writes new files), so the files' names can be
    part of a safe key; `anchor`, kept with the batches, keeps alive any object whose `id` is
    part of the key."""
    global _kept_bytes
    if key in _kept:
        yield from _kept[key][1]
        return
    if key in _too_large:
        yield from batches
        return
    items: list[Any] | None = []
    size = 0
    seen: set[int] = set()
    for item in batches:
        if items is not None:
            items.append(item)
            size += nbytes(item, seen)
            if _kept_bytes + size > KEEP_LIMIT_BYTES:
                log.info("evaluation set over the in-memory limit: decoded every time")
                items = None
                _too_large.add(key)
        yield item
    if items is not None:
        _kept[key] = (anchor, items)
        _kept_bytes += size


def release_kept() -> None:
    """Forget every kept evaluation set: a training that ran in this process (the `single`
    launcher) leaves nothing behind."""
    global _kept_bytes
    _kept.clear()
    _too_large.clear()
    _kept_bytes = 0


def nbytes(value: Any, seen: set[int]) -> int:
    """Bytes held by a decoded batch's tensors and arrays (nested dataclasses, columns), each
    memory counted once (`seen`: the addresses counted): both sides of a triple share the
    query's gate and mask."""
    if isinstance(value, torch.Tensor):  # the two sides' tensors are views of one array
        return _once(value.data_ptr(), value.nelement() * value.element_size(), seen)
    if isinstance(value, np.ndarray):
        size = sum(len(v) for v in value) if value.dtype == object else value.nbytes
        return _once(value.__array_interface__["data"][0], size, seen)
    if isinstance(value, dict):
        return sum(nbytes(v, seen) for v in value.values())
    if is_dataclass(value):
        return sum(nbytes(getattr(value, f.name), seen) for f in fields(value))
    return 0


def _once(address: int, size: int, seen: set[int]) -> int:
    if address in seen:
        return 0
    seen.add(address)
    return size


def rebatch(groups: Iterable[Columns], settings: ReaderSettings) -> Iterator[Columns]:
    """Row groups -> batches of `batch_size` rows; with `shuffle`, rows are mixed across row
    groups through a buffer of `shuffle_buffer_rows` (seeded). With `lists`, whole lists are
    mixed and a batch holds whole lists, at least `batch_size` rows of them (the last may
    hold fewer); a list stored across a buffer's end is the one thing that can split."""
    rng = np.random.default_rng(settings.seed)
    buffered: list[Columns] = []
    rows = 0
    threshold = settings.shuffle_buffer_rows if settings.shuffle else settings.batch_size
    for group in groups:
        buffered.append(group)
        rows += _rows(group)
        if rows >= threshold:
            pool = _mix(buffered, rng if settings.shuffle else None, settings.lists)
            ends = _batch_ends(pool, settings.batch_size, settings.lists)
            usable = ends[-1] if ends else 0
            yield from _slices(pool, [0, *ends])
            buffered, rows = [_take(pool, slice(usable, rows))], rows - usable
    if rows:
        pool = _mix(buffered, rng if settings.shuffle else None, settings.lists)
        bounds = [0, *_batch_ends(pool, settings.batch_size, settings.lists)]
        yield from _slices(pool, bounds if bounds[-1] == rows else [*bounds, rows])  # the rest


def _batch_ends(pool: Columns, size: int, lists: bool) -> list[int]:
    """Where the full batches of `pool` end: every `size` rows, or with `lists` at the first
    list boundary at least `size` rows after the last end."""
    rows = _rows(pool)
    if not lists:
        return list(range(size, rows + 1, size))
    boundaries = np.flatnonzero(np.diff(list_index(pool))) + 1
    ends: list[int] = []
    for boundary in (*boundaries.tolist(), rows):
        if boundary - (ends[-1] if ends else 0) >= size:
            ends.append(boundary)
    return ends


def _rows(columns: Columns) -> int:
    return len(next(iter(columns.values())))


def _mix(groups: list[Columns], rng: np.random.Generator | None, lists: bool = False) -> Columns:
    """The buffered groups as one pool: rows shuffled (`rng`), or with `lists` whole lists
    shuffled (`rng`) or kept in the order they first appear, each list's rows together."""
    pool = {c: np.concatenate([g[c] for g in groups]) for c in groups[0]}
    if not lists:
        return pool if rng is None else _take(pool, rng.permutation(_rows(pool)))
    _, first, inverse = np.unique(_list_hash(pool), return_index=True, return_inverse=True)
    order = np.argsort(first) if rng is None else rng.permutation(len(first))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return _take(pool, np.argsort(rank[inverse], kind="stable"))


def _take(columns: Columns, index: slice | np.ndarray) -> Columns:
    return {c: values[index] for c, values in columns.items()}


def _slices(pool: Columns, bounds: list[int]) -> Iterator[Columns]:
    for low, high in pairwise(bounds):
        yield _take(pool, slice(low, high))


class _Stream(IterableDataset):
    """One table's rows of one shard as decoded batches, for `torch.utils.data.DataLoader`."""

    def __init__(
        self,
        settings: ReaderSettings,
        spec: DrmmSpec,
        vectors: QueryVectors | None = None,
        stored_counts: bool = False,
    ) -> None:
        super().__init__()
        if (spec.gating == "embedding") != (vectors is not None):
            raise ValueError("embedding gating needs the query vectors, IDF gating none")
        self.settings = settings
        self.spec = spec
        self.vectors = vectors
        # histograms left as the stored counts (`jobrec_scoring.inputs.document_inputs`)
        self.stored_counts = stored_counts

    def columns(self) -> list[str]:
        raise NotImplementedError

    def decode(self, columns: Columns) -> Any:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        settings = worker_share(self.settings)
        batches = rebatch(stream_columns(settings, self.columns()), settings)
        decoded = map(self.decode, batches)
        if not settings.keep_in_memory:
            return decoded
        spec = json.dumps(self.spec.to_dict(), sort_keys=True)
        key = (type(self).__name__, self.settings, spec, id(self.vectors), self.stored_counts)
        return kept(key, self.vectors, decoded)


class TripleStream(_Stream):
    """Triples (shuffled when the settings say so), with each row's list in the batch when
    the settings read whole lists."""

    def columns(self) -> list[str]:
        keys = list(LIST_KEY) if self.settings.lists else []
        return [*keys, *triple_columns(self.spec)]

    def decode(self, columns: Columns) -> TripleBatch:
        batch = decode_triples(columns, self.spec, self.vectors, self.stored_counts)
        if self.settings.lists:
            batch.lists = torch.from_numpy(list_index(columns))
        return batch


class DocumentStream(_Stream):
    """MAP-set rows, in stored order for evaluation."""

    def columns(self) -> list[str]:
        return document_columns(self.spec)

    def decode(self, columns: Columns) -> DocumentBatch:
        if self.stored_counts:
            raise ValueError("evaluation batches are decoded whole on the host")
        return decode_documents(columns, self.spec, self.vectors)


def prefetched(items: Iterable[T], depth: int) -> Generator[T, None, None]:
    """`items`, produced by a background thread up to `depth` ahead of the consumer: reading
    and decoding the next batches (Petastorm, numpy) overlap the training step, which on a GPU
    is otherwise idle while they run. (The copy to the GPU, from ordinary memory on the
    default stream, waits for the queued step: only the host's work overlaps.) Order is
    unchanged, so a run is the same with and without it. `depth` 0 produces in the calling
    thread. An error in the producer is raised in the consumer; a consumer that stops early
    stops the producer."""
    if depth <= 0:
        yield from items
        return
    ready: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stopping = threading.Event()

    def offer(message: tuple[str, Any]) -> bool:
        while not stopping.is_set():
            try:
                ready.put(message, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        source: Iterator[T] | None = None
        try:
            source = iter(items)
            for item in source:
                if not offer(("item", item)):
                    return
            offer(("end", None))
        except BaseException as error:  # handed to the consumer, which raises it
            offer(("error", error))
        finally:
            close = getattr(source, "close", None)  # None too when `iter` itself failed
            if close is not None:
                close()  # a generator's own cleanup (the Petastorm reader's stop) runs here

    producer = threading.Thread(target=produce, name="batch-prefetch", daemon=True)
    producer.start()
    try:
        while True:
            kind, value = ready.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stopping.set()
        producer.join()


def worker_share(settings: ReaderSettings) -> ReaderSettings:
    """This loader worker's part of the process's shard. With `w` worker processes (see
    :func:`loader`), shard `s` of `n` becomes shard `s * w + i` of `n * w` for worker `i`: each
    row is read and decoded by exactly one worker, by row group where there are enough of
    them (:func:`stream_columns`). In the process itself (no workers) nothing changes."""
    worker = get_worker_info()
    if worker is None:
        return settings
    if settings.keep_in_memory:
        raise ValueError("an evaluation set kept in memory is read in the process, not workers")
    return replace(
        settings,
        shard=settings.shard * worker.num_workers + worker.id,
        shards=settings.shards * worker.num_workers,
    )


def loader(stream: IterableDataset, workers: int = 0, pin: bool = False) -> DataLoader:
    """A DataLoader over already-batched items: batching, shuffling and sharding happen in
    the stream (Petastorm shards by row group), so the loader adds none of its own.

    `workers` > 0 reads and decodes in that many worker processes, each its own share
    (:func:`worker_share`), taken in turn: the order is fixed for a given number of
    workers, so a run stays reproducible, but differs from another number's. This is what
    feeds a GPU, whose host decodes about 7,000 triples/s on one thread (docs/BENCHMARKS.md,
    "GPU training"). `pin`: a thread of the loader copies each batch into page-locked memory
    as it arrives from a worker."""
    return DataLoader(stream, batch_size=None, num_workers=workers, pin_memory=pin)


def training_batches(
    stream: TripleStream, workers: int, device: torch.device, stored_counts: bool | None = None
) -> Iterator[tuple[int, DrmmInputs, torch.Tensor | None]]:
    """A training pass's batches as (triples, both sides' inputs on `device`, positives
    first, each triple's list in the batch when the stream reads lists). On a GPU with
    loader workers, the loader's pinning thread takes each batch from its worker: the first
    reads of a worker's shared memory cost about as much as decoding it (on the H200
    machine), and would otherwise stall the thread that drives the GPU. The copies to the
    GPU are then asynchronous, and the two sides are joined there.

    `stored_counts` (by default on a GPU, where the variant allows it): the histograms
    travel as the stored int16 counts and become the model's variant on `device`, the same
    values. The host that feeds a GPU bounds its training (docs/BENCHMARKS.md, "GPU
    training"); this halves the histogram bytes it pins and copies, and drops its lookup."""
    if stored_counts is None:
        stored_counts = device.type == "cuda" and reads_stored_counts(stream.spec)
    source = TripleStream(stream.settings, stream.spec, stream.vectors, stored_counts)
    for batch in loader(source, workers, pin=workers > 0 and device.type == "cuda"):
        lists = None if batch.lists is None else batch.lists.to(device, non_blocking=True)
        both = DrmmInputs.concat(batch.positive.to(device), batch.negative.to(device))
        yield len(batch), histogram_input(both, stream.spec), lists
