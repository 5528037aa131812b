#!/usr/bin/env bash
# Freeze the policy of a fresh held-out test (docs/learned-workflows.md) before any of its
# questions runs: the cluster table trained on every training row of the bank (--clusters auto,
# seed 0, lambda 0, SmolLM2 embeddings: the settings of the earlier tests), copied with its
# training record into OUT (default docs/eval/fresh2) as cluster-policy.npz and
# cluster-policy-train.json. Commit both, then run scripts/eval-fresh.sh with POLICY=OUT/cluster-policy.npz.
#   TRAIN_ROWS: the training rows the bank must hold (default 120); the script refuses otherwise,
#   so a policy is never frozen on a bank still being recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
PODIUM=${PODIUM:-.venv/bin/podium}
PYTHON=${PYTHON:-.venv/bin/python}
BANK=${BANK:-data/banks/local}
OUT=${OUT:-docs/eval/fresh2}
TRAIN_ROWS=${TRAIN_ROWS:-120}
NAME=${NAME:-$(basename "$OUT")-cluster}
"$PYTHON" - "$BANK" "$TRAIN_ROWS" <<'PY'
import sys
from podium.eval.replay import OutcomeMatrix
bank, wanted = sys.argv[1], int(sys.argv[2])
tasks = OutcomeMatrix.load(f"{bank}/matrix.csv").tasks()
train = sum(1 for t in tasks if t.split == "train")
if train != wanted:
    sys.exit(f"{bank} holds {train} training rows, not {wanted}: finish the recording (scripts/record-bank.sh) first")
print(f"{bank}: {train} training rows of {len(tasks)}")
PY
record=$(mktemp)
"$PODIUM" train --policy plans --replay "$BANK" --embedder smollm2-135m-instruct --lam 0 --clusters auto \
  --seed 0 --name "$NAME" --json > "$record"
ref=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$record")
"$PYTHON" - "$ref" "$OUT" <<'PY'
import shutil, sys
from pathlib import Path
from podium.registry import Registry
version, out = Registry().get(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
shutil.copy(version.policy_path, out / "cluster-policy.npz")
shutil.copy(version.path / "train.json", out / "cluster-policy-train.json")
print(f"{version.ref} frozen in {out}/cluster-policy.npz")
PY
