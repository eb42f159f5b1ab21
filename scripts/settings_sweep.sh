#!/usr/bin/env bash
# The whole pipeline on data settings the project was never tuned on: each line of settings
# below (or of the file given as $1) is one dataset, run by `jobrec run` in its own state
# (tables, Elasticsearch node, MLflow store; an earlier run's state is removed first) under
# $SWEEP_ROOT, and its ground-truth P@10 of BM25, the profile baseline, v10 and v5 printed, the
# retrievers' pools and pipelines (docs/TRAINING.md, "Small training sets"), and the temporal
# evaluation's two settings (docs/EVALUATION.md, experiment 6).
# About 6 minutes a tiny dataset on 2 cores; PRESET=demo runs the demo's scale (~20 min each).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
ROOT=${SWEEP_ROOT:-.jobrec/sweep}
PRESET=${PRESET:-tiny}
DEFAULT_SETTINGS='a run.seed=7 data.noise_rate=0.35 data.related_rate=0.8 data.related_share=0.5 data.long_ad_rate=0.3
b run.seed=11 data.noise_rate=0.0 data.related_rate=0.0
c run.seed=13 data.noise_rate=0.25 data.long_ad_rate=0.0 data.occupation_popularity_sigma=2.0'
settings=$([ $# -gt 0 ] && cat "$1" || echo "$DEFAULT_SETTINGS")
quick_titles=()
[ "$PRESET" = tiny ] && quick_titles=(--set titles.steps=40 --set titles.log_every=20)

while read -r name rest; do
  [ -z "$name" ] && continue
  # the name becomes a folder that is removed below: a plain word, never a path
  [[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "sweep: dataset name '$name' is not a plain word" >&2; exit 2; }
  root=$(realpath -m "$ROOT/$name")
  # Each dataset starts from nothing. `--fresh` only forgets the run's steps: an earlier
  # run's registry would still hold a champion, which the gate would then weigh the new
  # models against instead of BM25's order, and serving would start from it.
  rm -rf "$root"
  mkdir -p "$root"
  overrides=()
  for setting in $rest; do overrides+=(--set "$setting"); done
  echo "sweep: $name ($rest), log in $root/log"
  if ! .venv/bin/jobrec run --preset "$PRESET" --fresh \
      --set "storage.root=$root/store" --set "elasticsearch.local.workdir=$root/es" \
      --set "mlflow.tracking_uri=sqlite:///$root/mlflow.db" --set "mlflow.artifact_root=$root/artifacts" \
      "${quick_titles[@]}" "${overrides[@]}" >"$root/log" 2>&1; then
    echo "sweep: $name FAILED, the end of its log:"; tail -20 "$root/log"; continue
  fi
  report="$root/store/$PRESET/reports/evaluation/RESULTS.md"
  # the demo's report appends committed sections: its own tables are the first ones
  # (table 3: BM25's pools re-ranked; table 5, where the evaluation runs it: each retriever's
  # pool and pipeline, the one the held-out metric selects being what recommendations serve)
  awk '/^## .*committed snapshot/ {exit} /^3\. Ground truth/ {on=1} /^4\. Held-out/ {on=0} /^5\. Retrievers/ {on=2}
       /^6\. Temporal/ {on=3} on == 3 && /Held-out interest of this mode/ {on=0}
       on == 1 && /^  ranker|BM25 |profile-tfidf |DRMM v10 |DRMM v5 |ceiling/ {print}
       on == 2 {print} on == 2 && /selected by/ {on=0}
       on == 3 && /^6\.|all live|fresh ads only|^  ranker|BM25 |profile-tfidf |co-interest |DRMM v10 |DRMM v5 |>> |the champion/ {print}' "$report"
done <<<"$settings"
