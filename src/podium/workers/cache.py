"""A request cache for worker calls: the same exact request is answered once.

Evaluation and training re-run the same workflows many times; worker calls dominate their cost
(docs/design.md, "Training"). :class:`CachedWorker` keys each call by the exact request — the worker's
identity (name, backend class, model), the messages, the decoding settings (seed included) and,
for grammar-constrained continuations, the prefix, grammar and stop strings — and stores the
:class:`~podium.workers.base.Completion` in a call store: a SQLite file or a shared database
(:class:`podium.store.request_cache.RequestCache`). A hit returns the stored completion
(its recorded text, usage and latency) marked ``cached``, priced from its recorded usage at the
worker's **current** price table — a pool file's new prices apply to cached calls too, as they
would to the same call made again (a worker priced per call, such as a replay worker, keeps the
recorded cost); the executor and the conductor
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
from typing import Any, Protocol

from podium.workers.base import Call, Completion, CountsTokens, PricedPerCall, Worker, WorkerSettings
from podium.workers.wrapper import WorkerWrapper, unwrap

__all__ = [
    "KEY_VERSION",
    "CachedWorker",
    "CallStore",
    "request_key",
]


class CallStore(Protocol):
    """Where :class:`CachedWorker` keeps completions by request key. The SQLite/database one is
    :class:`podium.store.request_cache.RequestCache`; the core names only this protocol."""

    def get(self, key: str) -> Completion | None:
        """The completion stored under ``key`` (marked ``cached``), or None."""
        ...

    def put(self, key: str, worker: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` (replacing what was there)."""
        ...


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
    """``inner`` behind a call store (:class:`CallStore`, e.g.
    :class:`podium.store.request_cache.RequestCache`; see the module docstring).

    Wrap the raw worker (inside the budget guard), so budgets still reserve and settle every
    call — a hit settles to its cost at the current prices, as the same call made again would.
    """

    reaches_inner = False  # a hit answers without the inner worker: nothing to load ahead

    def __init__(self, inner: Worker, cache: CallStore) -> None:
        super().__init__(inner)
        self.cache = cache
        self._priced_per_call = isinstance(unwrap(inner), PricedPerCall)  # keeps its recorded cost on a hit
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
            if self._priced_per_call:
                return hit
            cost = self.info.price.cost(hit.usage)
            return hit if cost == hit.cost_usd else dataclasses.replace(hit, cost_usd=cost)
        completion = await super().complete(call)
        self.cache.put(key, self.info.name, completion)
        return completion
