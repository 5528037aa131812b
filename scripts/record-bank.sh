#!/usr/bin/env bash
# Record the local workflow outcome bank (docs/learned-workflows.md): every catalogue step on the
# 120 training and 150 held-out questions listed in data/banks/local/ids/, live on the embedded
# local pool, through the request cache. Resumable: rerun to continue where it stopped.
# About 3–5 minutes per question on 2 CPU cores (the whole bank: roughly 15–20 hours).
set -euo pipefail
cd "$(dirname "$0")/.."
PODIUM=${PODIUM:-.venv/bin/podium}
DATA=${SHARED_DATA:-../shared/data}/benchmarks
OUT=${OUT:-data/banks/local}
for split in train test; do
  "$PODIUM" bank record --pool local-tools --out "$OUT" --ids "$OUT/ids/$split.txt" \
    --tasks "$DATA/gsm8k/$split.jsonl" --tasks "$DATA/mbpp/mbpp.jsonl"
done
