#!/usr/bin/env bash
# The paper's GRPO recipe (Nielsen et al. 2026 §4: G = 64 rollouts × 4 questions per step, ≤ 1024
# new tokens, lr 1e-6, KL 0) for a few steps on a GPU, reporting seconds per step and steps/s —
# to size a full run (200 steps). Nothing in podium depends on it; on a CPU it refuses to start.
#
#   scripts/grpo-gpu.sh [STEPS] [MODEL] [MATRIX]
#     STEPS   optimiser steps (default 3)
#     MODEL   embedded base model (default qwen2.5-coder-1.5b-instruct; podium models list)
#     MATRIX  replay pool (default data/outcomes/routellm-gpt4-mixtral.csv)
#
# Needs the train extra with a CUDA build of torch and the base model installed
# (podium models install MODEL). Writes into $OUT (default /tmp/podium-grpo-gpu): the registry
# version (adapter, checkpoints, metrics.jsonl, learning-curve.png) and summary.json.
set -euo pipefail
steps="${1:-3}"
model="${2:-qwen2.5-coder-1.5b-instruct}"
matrix="${3:-data/outcomes/routellm-gpt4-mixtral.csv}"
out="${OUT:-/tmp/podium-grpo-gpu}"
python="${PYTHON:-.venv/bin/python}"
podium="${PODIUM:-.venv/bin/podium}"
mkdir -p "$out"
if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "no CUDA device visible to torch: this script is for a GPU machine (docs/training.md)" >&2
  exit 2
fi
"$python" -c 'import torch; print("device:", torch.cuda.get_device_name(0), "| torch", torch.__version__)' | tee "$out/device.txt"
export PODIUM_HOME="$out/home"
start=$(date +%s)
"$podium" train --policy lm --preset paper --model "$model" --replay "$matrix" --tag gsm8k \
  --steps "$steps" --name gpu-probe
end=$(date +%s)
metrics=$(ls -d "$PODIUM_HOME"/conductors/gpu-probe/v*/ | tail -1)metrics.jsonl
"$python" - "$metrics" "$((end - start))" "$out/summary.json" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
seconds = [r["seconds"] for r in rows]
steady = seconds[1:] or seconds  # the first step includes loading and warm-up
summary = {
    "steps": len(rows),
    "wall_s": int(sys.argv[2]),
    "seconds_per_step": seconds,
    "steady_steps_per_s": len(steady) / sum(steady),
    "reward_mean": [r["reward_mean"] for r in rows],
    "parse_rate": [r["parse_rate"] for r in rows],
}
json.dump(summary, open(sys.argv[3], "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
