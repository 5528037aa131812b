#!/usr/bin/env bash
# The live evaluation committed in docs/eval.md: the routing light conductor (the local-light pool's,
# the default when this ran) against each single worker, the fixed pipeline and Mixture-of-Agents, plus the
# untrained LM conductor (conductor:local-lm), on the embedded local pool, on a seeded sample of 50
# GSM8K test and 30 MBPP test questions. Every worker call goes through the request cache,
# so an interrupted run resumes where it stopped (rerun this script) and a finished one re-renders
# in seconds. About 5 minutes per question on 2 CPU cores when nothing is cached.
#
# MBPP runs twice: first without the LM conductor (the slowest method, 1-2 minutes a question),
# so the comparison with the baselines completes first; then with it, which only adds the LM
# conductor's calls (everything else comes from the cache) and overwrites the first report.
#
#   scripts/eval-live.sh [DATA_DIR]   (default: data)
set -euo pipefail
data="${1:-data}"
cache="${PODIUM_EVAL_CACHE:-$HOME/.cache/podium/eval/requests.sqlite3}"
podium=${PODIUM:-podium}
baselines=conductor,single,pipeline,moa
$podium eval --pool local-light --tasks "$data/benchmarks/gsm8k/test.jsonl" --sample 50 --seed 0 \
  --methods "$baselines,conductor:local-lm" --cache "$cache" --out docs/eval/live-gsm8k
for methods in "$baselines" "$baselines,conductor:local-lm"; do
  $podium eval --pool local-light --tasks "$data/benchmarks/mbpp/mbpp.jsonl" --split test --sample 30 --seed 0 \
    --methods "$methods" --cache "$cache" --out docs/eval/live-mbpp
done
