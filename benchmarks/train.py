"""DRMM training speed (1 vs N processes, CPU or GPU) and the memory of streaming a large
triple set.

    .venv/bin/python benchmarks/train.py throughput --preset demo --processes 1 2
    .venv/bin/python benchmarks/train.py export --preset demo --out DIR
    python benchmarks/train.py throughput --plan DIR/plan.json --device gpu --processes 1 \
        --decode-workers 0 4
    python benchmarks/train.py parts --plan DIR/plan.json --device gpu --decode-workers 0 8
    .venv/bin/python benchmarks/train.py stream --triples 10000000 --dir /tmp/jobrec-triples

`throughput` trains on the preset's stored triples (run the demo first) with plain torchrun,
once per process count, side by side in one run, and reports training triples/s over the
training passes alone (dev evaluation excluded), and apart from them the seconds the epochs'
dev evaluations took. The baseline is the first row: `--prefetch` and `--decode-workers`
(loader processes that read and decode, `training.decode_workers`) add rows.

`parts` times a pass's parts in one process: reading and decoding alone, then also copying
to the device with the histogram variant made on the host (the baseline) or from the stored
counts on the device (what a GPU's training does), then the training step alone.

`export` copies the configured model's plan and the Parquet files it reads into one folder
(`--row-groups`: rewritten in that many row groups a file, so that loader workers can share them);
`throughput --plan` trains from such a folder where only torch, Petastorm, numpy and pandas
are installed (the worker needs no Spark, MLflow or configuration): how the GPU path is
measured on a GPU machine. `--device gpu` runs one process per GPU with NCCL.

`stream` writes a synthetic triple set of the stored schema (`gold/pairs/triples`: ragged
IDF lists and int16 histograms; query lengths 5-40 terms, histograms sampled from a pool of
realistic count rows) in 128 MB row groups, then streams all of it through the training
reader (Petastorm, shuffle buffer, decoding, padding) in a child process, sampling that
process's RSS. The baseline is the size of the data set itself: what materialising it would
need. Target: under 4 GB peak.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np
from _resources import run_measured  # benchmarks/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
GIB = 1024**3
BINS = 30


PLAN_FILES = ("train_files", "dev_files", "map_dev_files", "held_out_dev_files")


def stored_plan(args: argparse.Namespace) -> tuple[dict, str]:
    """The configured model's training plan on the preset's stored pairs (Spark on the
    driver, to find the Delta snapshots' files), and a one-line description."""
    from jobrec_core.config import load_config
    from jobrec_core.models.drmm import spec_from_config
    from jobrec_core.platform.spark import get_spark
    from jobrec_core.training.stage import make_plan, training_inputs

    config = load_config("local", [f"data.preset={args.preset}", *args.overrides], REPO / "conf")
    spark = get_spark(config)
    inputs = training_inputs(spark, config)
    spark.stop()
    spec = spec_from_config(config, config.embeddings.vector_size)
    plan = asdict(make_plan(config, spec, inputs, "checkpoints"))
    if spec.gating == "embedding":
        raise SystemExit("only idf gating is exported: embedding gating loads gensim vectors")
    plan["vectors_file"] = None
    return plan, f"{args.preset}, model {config.model.version}"


def export(args: argparse.Namespace) -> int:
    """Copy the plan and the Parquet files it reads into one folder that trains anywhere
    torch and Petastorm are installed (a GPU machine without Spark, say)."""
    from jobrec_core.platform.paths import local_path

    plan, described = stored_plan(args)
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    for key in PLAN_FILES:
        copied = []
        for number, url in enumerate(plan[key]):
            target = Path("data") / key / f"part-{number:05d}.parquet"
            (out / target).parent.mkdir(parents=True, exist_ok=True)
            recompress(Path(local_path(url)), out / target, args.row_groups)
            copied.append(str(target))
        plan[key] = copied
    plan |= {"tracking_uri": None, "run_id": None, "described": described}
    (out / "plan.json").write_text(json.dumps(plan, indent=2), encoding="utf-8")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"exported {described}: {size / 1024**2:.1f} MiB in {out}")
    return 0


def recompress(source: Path, target: Path, row_groups: int | None) -> None:
    """The same rows, in as many row groups of equal size as stored or as `row_groups` says
    (Petastorm shards by row group: loader workers need several each), in zstd: about a
    third smaller than Spark's snappy, for the 64 MiB a GPU machine is sent."""
    import pyarrow.parquet as pq

    stored = pq.ParquetFile(source)
    groups = row_groups or stored.metadata.num_row_groups
    rows_per_group = -(-stored.metadata.num_rows // max(groups, 1))
    pq.write_table(
        stored.read(),
        target,
        row_group_size=max(rows_per_group, 1),
        compression="zstd",
        compression_level=9,
    )


def exported_plan(path: Path) -> tuple[dict, str]:
    """An exported plan with its files as absolute `file://` URLs."""
    plan = json.loads(path.read_text(encoding="utf-8"))
    for key in PLAN_FILES:
        plan[key] = [(path.parent / f).resolve().as_uri() for f in plan[key]]
    return plan, plan.pop("described")


def throughput(args: argparse.Namespace) -> int:
    from jobrec_core.training.plan import TrainPlan
    from jobrec_core.training.worker import torchrun_command, write_plan

    plan, described = exported_plan(Path(args.plan)) if args.plan else stored_plan(args)
    plan |= {
        "max_epochs": args.epochs,
        "early_stop_patience": args.epochs,  # every run trains the same number of epochs
        "use_gpu": args.device == "gpu",
        "min_epoch_steps": 0,  # the batch as configured or asked for, on any training set
    }
    if args.batch_size:
        plan["batch_size"] = args.batch_size
    rows = []
    for prefetch in args.prefetch or [plan.get("prefetch_batches", 0)]:
        for workers in args.decode_workers or [plan.get("decode_workers", 0)]:
            for processes in args.processes:
                setting = f"{args.device}-{processes}-{prefetch}-{workers}"
                directory = Path(args.dir) / f"throughput-{setting}"
                shutil.rmtree(directory, ignore_errors=True)
                directory.mkdir(parents=True)
                run_plan = TrainPlan(
                    **plan
                    | {
                        "checkpoint_dir": str(directory),
                        "prefetch_batches": prefetch,
                        "decode_workers": workers,
                    }
                )
                command = torchrun_command(write_plan(run_plan, directory), processes)
                measured = run_measured(command)
                if measured.returncode != 0:
                    print(measured.output[-3000:])
                    return 1
                history = json.loads((directory / "result.json").read_text())["history"]
                train_s = sum(r["train_seconds"] for r in history)
                triples = sum(r["triples"] for r in history)
                rows.append((processes, prefetch, workers, triples, train_s, measured, history))
    base = rows[0][3] / rows[0][4]
    print(f"\nDRMM training on {described} ({rows[0][3] // args.epochs:,} triples/epoch, "
          f"{args.epochs} epochs, batch {plan['batch_size']}/process, "
          f"{_hardware(args.device)})")  # fmt: skip
    print(f"{'processes':>9}{'prefetch':>9}{'workers':>8}{'triples/s':>11}{'vs first':>9}"
          f"{'train s':>9}{'dev s':>7}{'wall s':>8}{'peak GiB':>10}{'dev MRR':>9}")  # fmt: skip
    for processes, prefetch, workers, triples, train_s, measured, history in rows:
        rate = triples / train_s
        dev_s = sum(r["seconds"] - r["train_seconds"] for r in history)
        print(f"{processes:>9}{prefetch:>9}{workers:>8}{rate:>11,.0f}{rate / base:>8.2f}x"
              f"{train_s:>9.1f}{dev_s:>7.1f}{measured.seconds:>8.1f}"
              f"{measured.peak_rss_bytes / GIB:>10.2f}{history[-1]['dev_mrr']:>9.4f}")  # fmt: skip
    return 0


def pass_parts(args: argparse.Namespace) -> int:
    """Where a training pass's time goes, in one process: reading and decoding alone (with
    each number of loader workers), then also joining the two sides and copying them to the
    device, then the training step alone on batches already there (forward, backward,
    optimiser; repeated over the first `--step-batches` batches)."""
    import torch

    from jobrec_core.models.drmm import phases, set_phase
    from jobrec_core.training.batches import (
        ReaderSettings,
        TripleStream,
        loader,
        training_batches,
    )
    from jobrec_core.training.plan import TrainPlan
    from jobrec_core.training.worker import make_optimizer, train_step
    from jobrec_scoring.network import Drmm, DrmmSpec

    plan, described = exported_plan(Path(args.plan)) if args.plan else stored_plan(args)
    batch_size = args.batch_size or plan["batch_size"]
    device = torch.device("cuda" if args.device == "gpu" else "cpu")
    spec = DrmmSpec.from_dict(plan["spec"])
    settings = ReaderSettings(
        tuple(plan["train_files"]),
        batch_size,
        shuffle=True,
        seed=1,
        lists=plan.get("loss") == "listwise",  # as the worker streams a listwise model's pairs
    )

    def synchronise() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def timed_pass(workers: int, stored_counts: bool | None) -> tuple[int, float]:
        """Reading and decoding alone (`stored_counts` None), or as the training does, with
        the histograms decoded on the host or copied as counts and made on the device."""
        started = time.perf_counter()
        stream = TripleStream(settings, spec)
        if stored_counts is None:
            rows = sum(len(batch) for batch in loader(stream, workers))
        else:
            batches = training_batches(stream, workers, device, stored_counts)
            rows = sum(size for size, _, _ in batches)
        synchronise()
        return rows, time.perf_counter() - started

    parts = (
        (None, "read + decode"),
        (False, "+ copy to device (variant on the host)"),
        (True, "+ copy to device (counts; variant there)"),
    )
    print(f"\nTraining pass parts on {described} (batch {batch_size}, {_hardware(args.device)})")
    print(f"{'part':<44}{'workers':>8}{'triples/s':>11}{'seconds':>9}")
    for workers in args.decode_workers or [0]:
        for stored_counts, part in parts:
            rows, seconds = timed_pass(workers, stored_counts)
            print(f"{part:<44}{workers:>8}{rows / seconds:>11,.0f}{seconds:>9.2f}")
    batches = []
    for batch in training_batches(TripleStream(settings, spec), 0, device):
        batches.append(batch)
        if len(batches) == args.step_batches:
            break
    train_plan = TrainPlan(**plan)
    torch.manual_seed(train_plan.seed)
    model = Drmm(spec).to(device)
    set_phase(model, phases(spec)[0])
    optimizer = make_optimizer(train_plan, model)
    model.train()
    for _round in range(2):  # the first round warms up (kernels, allocator)
        synchronise()
        started, rows = time.perf_counter(), 0
        for size, both, lists in batches:
            train_step(model, optimizer, size, both, train_plan, lists)
            rows += size
        synchronise()
        seconds = time.perf_counter() - started
    step_ms = seconds / len(batches) * 1000
    print(f"{'training step alone (' + f'{step_ms:.2f} ms a batch)':<44}{'':>8}"
          f"{rows / seconds:>11,.0f}{seconds:>9.2f}")  # fmt: skip
    return 0


def _hardware(device: str) -> str:
    import os

    import torch

    if device == "gpu":
        return f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    return f"CPU: {os.cpu_count()} cores, torch {torch.__version__}"


def write_synthetic(directory: Path, triples: int, seed: int) -> int:
    """The stored triple schema with synthetic values; returns bytes written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    width = BINS + 1
    # A pool of histogram rows: ~200 document terms spread around the middle bins, a few
    # exact matches. Rows are sampled from it, so writing costs memory copies, not draws.
    profile = np.exp(-0.5 * ((np.arange(width) - 16) / 2.5) ** 2)
    profile = profile / profile.sum() * 200
    pool = rng.poisson(profile, size=(100_000, width)).astype(np.int16)
    pool[:, BINS] = rng.poisson(0.3, size=len(pool))
    directory.mkdir(parents=True, exist_ok=True)
    chunk = 200_000
    writer = None
    for start in range(0, triples, chunk):
        n = min(chunk, triples - start)
        terms = rng.integers(5, 41, size=n)
        offsets = np.r_[0, np.cumsum(terms)].astype(np.int32)
        columns = {
            "candidate_id": pa.array(np.arange(start, start + n, dtype=np.int64)),
            "split": pa.array(["train"] * n),
            "query_idf": pa.ListArray.from_arrays(
                pa.array(offsets), pa.array(rng.random(offsets[-1], dtype=np.float32) * 8)
            ),
        }
        for side in ("pos", "neg"):
            rows = pool[rng.integers(0, len(pool), size=offsets[-1])].ravel()
            columns |= {
                f"{side}_job_id": pa.array(rng.integers(0, 466_101, size=n, dtype=np.int32)),
                f"{side}_bm25": pa.array(rng.random(n, dtype=np.float32) * 60),
                f"{side}_doc_len": pa.array(np.full(n, 200, dtype=np.int32)),
                f"{side}_hist": pa.ListArray.from_arrays(pa.array(offsets * width), pa.array(rows)),
                f"{side}_unigrams": pa.array(rng.integers(0, 30, size=n, dtype=np.int32)),
                f"{side}_bigrams": pa.array(rng.integers(0, 10, size=n, dtype=np.int32)),
            }
        table = pa.table(columns)
        if writer is None:
            writer = pq.ParquetWriter(directory / "part-00000.parquet", table.schema)
        writer.write_table(table, row_group_size=chunk // 4)
        if start // chunk % 10 == 0:
            print(f"  written {start + n:,} / {triples:,} triples", flush=True)
    assert writer is not None
    writer.close()
    return sum(f.stat().st_size for f in directory.glob("*.parquet"))


def stream_child(directory: str, batch_size: int) -> int:
    """Stream every triple through the training reader; print the count and the decoded
    in-memory size of what went through."""
    from jobrec_core.training.batches import ReaderSettings, TripleStream, loader
    from jobrec_scoring.network import DrmmSpec

    spec = DrmmSpec(
        bins=BINS, histogram="lch", mlp_layers=10, mlp_width=10, gating="idf", gate_dim=1
    )
    files = tuple(f"file://{p}" for p in sorted(Path(directory).glob("*.parquet")))
    settings = ReaderSettings(files, batch_size, shuffle=True, seed=1)
    started = time.perf_counter()
    rows = 0
    decoded_bytes = 0
    for batch in loader(TripleStream(settings, spec)):
        rows += len(batch)
        decoded_bytes += sum(t.numel() * t.element_size() for t in batch.positive.tensors())
        decoded_bytes += batch.negative.hist.numel() * batch.negative.hist.element_size()
        if rows % 1_000_000 < batch_size:
            print(
                f"  streamed {rows:,} triples ({time.perf_counter() - started:.0f} s)", flush=True
            )
    print(
        json.dumps(
            {"rows": rows, "decoded_bytes": decoded_bytes, "seconds": time.perf_counter() - started}
        )
    )
    return 0


def stream(args: argparse.Namespace) -> int:
    directory = Path(args.dir) / "synthetic-triples"
    if args.regenerate or not list(directory.glob("*.parquet")):
        shutil.rmtree(directory, ignore_errors=True)
        started = time.perf_counter()
        print(f"writing {args.triples:,} synthetic triples to {directory}")
        size = write_synthetic(directory, args.triples, seed=7)
        print(f"  {size / GIB:.2f} GiB of Parquet in {time.perf_counter() - started:.0f} s")
    size = sum(f.stat().st_size for f in directory.glob("*.parquet"))
    command = [sys.executable, __file__, "_stream_child", str(directory), str(args.batch_size)]
    measured = run_measured(command, interval_s=0.25)
    if measured.returncode != 0:
        print(measured.output[-3000:])
        return 1
    result = json.loads(measured.output.strip().splitlines()[-1])
    print(f"\nstreaming {result['rows']:,} triples through the training reader "
          f"(batch {args.batch_size}, shuffle buffer 20,000 rows)")  # fmt: skip
    print(f"{'':<34}{'GiB':>8}")
    print(f"{'Parquet on disk':<34}{size / GIB:>8.2f}")
    print(f"{'decoded, if materialised (baseline)':<34}{result['decoded_bytes'] / GIB:>8.2f}")
    print(f"{'peak RSS while streaming':<34}{measured.peak_rss_bytes / GIB:>8.2f}")
    print(
        f"{result['rows'] / result['seconds']:,.0f} triples/s decoded ({result['seconds']:.0f} s)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["_stream_child"]:
        return stream_child(arguments[1], int(arguments[2]))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parts = parser.add_subparsers(dest="part", required=True)
    speed = parts.add_parser("throughput")
    speed.add_argument("--preset", default="demo")
    speed.add_argument("--plan", help="an exported plan.json instead of the preset's store")
    speed.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    speed.add_argument("--batch-size", type=int, help="instead of training.batch_size")
    speed.add_argument(
        "--prefetch", type=int, nargs="+", help="training.prefetch_batches values to compare"
    )
    speed.add_argument(
        "--decode-workers", type=int, nargs="+", help="training.decode_workers values to compare"
    )
    speed.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    speed.add_argument("--epochs", type=int, default=2)
    speed.add_argument("--dir", default="/tmp/jobrec-bench/train")
    speed.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    split = parts.add_parser("parts")
    split.add_argument("--preset", default="demo")
    split.add_argument("--plan", help="an exported plan.json instead of the preset's store")
    split.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    split.add_argument("--batch-size", type=int, help="instead of training.batch_size")
    split.add_argument("--decode-workers", type=int, nargs="+", help="loader workers to compare")
    split.add_argument("--step-batches", type=int, default=40)
    split.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    bundle = parts.add_parser("export")
    bundle.add_argument("--preset", default="demo")
    bundle.add_argument("--out", default="/tmp/jobrec-bench/train/export")
    bundle.add_argument("--row-groups", type=int, help="per file, instead of as stored")
    bundle.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    memory = parts.add_parser("stream")
    memory.add_argument("--triples", type=int, default=10_000_000)
    memory.add_argument("--batch-size", type=int, default=256)
    memory.add_argument("--dir", default="/tmp/jobrec-bench/train")
    memory.add_argument("--regenerate", action="store_true")
    args = parser.parse_args(arguments)
    run = {"throughput": throughput, "parts": pass_parts, "export": export, "stream": stream}
    return run[args.part](args)


if __name__ == "__main__":
    raise SystemExit(main())
