#!/usr/bin/env bash
# The live evaluation committed in docs/eval.md: the default conductor (the local pool's trained
# light conductor) and the LM conductor (conductor:local-lm) against each single worker, the
# fixed pipeline and Mixture-of-Agents on the embedded local pool, on a seeded sample of 50
# GSM8K test and 30 MBPP test questions. Every worker call goes through the request cache,
# so an interrupted run resumes where it stopped (rerun this script) and a finished one re-renders
# in seconds. About 3 minutes per question on 2 CPU cores when nothing is cached.
#
#   scripts/eval-live.sh [DATA_DIR]   (default: ../shared/data)
set -euo pipefail
data="${1:-../shared/data}"
cache="${PODIUM_EVAL_CACHE:-$HOME/.cache/podium/eval/requests.sqlite3}"
podium=${PODIUM:-podium}
$podium eval --tasks "$data/benchmarks/gsm8k/test.jsonl" --sample 50 --seed 0 \
  --methods conductor,conductor:local-lm,single,pipeline,moa --cache "$cache" --out docs/eval/live-gsm8k
$podium eval --tasks "$data/benchmarks/mbpp/mbpp.jsonl" --split test --sample 30 --seed 0 \
  --methods conductor,conductor:local-lm,single,pipeline,moa --cache "$cache" --out docs/eval/live-mbpp
