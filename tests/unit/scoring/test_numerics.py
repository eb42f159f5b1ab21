"""One CPU code path for MKL, ATen, oneDNN, OpenBLAS, numpy and numba
(jobrec_scoring.numerics): set where unset, kept where the user chose, never on a CPU that
lacks it; and in force in a fresh process that imports the project, before torch computes."""

import json
import os
import subprocess
import sys

import pytest

from jobrec_scoring.numerics import AVX2_LEVEL, PINNED_CODE_PATHS, pin_cpu_code_paths


def test_pins_every_library_on_an_x86_cpu_with_avx2():
    environ: dict[str, str] = {}
    assert pin_cpu_code_paths(environ, "x86_64", {"sse4_2", *AVX2_LEVEL}) == PINNED_CODE_PATHS
    assert environ == PINNED_CODE_PATHS


def test_keeps_a_path_the_user_chose():
    environ = {"MKL_CBWR": "COMPATIBLE"}
    in_force = pin_cpu_code_paths(environ, "AMD64", AVX2_LEVEL)
    assert in_force["MKL_CBWR"] == "COMPATIBLE"
    assert in_force["OPENBLAS_CORETYPE"] == PINNED_CODE_PATHS["OPENBLAS_CORETYPE"]


def test_pins_nothing_when_asked_for_the_native_paths():
    environ = {"JOBREC_NATIVE_CODE_PATHS": "1"}
    assert pin_cpu_code_paths(environ, "x86_64", AVX2_LEVEL) == {}
    assert environ == {"JOBREC_NATIVE_CODE_PATHS": "1"}


@pytest.mark.parametrize(
    ("machine", "flags"),
    [("aarch64", {"asimd"}), ("x86_64", {"sse4_2"}), ("x86_64", {"avx2"})],  # AVX2 without FMA
)
def test_leaves_other_cpus_alone(machine, flags):
    environ: dict[str, str] = {}
    assert pin_cpu_code_paths(environ, machine, flags) == {}
    assert environ == {}


@pytest.mark.skipif(not pin_cpu_code_paths({}), reason="the pinned path is AVX2's, on x86")
def test_a_fresh_process_of_the_project_computes_on_the_pinned_path():
    unpinned = {k: v for k, v in os.environ.items() if k not in PINNED_CODE_PATHS}
    probe = (
        "import json, os, jobrec_core, torch, numba; "
        "from numpy._core._multiarray_umath import __cpu_features__ as numpy_uses; "
        f"print(json.dumps([{{k: os.environ.get(k) for k in {sorted(PINNED_CODE_PATHS)!r}}}, "
        "torch.backends.cpu.get_cpu_capability(), numpy_uses['AVX512F'], "
        "[numba.config.CPU_NAME, numba.config.CPU_FEATURES]]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=unpinned, capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    environ, capability, numpy_avx512, numba_target = found
    assert environ == PINNED_CODE_PATHS
    assert capability == "AVX2"
    assert numpy_avx512 is False  # numpy's AVX-512 loops off, on a CPU that has them too
    assert numba_target == ["haswell", ""]  # numba compiles for AVX2, not for this CPU
