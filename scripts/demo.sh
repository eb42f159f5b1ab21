#!/usr/bin/env bash
# Set up (if needed) and run the pipeline on the embedded default: local Spark, the project's
# own Elasticsearch node, a local MLflow store. Arguments go to `jobrec demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/jobrec demo "$@"
