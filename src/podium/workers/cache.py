"""A request cache for worker calls: the same exact request is answered once.

Evaluation and training re-run the same workflows many times; worker calls dominate their cost
(DESIGN.md §5). :class:`CachedWorker` keys each call by the exact request — the worker's
identity (name, backend class, model), the messages, the decoding settings (seed included) and,
for grammar-constrained continuations, the prefix, grammar and stop strings — and stores the
:class:`~podium.workers.base.Completion` in a SQLite file. A hit returns the stored completion
(its recorded text, usage, cost and latency) marked ``cached``; the executor and the conductor
then record the original call's latency as its backend measured it (queueing for the model,
prefill, generation). A live step records the wall time of its whole call, which adds podium's
own per-call work, so a cached re-run reports slightly lower latencies (docs/eval.md, Metrics).
Errors are never cached.

Only deterministic requests are worth caching: llama.cpp with a fixed seed is; remote providers
at temperature > 0 are not, and a hit then replays one sample rather than drawing a new one —
which is exactly what a reproducible evaluation wants.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.workers.base import Completion, Message, Usage, Worker, WorkerSettings
from podium.workers.resilience import _Wrapper, unwrap

__all__ = [
    "KEY_VERSION",
    "CachedWorker",
    "RequestCache",
    "request_key",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    worker TEXT NOT NULL,
    completion TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
"""


class RequestCache:
    """Stored completions by request key, in a SQLite file (WAL; safe across threads).

    Args:
        path: the SQLite file (created with its folder).

    Raises:
        ConfigError: the file cannot be opened as a SQLite database.

    Attributes:
        hits, misses: counts since this object was created.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the request cache {self.path}: {exc} (pass another --cache path)") from exc
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute("SELECT completion FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        data = json.loads(row[0])
        data["usage"] = Usage(**data["usage"])
        data["cached"] = True
        return Completion(**data)

    def put(self, key: str, worker: str, completion: Completion) -> None:
        data = json.dumps(dataclasses.asdict(completion), ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO calls (key, worker, completion) VALUES (?, ?, ?)", (key, worker, data)
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


KEY_VERSION = 1
"""Version of the request-key format below; bump it only on purpose (a new key loses every
recorded call)."""

_SETTINGS_FIELDS = ("max_tokens", "temperature", "top_p", "seed", "reasoning_effort")
"""Decoding fields always in the key (key version 1); a field added to WorkerSettings later
enters the key only when it differs from its default, so old keys stay valid."""


def request_key(worker: Worker, call: dict[str, Any]) -> str:
    """sha256 (hex) of the exact request, in a fixed format (key version 1).

    The key is a canonical JSON object (sorted keys, UTF-8) of: ``v`` (1); ``worker``: its
    ``name``, ``backend`` (the pool-file backend, e.g. ``llama_cpp``), ``model``,
    ``system_prompt`` and, for a LoRA-adapted model, ``lora_sha256``; ``messages`` (role and
    content); ``settings`` (max_tokens, temperature, top_p, seed, reasoning_effort); and, only
    for grammar-constrained continuations, ``prefix``, ``grammar`` and ``stop``. It depends on
    nothing else — not on class names or on which method served the call — so refactors keep
    recorded calls (a test pins a known key).

    Args:
        worker: the worker (wrappers are looked through).
        call: ``messages`` (list of messages), ``settings`` (WorkerSettings), and optionally
            ``prefix`` (str), ``grammar`` (str | None), ``stop`` (sequence of str).
    """
    inner = unwrap(worker)
    identity: dict[str, Any] = {
        "name": worker.name,
        "backend": str(getattr(inner, "backend", type(inner).__name__)),
        "model": str(getattr(inner, "model", getattr(inner, "model_id", ""))),
        "system_prompt": getattr(inner, "system_prompt", None),
    }
    if lora := getattr(inner, "lora_sha256", None):  # a LoRA-adapted model answers differently
        identity["lora_sha256"] = lora
    settings: WorkerSettings = call["settings"]
    values = dataclasses.asdict(settings)
    defaults = dataclasses.asdict(WorkerSettings())
    chosen = {k: values[k] for k in _SETTINGS_FIELDS}
    chosen |= {k: v for k, v in values.items() if k not in _SETTINGS_FIELDS and v != defaults[k]}
    body: dict[str, Any] = {
        "v": KEY_VERSION,
        "worker": identity,
        "messages": [{"role": m["role"], "content": m["content"]} for m in call["messages"]],
        "settings": chosen,
    }
    if call.get("prefix") or call.get("grammar") or call.get("stop"):
        body |= {"prefix": call.get("prefix", ""), "grammar": call.get("grammar"), "stop": list(call.get("stop", ()))}
    blob = json.dumps(body, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedWorker(_Wrapper):
    """``inner`` behind a :class:`RequestCache` (see the module docstring).

    Wrap the raw worker (inside the budget guard), so budgets still reserve and settle every
    call — a hit settles to its recorded cost, as the real call did.
    """

    def __init__(self, inner: Worker, cache: RequestCache) -> None:
        super().__init__(inner)
        self.cache = cache
        counter = getattr(inner, "count_tokens", None)
        if counter is not None:  # exact reservations, as without the cache
            self.count_tokens = counter

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Completion:
        messages: Sequence[Message] = args[0]
        call: dict[str, Any] = {"messages": messages}
        if method == "continue_text":
            call |= {
                "settings": args[2] or self.settings,
                "prefix": args[1],
                "grammar": kwargs.get("grammar"),
                "stop": list(kwargs.get("stop", ())),
            }
        else:
            call["settings"] = args[1] or self.settings
        key = request_key(self.inner, call)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        completion = await super()._call(method, *args, **kwargs)
        self.cache.put(key, self.name, completion)
        return completion
