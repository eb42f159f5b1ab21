"""One CPU code path for the numeric libraries, whatever the x86 machine: the same seed and
data give the same models and tables on every CPU.

MKL (torch's matrix products on a CPU), ATen's vectorised kernels (torch's element-wise ops
such as `tanh`), oneDNN (torch's LSTM on a CPU: the title normaliser), OpenBLAS (numpy's
matrix products), numpy's own dispatched loops (`log`, `exp`, `power`, `log1p`: Intel's
SVML on AVX-512, other code on AVX2) and numba (which compiles the Word Mover's Distance
solver, the profile features' loops and the histogram counts for the CPU it runs on) each
pick kernels for the CPU they find: AVX-512 on one machine, AVX2 on the next, another path
again for MKL on AMD CPUs. The kernels sum in other orders or round otherwise, so their
results differ in the last bits, and a training run amplifies that: early stopping keeps
another epoch, and DRMM v10 on one generated dataset moved by 0.013 P@10 between two 2-core
machines (docs/BENCHMARKS.md, "One CPU code path"). The WMD solver's distance sums may be
reordered (`fastmath`), so their vector width shows in their last bits: on an AVX-512 machine
its distances differ from those compiled for AVX2, and the cleaning stage keeps or drops a
candidate by a threshold on them.
Each library has an environment variable that fixes its path; AVX2, which every x86 CPU of the
last ten years has, is the path we pin. Its price depends on the CPU (docs/BENCHMARKS.md):
on an AVX2 EPYC it is faster than the default (MKL takes a generic path on AMD CPUs). The
scoring path's tanh, which once made a pinned request 2.7 times as long on an AVX-512 EPYC,
is no library's: `jobrec_scoring.activations` computes the same floats on every path.

The variables must be set before a library first computes (MKL, ATen and oneDNN read theirs on
the first operation, OpenBLAS and numpy's dispatcher when numpy loads, numba when it is
imported; numba's cache of compiled loops is kept per target, so a pinned process never reads
code compiled for the host).
:func:`pin_cpu_code_paths` runs when `jobrec_scoring` is imported, which `jobrec_core` does
first of all, so every process of the pipeline (the driver, Spark's Python workers, the
training processes) and a served model pin the same paths. A value already in the environment
is kept: a user may choose another, or set `JOBREC_NATIVE_CODE_PATHS=1` to let each library
choose for the CPU (faster on some machines, and then not reproducible across them;
`benchmarks/code_path.py` times both).
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping
from pathlib import Path

# variable -> the AVX2 path of its library
PINNED_CODE_PATHS = {
    # numba's LLVM target: Haswell's instruction set (AVX2, FMA, BMI2), with no feature of the
    # host's added to it (an empty list: the target's own)
    "NUMBA_CPU_NAME": "haswell",
    "NUMBA_CPU_FEATURES": "",
    "MKL_CBWR": "AVX2,STRICT",  # MKL's conditional numerical reproducibility, alignment aside
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorised kernels
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and SciPy's OpenBLAS: its AVX2 kernels
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN, under torch's LSTM (the title normaliser)
    # numpy's dispatched loops: none of the AVX-512 ones (numpy 1.26's names, and 2.x's SPR;
    # a name this numpy does not know, or this CPU lacks, is ignored)
    "NPY_DISABLE_CPU_FEATURES": "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX "
    "AVX512_CNL AVX512_ICL AVX512_SPR",
}
NATIVE = "JOBREC_NATIVE_CODE_PATHS"  # "1": pin nothing
_X86 = {"x86_64", "amd64"}
# What the pinned paths execute (OpenBLAS's and numba's Haswell code uses FMA and BMI2 too):
# every Intel CPU since Haswell and AMD CPU since Excavator has all three.
AVX2_LEVEL = {"avx2", "fma", "bmi2"}


def pin_cpu_code_paths(
    environ: MutableMapping[str, str] = os.environ,
    machine: str | None = None,
    cpu_flags: set[str] | None = None,
) -> dict[str, str]:
    """Set :data:`PINNED_CODE_PATHS` in `environ` where unset, on an x86 CPU with
    :data:`AVX2_LEVEL` (on others the variables would name paths that do not exist, or code
    it cannot execute) unless :data:`NATIVE` is "1"; the variables now in force."""
    if environ.get(NATIVE) == "1":
        return {}
    machine = (machine if machine is not None else platform.machine()).lower()
    flags = cpu_flags if cpu_flags is not None else _cpu_flags()
    if machine not in _X86 or not AVX2_LEVEL.issubset(flags):
        return {}
    for name, value in PINNED_CODE_PATHS.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name in PINNED_CODE_PATHS}


def _cpu_flags() -> set[str]:
    """The CPU's feature flags from Linux's /proc/cpuinfo; the AVX2 level assumed elsewhere
    (macOS and Windows on x86 have had it for a decade, and no flag file to read)."""
    info = Path("/proc/cpuinfo")
    if not info.exists():
        return set(AVX2_LEVEL)
    for line in info.read_text(errors="replace").splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()
