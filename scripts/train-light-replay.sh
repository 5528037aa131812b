#!/usr/bin/env bash
# The light-conductor result in docs/training.md: on the RouteLLM outcome matrix, store the
# untrained policy, train one light conductor per cost penalty λ on the train split (CMA-ES,
# seconds each), and evaluate them all on the held-out test split beside the baselines.
#
#   PODIUM_HOME=/tmp/podium-docs scripts/train-light-replay.sh [DATA_DIR]
# (a separate PODIUM_HOME keeps these versions out of your own registry)
set -euo pipefail
data="${1:-data}"
matrix="$data/outcomes/routellm-gpt4-mixtral.csv"
podium=${PODIUM:-podium}
name=routellm-light
$podium train --replay "$matrix" --name "$name" --generations 0            # v1: untrained
methods="single,random,router,oracle,light:$name@v1"
version=1
for lam in 0 5 10 20 40; do
  $podium train --replay "$matrix" --name "$name" --lam "$lam" --generations 60
  version=$((version + 1))
  methods="$methods,light:$name@v$version"
done
$podium eval --replay "$matrix" --methods "$methods" --out docs/eval/light-replay --summary-only
