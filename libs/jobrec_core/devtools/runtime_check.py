"""Would installing the wheel change the target runtime's libraries? Asked of pip itself.

Databricks Runtime ML comes with numpy, pandas, pyarrow, torch, pyspark and MLflow built and
tested together; a wheel whose ranges exclude one of them makes pip upgrade or downgrade it
on every cluster, under Spark's and Databricks' own code. This check builds the wheel, makes
a scratch environment in which every library of the runtime's list
(`deploy/runtime/dbr-16.4-lts-ml.txt`) counts as installed (its metadata only, no code), and
runs `pip install --dry-run --report` of the wheel there: pip resolves the wheel's
dependencies from PyPI exactly as it would on a cluster and reports what it would install.
None of :data:`PROTECTED` may appear in that report.

The scratch environment runs this machine's Python (3.11), the runtime's is 3.12: the wheel
allows both, and every dependency it adds publishes wheels for both.

    python -m jobrec_core.devtools.runtime_check            # exit 1 if a protected one moves
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[3]
RUNTIME_LIST = REPO / "deploy" / "runtime" / "dbr-16.4-lts-ml.txt"
PROTECTED = ("numpy", "pandas", "pyarrow", "torch", "pyspark", "mlflow", "mlflow-skinny")


def canonical(name: str) -> str:
    """PEP 503's normalised project name (`PyYAML` and `pyyaml` are one project)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_libraries(listing: Path) -> dict[str, str]:
    """`name==version` lines of a runtime's list (comments and blank lines skipped)."""
    libraries: dict[str, str] = {}
    for number, raw in enumerate(listing.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, separator, version = line.partition("==")
        if not separator or not name.strip() or not version.strip():
            raise ValueError(f"{listing}:{number}: expected name==version, got {raw!r}")
        libraries[canonical(name.strip())] = version.strip()
    return libraries


@dataclass(frozen=True)
class Change:
    name: str
    runtime: str | None  # None: not on the runtime, pip adds it
    wheel_needs: str

    def format(self) -> str:
        before = self.runtime or "absent"
        return f"{self.name}: {before} -> {self.wheel_needs}"


@dataclass(frozen=True)
class RuntimeCheck:
    changes: tuple[Change, ...]  # everything pip would install
    protected: tuple[Change, ...]  # those of them the runtime must keep

    @property
    def passed(self) -> bool:
        return not self.protected

    def format(self) -> str:
        replaced = [c for c in self.changes if c.runtime is not None]
        added = [c for c in self.changes if c.runtime is None]
        lines = [
            f"installing the wheel on the runtime: {len(added)} libraries added, "
            f"{len(replaced)} replaced"
        ]
        lines += [f"  replaced {c.format()}" for c in replaced]
        lines += [f"  added    {c.name} {c.wheel_needs}" for c in added]
        verdict = (
            "none of " + ", ".join(PROTECTED) + " changes"
            if self.passed
            else "PROTECTED LIBRARIES CHANGE: " + "; ".join(c.format() for c in self.protected)
        )
        return "\n".join([*lines, verdict])


def build_wheel(into: Path) -> Path:
    """The project's wheel, as the bundle builds it (no dependencies bundled)."""
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    command += ["--no-build-isolation", "--wheel-dir", str(into), str(REPO)]
    subprocess.run(command, check=True)
    [wheel] = into.glob("jobrec-*.whl")
    return wheel


def simulated_runtime(directory: Path, libraries: dict[str, str]) -> Path:
    """A virtual environment (no pip of its own) where each library is installed as far as
    pip can tell: a `.dist-info` with its name and version. Returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    python = directory / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    for name, version in libraries.items():
        info = Path(purelib) / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("runtime-check\n")
        (info / "RECORD").write_text("")
    return python


def planned_installs(python: Path, wheel: Path, report: Path) -> dict[str, str]:
    """What `pip install --dry-run` of `wheel` into `python`'s environment would install."""
    command = [sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run"]
    command += ["--quiet", "--disable-pip-version-check", "--report", str(report), str(wheel)]
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode != 0:
        raise RuntimeError(
            "pip could not resolve the wheel against the runtime's libraries:\n"
            + finished.stderr[-4000:]
        )
    installs = json.loads(report.read_text())["install"]
    return {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}


def check_runtime(listing: Path = RUNTIME_LIST) -> RuntimeCheck:
    libraries = runtime_libraries(listing)
    with tempfile.TemporaryDirectory(prefix="jobrec-runtime-check-") as scratch:
        root = Path(scratch)
        wheel = build_wheel(root / "dist")
        python = simulated_runtime(root / "runtime", libraries)
        planned = planned_installs(python, wheel, root / "report.json")
    changes = tuple(
        Change(name, libraries.get(name), version)
        for name, version in sorted(planned.items())
        if name != "jobrec"
    )
    protected = tuple(c for c in changes if c.name in PROTECTED)
    return RuntimeCheck(changes, protected)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", type=Path, default=RUNTIME_LIST, help="name==version list")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    log.info(
        "resolving the wheel against %s (Python %s here)",
        args.runtime,
        sysconfig.get_python_version(),
    )
    result = check_runtime(args.runtime)
    print(result.format())
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
