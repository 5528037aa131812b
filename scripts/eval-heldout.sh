#!/usr/bin/env bash
# The held-out proof of docs/learned-workflows.md: every method on the 150 held-out questions of
# data/banks/local/ids/test.txt (100 GSM8K test, 50 MBPP test), live over the local pool with the
# request cache. The bank's recorded calls are put into the cache first (podium bank restore-cache),
# so every catalogue step is a cache hit — the calls were real, recorded by scripts/record-bank.sh —
# and only methods outside the catalogue (pipeline, MoA, the LM conductors) call models now.
set -euo pipefail
cd "$(dirname "$0")/.."
PODIUM=${PODIUM:-.venv/bin/podium}
BANK=${BANK:-data/banks/local}
OUT=${OUT:-docs/eval/heldout}
CACHE=${CACHE:-$HOME/.cache/podium/eval/requests.sqlite3}
METHODS=${METHODS:-conductor,single,pipeline,moa,plan:vote(sample×5@1.5b),plan:run(program@1.5b),plan:state@0.5b(program@1.5b)}
"$PODIUM" bank restore-cache "$BANK" --cache "$CACHE"
"$PODIUM" eval --tasks data/benchmarks/gsm8k/test.jsonl --tasks data/benchmarks/mbpp/mbpp.jsonl \
  --ids "$BANK/ids/test.txt" --pool local-tools --cache "$CACHE" --methods "$METHODS" --out "$OUT"
