#!/usr/bin/env bash
# The shift proof on a second, fresh held-out set (issue 21; docs/loop.md, "A second held-out
# set"). Written and committed before any of its questions was recorded: the recipe below was
# chosen after the first held-out set had been seen, so only fresh questions can test it.
#
# Pre-registered:
#   * questions: bench/shift_data.py --heldout2 80 (seed 0), the Danish slice left out as in the
#     first proof: 60 (math, MBPP code, HumanEval; 20 each), recorded as bank test rows;
#   * the retrained conductor ("pooled", what `podium loop run --policy plans` trains on: the
#     loop's set is append-only, so after a shift its bank holds the earlier weeks' rows too):
#     the plan table's recipe (Qwen2.5-Coder-0.5B embeddings, cluster table, λ = 0, seed 0) on
#     the training rows of the local bank (the "before" kinds) and of the shift bank as pinned
#     below (96 "after" rows);
#   * the old conductor: the shipped table, src/podium/pools/local-plans.npz;
#   * beside them, for the account of where a gain comes from: the same recipe on the after rows
#     alone (the first proof's recipe) and on the before rows alone;
#   * live on the same questions: the hand-written rule pipeline (bench/shift/rules.toml) and
#     each single worker; the per-question best is taken over every method above;
#   * target: the pooled conductor recovers ≥ 0.5 of the gap from the old conductor to the
#     per-question best, and beats the rule pipeline (paired, 95 % intervals).
#
#   SHIFT_WORK=/work/shift scripts/shift-heldout2.sh     # resumable; hours on 2 cores
#
# Environment (defaults in brackets): SHIFT_WORK [runs/shift] SHIFT_OUT [docs/eval/shift]
#   SHIFT_RECORD [1] (0: compare on what the bank holds now) SHIFT_TRAIN_ONLY [0] (1: stop after
#   training the three tables) PODIUM_HOME [$SHIFT_WORK/home2]
#   PYTHON / PODIUM. The bank: $SHIFT_OUT/bank2 (committed as it grows); the reports:
#   $SHIFT_OUT/heldout2/.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${SHIFT_WORK:-runs/shift} out=${SHIFT_OUT:-docs/eval/shift}
py=${PYTHON:-.venv/bin/python} podium=${PODIUM:-.venv/bin/podium}
export PODIUM_HOME=${PODIUM_HOME:-$work/home2}
pin=e4c910fc4914f496ea213e33a8ff5886eb42faeb  # the shift bank with its 96 training rows
bank2=$out/bank2 report=$out/heldout2 tasks=$work/bank2-tasks old=src/podium/pools/local-plans.npz
mkdir -p "$report" "$work"
log() { echo "[$(date -u +%FT%TZ)] $*" >&2; }

# 1. the questions (the first three sets stay byte for byte those of the first proof)
"$py" bench/shift_data.py --out "$work/data" --before 100 --after 200 --heldout 120 --heldout2 80 --seed 0 > /dev/null
: > "$work/no-train.jsonl"
"$py" bench/shift_bank_tasks.py "$work/no-train.jsonl" "$work/data/heldout2.jsonl" --out "$tasks" \
  --leave-out use-case:support-da
# 2. the three retrained tables, once each, kept beside the report (policy-NAME.npz, committed
#    before any result on these questions was looked at; training reads no row of bank2)
train_bank() {  # NAME BANK...: the recipe on the banks' training rows
  local name=$1; shift
  local merged=$work/heldout2-train/$name
  if [ ! -e "$report/policy-$name.npz" ]; then
    rm -rf "$merged"
    "$podium" bank merge "$@" --split train --out "$merged" > /dev/null
    "$podium" train --policy plans --replay "$merged" --split train --name "$name" \
      --embedder qwen2.5-coder-0.5b-instruct --lam 0 --clusters auto --seed 0 --json > "$report/train-$name.json"
    cp "$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['policy_path'])" "$report/train-$name.json")" \
      "$report/policy-$name.npz"
  fi
}
pinned=$work/heldout2-train/shift-bank
mkdir -p "$pinned"
git show "$pin:docs/eval/shift/bank/matrix.csv" > "$pinned/matrix.csv"
git show "$pin:docs/eval/shift/bank/workflows.json" > "$pinned/workflows.json"
train_bank shift-pooled data/banks/local "$pinned"
train_bank shift-after "$pinned"
train_bank shift-before data/banks/local
pooled=$report/policy-shift-pooled.npz after=$report/policy-shift-after.npz before=$report/policy-shift-before.npz
[ "${SHIFT_TRAIN_ONLY:-0}" = 1 ] && { log "trained: $report/policy-*.npz"; exit 0; }

# 3. their outcomes: the bank (every step of the catalogue) and, live, the rule pipeline and the
#    single workers (both through the request cache: a rerun resumes)
if [ "${SHIFT_RECORD:-1}" = 1 ]; then
  nice -n 19 "$podium" bank record --tasks "$tasks/heldout.jsonl" --ids "$tasks/ids.txt" --out "$bank2" --pool local-tools
  nice -n 19 "$podium" eval --tasks "$tasks/heldout.jsonl" --methods rules:bench/shift/rules.toml,single \
    --out "$report/live" --no-plot
fi

# 4. the bank's test rows, replayed exactly; 5. joined with the live report, paired
"$podium" eval --replay "$bank2" --split test --pool local-tools \
  --methods "light:$old,light:$pooled,light:$after,light:$before" --out "$report/plans" --no-plot
"$py" bench/shift_compare.py "$report/live/eval.json" "$report/plans/eval.json" --new "light:$pooled" \
  --old "light:$old" --out "$report/compare.md" --json "$report/compare.json" > /dev/null
sed -i "s#$work#\$SHIFT_WORK#g" "$report"/train-*.json "$report"/plans/eval.* "$report"/compare.*
log "done: $report/compare.md"
