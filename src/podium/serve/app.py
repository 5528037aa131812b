"""``podium serve``: an OpenAI-compatible chat-completions API in front of the orchestrator.

Endpoints:

* ``POST /v1/chat/completions`` — the conversation becomes the question; the model name picks a
  conductor preset (:mod:`podium.serve.config`). Non-streaming and streaming (server-sent
  events; only the answering step streams, see :mod:`podium.streaming`). ``usage`` carries
  ``cost_usd`` (USD, workers and conductor); the response ``id`` is the trace id, also sent as
  the ``X-Request-Id`` header, so ``podium trace show ID`` finds the request.
* ``GET /v1/models`` — the presets; ``GET /healthz`` — serving mode, requests in flight and
  waiting, requests refused as busy, the trace writer's counts, the configuration's load time and
  any reload error.

Admission: at most ``max_in_flight`` requests run; later ones wait for a slot, first come first
served (at most ``max_queued`` waiting, each at most ``queue_timeout_s``), and one that gets no
slot is answered 503 — and traced (status error, ``ServerBusy: …``) and counted like any request.

Per-request options, as headers or in the body's ``podium`` object (``extra_body`` in the
OpenAI SDK): ``deadline_s`` / ``X-Podium-Deadline`` (seconds), ``cost_cap_usd`` /
``X-Podium-Cost-Cap`` (USD) — both can only lower the preset's limits — ``workers`` /
``X-Podium-Workers`` (allowed worker names, comma-separated), ``rounds`` / ``X-Podium-Rounds``,
``tags`` / ``X-Podium-Tags``; the data subject is ``subject`` / ``X-Podium-Subject`` or the
OpenAI ``user`` field.

Errors use the OpenAI shape ``{"error": {"message", "type", "param", "code"}}``: 400 bad input,
401 missing or unknown key, 404 unknown model, 429 a period budget (the pool's or the key's) used
up, with Retry-After, 503 busy (its trace id in the message and header), 502/504 when no answer
could be produced, 500 a bug (the trace id is in the message and header).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import os
import signal
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from podium import __version__
from podium.budget import RequestBudget
from podium.conductor.base import Conductor
from podium.conductor.baselines import FallbackOnly
from podium.conductor.lm import LMConductor
from podium.conductor.named import named_conductor
from podium.errors import ConfigError, CostCapExceeded, DeadlineExceeded, InvalidQuestion
from podium.orchestrator import Orchestrator, is_blank, validate_question
from podium.pool import PoolConfig, load_pool
from podium.records import RunRecord
from podium.serve.config import ModelPreset, ServeConfig, load_serve_config
from podium.serve.keys import ApiKey, KeyStore
from podium.store.engine import StoreError
from podium.store.settings import KILL_SWITCH, Setting, SharedSettings
from podium.streaming import AnswerStream
from podium.trace.backend import TraceBackend
from podium.workers.base import Worker

if TYPE_CHECKING:
    from podium.telemetry import Telemetry

__all__ = [
    "MAX_JSON_DEPTH",
    "ApiError",
    "Server",
    "create_app",
    "question_from_messages",
]

_log = logging.getLogger("podium.serve")


class ApiError(Exception):
    """An error answered in the OpenAI error shape with HTTP ``status``."""

    def __init__(
        self, status: int, message: str, *, type: str = "invalid_request_error", code: str | None = None,
        param: str | None = None, headers: Mapping[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


# ------------------------------------------------------------------------------------ requests


class _ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    deadline_s: float | None = Field(default=None, gt=0)
    cost_cap_usd: float | None = Field(default=None, gt=0)
    workers: list[str] | None = None
    rounds: int | None = Field(default=None, ge=0, le=5)
    tags: list[str] = Field(default_factory=list)
    subject: str | None = None


class _ChatRequest(BaseModel):
    """The fields podium reads; the other OpenAI fields are accepted and ignored (decoding is
    the pool's and the conductor's business)."""

    model_config = ConfigDict(extra="allow")
    model: str = ""
    messages: list[_ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    user: str | None = None
    podium: Any = None  # validated by _options, so errors name the field as the client wrote it


def question_from_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """The question for the conductor from an OpenAI conversation.

    One user message (after optional system messages) is the question itself, with the system
    text first as instructions; a longer conversation is written out as a transcript followed
    by the last user message. Raises InvalidQuestion for non-text content or no user message.
    """
    texts: list[tuple[str, str]] = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise InvalidQuestion(f"messages[{i}]: podium serves text only (got a {part.get('type')!r} part)")
                parts.append(part["text"])
            content = "\n".join(parts)
        texts.append((str(m.get("role")), content or ""))
    if not texts or texts[-1][0] != "user":
        raise InvalidQuestion("the last message must be the user's question (role 'user')")
    system = "\n".join(t for r, t in texts if r in ("system", "developer") and t.strip())
    turns = [(r, t) for r, t in texts if r not in ("system", "developer")]
    last = turns[-1][1]
    if is_blank(last):
        raise InvalidQuestion(
            f"messages[{len(messages) - 1}]: the user's question is empty (only spaces or invisible characters)"
        )
    parts = [f"Instructions: {system}"] if system else []
    if len(turns) > 1:
        names = {"user": "User", "assistant": "Assistant", "tool": "Tool"}
        transcript = "\n".join(f"{names[r]}: {t}" for r, t in turns[:-1])
        parts.append(f"Conversation so far:\n{transcript}\n\nThe user now asks:")
    parts.append(last)
    return "\n\n".join(parts)


# ------------------------------------------------------------------------------------- server


@dataclass
class _Loaded:
    """One loaded configuration: the presets' orchestrators, built together."""

    config: ServeConfig
    pool: PoolConfig
    models: dict[str, Orchestrator]
    presets: dict[str, ModelPreset]
    loaded_at: float = field(default_factory=time.time)


class _Busy(Exception):
    """No slot for a request: every one is taken and the wait queue is full or timed out."""

    def __init__(self, reason: str, waited_s: float) -> None:
        super().__init__(reason)
        self.reason, self.waited_s = reason, waited_s


class _Admission:
    """Slots for requests: at most ``limit`` hold one; the others wait first come, first served.

    A freed slot is handed straight to the longest waiter (a request arriving meanwhile cannot
    take it), so nobody waits past their turn."""

    def __init__(self) -> None:
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def enter(self, limit: int, max_queued: int, timeout_s: float) -> float:
        """Take a slot, waiting at most ``timeout_s``; returns the seconds waited. Raises _Busy."""
        if self.running < limit and not self._waiters:
            self.running += 1
            return 0.0
        if timeout_s <= 0 or len(self._waiters) >= max_queued:
            raise _Busy(f"{self.running} requests in flight (max_in_flight {limit}) and {self.waiting} waiting", 0.0)
        started = time.monotonic()
        slot = asyncio.get_running_loop().create_future()
        self._waiters.append(slot)
        try:
            await asyncio.wait_for(asyncio.shield(slot), timeout_s)
        except TimeoutError:
            if not (slot.done() and not slot.cancelled()):  # handed a slot just as the time ran out: keep it
                slot.cancel()
                raise _Busy(
                    f"no slot within queue_timeout_s {timeout_s:g} s ({self.running} requests in flight, "
                    f"max_in_flight {limit})",
                    time.monotonic() - started,
                ) from None
        except asyncio.CancelledError:  # the client went away while waiting
            if slot.done() and not slot.cancelled():
                self.leave(limit)  # the slot was ours: pass it on
            slot.cancel()
            raise
        finally:
            if slot in self._waiters:
                self._waiters.remove(slot)
        return time.monotonic() - started

    def leave(self, limit: int) -> None:
        """Give a slot back: to the longest waiter, or free."""
        self.running -= 1
        while self._waiters and self.running < limit:
            slot = self._waiters.popleft()
            if not slot.done():
                slot.set_result(None)
                self.running += 1


class Server:
    """What a running server holds: its configuration (reloadable), traces and keys.

    Args:
        config_path: the server configuration file (None: the defaults, no reload).
        pool: pool file or preset overriding the configuration's ``pool``.
        traces: the trace store every request is written to.
        keys: the key file; when it holds an active key, every request needs one.
        workers: the pool's workers (tests pass fakes; default: built from the pool file).

    Raises ConfigError when the first load fails.
    """

    def __init__(
        self,
        *,
        config_path: Path | None = None,
        pool: str | None = None,
        traces: TraceBackend | None = None,
        keys: KeyStore | None = None,
        workers: list[Worker] | None = None,
    ) -> None:
        self.config_path = config_path
        self.pool_override = pool
        self.traces = traces
        self.keys = keys
        self.workers = workers
        self.served = 0
        self.refused_busy = 0
        """Requests answered 503 because no slot was free (each also left a trace)."""
        self.admission = _Admission()
        self._busy_logged_at = -60.0
        self.tasks: set[asyncio.Task[RunRecord]] = set()
        """Requests being answered: shutdown waits for them, so every one leaves its trace."""
        self._bookings: set[asyncio.Future[None]] = set()
        """Usage rows being written (in threads); shutdown waits for them."""
        self.reload_error: str | None = None
        self.telemetry: Telemetry | None = None
        self.switches = SharedSettings(keys.engine) if keys is not None else None
        """The kill switch every replica on this key store reads (``podium kill-switch``)."""
        self.kill_switch: Setting | None = self.switches.get(KILL_SWITCH) if self.switches else None
        self._switch_error: str | None = None
        self._stamp = self._watched()
        self.current = self._load()

    def _load(self) -> _Loaded:
        from podium.runtime import build_orchestrator, build_telemetry

        config = load_serve_config(self.config_path)
        pool_config = load_pool(self.pool_override or config.pool)
        if self.telemetry is None:  # one span exporter for the server's life (the first pool's settings)
            self.telemetry = build_telemetry(pool_config)
        base = build_orchestrator(pool_config, traces=self.traces, workers=self.workers, exporter=self.telemetry)
        models = {}
        for name, preset in config.models.items():
            try:
                models[name] = self._preset(base, preset, config)
            except ConfigError as exc:
                raise ConfigError(f"model {name!r}: {exc}") from None
        return _Loaded(config, pool_config, models, dict(config.models))

    def _preset(self, base: Orchestrator, preset: ModelPreset, config: ServeConfig) -> Orchestrator:
        names = [w.info.name for w in base.pool]
        subset = None
        if preset.workers is not None:
            unknown = [w for w in preset.workers if w not in names]
            if unknown:
                raise ConfigError(f"workers {unknown} are not in the pool ({', '.join(names)})")
            subset = [names.index(w) for w in preset.workers]
        limits = base.config.limits.overridden(deadline_s=preset.deadline_s, cost_cap_usd=preset.cost_cap_usd)
        shaped = base.derive(workers=subset, max_steps=preset.max_steps, recursion_rounds=preset.rounds, limits=limits)
        conductor: Conductor
        if self.serving(config) == "fallback" or preset.conductor == "fallback":
            conductor = FallbackOnly(shaped.fallback.worker, shaped.fallback.subtask)
        elif preset.conductor == "pool":
            conductor = base.conductor
        else:
            conductor = named_conductor(preset.conductor, shaped.pool)
        return shaped.derive(conductor=conductor)

    def serving(self, config: ServeConfig | None = None) -> str:
        """What is served: ``fallback`` while the kill switch is on (set in the store, for every
        replica), else the configuration's ``serving``."""
        if self.kill_switch is not None and self.kill_switch.value == "fallback":
            return "fallback"
        return (config or self.current.config).serving

    def poll_kill_switch(self) -> bool:
        """Read the kill switch from the store (a blocking call: run it in a thread); reload when
        it changed. A store that cannot be read keeps the last state known (logged once).
        Returns whether it changed."""
        if self.switches is None:
            return False
        try:
            found = self.switches.get(KILL_SWITCH)
        except ConfigError as exc:
            if str(exc) != self._switch_error:
                _log.error("podium: cannot read the kill switch, keeping %s: %s", self.serving(), exc)
            self._switch_error = str(exc)
            return False
        self._switch_error = None
        before = self.kill_switch.value if self.kill_switch else None
        self.kill_switch = found
        if (found.value if found else None) == before:
            return False
        _log.warning("podium: kill switch %s", f"on (set {found.updated_at} by {found.updated_by})" if found else "off")
        self.reload()
        return True

    # ---------------------------------------------------------------------------- reloading

    def _watched(self) -> tuple[float, ...]:
        """Modification times of what a reload reads: the configuration and the registry's
        promotion logs (a ``podium conductor rollback`` changes which version is served)."""
        from podium.registry import Registry

        paths = [self.config_path] if self.config_path else []
        root = Registry().root
        paths += sorted(root.glob("*/promotions.jsonl")) if root.is_dir() else []
        return tuple(p.stat().st_mtime if p.exists() else 0.0 for p in paths)

    def reload(self) -> bool:
        """Load the configuration again; on failure keep serving the previous one and keep
        the error for ``/healthz``. Returns whether the new configuration is in force."""
        self._stamp = self._watched()
        try:
            self.current = self._load()
        except ConfigError as exc:
            self.reload_error = str(exc)
            _log.error("podium: configuration not reloaded, still serving the previous one: %s", exc)
            return False
        self.reload_error = None
        _log.warning("podium: configuration reloaded (serving: %s)", self.serving())
        return True

    def reload_if_changed(self) -> None:
        if self._watched() != self._stamp:
            self.reload()

    # ----------------------------------------------------------------------------- requests

    def authenticate(self, request: Request) -> ApiKey | None:
        """The request's key, or None when the server has no active keys. Raises ApiError 401,
        or 503 when the key store cannot be read and has no answer for this key yet."""
        if self.keys is None:
            return None
        try:
            if not self.keys.active():
                return None
            header = request.headers.get("authorization", "")
            secret = header[7:].strip() if header.lower().startswith("bearer ") else ""
            if not secret:
                raise ApiError(401, "missing API key: send 'Authorization: Bearer <key>'", code="invalid_api_key")
            key = self.keys.verify(secret)
        except StoreError as exc:
            _log.error("podium: %s", exc)
            raise ApiError(503, f"{exc}; try again shortly", type="server_error", code="store_unavailable",
                           headers={"Retry-After": "5"}) from None  # fmt: skip
        if key is None:
            raise ApiError(401, "unknown or revoked API key", code="invalid_api_key")
        return key

    def prepare(self, body: _ChatRequest, headers: Mapping[str, str], key: ApiKey | None) -> _Prepared:
        """Everything a request needs before it runs. Raises ApiError for bad input."""
        loaded = self.current
        model = body.model or loaded.config.default_model
        orchestrator = loaded.models.get(model)
        if orchestrator is None:
            raise ApiError(
                404,
                f"model {model!r} does not exist; this server offers {', '.join(loaded.models)}",
                code="model_not_found",
                param="model",
            )
        options = _options(body, body.podium, headers)
        if options.workers is not None or options.rounds is not None:
            subset = None
            if options.workers is not None:
                if not isinstance(orchestrator.conductor, LMConductor):
                    raise ApiError(
                        400,
                        f"model {model!r} has a fixed conductor; 'workers' applies to LM-conductor models",
                        param="workers",
                    )
                names = [w.info.name for w in orchestrator.pool]
                unknown = [w for w in options.workers if w not in names]
                if unknown:
                    raise ApiError(400, f"workers {unknown} are not offered ({', '.join(names)})", param="workers")
                subset = [names.index(w) for w in options.workers]
            try:
                orchestrator = orchestrator.derive(workers=subset, recursion_rounds=options.rounds)
            except ConfigError as exc:
                raise ApiError(400, str(exc), param="workers") from None
        limits = orchestrator.config.limits.tightened(deadline_s=options.deadline_s, cost_cap_usd=options.cost_cap_usd)
        periods = list(orchestrator.config.periods)
        if key is not None and self.keys is not None and (ledger := self.keys.budget(key)) is not None:
            if ledger.exhausted():
                raise ApiError(
                    429,
                    f"key {key.name!r} has used its budget of ${ledger.cap_usd:g} per {key.period}",
                    type="insufficient_quota",
                    code="insufficient_quota",
                    headers={"Retry-After": str(max(1, math.ceil(ledger.until_next_period_s())))},
                )
            periods.append(ledger)
        try:
            question = question_from_messages([m.model_dump() for m in body.messages])
            question = validate_question(question, max_chars=orchestrator.config.max_question_chars)
        except InvalidQuestion as exc:
            raise ApiError(400, str(exc), param="messages") from None
        tags = [f"model:{model}", *options.tags] + ([f"key:{key.name}"] if key else [])
        return _Prepared(
            model=model,
            orchestrator=orchestrator,
            budget=RequestBudget(limits, periods),
            question=question,
            request_id=uuid.uuid4().hex,
            tags=tuple(tags),
            subject=options.subject or body.user,
            key=key,
            include_usage=bool((body.stream_options or {}).get("include_usage")),
        )

    @property
    def in_flight(self) -> int:
        """Requests being answered now."""
        return len(self.tasks)

    async def admit(self, prepared: _Prepared) -> None:
        """Take a slot for ``prepared`` (waiting for one as configured), to be given back when
        its task ends (:meth:`start`). Without one: the refusal is traced and counted, and
        ApiError 503 carries the trace id."""
        config = self.current.config
        try:
            await self.admission.enter(config.max_in_flight, config.max_queued, config.queue_timeout_s)
        except _Busy as busy:
            self.refused_busy += 1
            reason = f"ServerBusy: {busy.reason}; waited {busy.waited_s:.3f} s"
            prepared.orchestrator.refuse(
                prepared.question, reason, request_id=prepared.request_id, tags=prepared.tags, subject=prepared.subject
            )
            now = time.monotonic()
            if now - self._busy_logged_at >= 10.0:  # at most one line per 10 s under a burst
                self._busy_logged_at = now
                _log.warning("podium: busy: %s (%d requests refused with 503 so far, each traced)",
                            busy.reason, self.refused_busy)  # fmt: skip
            raise ApiError(
                503,
                f"the server is busy (trace {prepared.request_id}): {busy.reason}; retry shortly",
                type="server_error",
                code="server_busy",
                headers={"Retry-After": "1", "X-Request-Id": prepared.request_id},
            ) from None

    def start(self, prepared: _Prepared, stream: AnswerStream | None = None) -> asyncio.Task[RunRecord]:
        """Run ``prepared`` (admitted: :meth:`admit`) as a task the server keeps track of until
        it ends, then give its slot back and book it."""
        task = asyncio.create_task(prepared.run(stream))
        self.tasks.add(task)
        task.add_done_callback(lambda done: self._finished(prepared, done))
        return task

    async def drain(self, timeout_s: float = 30.0) -> None:
        """At shutdown, after uvicorn's grace period: cancel the requests still running and wait
        (at most ``timeout_s``) until each has written its trace (status error, cancelled)."""
        pending = [t for t in self.tasks if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        if self._bookings:  # the usage rows of the last requests
            await asyncio.wait(self._bookings, timeout=timeout_s)

    def _finished(self, prepared: _Prepared, task: asyncio.Task[RunRecord]) -> None:
        """Forget a finished request, give its slot back and book what it cost against its key
        (in a thread: the store's write never holds up the event loop)."""
        self.tasks.discard(task)
        self.admission.leave(self.current.config.max_in_flight)
        self.served += 1
        record = None if task.cancelled() or task.exception() is not None else task.result()
        if prepared.key is not None and self.keys is not None and record is not None:
            booking = asyncio.ensure_future(asyncio.to_thread(self._book, prepared.key.name, record))
            self._bookings.add(booking)
            booking.add_done_callback(self._bookings.discard)

    def _book(self, key: str, record: RunRecord) -> None:
        assert self.keys is not None
        try:
            self.keys.record(key, record.id, record.totals.total_cost_usd)
        except Exception as exc:  # the answer is sent; the ledger already holds the cost
            _log.error("podium: usage of request %s (key %r, $%.6f) not recorded: %s",
                       record.id, key, record.totals.total_cost_usd, exc)  # fmt: skip


@dataclass(frozen=True)
class _Prepared:
    model: str
    orchestrator: Orchestrator
    budget: RequestBudget
    question: str
    request_id: str
    tags: tuple[str, ...]
    subject: str | None
    key: ApiKey | None
    include_usage: bool

    async def run(self, stream: AnswerStream | None = None) -> RunRecord:
        return await self.orchestrator.run(
            self.question,
            budget=self.budget,
            request_id=self.request_id,
            tags=self.tags,
            subject=self.subject,
            stream=stream,
        )


_HEADERS = {
    "x-podium-deadline": "deadline_s",
    "x-podium-cost-cap": "cost_cap_usd",
    "x-podium-workers": "workers",
    "x-podium-rounds": "rounds",
    "x-podium-tags": "tags",
    "x-podium-subject": "subject",
}
"""Per-request option headers and the body option each stands for."""


def _options(body: _ChatRequest, raw_podium: Any, headers: Mapping[str, str]) -> _Options:
    """Options from the body's ``podium`` object, then ``X-Podium-*`` headers (a header wins).
    Raises ApiError naming the field or header as the client wrote it."""
    if raw_podium is not None and not isinstance(raw_podium, dict):
        fields = ", ".join(_Options.model_fields)
        raise ApiError(400, f"podium: give an object with any of {fields}", param="podium")
    merged: dict[str, Any] = dict(raw_podium or {})
    given_as: dict[str, str] = {name: f"podium.{name}" for name in merged}
    for header, name in _HEADERS.items():
        value = headers.get(header)
        if value is None:
            continue
        merged[name] = [v.strip() for v in value.split(",") if v.strip()] if name in ("workers", "tags") else value
        given_as[name] = "X-Podium-" + "-".join(p.capitalize() for p in header.split("-")[2:])
    try:
        options = _Options.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        where = given_as.get(field, f"podium.{field}")
        raise ApiError(400, f"{where}: {first['msg']}", param=where) from None
    for name in ("deadline_s", "cost_cap_usd"):
        value = getattr(options, name)
        if value is not None and not math.isfinite(value):
            raise ApiError(400, f"{given_as.get(name, name)}: must be a finite number", param=given_as.get(name))
    return options


# ---------------------------------------------------------------------------------- responses


def _usage(record: RunRecord) -> dict[str, Any]:
    t = record.totals
    prompt = t.input_tokens + t.conductor_input_tokens
    completion = t.output_tokens + t.conductor_output_tokens
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cost_usd": round(t.total_cost_usd, 10),
    }
    if t.estimated_calls:  # some upstream sent no usage: its tokens were counted by podium
        usage["estimated"] = True
        usage["estimated_calls"] = t.estimated_calls
    return usage


def _podium_info(record: RunRecord) -> dict[str, Any]:
    return {
        "request_id": record.id,
        "status": record.status,
        "fallback_reason": record.fallback.reason if record.fallback else None,
        "conductor": record.conductor,
        "steps": len(record.steps),
        "workers": sorted({s.worker for s in record.steps}),
        "wall_time_s": round(record.totals.wall_time_s, 3),
    }


def _finish_reason(record: RunRecord) -> str:
    answering = [s for s in record.steps if s.output and s.output == record.answer]
    return "length" if answering and answering[-1].finish_reason == "length" else "stop"


def _failure(record: RunRecord) -> ApiError:
    """The HTTP answer to a request that ended with status error, chosen by the type and fields
    of the error that ended it (``record.cause``), never by its text: a period budget's refusal
    (the pool's or the key's) is 429 with Retry-After until the period rolls over; the request's
    own cap 400; a worker that overcharged 502; the deadline 504; anything else 502."""
    error, cause = record.error or "", record.cause
    headers = {"X-Request-Id": record.id}
    if isinstance(cause, CostCapExceeded) and cause.by_period_budget:
        if cause.retry_after_s is not None:
            headers["Retry-After"] = str(max(1, math.ceil(cause.retry_after_s)))
        return ApiError(
            429,
            f"no answer within the budget (trace {record.id}): {error}",
            type="insufficient_quota",
            code="insufficient_quota",
            headers=headers,
        )
    if isinstance(cause, CostCapExceeded) and record.totals.incidents:
        # a worker reported more usage than its reservation allowed, and the request stopped
        # calling: the upstream misbehaved, not the client's request or cap
        worker = record.totals.incidents[0].worker
        return ApiError(
            502,
            f"no answer (trace {record.id}): worker {worker!r} reported more usage than its limits allow; {error}",
            type="server_error",
            code="upstream_overcharged",
            headers=headers,
        )
    if isinstance(cause, CostCapExceeded):  # the request's own cap is too small for a call
        return ApiError(
            400,
            f"no answer within the budget (trace {record.id}): {error}",
            code="cost_cap_exceeded",
            headers=headers,
        )
    timeout = isinstance(cause, DeadlineExceeded)
    return ApiError(
        504 if timeout else 502,
        f"no answer (trace {record.id}): {record.error}",
        type="server_error",
        code="deadline_exceeded" if timeout else "no_answer",
        headers=headers,
    )


def _internal(request_id: str, exc: Exception) -> ApiError:
    """A 500 in OpenAI's shape for an unexpected error of request ``request_id`` (logged with its
    traceback; the request's trace holds the error too)."""
    _log.error("podium: request %s failed: %s: %s", request_id, type(exc).__name__, exc, exc_info=exc)
    return ApiError(
        500,
        f"internal error (trace {request_id}): {type(exc).__name__}",
        type="server_error",
        code="internal_error",
        headers={"X-Request-Id": request_id},
    )


def _sse(body: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def _chunk(prepared: _Prepared, created: int, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    """A ``chat.completion.chunk`` event; ``extra`` (usage) comes with no choices."""
    choices = [] if extra else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {"id": prepared.request_id, "object": "chat.completion.chunk", "created": created}
    return _sse({**body, "model": prepared.model, "choices": choices, **extra})


def _sse_error(error: ApiError) -> str:
    return _sse({"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}})


async def _events(
    prepared: _Prepared, task: asyncio.Task[RunRecord], stream: AnswerStream, queue: asyncio.Queue[str]
) -> AsyncIterator[str]:
    """The SSE stream of one request (already started, writing its answer's text to ``stream``,
    which puts it on ``queue``): role, the answer's text as it is generated, the finish chunk,
    usage if asked, ``[DONE]``. A client that goes away cancels the request (its trace is still
    written, with status error)."""
    created = int(time.time())
    try:
        yield _chunk(prepared, created, {"role": "assistant", "content": ""})
        while not task.done():
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield _chunk(prepared, created, {"content": getter.result()})
            else:
                getter.cancel()
        await asyncio.sleep(0)  # deltas a worker thread scheduled just before the end
        while not queue.empty():
            yield _chunk(prepared, created, {"content": queue.get_nowait()})
        try:
            record = task.result()
        except ConfigError as exc:
            yield _sse_error(ApiError(500, f"trace {prepared.request_id}: {exc}", type="server_error"))
            return
        except Exception as exc:  # a bug: the request's trace is written; the stream still ends in OpenAI's shape
            yield _sse_error(_internal(prepared.request_id, exc))
            return
        if record.status == "error":
            yield _sse_error(_failure(record))
            return
        rest = stream.close(record.answer)
        if rest is None:
            message = f"trace {record.id}: the answer changed after streaming began (a retry or the fallback)"
            yield _sse_error(ApiError(502, message, type="server_error", code="stream_diverged"))
            return
        if rest:
            yield _chunk(prepared, created, {"content": rest})
        yield _chunk(prepared, created, {}, _finish_reason(record))
        if prepared.include_usage:
            yield _chunk(prepared, created, {}, usage=_usage(record), podium=_podium_info(record))
        yield "data: [DONE]\n\n"
    finally:
        if not task.done():
            task.cancel()  # the client went away: stop the work; the trace records it


# ------------------------------------------------------------------------------- input edge


def _chat_body_schema() -> dict[str, Any]:
    """The OpenAPI request body of ``POST /v1/chat/completions`` (the body is read and validated
    by hand, so the schema is declared here, its references inlined): clients and API fuzzers
    (schemathesis, in the test suite) see what the endpoint accepts."""
    schema = _ChatRequest.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.rsplit("/", 1)[1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return {"required": True, "content": {"application/json": {"schema": inline(schema)}}}


MAX_JSON_DEPTH = 32
"""Deepest JSON nesting a request body may have (a chat request needs about 5)."""


async def _read_json(request: Request, limit: int) -> Any:
    """The request body as JSON, read at most ``limit`` bytes far. Raises ApiError: 413 when
    the body is larger (Content-Length is checked before reading), 400 when it is not UTF-8
    JSON, nests deeper than :data:`MAX_JSON_DEPTH`, or holds a lone surrogate (``\\ud800``, text
    no store can keep)."""
    declared = request.headers.get("content-length")
    too_large = ApiError(
        413, f"the body is larger than {limit:,} bytes (max_body_bytes in the server config)", code="body_too_large"
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the body is not UTF-8 (byte {exc.start})") from None
    if _nesting(text) > MAX_JSON_DEPTH:
        raise ApiError(400, f"the body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        raise ApiError(400, "the body is not JSON") from None
    where = _lone_surrogate(payload)
    if where is not None:
        raise ApiError(400, f"{where or 'body'}: a lone surrogate escape (\\ud800–\\udfff) is not text", param=where)
    return payload


def _nesting(text: str) -> int:
    """The deepest bracket nesting of a JSON text outside strings (one pass)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _lone_surrogate(value: Any, where: str = "") -> str | None:
    """Where in a parsed JSON value a string holds a surrogate code point, or None."""
    if isinstance(value, str):
        return where if any("\ud800" <= c <= "\udfff" for c in value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            found = _lone_surrogate(k, where) if isinstance(k, str) else None
            found = found if found is not None else _lone_surrogate(v, f"{where}.{k}" if where else str(k))
            if found is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _lone_surrogate(v, f"{where}.{i}" if where else str(i))
            if found is not None:
                return found
    return None


# ---------------------------------------------------------------------------------------- app


def create_app(server: Server) -> FastAPI:
    """The FastAPI application serving ``server``."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, server.reload)

        async def watch() -> None:
            while True:
                await asyncio.sleep(1.0)
                server.reload_if_changed()
                await asyncio.to_thread(server.poll_kill_switch)

        watcher = asyncio.create_task(watch())
        try:
            yield
        finally:
            watcher.cancel()
            await server.drain()  # requests cut off by the grace period still write their traces
            if server.traces is not None:  # the trace writer stores what is queued before we stop
                await asyncio.to_thread(server.traces.flush)
            if server.telemetry is not None:  # flush the spans; losses are logged, never silent
                server.telemetry.shutdown()

    app = FastAPI(title="podium", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    from podium.serve.ui import UIHeaders, ui_router

    app.include_router(ui_router(server))
    app.add_middleware(UIHeaders)  # every /ui answer: no script, no framing

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> Response:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
        codes = {404: "not_found", 405: "method_not_allowed"}
        return ApiError(exc.status_code, str(exc.detail), code=codes.get(exc.status_code)).response()

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        loaded = server.current
        return {
            "status": "ok",
            "version": __version__,
            "process": os.getpid(),  # which server process answered (several with --workers N)
            "serving": server.serving(loaded.config),
            "kill_switch": dataclasses.asdict(server.kill_switch) if server.kill_switch else None,
            "pool": loaded.pool.name,
            "models": list(loaded.models),
            "in_flight": server.in_flight,
            "waiting": server.admission.waiting,
            "served": server.served,
            "refused_busy": server.refused_busy,
            "max_in_flight": loaded.config.max_in_flight,
            "config_loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(loaded.loaded_at)),
            "reload_error": server.reload_error,
            "telemetry": dataclasses.asdict(server.telemetry.stats()) if server.telemetry else None,
            "traces": dataclasses.asdict(server.traces.stats()) if server.traces else None,
        }

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        server.authenticate(request)
        loaded = server.current
        created = int(loaded.loaded_at)
        data = [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "podium",
                "description": loaded.presets[name].description,
                "conductor": orchestrator.conductor.name,
            }
            for name, orchestrator in loaded.models.items()
        ]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions", openapi_extra={"requestBody": _chat_body_schema()})
    async def chat(request: Request) -> Response:
        key = server.authenticate(request)
        payload = await _read_json(request, server.current.config.max_body_bytes)
        if not isinstance(payload, dict):
            raise ApiError(400, "the body must be a JSON object with 'model' and 'messages'")
        try:
            body = _ChatRequest.model_validate(payload)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ApiError(400, f"{where or 'body'}: {first['msg']}", param=where or None) from None
        prepared = server.prepare(body, request.headers, key)
        headers = {"X-Request-Id": prepared.request_id}
        await server.admit(prepared)  # 503 (traced) when no slot frees in time
        if body.stream:
            queue: asyncio.Queue[str] = asyncio.Queue()
            stream = AnswerStream(queue.put_nowait)
            task = server.start(prepared, stream)  # started here, so its slot is given back however the stream ends
            events = _events(prepared, task, stream, queue)
            return StreamingResponse(events, media_type="text/event-stream", headers=headers)
        try:
            record = await server.start(prepared)
        except ConfigError as exc:
            raise ApiError(500, f"trace {prepared.request_id}: {exc}", type="server_error", headers=headers) from None
        except Exception as exc:  # a bug: the request's trace is written; answer in OpenAI's shape
            raise _internal(prepared.request_id, exc) from None
        if record.status == "error":
            raise _failure(record)
        return JSONResponse(
            {
                "id": record.id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": prepared.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": record.answer},
                        "finish_reason": _finish_reason(record),
                    }
                ],
                "usage": _usage(record),
                "podium": _podium_info(record),
            },
            headers=headers,
        )

    return app
