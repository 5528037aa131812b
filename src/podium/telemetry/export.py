"""Exporting each finished request's spans (:mod:`podium.telemetry.spans`) through the
OpenTelemetry SDK: :class:`Telemetry`, with its bounded queue and its counters
(:class:`TelemetryStats`).

Spans wait in a bounded queue (``max_queue_size``) for a background thread that exports them in
batches (the SDK's ``BatchSpanProcessor``). A request whose spans do not fit in the queue is
dropped whole — never a partial tree — and counted; so are spans whose export failed and spans
still queued when shutdown gave up (the ``otel`` extra is checked when the package is imported).
The trace id is the request id (32 hex), set for the span
tree being emitted through a context variable the id generator reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Status, StatusCode

from podium.errors import ConfigError
from podium.records import RunRecord
from podium.telemetry.spans import SpanModel, SpanSpec, span_specs

__all__ = ["Telemetry", "TelemetryStats"]

_log = logging.getLogger("podium.telemetry")

_WARN_EVERY_S = 10.0
"""At most one queue-full warning per this many seconds (each names the running total)."""


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


class _RequestTraceIds(RandomIdGenerator):
    """Trace id = the request id being exported (random when it is not 32 hex): :meth:`next`
    says which, for the spans this thread creates next (the exporter creates a request's spans
    in one synchronous pass)."""

    def __init__(self) -> None:
        self._given = threading.local()

    def next(self, trace_id: int | None) -> None:
        """Use ``trace_id`` for the next traces this thread starts (None: random ids)."""
        self._given.trace_id = trace_id

    def generate_trace_id(self) -> int:
        given: int | None = getattr(self._given, "trace_id", None)
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
        workers: Mapping[str, SpanModel] | None = None,
        conductors: Mapping[str, SpanModel] | None = None,
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
        self._ids = _RequestTraceIds()
        self._provider = TracerProvider(resource=resource, sampler=ALWAYS_ON, id_generator=self._ids)
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
        self._ids.next(_trace_id(request_id))
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
            self._ids.next(None)

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
