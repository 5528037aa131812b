#!/usr/bin/env bash
# Record the local workflow outcome bank (docs/learned-workflows.md): every catalogue step on the
# training and held-out questions listed in data/banks/local/ids/, live on the embedded local
# pool, through the request cache. Resumable: rerun to continue where it stopped (finished steps
# of an interrupted question come back from the cache).
# About 3–6 minutes per question on 2 CPU cores.
#   TRAIN_LIMIT: record only the first N training questions before the held-out ones (default 60
#   of the 120 listed; rerun with TRAIN_LIMIT=120 to extend the training rows later).
set -euo pipefail
cd "$(dirname "$0")/.."
PODIUM=${PODIUM:-.venv/bin/podium}
DATA=${DATA:-data}/benchmarks
OUT=${OUT:-data/banks/local}
TRAIN_LIMIT=${TRAIN_LIMIT:-60}
record() {  # split, extra args
  local split=$1; shift
  "$PODIUM" bank record --pool local-tools --out "$OUT" --ids "$OUT/ids/$split.txt" \
    --tasks "$DATA/gsm8k/$split.jsonl" --tasks "$DATA/mbpp/mbpp.jsonl" "$@"
}
record train --limit "$TRAIN_LIMIT"
record test
