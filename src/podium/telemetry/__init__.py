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

Needs the ``otel`` extra (:func:`podium.extras.install_command` names the command).

The span tree made from a record, and what each span says: :mod:`podium.telemetry.spans`. The
export — the SDK's provider and batch processor, the queue's bound and the counters:
:mod:`podium.telemetry.export`.
"""

from __future__ import annotations

from podium.errors import ConfigError
from podium.extras import install_command

try:  # the otel extra, which the submodules import from
    import opentelemetry.sdk.resources
    import opentelemetry.sdk.trace
    import opentelemetry.sdk.trace.export
    import opentelemetry.sdk.trace.id_generator
    import opentelemetry.sdk.trace.sampling
    import opentelemetry.trace  # noqa: F401
except ImportError as exc:
    raise ConfigError(
        f"OpenTelemetry export needs the otel extra: {install_command('otel')} ({exc.name} is missing)"
    ) from None

from podium.telemetry.export import Telemetry, TelemetryStats
from podium.telemetry.spans import SpanModel, SpanSpec, pool_models, span_specs

__all__ = ["SpanModel", "SpanSpec", "Telemetry", "TelemetryStats", "pool_models", "span_specs"]
