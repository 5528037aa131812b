#!/usr/bin/env bash
# The bank behind docs/eval/fresh3/learning-curve-merged.json (docs/learned-workflows.md, "The
# third fresh test"): the local bank's 270 rows and the shift bank's training rows as committed
# in 2104044 (126 questions recorded; 71 training rows once every question of a local test list
# and of fresh, fresh2 and fresh3 is left out), merged with `podium bank merge`.
#   usage: scripts/fresh3-bank.sh OUT   (OUT must not hold a bank)
set -euo pipefail
cd "$(dirname "$0")/.."
PODIUM=${PODIUM:-.venv/bin/podium}
out=${1:?usage: scripts/fresh3-bank.sh OUT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/shift"
git show 2104044:docs/eval/shift/bank/matrix.csv > "$work/shift/matrix.csv"
git show 2104044:docs/eval/shift/bank/workflows.json > "$work/shift/workflows.json"
ids=data/banks/local/ids
"$PODIUM" bank merge "$work/shift" --split train --out "$work/shift-train" \
  --exclude $ids/test.txt --exclude $ids/fresh.txt --exclude $ids/fresh2.txt --exclude $ids/fresh3.txt
"$PODIUM" bank merge data/banks/local "$work/shift-train" --out "$out"
