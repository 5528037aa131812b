"""Build a ready :class:`~podium.orchestrator.Orchestrator` from a pool file's configuration.

The one place where configuration turns into objects: workers (lazy: no model is loaded until
its first call), each under its data policy (:class:`~podium.workers.pii_guard.PIIGuard`:
pseudonymization for external workers), under budget guard, retries, circuit breaker
and failover (in one order: :mod:`podium.workers.stack`), the LM conductor on its configured
worker's model, the fallback pipeline, limits and period budgets.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from podium.budget import Limits, PeriodBudget
from podium.conductor.base import Conductor
from podium.conductor.lm import LMConductor, LMConductorSettings
from podium.conductor.plans import cascade_rounds
from podium.errors import ConfigError
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig, RecordExporter
from podium.pii.protection import PIIProtection
from podium.pool import PoolConfig
from podium.pool_workers import build_pool_workers
from podium.trace.backend import TraceBackend
from podium.workers.base import Price, Worker, WorkerSettings
from podium.workers.conductor_worker import ConductorWorker
from podium.workers.endpoints import endpoint
from podium.workers.pii_guard import DataPolicy, PIIGuard
from podium.workers.resilience import ResiliencePolicy
from podium.workers.stack import stack, stack_pool
from podium.workers.wrapper import WorkerWrapper

if TYPE_CHECKING:
    from podium.store.request_cache import RequestCache
    from podium.telemetry import Telemetry

__all__ = [
    "build_orchestrator",
    "build_telemetry",
    "data_policy",
    "judge_stack",
    "judge_worker",
    "pii_protection",
    "pii_to_warm",
    "pool_limits",
    "warm_models",
    "warm_pii",
]


def build_orchestrator(
    config: PoolConfig,
    *,
    traces: TraceBackend | None = None,
    conductor: Conductor | None = None,
    workers: list[Worker] | None = None,
    exporter: RecordExporter | None = None,
    cache: RequestCache | None = None,
) -> Orchestrator:
    """An orchestrator for ``config``, with the pool file's per-request settings
    (:class:`~podium.request.OrchestratorConfig`; a plan conductor that may choose a cascade gets
    at least the one round its escalation needs). Change them on the result:
    ``dataclasses.replace(orchestrator, config=orchestrator.config.updated(max_steps=..., ...))``.

    Args:
        config: a validated pool file.
        traces: the trace store (None: records are returned but not stored).
        conductor: override the configured LM conductor (e.g. a baseline or a test fake).
        workers: override the pool's workers (tests), in pool order; they get the pool file's
            data policies all the same.
        exporter: where finished records also go (e.g. :func:`build_telemetry`'s result).
        cache: a request cache for the pool's workers (evaluation), or None.

    Raises ConfigError when PII protection is on and the ``pii`` extra is not installed.
    """
    raw = workers if workers is not None else build_pool_workers(config)
    protection = pii_protection(config)
    r = config.resilience
    policy = ResiliencePolicy(r.attempts, r.base_delay_s, r.max_delay_s, r.breaker_threshold, r.breaker_cooldown_s)
    pool = stack_pool(
        raw,
        equivalents=[config.worker_index(w.equivalent) if w.equivalent else None for w in config.workers],
        policies=[data_policy(config, i) for i in range(len(raw))],
        cache=cache,
        protection=protection,
        resilience=policy,
    )
    if conductor is None and config.conductor.light is not None:
        from podium.named_conductors import light_conductor

        ref = config.conductor.light
        # a policy file by its stem; a registry ref by the version it resolves to (shows rollbacks)
        conductor = light_conductor(ref, name=config.conductor.light_name if ref.endswith(".npz") else None)
    if conductor is None:
        c = config.conductor
        settings = LMConductorSettings(
            temperature=c.temperature,
            seed=c.seed,
            reasoning_max_tokens=c.reasoning_max_tokens,
            max_tokens=c.max_tokens,
            constrained=c.constrained,
            subtask_chars=c.subtask_chars,
        )
        if c.worker is not None:
            model = pool[config.worker_index(c.worker)]
        elif c.version is not None:  # a GRPO-trained conductor: base model + LoRA adapter
            from podium.named_conductors import trained_lm

            price = Price(c.price.input, c.price.output, c.price.cached_input)
            own_lm, trained, _ = trained_lm(c.version, n_ctx=c.n_ctx, price=price)
            model = stack(own_lm, resilience=policy)
            # the training's decoding settings, except those this [conductor] section sets
            settings = dataclasses.replace(trained, **{k: getattr(c, k) for k in _SETTINGS if k in c.model_fields_set})
        else:  # a local conductor of its own, outside the pool
            from podium.workers.llama_cpp import LlamaCppWorker

            own = LlamaCppWorker(
                "conductor",
                c.model or "",
                settings=WorkerSettings(),
                price=Price(c.price.input, c.price.output, c.price.cached_input),
                n_ctx=c.n_ctx,
            )
            model = stack(own, resilience=policy)
        conductor = LMConductor(model, settings)
    per_request = OrchestratorConfig(
        pool_name=config.name,
        max_steps=config.max_steps,
        resamples=config.conductor.resamples,
        max_question_chars=config.max_question_chars,
        limits=pool_limits(config),
        periods=tuple(_periods(config, traces)),
        recursion_rounds=max(config.conductor.recursion_rounds, cascade_rounds(conductor)),  # a cascade's round
    )
    fallback = Fallback(config.worker_index(config.fallback.worker), config.fallback.subtask)
    orchestrator = Orchestrator(pool, conductor, fallback, per_request, traces=traces, exporter=exporter)
    for worker in raw:
        if isinstance(worker, ConductorWorker):
            worker.bind(orchestrator)
    return orchestrator


def warm_models(orchestrators: Iterable[Orchestrator]) -> None:
    """Start loading, in background threads, the local models the orchestrators' plan
    conductors need whatever the question (:meth:`~podium.conductor.plans.PlanConductor.warm`:
    the embedding model and the models every plan they can choose calls), so the loads overlap
    start-up instead of following the first question. Returns at once; other conductors need
    nothing here."""
    from podium.conductor.plans import PlanConductor

    for orchestrator in orchestrators:
        if isinstance(orchestrator.conductor, PlanConductor):
            orchestrator.conductor.warm(orchestrator.pool, orchestrator.config.max_steps)


def pii_to_warm(orchestrators: Iterable[Orchestrator]) -> list[PIIProtection]:
    """The PII protections the orchestrators' workers (and conductor worker) will use, each
    once: call ``warm_up()`` on them before serving, so loading Presidio never counts against a
    request's deadline. Empty when no worker receiving data is external."""
    found: dict[int, PIIProtection] = {}
    for orchestrator in orchestrators:
        workers = list(orchestrator.pool)
        if isinstance(orchestrator.conductor, LMConductor):
            workers.append(orchestrator.conductor.model)
        for outer in workers:
            worker: Worker | None = outer
            while worker is not None:
                if isinstance(worker, PIIGuard) and worker.protection is not None and worker.policy.external:
                    found[id(worker.protection)] = worker.protection
                worker = worker.inner if isinstance(worker, WorkerWrapper) else None
    return list(found.values())


def warm_pii(orchestrators: Iterable[Orchestrator], announce: Callable[[], AbstractContextManager[Any]]) -> None:
    """Load PII detection now, inside ``announce()`` (a spinner, a line), when a worker of the
    orchestrators receiving data is external (:func:`pii_to_warm`), so its load (about 2 s) never
    counts against a request's deadline. A failure is left to the requests: their PII guard then
    refuses the call and says why (fail closed)."""
    protections = pii_to_warm(orchestrators)
    if not protections:
        return
    with announce():
        for protection in protections:
            try:
                protection.warm_up()
            except Exception:
                return


def pii_protection(config: PoolConfig) -> PIIProtection | None:
    """The pool's PII protection, or None when ``[pii]`` is off. Raises ConfigError when it is on
    and Presidio is not installed."""
    if not config.pii_enabled:
        return None
    p = config.pii
    return PIIProtection(p.entities, p.languages, p.score_threshold, p.record_values)


def data_policy(config: PoolConfig, index: int) -> DataPolicy | None:
    """The pool-file data policy of pool slot ``index``; None for a local worker (nothing leaves)."""
    w = config.workers[index]
    if not config.is_external(w):
        return None
    return DataPolicy(True, w.allow_pii, w.provider, w.region, endpoint(w.backend, w.base_url))


_SETTINGS = ("temperature", "seed", "reasoning_max_tokens", "max_tokens", "constrained", "subtask_chars")
"""The [conductor] fields that are :class:`LMConductorSettings`."""


def pool_limits(config: PoolConfig) -> Limits:
    """The pool file's ``[limits]`` as the orchestrator's :class:`~podium.budget.Limits` (for a
    caller's own changes: :meth:`Limits.overridden`, :meth:`Limits.tightened`)."""
    c = config.limits
    return Limits(c.deadline_s, c.step_timeout_s, c.cost_cap_usd, c.fallback_reserve)


def _periods(config: PoolConfig, traces: TraceBackend | None) -> list[PeriodBudget]:
    """The pool's daily budget. With traces in PostgreSQL: a ledger in that database, shared by
    every process using it (:class:`~podium.store.ledger.SharedPeriodBudget`; its first day starts
    from today's stored traces). Otherwise one per process, starting from what today's stored
    traces already spent (so it holds across ``podium run`` processes run one after another)."""
    cap = config.limits.daily_budget_usd
    if cap is None:
        return []
    scope = f"pool:{config.name}/day"
    engine = traces.shared_engine if traces is not None else None
    if engine is not None:
        from podium.store.ledger import SharedPeriodBudget, spent_by_pool

        return [SharedPeriodBudget(engine, cap, period_s=86_400, scope=scope, seed=spent_by_pool(config.name))]
    day = PeriodBudget(cap, period_s=86_400, scope=scope)
    if traces is not None:
        since = datetime.fromtimestamp(day.period_start, UTC).isoformat(timespec="milliseconds")
        day.spent_usd = traces.spent_since(config.name, since.replace("+00:00", "Z"))
    return [day]


def build_telemetry(config: PoolConfig, environ: Mapping[str, str] | None = None) -> Telemetry | None:
    """The OpenTelemetry span exporter ``config``'s ``[telemetry]`` section and the standard
    ``OTEL_*`` variables ask for, or None when export is off (the default).

    The pool file wins over the environment: ``exporter`` else ``OTEL_TRACES_EXPORTER``
    (``otlp``, ``console`` or ``none``); ``OTEL_SDK_DISABLED=true`` turns export off. The OTLP
    exporter speaks HTTP/protobuf; its endpoint is ``endpoint`` (a bare ``http://host:4318``
    gets ``/v1/traces``) else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` else ``http://localhost:4318/v1/traces``; headers and TLS
    come from the ``OTEL_EXPORTER_OTLP_*`` variables. Console spans go to stderr.

    Raises ConfigError for an unknown exporter, a gRPC protocol, a bad endpoint, or when the
    ``otel`` extra is not installed.
    """
    env = os.environ if environ is None else environ
    t = config.telemetry
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    kind = t.exporter or env.get("OTEL_TRACES_EXPORTER", "").strip().lower() or "none"
    if kind not in ("otlp", "console", "none"):
        raise ConfigError(f"OTEL_TRACES_EXPORTER={kind!r} is not supported; use otlp (HTTP/protobuf), console or none")
    if kind == "none":
        return None
    from podium.telemetry import Telemetry, pool_models  # raises ConfigError naming the extra

    exporter: object
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporter = ConsoleSpanExporter(out=sys.stderr)  # stdout stays the answer / --json
    else:
        protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
        if protocol and protocol.strip() != "http/protobuf":
            raise ConfigError(
                f"OTLP protocol {protocol!r} is not supported: podium exports OTLP over HTTP/protobuf "
                "(set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf and use the collector's HTTP port, usually 4318)"
            )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=_traces_url(t.endpoint), timeout=t.export_timeout_s)
    workers, conductors = pool_models(config)
    return Telemetry(
        exporter,
        workers=workers,
        conductors=conductors,
        max_queue_size=t.max_queue_size,
        max_export_batch_size=t.max_export_batch_size,
        schedule_delay_s=t.schedule_delay_s,
        export_timeout_s=t.export_timeout_s,
        capture_content=t.capture_content,
        service_name=t.service_name,
    )


def _traces_url(endpoint: str | None) -> str | None:
    """The OTLP/HTTP traces URL for a configured endpoint (None: the exporter reads the env)."""
    if endpoint is None:
        return None
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"[telemetry] endpoint {endpoint!r} is not an http(s) URL; e.g. http://127.0.0.1:4318/v1/traces"
        )
    return endpoint.rstrip("/") + "/v1/traces" if parts.path in ("", "/") else endpoint


def judge_worker(pool: str | None, name: str, cache: RequestCache | None = None) -> Worker:
    """Pool ``pool``'s worker ``name`` as ``tasks label`` calls it: under its pool-file data policy
    and the pool's PII protection (an external worker gets pseudonymized text), and behind
    ``cache`` when given. ConfigError when the pool has no such model worker (a tool cannot grade)."""
    from podium.pool import load_pool
    from podium.pool_workers import build_worker, judge_index

    config = load_pool(pool)
    index = judge_index(config, name)
    return judge_stack(config, index, build_worker(config.merged(config.workers[index])), cache)


def judge_stack(config: PoolConfig, index: int, raw: Worker, cache: RequestCache | None = None) -> Worker:
    """``raw``, the pool's worker ``index``, wrapped as a judge calls it: its data policy and the
    pool's PII protection (a judge reads questions, answers and references: an external one gets
    them pseudonymized, as the pool's steps do) and ``cache`` when given."""
    return stack(raw, cache=cache, policy=data_policy(config, index), protection=pii_protection(config))
