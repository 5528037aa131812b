"""``podium pool check``: call each worker of a pool once, check that each OpenAI-compatible
server serves the model the pool file names, and resolve the conductor.

A server that answers whatever model is asked for (``llama_cpp.server`` answers with its one
model and echoes the requested name back) passes a plain call, so the configured ``model`` is
also compared with the server's list (``GET /v1/models``) and with the ``model`` field of its
reply. A dated or tagged name the server resolves an alias to (``gpt-4o-mini`` →
``gpt-4o-mini-2024-07-18``, Ollama's ``llama3`` → ``llama3:latest``) counts as the same model.

The conductor is checked without writing a plan with an LM: a pool worker's model is that
worker's check; an own model must be installed (or its ``.gguf`` file exist); a trained LM
conductor must have its exported adapter and an embedded base model; a light conductor is built
and plans one question (it loads only its embedder), which also shows whether any worker it was
trained on is in this pool.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from podium.errors import PodiumError
from podium.pool import PoolConfig
from podium.workers.base import Call, Message, Worker
from podium.workers.openai_compat import OpenAICompatWorker

__all__ = ["check_pool", "same_model"]

_PROMPT = "Reply with the word OK."
_TOOL_PROMPT = "```python\nprint('OK')\n```"


def same_model(configured: str, served: str) -> bool:
    """Whether a server's ``served`` model name is the ``configured`` one: equal (any case), or
    ``configured`` followed by a version or tag the server resolved it to (``-2024-07-18``,
    ``:latest``, ``@v2``)."""
    a, b = configured.strip().lower(), served.strip().lower()
    return a == b or (b.startswith(a) and b[len(a)] in "-:@")


async def check_pool(config: PoolConfig) -> list[dict[str, Any]]:
    """One row per worker, in pool order, then one for the conductor (``role`` ``"conductor"``,
    ``worker`` ``"[conductor]"``). Each row: ``worker``, ``role``, ``ok``, ``reply``, ``error``,
    ``latency_s`` (seconds), ``input_tokens`` / ``output_tokens`` (a worker that answered),
    ``model`` (as configured), ``served_model`` (the reply's ``model`` field, OpenAI-compatible
    servers), ``listed_models`` (the server's list, or None when it has none), ``problems``
    (mismatches that make the row fail, each naming the fix) and ``notes`` (worth knowing, not
    failures). ``ok`` is False when the call failed or a problem was found."""
    from podium.pool_workers import build_pool_workers

    workers = build_pool_workers(config)
    rows = [await _check_worker(worker, config.workers[i].model) for i, worker in enumerate(workers)]
    rows.append(await _check_conductor(config, workers, rows))
    return rows


def _row(name: str, role: str, model: str | None) -> dict[str, Any]:
    return {
        "worker": name,
        "role": role,
        "ok": True,
        "reply": "",
        "error": None,
        "model": model,
        "served_model": None,
        "listed_models": None,
        "problems": [],
        "notes": [],
    }


def _check_messages(worker: Worker) -> list[Message]:
    """What the check sends: a vote tool, two earlier answers to vote on (it answers the
    majority, ``OK``); another tool, a program printing ``OK``; a model, a request to say it."""
    if worker.info.backend == "vote":
        from podium.messages import GrantedStep, worker_messages

        answers = [GrantedStep(0, "Answer.", "OK"), GrantedStep(1, "Answer.", "OK")]
        return worker_messages("Say OK.", answers, "Return the majority answer.")
    return [{"role": "user", "content": _TOOL_PROMPT if worker.info.is_tool else _PROMPT}]


async def _check_worker(worker: Worker, model: str | None) -> dict[str, Any]:
    row = _row(worker.info.name, "worker", model or None)
    settings = dataclasses.replace(worker.info.settings, max_tokens=8)
    started = time.perf_counter()
    try:
        result = await worker.complete(Call(_check_messages(worker), settings))
        row.update(reply=result.text.strip()[:60], input_tokens=result.usage.input_tokens,
                   output_tokens=result.usage.output_tokens)  # fmt: skip
    except PodiumError as exc:
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}")
    row["latency_s"] = time.perf_counter() - started
    if row["ok"] and model and isinstance(worker, OpenAICompatWorker):
        await _compare_models(worker, model, row)
    row["ok"] = row["ok"] and not row["problems"]
    return row


async def _compare_models(worker: OpenAICompatWorker, model: str, row: dict[str, Any]) -> None:
    """The configured ``model`` against the server's list and its reply's ``model`` field."""
    served = worker.last_model
    row["served_model"] = served
    try:
        listed: tuple[str, ...] | None = await worker.served_models()
    except PodiumError as exc:
        listed = None
        row["notes"].append(f"the server lists no models ({type(exc).__name__}), so only its reply was compared")
    row["listed_models"] = list(listed) if listed is not None else None
    if listed is not None and not any(same_model(model, m) for m in listed):
        shown = ", ".join(listed[:10]) + (f" … ({len(listed)} in all)" if len(listed) > 10 else "") or "none"
        row["problems"].append(
            f"model {model!r} is not served there; the server lists: {shown}. Set model to one of them in the "
            "pool file (or start the server with that name, e.g. llama.cpp's --alias / --model_alias)"
        )
    if served and not same_model(model, served):
        row["problems"].append(
            f"the server answered as model {served!r}, not {model!r}: it ignores the name asked for; set model "
            f"= {served!r} if that is the model you want"
        )


async def _check_conductor(config: PoolConfig, workers: list[Worker], rows: list[dict[str, Any]]) -> dict[str, Any]:
    c = config.conductor
    started = time.perf_counter()
    if c.worker is not None:
        row = _row("[conductor]", "conductor", config.workers[config.worker_index(c.worker)].model)
        row["reply"] = f"runs on pool worker {c.worker!r}"
        worker_row = rows[config.worker_index(c.worker)]
        if not worker_row["ok"]:
            row["problems"].append(f"its worker {c.worker!r} failed its check (above)")
    elif c.model is not None:
        row = _row("[conductor]", "conductor", c.model)
        row["reply"] = f"own model {c.model} (llama_cpp; resolved, not run)"
        _check_local_model(c.model, row)
    elif c.version is not None:
        row = _row("[conductor]", "conductor", c.version)
        try:
            from podium.named_conductors import trained_lm

            lm, _, version = trained_lm(c.version)
            row["reply"] = f"trained LM conductor {version.ref} on {lm.model} (resolved, not run)"
            _check_local_model(lm.model, row)
        except PodiumError as exc:
            row["problems"].append(str(exc))
    else:
        row = _row("[conductor]", "conductor", c.light)
        await _check_light(config, workers, row)
    row["latency_s"] = time.perf_counter() - started
    row["ok"] = not row["problems"]
    row["error"] = "; ".join(row["problems"]) or None
    return row


def _check_local_model(model: str, row: dict[str, Any]) -> None:
    from podium.local_models import EMBEDDED_MODELS, model_status

    if model in EMBEDDED_MODELS:
        if model_status(model) != "ready":
            row["problems"].append(f"model {model!r} is not installed: podium models install {model}")
    elif not Path(model).expanduser().is_file():
        row["problems"].append(f"model file {model!r} does not exist; give an embedded model id or a .gguf path")


async def _check_light(config: PoolConfig, workers: list[Worker], row: dict[str, Any]) -> None:
    """Build the light conductor and let it plan one question over this pool."""
    ref = config.conductor.light or ""
    try:
        from podium.named_conductors import light_conductor

        conductor = light_conductor(ref, name=config.conductor.light_name)
        attempt = await conductor.plan("What is 2 + 2?", workers, max_steps=config.max_steps)
    except (PodiumError, ImportError) as exc:
        row["problems"].append(f"light conductor {ref!r}: {exc}")
        return
    if attempt.workflow is None:
        row["problems"].append(f"light conductor {ref!r} wrote no workflow: {attempt.error}")
        return
    from podium.conductor.light import LightConductor

    trained = conductor.policy.workers if isinstance(conductor, LightConductor) else ()
    missing = [w for w in trained if w not in {x.info.name for x in workers}]
    if missing:
        row["notes"].append(f"trained on workers this pool lacks (never chosen): {', '.join(missing)}")
    row["reply"] = f"{conductor.name}: planned {len(attempt.workflow)} step(s) for a test question"
