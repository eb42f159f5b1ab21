"""Stage 1 on a preset: the two jobs measured, then the WMD of the preset's own job pairs,
jobrec's compiled batch side by side with gensim (the baseline) and POT one pair at a time.

    .venv/bin/python benchmarks/clean.py --preset seed --storage-root /tmp/jobrec-bench
    .venv/bin/python benchmarks/clean.py --preset seed --storage-root /tmp/jobrec-bench --skip-jobs

Needs the preset generated and ingested (`benchmarks/generate.py`).

1. `spark-submit jobs/train_embeddings.py`, then `jobs/clean_candidates.py`, each measured:
   wall time and the summed peak memory of the driver, the JVM and the Python workers
   (`benchmarks/_resources.py`); then the funnel the cleaning printed. Target (issue 4): the
   cleaning under one hour on 2 cores.
2. The pairs the cleaning solves, as it builds them: `--sample` distinct job pairs of the
   candidates that pass the rules, as documents of the embeddings the cleaning used. gensim's
   `wmdistance` (on the first `--baseline-pairs` of them) against jobrec one pair at a time
   (POT) and jobrec's compiled batch, each the fastest of `--repeat` runs. Real job titles
   repeat words and differ in length, so this is slower per pair than `benchmarks/wmd.py`'s
   documents of 12 distinct words.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np
import pandas as pd
from _resources import run_measured  # benchmarks/ is on sys.path when run as a script
from pyspark.sql import functions as F

from jobrec_core.cleaning.rules import apply_rules
from jobrec_core.cleaning.stage import job_documents
from jobrec_core.cleaning.wmd_filter import candidate_pairs
from jobrec_core.config import load_config
from jobrec_core.platform.spark import get_spark
from jobrec_core.platform.tables import read_delta, table_path
from jobrec_core.text.vectors import keyed_vectors
from jobrec_core.text.wmd import DocumentBatch, VectorTable, WmdDocument, wmd, wmd_pairs

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="seed")
    parser.add_argument("--storage-root", default="/tmp/jobrec-bench")
    parser.add_argument("--skip-jobs", action="store_true", help="only the per-pair part")
    parser.add_argument("--sample", type=int, default=50_000, help="distinct pairs, batch")
    parser.add_argument("--baseline-pairs", type=int, default=2_000, help="pairs for gensim")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    overrides = [f"data.preset={args.preset}", f"storage.root={args.storage_root}"]
    if not args.skip_jobs:
        for job in ("train_embeddings", "clean_candidates"):
            if not run_job(job, overrides):
                return 1
    compare_on_pairs(overrides, args)
    return 0


def run_job(job: str, overrides: list[str]) -> bool:
    """One job through spark-submit, measured; prints its figures and the lines it printed."""
    command = [str(Path(sys.executable).with_name("spark-submit")), f"{REPO}/jobs/{job}.py"]
    for override in overrides:
        command += ["--set", override]
    print(f"$ {' '.join(command)}", flush=True)
    measured = run_measured(command)
    print(
        f"  {job}: wall {measured.seconds:.0f} s, peak {measured.peak_rss_bytes / 2**30:.2f} GiB "
        f"(Python workers {measured.peak_workers_rss_bytes / 2**30:.2f} GiB), "
        f"exit {measured.returncode}"
    )
    printed = [line for line in measured.output.splitlines() if not line.startswith(("2", "["))]
    print("\n".join(f"    {line}" for line in printed[-14:]), flush=True)
    return measured.returncode == 0


def compare_on_pairs(overrides: list[str], args: argparse.Namespace) -> None:
    """Per pair on the preset's own pairs: gensim, POT one by one, the compiled batch."""
    logging.getLogger("gensim").setLevel(logging.WARNING)
    config = load_config("local", overrides, REPO / "conf")
    spark = get_spark(config)
    vectors_file, documents = job_documents(spark, config)
    eligible = apply_rules(
        read_delta(spark, table_path(config, "bronze", "candidates")), config.cleaning
    )
    distinct = candidate_pairs(eligible).select("job_a", "job_b").distinct()
    total = distinct.count()
    words = documents.select(F.col("job_id"), F.col("word_ids"))
    sample = pd.DataFrame(
        distinct.sample(fraction=min(1.0, 1.2 * args.sample / max(total, 1)), seed=config.run.seed)
        .orderBy("job_a", "job_b")
        .limit(args.sample)
        .join(words.toDF("job_a", "words_a"), "job_a")
        .join(words.toDF("job_b", "words_b"), "job_b")
        .orderBy("job_a", "job_b")
        .toPandas()
    )
    spark.stop()

    keyed = keyed_vectors(vectors_file)
    table = VectorTable.from_vectors(np.asarray(keyed.vectors))
    firsts = [WmdDocument.from_word_ids(np.asarray(ids)) for ids in sample["words_a"]]
    seconds = [WmdDocument.from_word_ids(np.asarray(ids)) for ids in sample["words_b"]]
    count = len(sample)
    packed = DocumentBatch.from_documents([*firsts, *seconds])
    rows = np.arange(count, dtype=np.int64)
    wmd_pairs(table, packed, rows[:2], rows[:2] + count)  # compiles the kernel

    def fastest(run: Callable[[], T], pairs: int) -> tuple[T, float]:
        best = np.inf
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = run()
            best = min(best, time.perf_counter() - started)
        return result, best / pairs

    baseline = min(args.baseline_pairs, count)
    texts = [
        ([keyed.index_to_key[i] for i in a], [keyed.index_to_key[i] for i in b])
        for a, b in zip(sample["words_a"][:baseline], sample["words_b"][:baseline], strict=True)
    ]
    expected, gensim_s = fastest(lambda: [keyed.wmdistance(a, b) for a, b in texts], baseline)
    one_by_one, pot_s = fastest(
        lambda: [wmd(table, firsts[k], seconds[k]) for k in range(baseline)], baseline
    )
    batched, batch_s = fastest(lambda: wmd_pairs(table, packed, rows, rows + count), count)
    finite = np.isfinite(expected)
    error = np.max(np.abs(batched[:baseline][finite] - np.asarray(expected)[finite]))
    agreement = np.max(np.abs(batched[:baseline][finite] - np.asarray(one_by_one)[finite]))
    sizes = np.array([d.ids.size for d in (*firsts, *seconds)])
    print(
        f"\n{count:,} of the {total:,} distinct pairs of preset '{args.preset}' "
        f"({sizes.mean():.1f} distinct words per document, at most {sizes.max()}; "
        f"{len(keyed.index_to_key):,} words x {keyed.vector_size}); fastest of {args.repeat} runs"
    )
    print(f"  gensim wmdistance (baseline)    {gensim_s * 1e6:8.1f} us/pair   ({baseline:,} pairs)")
    print(
        f"  jobrec one by one (POT)         {pot_s * 1e6:8.1f} us/pair   "
        f"{gensim_s / pot_s:6.1f}x   max |difference| to the batch {agreement:.1e}"
    )
    print(
        f"  jobrec compiled batch           {batch_s * 1e6:8.1f} us/pair   "
        f"{gensim_s / batch_s:6.1f}x   max |difference| to gensim {error:.1e}"
    )
    print(f"  all {total:,} distinct pairs at that rate: {total * batch_s:.0f} core-seconds")


if __name__ == "__main__":
    raise SystemExit(main())
