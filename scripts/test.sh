#!/usr/bin/env bash
# Set up (if needed), lint, type-check and run the test suite against the real stack (Spark,
# Delta, a local Elasticsearch node the tests start, MLflow, Petastorm, torch).
# Arguments go to pytest, e.g. scripts/test.sh tests/unit -k config
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "test: ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "test: mypy"
.venv/bin/mypy
echo "test: pytest"
exec .venv/bin/python -m pytest "$@"
