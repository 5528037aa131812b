#!/usr/bin/env bash
# The light conductor on the embedded local pool (docs/training.md), the one the default `local`
# pool ships as its conductor (src/podium/pools/local-light.npz):
#
# 1. record what each local worker scores and costs, live through the request cache, as an
#    outcome matrix (docs/eval/local-pool/outcomes.csv): 70 sampled GSM8K train questions and 30
#    MBPP train questions, plus the test questions scripts/eval-live.sh has finished so far;
# 2. train one light conductor per cost penalty λ on the train rows, on SmolLM2-135M's
#    mean-pooled hidden state (llama.cpp: no torch where the conductor runs);
# 3. evaluate them in replay on the test rows, beside the untrained policy and the baselines.
#
#   PODIUM_HOME=/tmp/podium-docs scripts/train-light-local.sh [DATA_DIR] [GSM8K_TESTS] [MBPP_TESTS]
# GSM8K_TESTS / MBPP_TESTS: how many of eval-live.sh's sampled test questions are finished
# (scripts/live-progress.py counts them). About 40 s of CPU per train question for the three
# workers when nothing is cached; seconds when everything is.
set -euo pipefail
data="${1:-data}"
gsm8k_tests="${2:-24}"
mbpp_tests="${3:-0}"
cache="${PODIUM_EVAL_CACHE:-$HOME/.cache/podium/eval/requests.sqlite3}"
podium=${PODIUM:-podium}
tmp="${TMPDIR:-/tmp}"
matrix=docs/eval/local-pool/outcomes.csv
gsm8k="$data/benchmarks/gsm8k"
mbpp="$data/benchmarks/mbpp/mbpp.jsonl"
record() {  # record ARGS...: single-worker results of a task sample into the matrix
  $podium eval "$@" --methods single --cache "$cache" --out "$tmp/podium-local-matrix" --no-plot --summary-only \
    --matrix "$matrix"
}
rm -f "$matrix"
record --tasks "$gsm8k/train.jsonl" --sample 40 --seed 0
record --tasks "$gsm8k/train.jsonl" --sample 30 --seed 1
record --tasks "$mbpp" --split train --sample 30 --seed 0
record --tasks "$gsm8k/test.jsonl" --sample 50 --seed 0 --limit "$gsm8k_tests"
if [ "$mbpp_tests" -gt 0 ]; then
  record --tasks "$mbpp" --split test --sample 30 --seed 0 --limit "$mbpp_tests"
fi
name=local-light
train() { $podium train --replay "$matrix" --name "$name" --dims 8 --embedder smollm2-135m-instruct "$@"; }
train --generations 0        # v1: the untrained policy
methods="single,random,oracle,light:$name@v1"
version=1
for lam in 0 100 300; do
  train --lam "$lam" --generations 60
  version=$((version + 1))
  methods="$methods,light:$name@v$version"
done
$podium eval --replay "$matrix" --methods "$methods" --out docs/eval/light-local --summary-only
