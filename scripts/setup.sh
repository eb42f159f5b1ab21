#!/usr/bin/env bash
# Set up everything jobrec needs on this machine: the Python environment (.venv) with the pinned
# packages of deps/, and the JVM jars of jvm/pom.xml (Delta, the ES-Hadoop connector, the local
# Elasticsearch node) fetched from Maven Central into build/jars/.
# Safe to rerun: each step is skipped while its inputs are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
STAMPS=build/stamps
mkdir -p "$STAMPS"

fail() { echo "setup: $*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null || fail "$PYTHON not found (Python 3.10-3.12 is needed)"
"$PYTHON" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, 12)))' \
  || fail "Python 3.10-3.12 is needed, $PYTHON is $("$PYTHON" --version 2>&1)"
command -v java >/dev/null || [ -n "${JAVA_HOME:-}" ] || fail "Java 17+ is needed (Spark and the Elasticsearch node)"
command -v mvn >/dev/null || fail "Maven (mvn) is needed to fetch the JVM dependencies"

# Re-run a step only when the files it depends on change.
fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }
up_to_date() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }

# The three installs, run by the installer command given as the arguments (uv's or pip's):
# the pinned packages, the ones pinned without their declared dependencies, and jobrec itself.
install_packages() {
  "$@" -r deps/requirements.txt -c deps/constraints.txt &&
    "$@" --no-deps -r deps/requirements-nodeps.txt -c deps/constraints.txt &&
    "$@" --no-deps --no-build-isolation -e .
}
# The packages of deps/ into .venv, by uv. uv does not read pip's settings: the environment's
# index, extra index and local wheel folders (PIP_*) are passed on where no UV_* is set.
install_packages_with_uv() {
  local settings=()
  if [ -n "${PIP_INDEX_URL:-}" ] && [ -z "${UV_INDEX_URL:-}" ]; then
    settings+=("UV_INDEX_URL=$PIP_INDEX_URL")
  fi
  if [ -n "${PIP_EXTRA_INDEX_URL:-}" ] && [ -z "${UV_EXTRA_INDEX_URL:-}" ]; then
    settings+=("UV_EXTRA_INDEX_URL=$PIP_EXTRA_INDEX_URL")
  fi
  if [ -n "${PIP_FIND_LINKS:-}" ] && [ -z "${UV_FIND_LINKS:-}" ]; then
    settings+=("UV_FIND_LINKS=${PIP_FIND_LINKS// /,}")
  fi
  install_packages env "${settings[@]}" .venv/bin/uv pip install --python .venv/bin/python --quiet
}
install_packages_with_pip() {
  install_packages .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile
}

python_inputs=(deps/installers.txt deps/requirements.txt deps/constraints.txt deps/requirements-nodeps.txt pyproject.toml)
python_fp=$(fingerprint "${python_inputs[@]}")
if [ -x .venv/bin/python ] && up_to_date python "$python_fp"; then
  echo "setup: Python environment up to date (.venv)"
else
  echo "setup: installing the Python environment into .venv (first time: a few minutes)"
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r deps/installers.txt
  # uv installs the packages (from its cache: 26 s against pip's 1 min 44 s on 2 cores); pip,
  # which reads its own configuration (pip.conf: a mirror, say), is the fallback. Neither
  # byte-compiles: that is done below, on every core.
  # JOBREC_INSTALLER=pip skips uv.
  if [ "${JOBREC_INSTALLER:-uv}" = pip ]; then
    install_packages_with_pip
  elif install_packages_with_uv; then
    echo "setup: installed the packages with uv"
  else
    echo "setup: uv could not install them (above); installing with pip instead"
    install_packages_with_pip
  fi
  # As with pip, a file this Python cannot compile (torch ships a 3.12-only test helper) is
  # skipped: it would fail only if imported. The packages' own test folders (4,000 of the
  # 17,000 files, never imported by jobrec) are left out: 42-49 s instead of 57 on 2 cores.
  .venv/bin/python -c 'import compileall, re, sysconfig; compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=2, workers=0, rx=re.compile(r"[/\\]tests?[/\\]"))'
  echo "$python_fp" > "$STAMPS/python"
fi

jvm_fp=$(fingerprint $(find jvm -type f -not -path '*/target/*' | sort))
if [ -d build/jars/spark ] && [ -d build/jars/es/lib ] && up_to_date jvm "$jvm_fp"; then
  echo "setup: JVM jars up to date (build/jars)"
else
  echo "setup: fetching JVM dependencies from Maven Central into build/jars"
  rm -rf build/jars
  mvn -B -q -ntp -Dstyle.color=never -f jvm/pom.xml package
  echo "$jvm_fp" > "$STAMPS/jvm"
fi
# spark-submit reads its jars from the environment's spark-defaults.conf (see
# jobrec_core.platform.spark.install_spark_defaults); written every time, from conf/local.yaml.
.venv/bin/python -c 'from jobrec_core.config import load_config; from jobrec_core.platform.spark import install_spark_defaults; print("setup: wrote", install_spark_defaults(load_config("local")))'
echo "setup: done"
