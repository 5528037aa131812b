#!/usr/bin/env bash
# The light conductor on the embedded local pool (docs/training.md): record what each local
# worker scores and costs on GSM8K questions (live, through the request cache), as an outcome
# matrix — 40 sampled train questions, plus the test questions the live eval has finished —
# then train one light conductor per cost penalty λ on the train rows and evaluate them in
# replay on the test rows, beside the untrained policy and the baselines.
#
#   PODIUM_HOME=/tmp/podium-docs scripts/train-light-local.sh [DATA_DIR] [TEST_QUESTIONS]
# (about 40 s of CPU per train question for the three workers when nothing is cached)
set -euo pipefail
data="${1:-../shared/data}"
tests="${2:-19}"   # how many of scripts/eval-live.sh's sampled test questions are finished
cache="${PODIUM_EVAL_CACHE:-$HOME/.cache/podium/eval/requests.sqlite3}"
podium=${PODIUM:-podium}
matrix=docs/eval/local-pool/outcomes.csv
rm -f "$matrix"
$podium eval --tasks "$data/benchmarks/gsm8k/train.jsonl" --sample 40 --seed 0 --methods single \
  --cache "$cache" --out "${TMPDIR:-/tmp}/podium-local-train" --no-plot --matrix "$matrix"
$podium eval --tasks "$data/benchmarks/gsm8k/test.jsonl" --sample 50 --seed 0 --limit "$tests" \
  --methods single --cache "$cache" --out "${TMPDIR:-/tmp}/podium-local-test" --no-plot --matrix "$matrix"
name=local-light
$podium train --replay "$matrix" --name "$name" --generations 0 --dims 8        # v1: untrained
methods="single,random,oracle,light:$name@v1"
version=1
for lam in 0 100 300; do
  $podium train --replay "$matrix" --name "$name" --lam "$lam" --generations 60 --dims 8
  version=$((version + 1))
  methods="$methods,light:$name@v$version"
done
$podium eval --replay "$matrix" --methods "$methods" --out docs/eval/light-local --summary-only
