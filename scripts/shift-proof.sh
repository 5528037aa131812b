#!/usr/bin/env bash
# The proof on a real shift (issue 21; docs/loop.md "The proof on a real shift: how to run it"):
#   data -> old conductor -> podium serve -> "before" traffic -> "after" traffic -> podium drift
#   -> podium tasks export --review -> labels (the datasets' references, a simulated person)
#   -> podium tasks import -> podium eval --matrix -> podium train -> podium conductor promote
#   -> hot reload checked on the running server -> podium eval on held-out "after" questions
#   (old conductor, rule pipeline, each single worker, retrained conductor) + paired differences.
#
#   scripts/shift-proof.sh                        # full size: 200 before, 200 after, 120 held out
#   SHIFT_BEFORE=6 SHIFT_AFTER=25 SHIFT_HELDOUT=4 SHIFT_MIN_REQUESTS=3 SHIFT_WORK=/tmp/shift \
#     SHIFT_OUT=/tmp/shift/out scripts/shift-proof.sh            # a tiny run of the whole pipeline
#
# Resumable: each finished stage leaves $SHIFT_WORK/done/STAGE; the clients log every answered
# request and skip them on a rerun; worker calls of the evals go through the request cache. Run
# it again after an interruption. Environment (defaults in brackets):
#   SHIFT_WORK [runs/shift]  data, traces, registry, logs   SHIFT_OUT [docs/eval/shift]  reports
#   SHIFT_BEFORE/AFTER/HELDOUT [200/200/120]  SHIFT_SEED [0]  SHIFT_PORT [8765]
#   SHIFT_MIN_REQUESTS [10] drift's per-slice minimum  SHIFT_LAM [300] λ of both conductors
#   SHIFT_GENERATIONS [60]  SHIFT_NAME [shift] registry name  PODIUM_HOME [$SHIFT_WORK/home]
#   PODIUM_EVAL_CACHE [~/.cache/podium/eval/requests.sqlite3]  PYTHON / PODIUM [.venv/bin/...]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${SHIFT_WORK:-runs/shift}
out=${SHIFT_OUT:-docs/eval/shift}
before=${SHIFT_BEFORE:-200} after=${SHIFT_AFTER:-200} heldout=${SHIFT_HELDOUT:-120}
seed=${SHIFT_SEED:-0} port=${SHIFT_PORT:-8765} min_requests=${SHIFT_MIN_REQUESTS:-10}
lam=${SHIFT_LAM:-300} generations=${SHIFT_GENERATIONS:-60} name=${SHIFT_NAME:-shift}
py=${PYTHON:-.venv/bin/python} podium=${PODIUM:-.venv/bin/podium}
cache=${PODIUM_EVAL_CACHE:-$HOME/.cache/podium/eval/requests.sqlite3}
if [ "$after" -lt 25 ]; then  # 80 % of the after set trains the light conductor, which needs 20
  echo "error: SHIFT_AFTER=$after: the retrained conductor needs at least 20 training questions, 80 % of the" \
       "after set; use SHIFT_AFTER=25 or more" >&2
  exit 2
fi
mkdir -p "$work/done" "$out"
work=$(cd "$work" && pwd) out=$(cd "$out" && pwd)
export PODIUM_HOME=${PODIUM_HOME:-$work/home}   # this proof's traces and conductor registry only
traces=$work/traces.sqlite3 data=$work/data url=http://127.0.0.1:$port
old_matrix=docs/eval/local-pool/outcomes.csv    # what the routing light conductor (local-light) was trained on
train_opts=(--name "$name" --dims 8 --embedder smollm2-135m-instruct --lam "$lam" --generations "$generations" --seed "$seed")
log() { echo "[$(date -u +%FT%TZ)] $*" >&2; }
done_() { [ -e "$work/done/$1" ]; }
mark() { date -u +%FT%T.%3NZ > "$work/done/$1"; }
now() { date -u +%FT%T.%3NZ; }
timed() { local t0=$SECONDS rc=0; "$@" || rc=$?; echo "$* : $((SECONDS - t0)) s (exit $rc)" >> "$work/timings.txt"; return $rc; }

# 1. the data (deterministic; rebuilt only when missing)
if ! done_ data; then
  timed "$py" bench/shift_data.py --out "$data" --before "$before" --after "$after" --heldout "$heldout" --seed "$seed"
  mark data
fi
cp "$data/manifest.json" "$out/manifest.json"

# 2. the old conductor: the routing light conductor's recipe (local-light) (scripts/train-light-local.sh,
#    λ 300) on its own "before" matrix, as version 1 of $name, promoted
#    without the gate: it is the starting state (the gate compares it with the 1.5B worker alone,
#    which it need not beat on "before" questions to be what a team runs)
versions() { "$py" -c "from podium.registry import Registry; import sys; print(len(Registry().versions(sys.argv[1])))" "$name"; }
if ! done_ old-conductor; then
  [ "$(versions)" -gt 0 ] || timed "$podium" train --replay "$old_matrix" "${train_opts[@]}"
  "$py" - "$name" <<'PY'
import sys
from podium.registry import Registry
registry = Registry()
version = registry.get(f"{sys.argv[1]}@v1")
if registry.promoted(sys.argv[1]) is None:
    registry.promote(version, evidence={"note": "shift proof: the old conductor, promoted as the starting state (no gate)"})
print(f"promoted: {registry.promoted(sys.argv[1]).ref}", file=sys.stderr)
PY
  mark old-conductor
fi

# 3. the server: a preset serving the promoted version of $name (hot reload on promotion)
cat > "$work/serve.toml" <<TOML
default_model = "podium-shift"
[models.podium-shift]
conductor = "light:$name"
TOML
server_pid=
stop_server() { if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi; }
trap stop_server EXIT
if ! done_ traffic; then
  "$podium" serve --config "$work/serve.toml" --port "$port" --traces "$traces" >> "$work/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do curl -sf "$url/healthz" > /dev/null && break; sleep 1; done
  curl -sf "$url/healthz" > /dev/null || { log "podium serve did not start; see $work/serve.log"; exit 1; }
  # 4. "before" then "after" traffic, one request at a time; the phase starts are kept so the
  #    drift windows stay the same on a rerun
  [ -e "$work/before.start" ] || now > "$work/before.start"
  timed "$py" bench/shift_traffic.py "$data/before.jsonl" --url "$url" --model podium-shift --log "$work/before-sent.jsonl"
  if [ ! -e "$work/after.start" ]; then sleep 2; now > "$work/after.start"; fi
  timed "$py" bench/shift_traffic.py "$data/after.jsonl" --url "$url" --model podium-shift --log "$work/after-sent.jsonl"
  sleep 2; now > "$work/after.end"
  mark traffic
fi
b0=$(cat "$work/before.start") a0=$(cat "$work/after.start") a1=$(cat "$work/after.end")

# 5. drift: the after window against the before window (exit 3 input shift expected)
if ! done_ drift; then
  set +e
  timed "$podium" drift --traces "$traces" --reference-since "$b0" --reference-until "$a0" --since "$a0" --until "$a1" \
    --min-requests "$min_requests" --out "$out/drift.md" --plot "$out/drift.png"
  echo $? > "$work/drift.rc"
  "$podium" drift --traces "$traces" --reference-since "$b0" --reference-until "$a0" --since "$a0" --until "$a1" \
    --min-requests "$min_requests" --json > "$out/drift.json"
  set -e
  mark drift
fi
log "drift exit code $(cat "$work/drift.rc") (0 quiet, 3 input shift, 4 outcome shift)"

# 6. export the after window (public benchmark questions: no personal data, so --allow-pii),
#    7. label through the review file with the datasets' references, and import
if ! done_ labels; then
  rm -f "$work/set.jsonl" "$work/review.csv"
  timed "$podium" tasks export --traces "$traces" --since "$a0" --until "$a1" --out "$work/set.jsonl" \
    --review "$work/review.csv" --allow-pii
  cp "$work/review.csv" "$work/review-exported.csv"
  timed "$py" bench/shift_label.py "$work/review.csv" --from "$data/after.jsonl"
  timed "$podium" tasks import "$work/review.csv" --set "$work/set.jsonl"
  mark labels
fi

# 8. the pool's outcomes on the labelled set (cached), split 80/20
if ! done_ record; then
  timed "$podium" eval --tasks "$work/set.jsonl" --methods single --cache "$cache" --matrix "$work/set.csv" \
    --matrix-split 0.8 --seed "$seed" --out "$work/record" --no-plot
  mark record
fi

# 9. retrain on the after matrix; 10. promote through the gate (exit 3: refused)
if ! done_ train; then
  timed "$podium" train --replay "$work/set.csv" "${train_opts[@]}" --json > "$work/train.json"
  mark train
fi
new=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['version'])" "$work/train.json")
if ! done_ promote; then
  set +e
  timed "$podium" conductor promote "$new" --replay "$work/set.csv" --json > "$work/promote.json"
  echo $? > "$work/promote.rc"
  set -e
  mark promote
fi
log "promotion of $new: exit $(cat "$work/promote.rc") (0 promoted, 3 refused by the gate)"

# 11. the running server picks the promoted version up without a restart
if [ -n "$server_pid" ] && ! done_ reload; then
  sleep 3
  "$py" - "$url" > "$work/reload.json" <<'PY'
import json, sys, urllib.request
body = {"model": "podium-shift", "messages": [{"role": "user", "content": "What is 17 * 23?"}], "podium": {"tags": ["shift-proof:reload-check"]}}
req = urllib.request.Request(sys.argv[1] + "/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(req, timeout=1800))
print(json.dumps({"trace_id": reply["id"], "conductor": reply["podium"]["conductor"]}))
PY
  log "after promotion the server answered with $(cat "$work/reload.json")"
  mark reload
fi
stop_server; server_pid=

# 12. held-out after questions: old conductor, rule pipeline, each single worker, retrained
methods="light:$name@v1,rules:bench/shift/rules.toml,single,light:$new"
timed "$podium" eval --tasks "$data/heldout.jsonl" --methods "$methods" --cache "$cache" --out "$out/final"
timed "$py" bench/shift_compare.py "$out/final/eval.json" --new "light:$new" --old "light:$name@v1" \
  --out "$out/compare.md" --json "$out/compare.json" > /dev/null
cp "$work/timings.txt" "$out/timings.txt"
for f in drift.rc promote.rc promote.json reload.json train.json; do [ -e "$work/$f" ] && cp "$work/$f" "$out/"; done
log "done: $out/compare.md, $out/final/eval.md, $out/drift.md"
