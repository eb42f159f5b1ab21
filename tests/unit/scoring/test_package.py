"""The scoring package ships alone inside every registered model: it may import numpy, pandas,
scipy, numba, torch, MLflow and itself, nothing else (checked on its source, so a new import
fails here before it fails on a serving endpoint)."""

import ast
from pathlib import Path

import jobrec_scoring

ALLOWED = {"numpy", "pandas", "scipy", "numba", "torch", "mlflow", "jobrec_scoring"}


def imported_packages(source: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_scoring_package_imports_only_what_the_served_model_installs():
    import sys

    package = Path(jobrec_scoring.__file__).parent
    modules = sorted(package.glob("*.py"))
    assert {m.stem for m in modules} >= {"model", "network", "inputs", "vectors", "served"}
    for module in modules:
        third_party = imported_packages(module) - set(sys.stdlib_module_names) - {"__future__"}
        assert third_party <= ALLOWED, f"{module.name} imports {third_party - ALLOWED}"
