"""The shift proof's client (docs/loop.md, "The proof on a real shift"): sends each question of
a regression set to a running ``podium serve`` as a user's client would — an OpenAI-compatible
``POST /v1/chat/completions``, one user message, the task's tags as podium's request tags
(``"podium": {"tags": [...]}`` in the body, docs/serve.md "Request options") — one request at a
time, so that the server's traces are real traffic stamped with the time each arrived.

    .venv/bin/python bench/shift_traffic.py runs/shift/data/before.jsonl --url http://127.0.0.1:8765 \
        --model podium-shift --log runs/shift/before-sent.jsonl

Resumable: every answered request is appended to ``--log`` (task id, trace id, status, worker,
seconds, UTC start), and a task id already in the log is not sent again. A request that gets
answered with an HTTP error is not logged, so a rerun sends it again.
Exit 0 when every task has a logged answer, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _sent(log: Path) -> set[str]:
    if not log.is_file():
        return set()
    return {json.loads(line)["id"] for line in log.read_text(encoding="utf-8").splitlines() if line.strip()}


def send(url: str, model: str, question: str, tags: Sequence[str], timeout_s: float) -> dict[str, Any]:
    """One chat completion; returns the response's JSON. Raises urllib.error.HTTPError/URLError."""
    body = {"model": model, "messages": [{"role": "user", "content": question}], "podium": {"tags": list(tags)}}
    request = urllib.request.Request(
        f"{url.rstrip('/')}/v1/chat/completions",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Authorization": "Bearer shift-proof"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        reply: dict[str, Any] = json.loads(response.read())
    return reply


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Send a regression set's questions to podium serve as traffic.")
    parser.add_argument("tasks", type=Path, help="regression-set JSONL (bench/shift_data.py)")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the server (default %(default)s)")
    parser.add_argument("--model", default="podium", help="the conductor preset (default %(default)s)")
    parser.add_argument("--log", type=Path, required=True, help="append-only log of answered requests")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per request (default 1800)")
    args = parser.parse_args(argv)
    records = [json.loads(line) for line in args.tasks.read_text(encoding="utf-8").splitlines() if line.strip()]
    done = _sent(args.log)
    todo = [r for r in records if r["id"] not in done]
    print(
        f"{args.tasks}: {len(records)} questions, {len(records) - len(todo)} sent before, {len(todo)} to send",
        file=sys.stderr,
    )
    failed = 0
    args.log.parent.mkdir(parents=True, exist_ok=True)
    for n, record in enumerate(todo, 1):
        started = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        clock = time.perf_counter()
        entry: dict[str, Any] = {"id": record["id"], "started_at": started}
        try:
            reply = send(args.url, args.model, record["question"], record.get("tags", []), args.timeout)
            meta = reply.get("podium", {})
            entry.update(
                trace_id=reply.get("id"),
                status=meta.get("status"),
                conductor=meta.get("conductor"),
                workers=meta.get("workers"),
                cost_usd=(reply.get("usage") or {}).get("cost_usd"),
            )
        except urllib.error.HTTPError as exc:
            entry.update(status=f"http {exc.code}", error=exc.read().decode("utf-8", "replace")[:500])
            failed += 1
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            print(
                f"error: {args.url} did not answer ({exc}); is podium serve running? Rerun to resume", file=sys.stderr
            )
            return 1
        entry["seconds"] = round(time.perf_counter() - clock, 2)
        if not str(entry["status"]).startswith("http"):
            with args.log.open("a", encoding="utf-8") as log:
                log.write(json.dumps(entry) + "\n")
        print(
            f"[{n}/{len(todo)}] {record['id']}: {entry['status']} {entry.get('conductor')} {entry['seconds']} s",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
