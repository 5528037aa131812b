#!/usr/bin/env bash
# The held-out proof of docs/learned-workflows.md, on the recorded workflow bank (data/banks/local):
#
# 1. train the plan conductor on the bank's training rows only (60 questions), three seeds;
# 2. score every method on the 150 held-out rows (100 GSM8K test, 50 MBPP test) by replaying its
#    workflows on the recorded steps (podium eval --replay BANK_DIR): the single workers, every
#    fixed plan of the catalogue, the learned router (23 λ), the three trained conductors and the
#    per-question oracle, each paired with the greedy 1.5B worker alone (single:solve@1.5b);
# 3. with LIVE=1, also the methods outside the catalogue (the pool's default conductor, the fixed
#    pipeline, MoA) live over the local pool with the request cache — hours on 2 CPU cores.
#
# Nothing here is chosen on the held-out rows: the conductor's settings (--dims 4, λ = 0) were
# chosen by cross-validation on the training rows.
set -euo pipefail
cd "$(dirname "$0")/.."
PODIUM=${PODIUM:-.venv/bin/podium}
BANK=${BANK:-data/banks/local}
OUT=${OUT:-docs/eval/heldout}
NAME=${NAME:-heldout}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
methods="single,router,oracle,plans"
for seed in 0 1 2; do
  "$PODIUM" train --policy plans --replay "$BANK" --embedder smollm2-135m-instruct --lam 0 --dims 4 \
    --seed "$seed" --name "$NAME-s$seed" --json > "/tmp/podium-$NAME-s$seed.json"
  ref=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "/tmp/podium-$NAME-s$seed.json")
  methods="$methods,light:$ref"
done
"$PODIUM" eval --replay "$BANK" --methods "$methods" --against single:solve@1.5b --out "$OUT"
if [[ "${LIVE:-0}" == 1 ]]; then
  CACHE=${CACHE:-$HOME/.cache/podium/eval/requests.sqlite3}
  "$PODIUM" bank restore-cache "$BANK" --cache "$CACHE"
  "$PODIUM" eval --tasks data/benchmarks/gsm8k/test.jsonl --tasks data/benchmarks/mbpp/mbpp.jsonl \
    --ids "$BANK/ids/test.txt" --pool local-tools --cache "$CACHE" \
    --methods "conductor,single:qwen2.5-coder-1.5b,pipeline,moa" --out "$OUT-live"
fi
