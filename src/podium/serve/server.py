"""The server behind ``podium serve``'s API: the loaded configuration (presets → orchestrators,
hot-reloaded when the config, pool or registry changes), the kill switch shared through the
store, API keys, admission (:mod:`podium.serve.admission`), and each chat request from its
checked body to a running request (:class:`Prepared`) whose trace is always written."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import Request

from podium.budget import RequestBudget
from podium.conductor.base import Conductor
from podium.conductor.baselines import FallbackOnly
from podium.conductor.lm import LMConductor
from podium.errors import ConfigError, CostCapExceeded, InvalidQuestion
from podium.named_conductors import named_conductor
from podium.orchestrator import Orchestrator, validate_question
from podium.pool import PoolConfig, load_pool
from podium.records import RunRecord
from podium.serve.admission import Admission, ServerBusy
from podium.serve.config import ModelPreset, ServeConfig, load_serve_config
from podium.serve.keys import ApiKey, KeyStore
from podium.serve.wire import (
    ApiError,
    ChatRequest,
    question_from_messages,
    request_options,
)
from podium.store.engine import StoreError
from podium.store.settings import KILL_SWITCH, Setting, SharedSettings
from podium.streaming import AnswerStream
from podium.trace.backend import TraceBackend
from podium.workers.base import Worker

if TYPE_CHECKING:
    from podium.telemetry import Telemetry

__all__ = ["Prepared", "Server"]

_log = logging.getLogger("podium.serve")


@dataclass
class _Loaded:
    """One loaded configuration: the presets' orchestrators, built together."""

    config: ServeConfig
    pool: PoolConfig
    models: dict[str, Orchestrator]
    presets: dict[str, ModelPreset]
    loaded_at: float = field(default_factory=time.time)


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
        self.admission = Admission()
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
        from podium.builder import build_orchestrator, build_telemetry

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
        shape = base.config.updated(max_steps=preset.max_steps, recursion_rounds=preset.rounds, limits=limits)
        shaped = dataclasses.replace(base if subset is None else base.subset(subset), config=shape)
        conductor: Conductor
        if self.serving(config) == "fallback" or preset.conductor == "fallback":
            conductor = FallbackOnly(shaped.fallback.worker, shaped.fallback.subtask)
        elif preset.conductor == "pool":
            conductor = base.conductor
        else:
            conductor = named_conductor(preset.conductor, shaped.pool)
        return dataclasses.replace(shaped, conductor=conductor)

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

    def prepare(self, body: ChatRequest, headers: Mapping[str, str], key: ApiKey | None) -> Prepared:
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
        options = request_options(body, body.podium, headers)
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
                rounds = orchestrator.config.updated(recursion_rounds=options.rounds)
                orchestrator = orchestrator if subset is None else orchestrator.subset(subset)
                orchestrator = dataclasses.replace(orchestrator, config=rounds)
            except ConfigError as exc:
                raise ApiError(400, str(exc), param="workers") from None
        limits = orchestrator.config.limits.tightened(deadline_s=options.deadline_s, cost_cap_usd=options.cost_cap_usd)
        periods = list(orchestrator.config.periods)
        try:
            question = question_from_messages([m.model_dump() for m in body.messages])
            question = validate_question(question, max_chars=orchestrator.config.max_question_chars)
        except InvalidQuestion as exc:
            raise ApiError(400, str(exc), param="messages") from None
        tags = [f"model:{model}", *options.tags] + ([f"key:{key.name}"] if key else [])
        request_id, subject = uuid.uuid4().hex, options.subject or body.user
        if key is not None and self.keys is not None and (ledger := self.keys.budget(key)) is not None:
            if ledger.exhausted():  # refused before any work, traced as a busy server's 503 is
                reason = f"key {key.name!r} has used its budget of ${ledger.cap_usd:g} per {key.period}"
                refusal = CostCapExceeded(reason, needed_usd=0.0, remaining_usd=0.0, scope=ledger.scope)
                orchestrator.refuse(question, refusal, request_id=request_id, tags=tags, subject=subject)
                raise ApiError(
                    429,
                    f"{reason} (trace {request_id})",
                    type="insufficient_quota",
                    code="insufficient_quota",
                    headers={
                        "Retry-After": str(max(1, math.ceil(ledger.until_next_period_s()))),
                        "X-Request-Id": request_id,
                    },
                )
            periods.append(ledger)
        return Prepared(
            model=model,
            orchestrator=orchestrator,
            budget=RequestBudget(limits, periods),
            question=question,
            request_id=request_id,
            tags=tuple(tags),
            subject=subject,
            key=key,
            include_usage=bool((body.stream_options or {}).get("include_usage")),
        )

    @property
    def in_flight(self) -> int:
        """Requests being answered now."""
        return len(self.tasks)

    async def admit(self, prepared: Prepared) -> None:
        """Take a slot for ``prepared`` (waiting for one as configured), to be given back when
        its task ends (:meth:`start`). Without one: the refusal is traced and counted, and
        ApiError 503 carries the trace id."""
        config = self.current.config
        try:
            await self.admission.enter(config.max_in_flight, config.max_queued, config.queue_timeout_s)
        except ServerBusy as busy:
            self.refused_busy += 1
            prepared.orchestrator.refuse(
                prepared.question,
                busy,
                request_id=prepared.request_id,
                tags=prepared.tags,
                subject=prepared.subject,
                waited_s=busy.waited_s,
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

    def start(self, prepared: Prepared, stream: AnswerStream | None = None) -> asyncio.Task[RunRecord]:
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

    def _finished(self, prepared: Prepared, task: asyncio.Task[RunRecord]) -> None:
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
class Prepared:
    """A chat request checked and bound to its orchestrator, options and trace id, ready to run."""

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
