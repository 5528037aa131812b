#!/usr/bin/env bash
# Regenerate the transcripts in docs/examples/ with the default local pool (POOL: another pool,
# OUT: another folder; docs/examples/local-lm/ holds the LM conductor's, POOL=local-lm):
# the first three GSM8K test questions and HumanEval/0 from data.
# Each file holds the command and its output exactly as printed (rich, 100 columns).
set -euo pipefail
cd "$(dirname "$0")/.."
PODIUM=${PODIUM:-.venv/bin/podium}
DATA=${DATA:-data/benchmarks}
OUT=${OUT:-docs/examples}
pool=()
if [[ -n "${POOL:-}" ]]; then pool=(--pool "$POOL"); fi
mkdir -p "$OUT"
export COLUMNS=100
run() {  # name, question
  local name=$1 question=$2
  { printf '$ podium run%s "%s"\n\n' "${POOL:+ --pool $POOL}" "$(printf '%s' "$question" | head -c 160 | tr '\n' ' ')…"
    /usr/bin/time -f 'real %es (measured by /usr/bin/time)' "$PODIUM" run "${pool[@]}" "$question" 2>&1
  } > "$OUT/$name.txt"
  echo "wrote $OUT/$name.txt"
}
for i in 1 2 3; do
  q=$(sed -n "${i}p" "$DATA/gsm8k/test.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["question"])')
  run "gsm8k-test-$i" "$q"
done
q=$(head -1 "$DATA/humaneval/HumanEval.jsonl" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("Complete this Python function. Return the whole function in one code block.\n\n" + r["prompt"])')
run "humaneval-0" "$q"
