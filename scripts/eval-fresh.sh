#!/usr/bin/env bash
# The second held-out test of docs/learned-workflows.md: questions drawn after the
# mixture-of-thought plans and the cluster table were designed (data/banks/local/ids/fresh.txt:
# GSM8K test and MBPP test questions in no bank list and no committed report; later lists may
# hold HumanEval questions too), executed live over the local pool — every call real, through
# the request cache — for the 1.5B worker alone and the frozen plan conductor
# (docs/eval/fresh/cluster-policy.npz: the cluster table trained by
# scripts/eval-heldout.sh on the bank's 60 training rows, --clusters auto, seed 0), paired.
#   LIMIT: the first N questions of the list (default all 120; the order interleaves two GSM8K
#   questions and one MBPP question, so any prefix keeps that mix). Rerunning with a larger LIMIT
#   reuses the cached calls.
#   IDS, POLICY, OUT: another fresh test — an id list from scripts/draw-fresh-ids.py and a policy
#   frozen before it runs (defaults: the first fresh test's fresh.txt and cluster-policy.npz).
# About 1 minute per GSM8K question and half a minute per MBPP question on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PODIUM=${PODIUM:-.venv/bin/podium}
OUT=${OUT:-docs/eval/fresh}
IDS=${IDS:-data/banks/local/ids/fresh.txt}
POLICY=${POLICY:-docs/eval/fresh/cluster-policy.npz}
CACHE=${CACHE:-$HOME/.cache/podium/eval/requests.sqlite3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
limit=()
if [[ -n "${LIMIT:-}" ]]; then limit=(--limit "$LIMIT"); fi
"$PODIUM" eval --tasks data/benchmarks/gsm8k/test.jsonl --tasks data/benchmarks/mbpp/mbpp.jsonl \
  --tasks data/benchmarks/humaneval/HumanEval.jsonl \
  --ids "$IDS" "${limit[@]}" --pool local-tools --cache "$CACHE" \
  --methods "single:qwen2.5-coder-1.5b,light:$POLICY" \
  --against single:qwen2.5-coder-1.5b --out "$OUT" "$@"
