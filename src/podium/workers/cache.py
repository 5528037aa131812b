"""A request cache for worker calls: the same exact request is answered once.

Evaluation and training re-run the same workflows many times; worker calls dominate their cost
(DESIGN.md §5). :class:`CachedWorker` keys each call by the exact request — the worker's
identity (name, backend class, model), the messages, the decoding settings (seed included) and,
for grammar-constrained continuations, the prefix, grammar and stop strings — and stores the
:class:`~podium.workers.base.Completion` in a SQLite file (or a shared database). A hit returns the stored completion
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
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.workers.base import Call, Completion, CountsTokens, Usage, Worker, WorkerSettings
from podium.workers.wrapper import WorkerWrapper, unwrap

__all__ = [
    "KEY_VERSION",
    "CachedWorker",
    "RequestCache",
    "request_key",
]


class RequestCache:
    """Stored completions by request key: a SQLite file (the default) or the ``request_cache``
    table of a shared database, so the eval jobs of several machines share their calls.

    Args:
        location: the SQLite file (created with its folder; its table is ``calls``), or a
            database URL (``postgresql://…``, set up by ``podium db upgrade``).

    Raises:
        ConfigError: the file or database cannot be opened (names it and the fix).

    Attributes:
        path: where the cache is, as reports show it: the file's path, or the URL with its
            password masked.
        hits, misses: counts since this object was created.
    """

    def __init__(self, location: str | Path) -> None:
        from sqlalchemy import MetaData

        from podium.store.engine import is_database_url, mask_url, open_embedded, open_store
        from podium.store.schema import request_cache

        shared = is_database_url(location)
        self.path: str | Path = mask_url(str(location)) if shared else Path(location)
        try:
            if shared:
                self._table = request_cache
                self._engine = open_store(str(location))
            else:  # the file of every release before the shared store: table "calls"
                self._table = request_cache.to_metadata(MetaData(), name="calls")
                self._engine = open_embedded(location, [self._table], what="the request cache")
        except ConfigError as exc:
            raise ConfigError(f"{exc} (or pass another --cache)") from None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Completion | None:
        """The completion stored under ``key`` (marked ``cached``), or None."""
        from sqlalchemy import select

        from podium.store.engine import read_only

        with self._errors("read"), read_only(self._engine) as db:
            stored = db.scalar(select(self._table.c.completion).where(self._table.c.key == key))
        with self._lock:
            if stored is None:
                self.misses += 1
                return None
            self.hits += 1
        data = json.loads(stored)
        data["usage"] = Usage(**data["usage"])
        data["cached"] = True
        return Completion(**data)

    def put(self, key: str, worker: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` (replacing what was there)."""
        from podium.records import utc_now
        from podium.store.engine import upsert

        data = json.dumps(dataclasses.asdict(completion), ensure_ascii=False)
        row = {"key": key, "worker": worker, "completion": data, "created_at": utc_now()}
        with self._errors("write"), self._engine.begin() as db:
            upsert(db, self._table, row, key=("key",))

    def __len__(self) -> int:
        from sqlalchemy import func, select

        from podium.store.engine import read_only

        with self._errors("read"), read_only(self._engine) as db:
            return int(db.scalar(select(func.count()).select_from(self._table)) or 0)

    def close(self) -> None:
        """Close the cache's connections."""
        self._engine.dispose()

    def _errors(self, action: str) -> AbstractContextManager[None]:
        from podium.store.engine import database_errors

        return database_errors(f"cannot {action} the request cache {self.path}")


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
    info = unwrap(worker).info
    identity: dict[str, Any] = {
        "name": worker.info.name,
        "backend": info.backend or type(unwrap(worker)).__name__,
        "model": info.model,
        "system_prompt": info.system_prompt,
    }
    if info.adapter_sha256:  # a LoRA-adapted model answers differently
        identity["lora_sha256"] = info.adapter_sha256
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


class CachedWorker(WorkerWrapper):
    """``inner`` behind a :class:`RequestCache` (see the module docstring).

    Wrap the raw worker (inside the budget guard), so budgets still reserve and settle every
    call — a hit settles to its recorded cost, as the real call did.
    """

    def __init__(self, inner: Worker, cache: RequestCache) -> None:
        super().__init__(inner)
        self.cache = cache
        if isinstance(inner, CountsTokens):  # exact reservations, as without the cache
            self.count_tokens = inner.count_tokens

    async def complete(self, call: Call) -> Completion:
        # the key's fields and their order are the recorded cache's: keep them as they are
        asked: dict[str, Any] = {"messages": call.messages, "settings": call.settings_for(self)}
        if call.is_continuation:
            asked |= {"prefix": call.prefix, "grammar": call.grammar, "stop": list(call.stop)}
        key = request_key(self.inner, asked)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        completion = await super().complete(call)
        self.cache.put(key, self.info.name, completion)
        return completion
