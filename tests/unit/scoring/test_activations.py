"""The scoring path's tanh (`jobrec_scoring.activations`): one compiled kernel, the same floats
on every CPU."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from jobrec_scoring.activations import tanh_in_place
from jobrec_scoring.numerics import NATIVE, PINNED_CODE_PATHS


def test_tanh_within_7_ulp_odd_bounded_and_in_place():
    """The scoring path's compiled tanh: within 7 ulp of float64's tanh (at most 6.9 over
    every positive float32 up to 12, checked once; here a dense sample and random bit
    patterns), odd to the bit, never beyond ±1, exact below 0.0004, written in place."""
    rng = np.random.default_rng(0)
    patterns = rng.integers(0, 0x41400000, 202_000, dtype=np.int32).view(np.float32)  # to 12
    grid = np.linspace(-12.0, 12.0, 101_101, dtype=np.float32)
    values = torch.from_numpy(np.concatenate([grid, patterns, -patterns]).reshape(-1, 101))
    inputs = values.numpy().copy()
    exact = np.tanh(inputs.astype(np.float64))
    same = tanh_in_place(values)
    assert same is values
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(values.numpy() - exact) / ulp) <= 7.0
    assert np.abs(values.numpy()).max() <= 1.0
    negated = torch.from_numpy(-inputs)
    assert torch.equal(tanh_in_place(negated), -values)
    small = np.abs(inputs) < 0.0004
    assert np.array_equal(values.numpy()[small], inputs[small])


def test_nan_stays_infinities_saturate_and_other_tensors_are_refused():
    values = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 20.0])
    tanh_in_place(values)
    assert values[0].isnan() and values[1:3].tolist() == [1.0, -1.0]
    assert values[3:].tolist() == [0.0, -0.0, 1.0] and values[4].signbit()
    with pytest.raises(ValueError, match="contiguous float32 CPU tensor"):
        tanh_in_place(torch.zeros(4, 3).T)
    with pytest.raises(ValueError, match="contiguous float32 CPU tensor"):
        tanh_in_place(torch.zeros(3, dtype=torch.float64))


def test_the_same_floats_on_the_pinned_and_the_native_code_path(tmp_path):
    """The kernel's additions, products and division are each correctly rounded and never
    fused, so numba's AVX2 build (pinned) and its build for this CPU give the same bits."""
    script = (
        "import hashlib, numpy as np, torch; "
        "from jobrec_scoring.activations import tanh_in_place; "
        "v = torch.linspace(-10, 10, 1_000_003); tanh_in_place(v); "
        "print(hashlib.sha256(v.numpy().tobytes()).hexdigest())"
    )
    digests = set()
    for native in ("0", "1"):
        env = {
            **{k: v for k, v in os.environ.items() if k not in PINNED_CODE_PATHS},
            NATIVE: native,
            "NUMBA_CACHE_DIR": str(tmp_path / native),  # compiled afresh for each path
        }
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        digests.add(done.stdout.strip())
    assert len(digests) == 1
