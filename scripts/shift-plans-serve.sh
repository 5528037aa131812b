#!/usr/bin/env bash
# The shift proof's last step with plan conductors (issue 21; docs/loop.md "The proof with plan
# conductors"): a running `podium serve` picks up the retrained plan conductor, promoted through
# the gate, without a restart.
#   1. version 1 of $SHIFT_SERVE_NAME: the plan table's recipe trained on the "before" bank
#      (data/banks/local: GSM8K and MBPP training rows), promoted without the gate — the starting
#      state a team runs before the shift;
#   2. podium serve (pool local-tools) with a preset that serves the promoted version; one request;
#   3. version 2: the same recipe on the shift bank's training rows (as scripts/shift-plans.sh);
#   4. podium conductor promote v2 --replay BANK (the gate replays the bank's held-out rows:
#      v2 against v1 by reward and quality); exit code and verdict kept;
#   5. one more request to the running server: the trace names the version that answered.
#
#   SHIFT_WORK=/work/shift scripts/shift-plans-serve.sh      # after scripts/shift-plans.sh
#
# Environment (defaults in brackets): SHIFT_WORK [runs/shift] SHIFT_OUT [docs/eval/shift]
#   SHIFT_SEED [0] SHIFT_SERVE_NAME [shift-served] SHIFT_PORT [8391] PODIUM_HOME
#   [$SHIFT_WORK/home] PYTHON / PODIUM. Outputs: $SHIFT_OUT/plans-serve/{promote.json,promote.rc,
#   before.json,after.json,train-v1.json,train-v2.json}.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${SHIFT_WORK:-runs/shift} out=${SHIFT_OUT:-docs/eval/shift}/plans-serve
seed=${SHIFT_SEED:-0} name=${SHIFT_SERVE_NAME:-shift-served} port=${SHIFT_PORT:-8391}
py=${PYTHON:-.venv/bin/python} podium=${PODIUM:-.venv/bin/podium}
bank=$work/bank
if [ ! -e "$bank/matrix.csv" ]; then
  echo "error: $bank/matrix.csv is missing: record the shift bank first (scripts/shift-plans.sh)" >&2
  exit 2
fi
export PODIUM_HOME=${PODIUM_HOME:-$work/home}
mkdir -p "$out"
log() { echo "[$(date -u +%FT%TZ)] $*" >&2; }
recipe=(--policy plans --split train --name "$name" --embedder qwen2.5-coder-0.5b-instruct --lam 0 --clusters auto
        --seed "$seed" --json)
versions() { "$py" -c "from podium.registry import Registry; import sys; print(len(Registry().versions(sys.argv[1])))" "$name"; }

# 1. the "before" plan conductor, promoted as the starting state
if [ "$(versions)" -eq 0 ]; then
  "$podium" train --replay data/banks/local "${recipe[@]}" > "$out/train-v1.json"
  "$py" - "$name" <<'PY'
import sys
from podium.registry import Registry
registry = Registry()
registry.promote(registry.get(f"{sys.argv[1]}@v1"),
                 evidence={"note": "shift proof: the plan conductor trained before the shift, the starting state (no gate)"})
PY
fi
log "serving: $("$py" -c "from podium.registry import Registry; import sys; print(Registry().promoted(sys.argv[1]).ref)" "$name")"

# 2. the server and one request
cat > "$work/serve-plans.toml" <<TOML
pool = "local-tools"
default_model = "podium-shift"
[models.podium-shift]
conductor = "light:$name"
TOML
url=http://127.0.0.1:$port
"$podium" serve --config "$work/serve-plans.toml" --port "$port" --traces "$work/serve-plans.sqlite3" \
  >> "$work/serve-plans.log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
for _ in $(seq 600); do curl -sf "$url/healthz" > /dev/null && break; sleep 1; done
curl -sf "$url/healthz" > /dev/null || { log "podium serve did not start; see $work/serve-plans.log"; exit 1; }
ask() {
  "$py" - "$url" <<'PY'
import json, sys, urllib.request
body = {"model": "podium-shift", "messages": [{"role": "user", "content": "What is 17 * 23?"}],
        "podium": {"tags": ["shift-proof:reload-check"]}}
req = urllib.request.Request(sys.argv[1] + "/v1/chat/completions", data=json.dumps(body).encode(),
                             headers={"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(req, timeout=1800))
print(json.dumps({"trace_id": reply["id"], "conductor": reply["podium"]["conductor"],
                  "answer": reply["choices"][0]["message"]["content"]}))
PY
}
ask > "$out/before.json"
log "before promotion the server answered with $(cat "$out/before.json")"

# 3. retrain on the shift bank; 4. promote through the gate (exit 3: refused)
[ "$(versions)" -ge 2 ] || "$podium" train --replay "$bank" "${recipe[@]}" > "$out/train-v2.json"
set +e
"$podium" conductor promote "$name@v2" --replay "$bank" --json > "$out/promote.json"
echo $? > "$out/promote.rc"
set -e
log "promotion of $name@v2: exit $(cat "$out/promote.rc") (0 promoted, 3 refused by the gate)"

# 5. the running server picks the promoted version up
sleep 3
ask > "$out/after.json"
log "after promotion the server answered with $(cat "$out/after.json")"
