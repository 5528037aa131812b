"""OpenTelemetry export: every finished request as a span tree (GenAI semantic conventions).

Spans are made from the finished :class:`~podium.records.RunRecord`, with the times it recorded,
after it is stored — so the request's hot path is untouched and the span tree matches the
trace exactly. The trace id *is* the request id (32 hex), so ``podium trace show ID`` and a
tracing UI's search by trace id find the same request. One request gives::

    invoke_workflow {pool}          the request            (gen_ai.operation.name invoke_workflow)
    ├── plan {conductor}            one per conductor call (plan; podium.round, podium.plan.*)
    │   └── chat {model}            its model inference    (chat; only for LM conductors)
    ├── chat {model}                one per worker step    (chat; workflow and fallback steps)
    ├── execute_tool {worker}       a Python tool step     (execute_tool)
    └── invoke_agent {worker}       a conductor-worker step (its nested request is a trace of its own)

Attribute names follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``,
``error.type``, ``server.*``; status Development, as of semantic-conventions v1.41 / the
semantic-conventions-genai repository); podium's own are under ``podium.*``. Question text,
subtasks, messages, outputs and the data subject's key are never on spans unless
``capture_content`` is on. See ``docs/telemetry.md`` for the full table.

Spans wait in a bounded queue (``max_queue_size``) for a background thread that exports them in
batches (the SDK's ``BatchSpanProcessor``). A request whose spans do not fit in the queue is
dropped whole — never a partial tree — and counted; so are spans whose export failed and spans
still queued when shutdown gave up. :meth:`Telemetry.stats` reads the counters at any time, a
warning is logged when spans are lost, and :meth:`Telemetry.shutdown` returns the final count.

Needs the ``otel`` extra: ``pip install 'podium[otel]'``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from podium.errors import ConfigError
from podium.pool import PoolConfig
from podium.records import PlanAttempt, RunRecord, StepRecord
from podium.workers.base import Message, Usage

try:
    from opentelemetry import trace as otel_trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:
    raise ConfigError(
        f"OpenTelemetry export needs the otel extra: pip install 'podium[otel]' ({exc.name} is missing)"
    ) from None

__all__ = ["SpanSpec", "Telemetry", "TelemetryStats", "WorkerInfo", "pool_models", "span_specs"]

_log = logging.getLogger("podium.telemetry")

_WARN_EVERY_S = 10.0
"""At most one queue-full warning per this many seconds (each names the running total)."""


@dataclass(frozen=True)
class WorkerInfo:
    """What the spans say about one worker (or the conductor's model).

    Attributes:
        operation: ``gen_ai.operation.name``: ``chat`` (a model), ``execute_tool`` (a tool) or
            ``invoke_agent`` (a nested conductor).
        provider: ``gen_ai.provider.name`` (``openai``, ``anthropic``, ``gcp.gemini``,
            ``llama.cpp`` for in-process models, ``podium`` for nested conductors).
        model: ``gen_ai.request.model`` ("" for tools).
        server_address, server_port: the provider's host and port (HTTP backends), else None.
        max_tokens, temperature, top_p, seed: the decoding settings sent (None: not sent).
        in_process: the call runs inside podium (span kind INTERNAL instead of CLIENT).
    """

    operation: str = "chat"
    provider: str = "unknown"
    model: str = ""
    server_address: str | None = None
    server_port: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    in_process: bool = False


@dataclass(frozen=True)
class TelemetryStats:
    """Span export counters since the :class:`Telemetry` was made.

    Attributes:
        requests: records handed to :meth:`Telemetry.export`.
        spans_queued: spans accepted into the export queue.
        spans_exported: spans the exporter accepted (collector answered 2xx).
        spans_failed: spans in export requests that failed (collector down, refused, an error
            status): the collector does not have them.
        spans_unconfirmed: spans whose export request timed out: the collector may still have
            received them (a slow collector answers after the client gave up), so they are not
            counted as lost; check the collector's own count.
        spans_dropped: spans never queued because the queue was full (or telemetry was shut
            down); ``requests_dropped`` requests were dropped whole for it.
        spans_unsent: spans still queued or in flight when shutdown gave up waiting.
        queue_capacity: ``max_queue_size``.
    """

    requests: int = 0
    spans_queued: int = 0
    spans_exported: int = 0
    spans_failed: int = 0
    spans_unconfirmed: int = 0
    spans_dropped: int = 0
    requests_dropped: int = 0
    spans_unsent: int = 0
    queue_capacity: int = 0

    @property
    def spans_lost(self) -> int:
        """Spans that never reached the collector: dropped + failed + unsent."""
        return self.spans_dropped + self.spans_failed + self.spans_unsent

    def summary(self) -> str:
        """One line, e.g. ``telemetry: 12 spans exported, 5 lost (export failed: 5)``."""
        line = f"telemetry: {self.spans_exported} spans exported"
        if self.spans_unconfirmed:
            line += f", {self.spans_unconfirmed} unconfirmed (no answer in time; the collector may have them)"
        if not self.spans_lost:
            return line
        causes = []
        if self.spans_dropped:
            causes.append(
                f"queue full: {self.spans_dropped} spans of {self.requests_dropped} requests "
                f"(capacity {self.queue_capacity} spans)"
            )
        if self.spans_failed:
            causes.append(f"export failed: {self.spans_failed}")
        if self.spans_unsent:
            causes.append(f"unsent at shutdown: {self.spans_unsent}")
        return f"{line}, {self.spans_lost} lost ({'; '.join(causes)})"

    def to_json(self) -> dict[str, int]:
        """The counters plus ``spans_lost``, for ``--json`` and health endpoints."""
        return {**asdict(self), "spans_lost": self.spans_lost}


@dataclass(frozen=True)
class SpanSpec:
    """One span to emit: name, kind, parent (index into the same list; None for the root),
    start and end (ns since the epoch, UTC), attributes, and an error description when the
    operation failed (status ERROR)."""

    name: str
    kind: SpanKind
    parent: int | None
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def pool_models(config: PoolConfig) -> tuple[dict[str, WorkerInfo], dict[str, WorkerInfo]]:
    """(workers by pool name, conductor models by conductor name) for a
    :class:`~podium.pool.PoolConfig`, with the decoding settings each call sends."""
    from podium.workers import worker_settings

    workers: dict[str, WorkerInfo] = {}
    for raw in config.workers:
        w = config.merged(raw)
        if w.backend in ("python", "vote"):
            workers[w.name] = WorkerInfo("execute_tool", provider="podium", in_process=True)
            continue
        if w.backend == "conductor":
            workers[w.name] = WorkerInfo("invoke_agent", provider="podium", in_process=True)
            continue
        s = worker_settings(w)
        address, port = _server(w.backend, w.base_url)
        workers[w.name] = WorkerInfo(
            "chat",
            provider=_PROVIDERS[w.backend],
            model=_model_name(w.backend, w.model),
            server_address=address,
            server_port=port,
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            top_p=s.top_p,
            seed=s.seed,
            in_process=w.backend == "llama_cpp",
        )
    c = config.conductor
    if c.light is not None:  # no language-model call: nothing to describe
        return workers, {}
    if c.worker is not None:
        base, name = workers[c.worker], c.worker
    else:  # a local model of its own (the runtime names its worker "conductor")
        own = WorkerInfo(provider="llama.cpp", model=_model_name("llama_cpp", c.model or c.version), in_process=True)
        base, name = own, "conductor"
    conductor = WorkerInfo(
        "chat",
        provider=base.provider,
        model=base.model,
        server_address=base.server_address,
        server_port=base.server_port,
        max_tokens=c.max_tokens,
        temperature=c.temperature,
        seed=c.seed,
        in_process=base.in_process,
    )
    return workers, {f"lm:{name}": conductor}


_PROVIDERS = {"llama_cpp": "llama.cpp", "openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}
_DEFAULT_URLS = {"anthropic": "https://api.anthropic.com", "gemini": "https://generativelanguage.googleapis.com"}


def _model_name(backend: str, model: str | None) -> str:
    """The model's name; a .gguf path is shortened to its file name (no machine paths on spans)."""
    model = model or ""
    return Path(model).name if backend == "llama_cpp" and model.lower().endswith(".gguf") else model


def _server(backend: str, base_url: str | None) -> tuple[str | None, int | None]:
    url = base_url or _DEFAULT_URLS.get(backend)
    if not url:
        return None, None
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname, port


def span_specs(
    record: RunRecord,
    *,
    workers: Mapping[str, WorkerInfo] | None = None,
    conductors: Mapping[str, WorkerInfo] | None = None,
    capture_content: bool = False,
) -> list[SpanSpec]:
    """The spans of one request, root first (see the module docstring for the tree).

    Workers and conductors not in the maps (e.g. test fakes) are described as ``chat`` calls
    with provider ``unknown`` and their pool name as the model.
    """
    workers, conductors = workers or {}, conductors or {}
    start, end = _ns(record.started_at), _ns(record.finished_at)
    root = SpanSpec(
        f"invoke_workflow {record.pool}",
        SpanKind.INTERNAL,
        None,
        start,
        max(start, end),
        _request_attributes(record, capture_content),
        error=record.error if record.status == "error" else None,
    )
    specs = [root]
    cursor = start  # where an attempt without recorded times is placed: after the previous one
    model = conductors.get(record.conductor)
    for attempt in record.attempts:
        a_start = _ns(attempt.started_at) if attempt.started_at else cursor
        a_end = _ns(attempt.finished_at) if attempt.finished_at else a_start + int(attempt.latency_s * 1e9)
        cursor = a_end
        specs.append(
            SpanSpec(
                f"plan {record.conductor}",
                SpanKind.INTERNAL,
                0,
                a_start,
                a_end,
                _plan_attributes(record, attempt),
                error=_plan_error(attempt, capture_content),
            )
        )
        if attempt.messages:  # the conductor called a model (fixed baselines call none)
            info = model or WorkerInfo(model=record.conductor.removeprefix("lm:"))
            attrs = _call_attributes(info, record.conductor, attempt.usage, attempt.cost_usd)
            if capture_content:
                attrs["gen_ai.input.messages"] = _messages_json(attempt.messages)
                attrs["gen_ai.output.messages"] = _output_json(attempt.raw_output, None)
            specs.append(
                SpanSpec(
                    _call_name(info, record.conductor.removeprefix("lm:")),
                    SpanKind.INTERNAL if info.in_process else SpanKind.CLIENT,
                    len(specs) - 1,
                    a_start,
                    a_end,
                    attrs,
                    error="deadline: the conductor was cut off" if attempt.error_kind == "deadline" else None,
                )
            )
    for step in record.steps:
        info = workers.get(step.worker) or WorkerInfo(model=step.worker)
        specs.append(
            SpanSpec(
                _call_name(info, step.worker),
                SpanKind.INTERNAL if info.in_process else SpanKind.CLIENT,
                0,
                _ns(step.started_at),
                _ns(step.finished_at),
                _step_attributes(step, info, capture_content),
                error=step.error,
            )
        )
    return specs


def _plan_error(attempt: PlanAttempt, capture_content: bool) -> str | None:
    """The plan span's error description: the parse error kind, plus its detail only with
    content capture (a detail may quote the conductor's text)."""
    if not attempt.error_kind:
        return None
    return f"{attempt.error_kind}: {attempt.error}" if capture_content else attempt.error_kind


def _call_name(info: WorkerInfo, worker: str) -> str:
    if info.operation == "chat":
        return f"chat {info.model or worker}"
    return f"{info.operation} {worker}"


def _request_attributes(record: RunRecord, capture_content: bool) -> dict[str, Any]:
    t = record.totals
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": record.pool,
        "podium.request.id": record.id,
        "podium.request.mode": record.mode,
        "podium.request.status": record.status,
        "podium.pool": record.pool,
        "podium.conductor": record.conductor,
        "podium.rounds": len(record.workflows),
        "podium.steps": len(record.steps),
        "podium.cost_usd": t.total_cost_usd,
        "podium.conductor.cost_usd": t.conductor_cost_usd,
        "podium.workers.cost_usd": t.cost_usd,
        "podium.input_tokens": t.input_tokens + t.conductor_input_tokens,
        "podium.output_tokens": t.output_tokens + t.conductor_output_tokens,
        "podium.wall_time_s": t.wall_time_s,
    }
    if record.tags:
        attrs["podium.tags"] = list(record.tags)
    if record.fallback is not None:
        attrs["podium.fallback.reason"] = record.fallback.reason
    if record.status == "error":
        attrs["error.type"] = _error_type(record.error)
    if capture_content:
        attrs["podium.question"] = record.question
        attrs["podium.answer"] = record.answer
        if record.subject is not None:
            attrs["podium.subject"] = record.subject
    return attrs


def _plan_attributes(record: RunRecord, attempt: PlanAttempt) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "plan",
        "gen_ai.agent.name": record.conductor,
        "podium.round": attempt.round,
        "podium.plan.attempt": attempt.attempt,
        "podium.plan.valid": attempt.workflow is not None,
        "podium.plan.constrained": attempt.constrained,
        "podium.cost_usd": attempt.cost_usd,
    }
    if attempt.workflow is not None:
        attrs["podium.plan.steps"] = len(attempt.workflow)
    if attempt.error_kind:
        attrs["error.type"] = attempt.error_kind
    return attrs


def _call_attributes(info: WorkerInfo, worker: str, usage: Usage, cost_usd: float) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": info.operation, "gen_ai.provider.name": info.provider}
    if info.operation == "execute_tool":
        attrs["gen_ai.tool.name"] = worker
        attrs["gen_ai.tool.type"] = "function"
    elif info.operation == "invoke_agent":
        attrs["gen_ai.agent.name"] = worker
    else:
        attrs["gen_ai.request.model"] = info.model or worker
        for key, value in (
            ("max_tokens", info.max_tokens),
            ("temperature", info.temperature),
            ("top_p", info.top_p),
            ("seed", info.seed),
        ):
            if value is not None:
                attrs[f"gen_ai.request.{key}"] = value
        attrs["gen_ai.usage.input_tokens"] = usage.input_tokens
        attrs["gen_ai.usage.output_tokens"] = usage.output_tokens
        if usage.cached_input_tokens:
            attrs["gen_ai.usage.cache_read.input_tokens"] = usage.cached_input_tokens
        if usage.reasoning_tokens:
            attrs["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    if info.server_address:
        attrs["server.address"] = info.server_address
        if info.server_port:
            attrs["server.port"] = info.server_port
    attrs["podium.cost_usd"] = cost_usd
    return attrs


def _step_attributes(step: StepRecord, info: WorkerInfo, capture_content: bool) -> dict[str, Any]:
    attrs = _call_attributes(info, step.worker, step.usage, step.cost_usd)
    attrs.update(
        {
            "podium.step.index": step.index,
            "podium.step.phase": step.phase,
            "podium.round": step.round,
            "podium.worker.index": step.worker_index,
            "podium.worker.name": step.worker,
            "podium.step.access": step.access if isinstance(step.access, str) else json.dumps(step.access),
            "podium.step.visible": list(step.visible),
            "podium.latency_s": step.latency_s,
        }
    )
    if step.error is None and info.operation == "chat":
        attrs["gen_ai.response.finish_reasons"] = [step.finish_reason]
    if step.error_type:
        attrs["error.type"] = step.error_type
    if capture_content:
        attrs["podium.step.subtask"] = step.subtask
        if info.operation == "execute_tool":
            attrs["gen_ai.tool.call.arguments"] = step.messages[-1]["content"] if step.messages else ""
            attrs["gen_ai.tool.call.result"] = step.output
        else:
            attrs["gen_ai.input.messages"] = _messages_json(step.messages)
            attrs["gen_ai.output.messages"] = _output_json(step.output, step.finish_reason)
    return attrs


def _messages_json(messages: Sequence[Message]) -> str:
    """Messages in the GenAI input-messages JSON form (role + text parts)."""
    return json.dumps(
        [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages],
        ensure_ascii=False,
    )


def _output_json(text: str, finish_reason: str | None) -> str:
    message: dict[str, Any] = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    if finish_reason:
        message["finish_reason"] = finish_reason
    return json.dumps([message], ensure_ascii=False)


def _error_type(error: str | None) -> str:
    """``"WorkerTimeout: ..."`` → ``WorkerTimeout``; anything else → ``_OTHER``."""
    head = (error or "").split(":", 1)[0].strip()
    return head if head.isidentifier() else "_OTHER"


def _ns(iso: str) -> int:
    """UTC ISO 8601 (``...Z`` or ``+00:00``) → ns since the epoch. Raises ValueError."""
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


_TRACE_ID: contextvars.ContextVar[int | None] = contextvars.ContextVar("podium_otel_trace_id", default=None)


class _RequestTraceIds(RandomIdGenerator):
    """Trace id = the request id being exported (random when it is not 32 hex)."""

    def generate_trace_id(self) -> int:
        given = _TRACE_ID.get()
        return given if given else int(super().generate_trace_id())


class _CountingExporter(SpanExporter):
    """Wraps the real exporter and counts what happened to every span handed to it.

    A failed export that took the exporter's whole timeout (``timeout_s``, ±10 %) is counted as
    *unconfirmed*, not failed: the OTLP exporter gives up at its deadline, and a slow collector
    may still have received and stored the spans."""

    def __init__(self, inner: Any, timeout_s: float | None = None) -> None:
        self.inner = inner
        self.timeout_s = timeout_s
        self.taken = 0  # handed to export() (out of the queue)
        self.exported = 0
        self.failed = 0
        self.unconfirmed = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> Any:
        with self._lock:
            self.taken += len(spans)
        started = time.monotonic()
        try:
            result = self.inner.export(spans)
        except Exception:
            _log.exception("telemetry: exporting %d spans raised", len(spans))
            result = SpanExportResult.FAILURE
        timed_out = self.timeout_s is not None and time.monotonic() - started >= 0.9 * self.timeout_s
        with self._lock:
            if result == SpanExportResult.SUCCESS:
                self.exported += len(spans)
            elif timed_out:
                self.unconfirmed += len(spans)
            else:
                self.failed += len(spans)
        if result != SpanExportResult.SUCCESS and timed_out:
            _log.warning(
                "telemetry: export of %d spans timed out after %.1f s (unconfirmed: the collector may have them)",
                len(spans), time.monotonic() - started,
            )  # fmt: skip
        elif result != SpanExportResult.SUCCESS:
            _log.warning("telemetry: export of %d spans failed (%d failed so far)", len(spans), self.failed)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


class Telemetry:
    """Exports each finished request as OpenTelemetry spans (a podium
    :class:`~podium.orchestrator.RecordExporter`).

    Args:
        exporter: the OpenTelemetry span exporter (OTLP/HTTP, console, or the SDK's
            ``InMemorySpanExporter`` in tests).
        workers, conductors: what spans say about each worker / conductor model (see
            :func:`pool_models`); unknown names get provider ``unknown``.
        max_queue_size: spans held for export; a request that does not fit is dropped whole
            and counted.
        max_export_batch_size: spans per export request (at most ``max_queue_size``).
        schedule_delay_s: longest wait before a partial batch is sent, seconds.
        export_timeout_s: how long :meth:`shutdown` waits for the last exports, seconds.
        capture_content: put questions, subtasks, messages, outputs and the subject key on
            spans (off by default: they may hold personal data).
        service_name: ``service.name`` (None: ``OTEL_SERVICE_NAME``, else ``podium``).

    Raises ConfigError for sizes out of range.
    """

    def __init__(
        self,
        exporter: Any,
        *,
        workers: Mapping[str, WorkerInfo] | None = None,
        conductors: Mapping[str, WorkerInfo] | None = None,
        max_queue_size: int = 2048,
        max_export_batch_size: int = 512,
        schedule_delay_s: float = 5.0,
        export_timeout_s: float = 10.0,
        capture_content: bool = False,
        service_name: str | None = None,
    ) -> None:
        if max_queue_size < 1 or not 1 <= max_export_batch_size <= max_queue_size:
            raise ConfigError(
                f"telemetry: need 1 <= max_export_batch_size ({max_export_batch_size}) <= max_queue_size "
                f"({max_queue_size})"
            )
        from podium import __version__

        self.workers = dict(workers or {})
        self.conductors = dict(conductors or {})
        self.capture_content = capture_content
        self.max_queue_size = max_queue_size
        self.export_timeout_s = export_timeout_s
        self._exporter = _CountingExporter(exporter, export_timeout_s)
        attributes: dict[str, Any] = {"service.version": __version__}
        if service_name is not None:
            attributes["service.name"] = service_name
        resource = Resource.create(attributes)
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "podium"}))
        self._provider = TracerProvider(resource=resource, sampler=ALWAYS_ON, id_generator=_RequestTraceIds())
        self._provider.add_span_processor(
            BatchSpanProcessor(
                self._exporter,
                max_queue_size=max_queue_size,
                max_export_batch_size=max_export_batch_size,
                schedule_delay_millis=schedule_delay_s * 1000,
            )
        )
        self._tracer = self._provider.get_tracer("podium", __version__)
        self._lock = threading.Lock()
        self._requests = self._queued = self._dropped = self._requests_dropped = self._unsent = 0
        self._closed = False
        self._final: TelemetryStats | None = None
        self._last_warning = 0.0

    def export(self, record: RunRecord) -> None:
        """Queue ``record``'s spans for export (returns at once). When the queue cannot hold
        them all, the request is dropped whole, counted, and a warning is logged. Never raises."""
        try:
            specs = span_specs(
                record, workers=self.workers, conductors=self.conductors, capture_content=self.capture_content
            )
        except Exception:
            _log.exception("telemetry: request %s could not be turned into spans; dropped", record.id)
            with self._lock:
                self._requests += 1
                self._requests_dropped += 1
            return
        with self._lock:
            self._requests += 1
            pending = self._queued - self._exporter.taken
            if self._closed or pending + len(specs) > self.max_queue_size:
                self._dropped += len(specs)
                self._requests_dropped += 1
                self._warn_dropped(record.id, len(specs), pending)
                return
            self._queued += len(specs)
            self._emit(record.id, specs)

    def _warn_dropped(self, request_id: str, count: int, pending: int) -> None:
        now = time.monotonic()
        if now - self._last_warning < _WARN_EVERY_S and self._last_warning:
            return
        self._last_warning = now
        why = "telemetry is shut down" if self._closed else f"{pending} of {self.max_queue_size} queued"
        _log.warning(
            "telemetry: dropped the %d spans of request %s (%s); %d spans in %d requests dropped so far",
            count,
            request_id,
            why,
            self._dropped,
            self._requests_dropped,
        )

    def _emit(self, request_id: str, specs: list[SpanSpec]) -> None:
        token = _TRACE_ID.set(_trace_id(request_id))
        try:
            spans: list[Any] = []
            for spec in specs:
                context = None if spec.parent is None else otel_trace.set_span_in_context(spans[spec.parent])
                span = self._tracer.start_span(
                    spec.name, context=context, kind=spec.kind, attributes=spec.attributes, start_time=spec.start_ns
                )
                if spec.error is not None:
                    span.set_status(Status(StatusCode.ERROR, spec.error))
                spans.append(span)
            for span, spec in reversed(list(zip(spans, specs, strict=True))):  # children first, root last
                span.end(end_time=spec.end_ns)
        finally:
            _TRACE_ID.reset(token)

    def stats(self) -> TelemetryStats:
        """The counters now (after :meth:`shutdown`: the final ones)."""
        if self._final is not None:
            return self._final
        with self._lock:
            return TelemetryStats(
                requests=self._requests,
                spans_queued=self._queued,
                spans_exported=self._exporter.exported,
                spans_failed=self._exporter.failed,
                spans_unconfirmed=self._exporter.unconfirmed,
                spans_dropped=self._dropped,
                requests_dropped=self._requests_dropped,
                spans_unsent=self._unsent,
                queue_capacity=self.max_queue_size,
            )

    def shutdown(self, timeout_s: float | None = None, *, report: bool = True) -> TelemetryStats:
        """Export what is queued (waiting at most ``timeout_s``, default ``export_timeout_s``),
        stop, and return the final counters; spans still queued then count as unsent, spans in
        an export that has not answered yet as unconfirmed (the collector may have them). The
        default wait is ``export_timeout_s`` plus a margin, so an export in flight can end. With
        ``report``, a warning with :meth:`TelemetryStats.summary` is logged when any span was
        lost (callers that print the summary themselves pass False). Later exports are dropped
        and counted."""
        with self._lock:
            if self._final is not None:
                return self._final
            self._closed = True
        stopper = threading.Thread(target=self._provider.shutdown, name="podium-telemetry-shutdown", daemon=True)
        stopper.start()
        # an export already in flight may take its whole timeout: wait for it to end on its own
        # (a little past that timeout) rather than count spans a collector may have as lost
        wait = self.export_timeout_s if timeout_s is None else timeout_s
        stopper.join(wait + (min(1.0, 0.2 * self.export_timeout_s) if timeout_s is None else 0.0))
        with self._lock:
            exporter = self._exporter
            done = exporter.exported + exporter.failed + exporter.unconfirmed
            in_flight = max(0, exporter.taken - done)  # handed to the exporter, no answer yet
            exporter.unconfirmed += in_flight
            self._unsent = self._queued - done - in_flight
        stats = self.stats()
        self._final = stats
        if report and stats.spans_lost:
            _log.warning("%s", stats.summary())
        return stats


def _trace_id(request_id: str) -> int | None:
    """The request id as a 128-bit trace id, or None when it is not 32 hex digits (or zero)."""
    if len(request_id) != 32:
        return None
    try:
        value = int(request_id, 16)
    except ValueError:
        return None
    return value or None
