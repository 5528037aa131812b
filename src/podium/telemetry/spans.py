"""The spans of one request, made from its finished :class:`~podium.records.RunRecord` with the
times it recorded: the tree the package docstring (:mod:`podium.telemetry`) draws, and the
attributes of each span (OpenTelemetry GenAI semantic conventions, ``gen_ai.*``, ``error.type``,
``server.*``; podium's own under ``podium.*``).

:func:`span_specs` turns a record into :class:`SpanSpec` s (name, kind, parent, start and end in
ns since the epoch, attributes, error); :func:`pool_models` describes a pool's workers and
conductor models (:class:`SpanModel`). Question text, subtasks, messages, outputs and the data
subject's key are on spans only with ``capture_content``. Pure functions: nothing is exported
here (:mod:`podium.telemetry.export` does that). The ``otel`` extra is checked when the package is
imported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.trace import SpanKind

from podium.pool import PoolConfig
from podium.records import PlanAttempt, RunRecord, StepRecord
from podium.workers.base import Message, Usage
from podium.workers.endpoints import endpoint

__all__ = ["SpanModel", "SpanSpec", "pool_models", "span_specs"]


@dataclass(frozen=True)
class SpanModel:
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


def pool_models(config: PoolConfig) -> tuple[dict[str, SpanModel], dict[str, SpanModel]]:
    """(workers by pool name, conductor models by conductor name) for a
    :class:`~podium.pool.PoolConfig`, with the decoding settings each call sends."""
    from podium.pool_workers import worker_settings

    workers: dict[str, SpanModel] = {}
    for raw in config.workers:
        w = config.merged(raw)
        if w.backend in ("python", "vote"):
            workers[w.name] = SpanModel("execute_tool", provider="podium", in_process=True)
            continue
        if w.backend == "conductor":
            workers[w.name] = SpanModel("invoke_agent", provider="podium", in_process=True)
            continue
        s = worker_settings(w)
        address, port = _server(w.backend, w.base_url)
        workers[w.name] = SpanModel(
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
        own = SpanModel(provider="llama.cpp", model=_model_name("llama_cpp", c.model or c.version), in_process=True)
        base, name = own, "conductor"
    conductor = SpanModel(
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


def _model_name(backend: str, model: str | None) -> str:
    """The model's name; a .gguf path is shortened to its file name (no machine paths on spans)."""
    model = model or ""
    return Path(model).name if backend == "llama_cpp" and model.lower().endswith(".gguf") else model


def _server(backend: str, base_url: str | None) -> tuple[str | None, int | None]:
    url = endpoint(backend, base_url)
    if not url:
        return None, None
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname, port


def span_specs(
    record: RunRecord,
    *,
    workers: Mapping[str, SpanModel] | None = None,
    conductors: Mapping[str, SpanModel] | None = None,
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
            info = model or SpanModel(model=record.conductor.removeprefix("lm:"))
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
        info = workers.get(step.worker) or SpanModel(model=step.worker)
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


def _call_name(info: SpanModel, worker: str) -> str:
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


def _call_attributes(info: SpanModel, worker: str, usage: Usage, cost_usd: float) -> dict[str, Any]:
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


def _step_attributes(step: StepRecord, info: SpanModel, capture_content: bool) -> dict[str, Any]:
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
