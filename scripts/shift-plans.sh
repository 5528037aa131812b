#!/usr/bin/env bash
# The shift proof with plan conductors (issue 21; docs/loop.md "The proof with plan conductors"),
# after scripts/shift-proof.sh (its labelled "after" set, held-out questions and live report):
#   bench/shift_bank_tasks.py -> podium bank record (the after set's questions as training rows,
#   the held-out ones as test rows; resumable: hours on 2 cores) -> podium train --policy plans on
#   the training rows (the retrained plan conductor) -> podium eval --replay BANK --split test:
#   the shipped plan conductor (trained on GSM8K and MBPP, the "before" kinds) and the retrained
#   one -> bench/shift_compare.py joined with the live report of scripts/shift-proof.sh (light
#   conductors, rule pipeline, single workers), paired per question. The bank's columns alone
#   are not compared: each is one step of a workflow, and with 22 of them in the per-question
#   best the gap would no longer be the one between the methods the issue compares.
#
#   SHIFT_WORK=/work/shift scripts/shift-plans.sh
#
# Environment (defaults in brackets): SHIFT_WORK [runs/shift] SHIFT_OUT [docs/eval/shift]
#   SHIFT_SEED [0] SHIFT_PLANS_NAME [shift-plans] SHIFT_LEAVE_OUT [use-case:support-da] (every
#   method answers those right live: no gap to recover, hours of recording) SHIFT_RECORD [1]
#   (0: compare on what the bank holds now) PODIUM_HOME [$SHIFT_WORK/home] PYTHON / PODIUM
#   SHIFT_SET [$SHIFT_WORK/set.jsonl] the labelled after set; on a machine where the exported set
#   is gone, $SHIFT_WORK/data/after.jsonl (bench/shift_data.py) holds the same questions with the
#   same references (bench/shift_label.py labels the export from it), under the data's own ids
set -euo pipefail
cd "$(dirname "$0")/.."
work=${SHIFT_WORK:-runs/shift} out=${SHIFT_OUT:-docs/eval/shift}
seed=${SHIFT_SEED:-0} name=${SHIFT_PLANS_NAME:-shift-plans} leave_out=${SHIFT_LEAVE_OUT-use-case:support-da}
py=${PYTHON:-.venv/bin/python} podium=${PODIUM:-.venv/bin/podium}
set=${SHIFT_SET:-$work/set.jsonl}
if [ ! -e "$set" ] || [ ! -e "$work/data/heldout.jsonl" ] || [ ! -e "$out/final/eval.json" ]; then
  echo "error: $set, $work/data/heldout.jsonl or $out/final/eval.json is missing: run scripts/shift-proof.sh" \
       "first (SHIFT_WORK=$work), or rebuild its data (bench/shift_data.py) and set SHIFT_SET" >&2
  exit 2
fi
export PODIUM_HOME=${PODIUM_HOME:-$work/home}
bank=$work/bank tasks=$work/bank-tasks old=src/podium/pools/local-plans.npz
log() { echo "[$(date -u +%FT%TZ)] $*" >&2; }

# 1. the bank's questions and their order; 2. their outcomes (resumable, through the request cache)
"$py" bench/shift_bank_tasks.py "$set" "$work/data/heldout.jsonl" --out "$tasks" ${leave_out:+--leave-out "$leave_out"}
if [ "${SHIFT_RECORD:-1}" = 1 ]; then
  nice -n 19 "$podium" bank record --tasks "$tasks/after.jsonl" --tasks "$tasks/heldout.jsonl" --ids "$tasks/ids.txt" \
    --out "$bank" --pool local-tools
fi

# 3. the retrained plan conductor: the shipped table's recipe on the bank's training rows, once
#    per bank content
sha=$(sha256sum "$bank/matrix.csv" | cut -d' ' -f1)
if [ "$(cat "$work/plans-train.sha" 2>/dev/null)" != "$sha" ]; then
  "$podium" train --policy plans --replay "$bank" --split train --name "$name" --embedder qwen2.5-coder-0.5b-instruct \
    --lam 0 --clusters auto --seed "$seed" --json > "$work/plans-train.json"
  echo "$sha" > "$work/plans-train.sha"
fi
new=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['version'])" "$work/plans-train.json")
log "retrained plan conductor: $new"

# 4. the held-out rows, replayed exactly from the recorded steps; 5. joined with the live report
"$podium" eval --replay "$bank" --split test --pool local-tools --methods "light:$old,light:$new" \
  --out "$out/plans" --no-plot
"$py" bench/shift_compare.py "$out/final/eval.json" "$out/plans/eval.json" --new "light:$new" --old "light:$old" \
  --out "$out/compare-plans.md" --json "$out/compare-plans.json" > /dev/null
cp "$work/plans-train.json" "$out/plans-train.json"
log "done: $out/compare-plans.md"
