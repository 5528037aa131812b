#!/usr/bin/env bash
# GRPO of the LM conductor on the workflow bank (docs/learned-workflows.md, "The LM conductor on
# the bank"), on CPU: SmolLM2-135M, no format warm start, rollouts sampled by llama.cpp under the
# grammar of the shown pool's replayable plans (--rollouts llama.cpp), so every rollout is scored.
# Resumable: it checkpoints every SAVE steps, and a rerun continues the newest unfinished version
# of NAME from its last checkpoint (interrupt it at any time). When training has finished, the
# held-out replay on the bank's test rows runs twice — the workers in the bank's order and
# reversed (the permutation test) — beside the untrained base (NAME's version 0-step twin).
#
#   scripts/train-grpo-bank.sh                 STEPS=60 SAVE=2 NAME=lm-bank OUT=docs/eval/lm-bank
#
# About 5 minutes per step beside another model job on 2 cores (docs/training.md); a quiet
# machine with OMP_NUM_THREADS=2 is faster. PODIUM_HOME chooses the registry as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
podium=${PODIUM:-.venv/bin/podium}
python=${PYTHON:-.venv/bin/python}
steps=${STEPS:-60} save=${SAVE:-2} name=${NAME:-lm-bank} out=${OUT:-docs/eval/lm-bank}
bank=data/banks/local
export TRL_EXPERIMENTAL_SILENCE=1   # TRL's note that rollout_func is experimental, once per run

# the newest version of NAME: "ref unfinished|finished", or nothing
state=$("$python" - "$name" <<'PY'
import sys
from podium.registry import Registry
versions = [v for v in Registry().versions(sys.argv[1]) if (v.path / "train-config.json").exists() or any(v.path.glob("checkpoint-*"))]
if versions:
    v = versions[-1]
    print(v.ref, "finished" if (v.path / "adapter.gguf").exists() else "unfinished")
PY
)
train=(train --policy lm --replay "$bank" --name "$name" --rollouts llama.cpp --warm-start-epochs 0
       --steps "$steps" --save-steps "$save" --json)
case "$state" in
  *unfinished) "$podium" "${train[@]}" --resume "${state% *}" > /dev/null ;;
  *finished) ;;
  *) "$podium" "${train[@]}" > /dev/null ;;
esac
trained=$("$python" -c "from podium.registry import Registry; import sys; print(Registry().versions(sys.argv[1])[-1].ref)" "$name")
# the untrained base: a zero adapter, the same prompt and grammar at run time
base_name="$name-base"
if [ -z "$("$python" -c "from podium.registry import Registry; import sys; print(len(Registry().versions(sys.argv[1])) or '')" "$base_name")" ]; then
  "$podium" train --policy lm --replay "$bank" --name "$base_name" --rollouts llama.cpp --steps 0 --warm-start-epochs 0 \
    --json > /dev/null
fi
methods="lm:$trained,lm:$base_name,single:solve@1.5b"
for order in given reversed; do
  "$podium" eval --replay "$bank" --split test --methods "$methods" --against single:solve@1.5b \
    --pool-order "$order" --out "$out/$order"
done
