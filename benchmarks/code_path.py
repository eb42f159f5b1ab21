"""The pinned CPU code path (`jobrec_scoring.numerics`) against each library's own choice for
this CPU (the baseline, `JOBREC_NATIVE_CODE_PATHS=1`): the DRMM's scores of one re-ranking
request, and a training step, on one thread; their time, and a digest of what they computed,
with digests of a title-normaliser-shaped BiLSTM's gradients (oneDNN's path), of numpy's
`log`, `exp` and `power` (numpy's own dispatched loops) and of Word Mover's Distances from the
cleaning stage's compiled solver (numba's code), with its time per pair, beside them.

    .venv/bin/python benchmarks/code_path.py
    .venv/bin/python benchmarks/code_path.py --jobs 100 --repeats 300

Each side runs in its own process, as the variables take effect before a library first
computes. The network is v10's shape (`conf/`: 10 layers of 10 units, five extra features),
freshly initialised from a fixed seed; the inputs are random histograms of a 52-term query
against --jobs jobs, the demo's median. Different digests on the two sides mean that this
CPU's own path computes other floats than the pinned one, so that models trained on it
would differ from those trained on another machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any

from jobrec_scoring.numerics import NATIVE, PINNED_CODE_PATHS


def measure(jobs: int, repeats: int) -> dict[str, object]:
    """In this process: the environment's path, seconds per request and per training step,
    and the digests of the scores and of the gradients."""
    import torch

    from jobrec_scoring.network import Drmm, DrmmSpec

    torch.set_num_threads(1)
    torch.manual_seed(0)
    extras = ("bm25", "profile_tfidf", "profile_w2v", "co_interest", "occupation_agreement")
    spec = DrmmSpec(
        bins=30, histogram="lch", mlp_layers=10, mlp_width=10, gating="idf", gate_dim=1,
        extras=extras, examples="pool",
    )  # fmt: skip
    model = Drmm(spec)
    terms = 52
    hist = torch.log1p(torch.randint(0, 20, (jobs, terms, spec.bins + 1)).float())
    mask = torch.ones(jobs, terms, dtype=torch.bool)
    gate = torch.rand(jobs, terms, 1) * 10
    extra = torch.rand(jobs, len(extras))
    model.eval()
    with torch.inference_mode():
        scores = model(hist, mask, gate, extra)
        started = time.perf_counter()
        for _ in range(repeats):
            model(hist, mask, gate, extra)
        request = (time.perf_counter() - started) / repeats
    model.train()
    started = time.perf_counter()
    for _ in range(repeats // 10 or 1):
        model.zero_grad()
        model(hist, mask, gate, extra).sum().backward()
    step = (time.perf_counter() - started) / (repeats // 10 or 1)
    return {
        **_other_paths(),
        "path": {name: os.environ.get(name) for name in PINNED_CODE_PATHS},
        "capability": torch.backends.cpu.get_cpu_capability(),
        "request_ms": request * 1000,
        "step_ms": step * 1000,
        "scores": _digest(scores.numpy()),
        "gradients": _digest(_gradients(model)),
    }


def _digest(array: object) -> str:
    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:12]


def _gradients(module: Any) -> Any:
    """Every parameter's gradient of `module`, flattened into one numpy array."""
    import torch

    grads = [p.grad.flatten() for p in module.parameters() if p.grad is not None]
    return torch.cat(grads).numpy()


def _other_paths() -> dict[str, object]:
    """Digests of what oneDNN (a BiLSTM's gradients, as in the title normaliser), numpy's
    dispatched loops and numba (the WMD solver) compute on this side's path."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    lstm = torch.nn.LSTM(32, 64, bidirectional=True, batch_first=True)
    lstm(torch.randn(64, 40, 32))[0].sum().backward()
    values = np.random.default_rng(0).random(100_000) * 10 + 0.01
    numpy_out = np.concatenate([np.log(values), np.exp(values), np.power(values, 0.7)])
    distances, seconds = _wmd_distances(np.random.default_rng(0))
    return {
        "lstm": _digest(_gradients(lstm)),
        "numpy": _digest(numpy_out),
        "wmd": _digest(distances),
        "wmd_us": seconds / len(distances) * 1e6,
    }


def _wmd_distances(rng: Any, pairs: int = 3000) -> tuple[Any, float]:
    """The cleaning stage's WMD (`text.wmd.wmd_pairs`, the compiled solver) of random pairs of
    5-40-word documents over 5,000 random 100-d word vectors (wmd.py's setup), and the
    seconds the pairs took after a warm-up."""
    from jobrec_core.text.wmd import DocumentBatch, VectorTable, WmdDocument, wmd_pairs

    table = VectorTable.from_vectors(rng.normal(size=(5000, 100)).astype("float32"))
    documents = DocumentBatch.from_documents(
        [
            WmdDocument.from_word_ids(rng.integers(0, 5000, size))
            for size in rng.integers(5, 40, 600)
        ]
    )
    first, second = rng.integers(0, 600, (2, pairs))
    wmd_pairs(table, documents, first[:10], second[:10])  # compiles, or loads the cache
    started = time.perf_counter()
    distances = wmd_pairs(table, documents, first, second)
    return distances, time.perf_counter() - started


def run_side(native: bool, jobs: int, repeats: int) -> dict[str, object]:
    environ = {k: v for k, v in os.environ.items() if k not in PINNED_CODE_PATHS and k != NATIVE}
    if native:
        environ[NATIVE] = "1"
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--jobs", str(jobs), "--repeats", str(repeats)],
        env=environ, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.jobs, args.repeats)))
        return
    print(f"DRMM (v10's shape), {args.jobs} jobs a request, one thread, {args.repeats} requests")
    header = f"{'side':34s} {'request ms':>10s} {'step ms':>8s}  scores        gradients"
    print(f"{header}     lstm          numpy         wmd           WMD us/pair  capability")
    sides = (("pinned (jobrec_scoring.numerics)", False), ("baseline: the CPU's own", True))
    for name, native in sides:
        side = run_side(native, args.jobs, args.repeats)
        print(
            f"{name:34s} {side['request_ms']:10.3f} {side['step_ms']:8.2f}  {side['scores']}  "
            f"{side['gradients']}  {side['lstm']}  {side['numpy']}  {side['wmd']}  "
            f"{side['wmd_us']:11.1f}  {side['capability']}"
        )
        print(f"  {side['path']}")


if __name__ == "__main__":
    main()
