"""tanh for the scoring path's term MLP: one compiled kernel that computes the same floats on
every CPU, at the speed of the fastest library kernel.

Scoring 100 jobs runs tanh ten times over about 52,000 float32 values (ten layers of ten
units over 52 terms x 100 jobs), so the kernel decides much of a re-ranking request. The
libraries' kernels are fast on some CPUs and slow on others, and each rounds its own way:
torch's (SLEEF, 0.5 ulp) takes 130 us a layer on one thread; numpy's takes 20 us on an
AVX-512 EPYC (its AVX-512 and its AVX2 loops alike) but was measured at 1.5 times torch's
time on an AVX2 EPYC. Either gives the same floats on every CPU only on the pinned code path
(:mod:`jobrec_scoring.numerics`), which had taken torch's: a pinned request took 2.7 times
as long as the CPU's own on an AVX-512 EPYC.

This kernel is a rational function, evaluated with IEEE additions, multiplications and one
division per value and no fused multiply-add (numba fuses only under `fastmath`). Each of those
operations is correctly rounded, whatever the vector width, so an AVX2, AVX-512 or ARM build
gives the same bits, pinned or not. It runs in 17 us a layer on the AVX-512 EPYC
(docs/BENCHMARKS.md, "A compiled tanh for the scoring path").

The function is Eigen's 13/6-degree rational interpolant of tanh on [-7.905, 7.905]
(`generic_fast_tanh_float`, published coefficients), outside of which float32's tanh is
±1, with tanh(x) = x below 0.0004 in magnitude (within one ulp there). Checked on every
positive float32 from 1e-30 to 12: at most 6.9 ulp (4e-7) from float64's tanh, never beyond
±1, odd to the bit. Training (with gradients) keeps torch's `nn.Tanh`; the two differ by
less than the float32 sums' own order differences between the scoring and training forms of
the MLP (about 1e-6 relative).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numba import njit

_FLOAT = np.float32
# the numerator's odd coefficients, x^1 to x^13, and the denominator's even ones, x^0 to x^6
_P1, _P3, _P5, _P7, _P9, _P11, _P13 = (
    _FLOAT(4.89352455891786e-03),
    _FLOAT(6.37261928875436e-04),
    _FLOAT(1.48572235717979e-05),
    _FLOAT(5.12229709037114e-08),
    _FLOAT(-8.60467152213735e-11),
    _FLOAT(2.00018790482477e-13),
    _FLOAT(-2.76076847742355e-16),
)
_Q0, _Q2, _Q4, _Q6 = (
    _FLOAT(4.89352518554385e-03),
    _FLOAT(2.26843463243900e-03),
    _FLOAT(1.18534705686654e-04),
    _FLOAT(1.19825839466702e-06),
)
# beyond it float32's tanh is ±1; below _LINEAR, tanh(x) is x to within one ulp
_SATURATED = _FLOAT(7.90531110763549805)
_LINEAR = _FLOAT(0.0004)
_SIGNATURE = "void(float32[::1])"


def _compiled(kernel: Callable[[np.ndarray], None]) -> Any:
    """`kernel` compiled on import (no first-request delay), its machine code cached on disk
    where numba finds a writable place (beside this file, or its user cache,
    `NUMBA_CACHE_DIR`), else compiled in memory: a served model whose code folder and home
    are read-only still loads."""
    options = {"nogil": True, "error_model": "numpy"}
    try:
        return njit(_SIGNATURE, cache=True, **options)(kernel)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return njit(_SIGNATURE, cache=False, **options)(kernel)


@_compiled
def _tanh_float32(values: np.ndarray) -> None:  # pragma: no cover - compiled
    """tanh of each value, in place. NaN stays NaN (neither comparison holds), ±inf gives ±1."""
    for i in range(values.shape[0]):
        original = values[i]
        x = _SATURATED if original > _SATURATED else original
        x = -_SATURATED if x < -_SATURATED else x
        x2 = x * x
        numerator = x2 * _P13 + _P11
        numerator = x2 * numerator + _P9
        numerator = x2 * numerator + _P7
        numerator = x2 * numerator + _P5
        numerator = x2 * numerator + _P3
        numerator = x2 * numerator + _P1
        numerator = x * numerator
        denominator = x2 * _Q6 + _Q4
        denominator = x2 * denominator + _Q2
        denominator = x2 * denominator + _Q0
        rational = numerator / denominator
        values[i] = original if abs(original) < _LINEAR else rational


def tanh_in_place(values: torch.Tensor) -> torch.Tensor:
    """tanh of a contiguous float32 CPU tensor without gradients, written into the tensor
    itself (the scoring path's term MLP, `jobrec_scoring.network`)."""
    if values.dtype != torch.float32 or values.device.type != "cpu" or not values.is_contiguous():
        raise ValueError(
            f"tanh_in_place takes a contiguous float32 CPU tensor, not {values.dtype} on "
            f"{values.device} (contiguous: {values.is_contiguous()})"
        )
    if values.requires_grad and torch.is_grad_enabled():
        raise ValueError("tanh_in_place computes no gradient: call it without autograd")
    _tanh_float32(values.detach().numpy().reshape(-1))
    return values
