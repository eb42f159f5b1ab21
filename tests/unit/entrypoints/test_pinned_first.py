"""Every script a person runs (jobs/, benchmarks/) imports the project before numpy, torch or
any other numeric library: importing `jobrec_scoring` (which `jobrec_core` does first) pins
their CPU code paths, and numpy and OpenBLAS read theirs when they load. A benchmark that
loaded numpy first timed numpy's AVX-512 loops, which no pipeline process runs."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NUMERIC = {"numpy", "torch", "pandas", "scipy", "numba", "pyarrow", "pyspark", "delta", "gensim"}
PINNING = {"jobrec_scoring", "jobrec_core", "_resources"}  # _resources imports jobrec_core
SCRIPTS = sorted([*ROOT.glob("jobs/*.py"), *ROOT.glob("benchmarks/*.py")])


def first_top_level_imports(script: Path) -> list[str]:
    names: list[str] = []
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_the_project_is_imported_before_any_numeric_library(script: Path):
    imported = first_top_level_imports(script)
    numeric = [i for i, name in enumerate(imported) if name in NUMERIC]
    pinning = [i for i, name in enumerate(imported) if name in PINNING]
    if numeric:
        assert pinning and pinning[0] < numeric[0], f"{script.name} imports {imported}"
