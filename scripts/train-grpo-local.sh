#!/usr/bin/env bash
# GRPO of the LM conductor on the embedded local pool, on CPU (docs/training.md "GRPO on the local
# pool"): SmolLM2-135M as the base conductor, trained on the recorded results of the pool's three
# workers (docs/eval/local-pool/outcomes.csv, written by scripts/train-light-local.sh), then
# evaluated in replay on the matrix's held-out test rows beside the untrained base, the format
# warm start alone, the default light conductor and the baselines.
#
#   PODIUM_HOME=/tmp/podium-grpo scripts/train-grpo-local.sh [STEPS]   (default 30)
#
# Three versions of the registry name lm-local (a fresh PODIUM_HOME numbers them v1–v3):
#   v1  format warm start (1 epoch) + STEPS GRPO steps     about 35 s per GRPO step on 2 quiet cores
#   v2  the untrained base (--steps 0 --warm-start-epochs 0, a zero adapter)
#   v3  the format warm start alone (--steps 0; the same seed, so v1's starting point)
set -euo pipefail
steps="${1:-30}"
podium=${PODIUM:-podium}
matrix=docs/eval/local-pool/outcomes.csv
train() {
  $podium train --policy lm --name lm-local --replay "$matrix" --model smollm2-135m-instruct --lam 300 \
    --learning-rate 5e-5 "$@"
}
train --steps "$steps"
train --steps 0 --warm-start-epochs 0
train --steps 0
# held out: the matrix's test rows, with the workers in the matrix's order and reversed (a
# conductor that only learned "pick Model 0" fails the second)
methods=lm:lm-local@v2,lm:lm-local@v3,lm:lm-local@v1,light:src/podium/pools/local-light.npz,single,random,oracle
python scripts/reverse-matrix.py "$matrix" docs/eval/local-pool/outcomes-reversed.csv
$podium eval --replay "$matrix" --split test --methods "$methods" --out docs/eval/grpo-local
$podium eval --replay docs/eval/local-pool/outcomes-reversed.csv --split test --methods "$methods" \
  --out docs/eval/grpo-local-reversed
