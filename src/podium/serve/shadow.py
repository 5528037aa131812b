"""Shadow mode: podium beside an existing pipeline, never answering for it.

``podium shadow --upstream URL`` is an OpenAI-compatible proxy. Every request is forwarded to
the upstream unchanged and the upstream's response goes back to the client byte for byte, as it
arrives (streams included) — podium adds only the forwarding. After the upstream has answered,
chat completions are queued for the **shadow run**, in the background:

* ``--mode plan``: the conductor writes its workflow only (what podium *would* have done);
* ``--mode execute``: the workflow runs too, under a shadow budget: a cost cap per request and
  one per UTC day (USD). A request the day's budget cannot pay for is recorded as skipped.

The queue is bounded; a request that finds it full is recorded as dropped — never silently.
Each shadow run is a normal trace (tags ``shadow``, ``use-case:…``) plus a row in the shadow
store (:mod:`podium.store.shadow`: a SQLite file, or the shared PostgreSQL store) beside the
upstream's answer, latency and usage; rows are written off the event loop, and a row the store
could not take is logged and counted (``/healthz`` ``lost``). ``podium shadow report``
compares them per use case (:func:`shadow_report`, in :mod:`podium.serve.shadow_report`).

Request headers read by the proxy (and removed before forwarding): ``X-Podium-Use-Case`` (a
label for the report), ``X-Podium-Task`` (``math`` / ``choice`` / ``exact`` / ``code`` /
``open``: how answers are compared), ``X-Podium-Reference`` (the expected answer, when the
client knows it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from podium.budget import PeriodBudget, RequestBudget
from podium.errors import ConfigError, CostCapExceeded, InvalidQuestion
from podium.orchestrator import Orchestrator
from podium.records import RunRecord, utc_now
from podium.serve.shadow_report import agreement, correct, report_markdown, shadow_report
from podium.serve.wire import question_from_messages
from podium.store.engine import StoreError
from podium.store.shadow import ShadowStore
from podium.unicode import valid_text

_DAY_SCOPE = "shadow/day"
"""The shadow's daily budget's scope (:attr:`podium.errors.CostCapExceeded.scope` when it refuses)."""

__all__ = [
    "ShadowJob",
    "ShadowProxy",
    "Status",
    "agreement",
    "correct",
    "create_shadow_app",
    "report_markdown",
    "shadow_report",
    "upstream_answer",
]

_log = logging.getLogger("podium.shadow")

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
}
_OWN_HEADERS = ("x-podium-use-case", "x-podium-task", "x-podium-reference")

Status = Literal["done", "over_budget", "failed", "skipped_budget", "dropped", "error", "unreadable"]
"""A shadow row's status: ``done`` (planned / answered), ``over_budget`` (a call was refused by
the day's shadow budget mid-run), ``failed`` (podium ended in an error), ``skipped_budget`` (the
day's budget was used up before the run), ``dropped`` (queue full), ``error`` (the shadow run
itself crashed), ``unreadable`` (the request or the upstream's reply could not be read)."""


@dataclass(frozen=True)
class ShadowJob:
    """One forwarded chat completion, waiting for its shadow run.

    Attributes:
        body: the client's request body (JSON).
        upstream_status: HTTP status of the upstream's reply.
        upstream_body: the reply's bytes as received (decoded from gzip/deflate if needed).
        upstream_latency_s: seconds from forwarding to the reply's last byte.
        use_case, task_type, reference: from the ``X-Podium-*`` headers (may be None).
        at: when the client's request arrived, UTC ISO 8601.
    """

    body: dict[str, Any]
    upstream_status: int
    upstream_body: bytes
    upstream_latency_s: float
    use_case: str
    task_type: str | None
    reference: str | None
    at: str = field(default_factory=utc_now)


def upstream_answer(body: bytes) -> tuple[str, int, int]:
    """(answer text, prompt tokens, completion tokens) from an upstream reply: a chat completion
    JSON or a server-sent-event stream of chunks, the text made valid Unicode (a lone surrogate
    becomes U+FFFD, as in a worker's reply). Raises ValueError when it is neither."""
    text = body.decode("utf-8")
    if text.lstrip().startswith("{"):
        data = json.loads(text)
        usage = data.get("usage") or {}
        content = data["choices"][0]["message"].get("content") or ""
        content = valid_text(content) if isinstance(content, str) else content
        return content, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    parts: list[str] = []
    prompt = completion = 0
    for line in text.splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        chunk = json.loads(line[5:])
        for choice in chunk.get("choices") or []:
            parts.append((choice.get("delta") or {}).get("content") or "")
        if usage := chunk.get("usage"):
            prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    if not parts and not prompt:
        raise ValueError("neither a chat completion nor a stream of chunks")
    return valid_text("".join(parts)), prompt, completion


class ShadowProxy:
    """The proxy's state: upstream client, shadow queue and worker, budgets and counters.

    Args:
        upstream: the existing pipeline's base URL (e.g. ``http://10.0.0.5:8000``; requests to
            ``/v1/...`` go to ``upstream + "/v1/..."``).
        orchestrator: what runs in the shadow (built from the pool).
        store: where shadow rows go.
        mode: ``plan`` or ``execute``.
        request_cap_usd, daily_budget_usd: the shadow budget, USD (None: the pool's cost cap per
            request, if any; no daily cap).
        upstream_price: USD per 1M (input, output) tokens to price the upstream's calls, if known.
        queue_size: shadow runs waiting at most; more are recorded as dropped.
        timeout_s: the upstream call's time limit, seconds.
    """

    def __init__(
        self,
        upstream: str,
        orchestrator: Orchestrator,
        store: ShadowStore,
        *,
        mode: Literal["plan", "execute"] = "plan",
        request_cap_usd: float | None = None,
        daily_budget_usd: float | None = None,
        upstream_price: tuple[float, float] | None = None,
        queue_size: int = 1000,
        timeout_s: float = 600.0,
    ) -> None:
        if not upstream.startswith(("http://", "https://")):
            raise ConfigError(f"--upstream {upstream!r}: give the pipeline's base URL, e.g. http://127.0.0.1:8000")
        for name, value in (("request cap", request_cap_usd), ("daily budget", daily_budget_usd)):
            if value is not None and not value > 0:
                raise ConfigError(f"shadow {name} {value!r}: give a positive USD amount")
        self.upstream = upstream.rstrip("/")
        self.orchestrator = orchestrator
        self.store = store
        self.mode = mode
        # the pool's limits, with the shadow's own cap per request in place of the pool's where given
        self.limits = orchestrator.config.limits.overridden(cost_cap_usd=request_cap_usd)
        self.day = PeriodBudget(daily_budget_usd, scope=_DAY_SCOPE) if daily_budget_usd else None
        if self.day is not None:
            start = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.day.period_start))
            self.day.spent_usd = store.spent_since(start)
        self.upstream_price = upstream_price
        self.queue: asyncio.Queue[ShadowJob] | None = None
        self.queue_size = queue_size
        self.timeout_s = timeout_s
        self.counts = {
            "forwarded": 0,
            "queued": 0,
            "done": 0,
            "over_budget": 0,
            "failed": 0,
            "dropped": 0,
            "skipped_budget": 0,
            "errors": 0,
            "lost": 0,
        }
        self._client: httpx.AsyncClient | None = None
        self._writes: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------------- forwarding

    async def start(self) -> None:
        self._client = httpx.AsyncClient(timeout=self.timeout_s)
        self.queue = asyncio.Queue(self.queue_size)

    async def stop(self) -> None:
        if self._writes:
            await asyncio.gather(*self._writes)
        if self._client is not None:
            await self._client.aclose()

    async def _add(self, row: dict[str, Any]) -> None:
        """Store one shadow row in a thread (the database never blocks the proxy); a row the
        store refuses is logged with its status and time, and counted as lost."""
        try:
            await asyncio.to_thread(self.store.add, row)
        except StoreError as exc:
            self.counts["lost"] += 1
            _log.error("podium shadow: a %s row of %s was not stored: %s", row.get("status"), row.get("at"), exc)

    async def forward(self, request: Request, path: str) -> Response:
        """Send ``request`` to the upstream; relay its reply as it arrives."""
        assert self._client is not None, "start() first"
        headers = [(k, v) for k, v in request.headers.items() if k not in _HOP_BY_HOP and k not in _OWN_HEADERS]
        body = await request.body()
        url = f"{self.upstream}/{path}" + (f"?{request.url.query}" if request.url.query else "")
        started = time.perf_counter()
        arrived = utc_now()
        upstream_request = self._client.build_request(request.method, url, headers=headers, content=body)
        try:
            reply = await self._client.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            _log.error("podium shadow: upstream %s failed: %s", self.upstream, exc)
            error = {"message": f"upstream unreachable: {exc}", "type": "server_error", "param": None, "code": None}
            return JSONResponse({"error": error}, status_code=502)
        self.counts["forwarded"] += 1
        chat = request.method == "POST" and path.rstrip("/").endswith("chat/completions")
        out_headers = {k: v for k, v in reply.headers.items() if k.lower() not in _HOP_BY_HOP}

        async def relay() -> AsyncIterator[bytes]:
            received: list[bytes] = []
            complete = False
            try:
                async for piece in reply.aiter_raw():
                    received.append(piece)
                    yield piece
                complete = True
            finally:
                await reply.aclose()
                if chat and complete:
                    self._enqueue(request, body, reply, b"".join(received), time.perf_counter() - started, arrived)

        return StreamingResponse(relay(), status_code=reply.status_code, headers=out_headers)

    def _enqueue(
        self, request: Request, body: bytes, reply: httpx.Response, raw: bytes, latency_s: float, arrived: str
    ) -> None:
        headers = request.headers
        use_case = headers.get("x-podium-use-case") or "default"
        try:
            payload = json.loads(body)
            job = ShadowJob(
                body=payload,
                upstream_status=reply.status_code,
                upstream_body=_decoded(raw, reply.headers.get("content-encoding")),
                upstream_latency_s=latency_s,
                use_case=use_case,
                task_type=headers.get("x-podium-task"),
                reference=headers.get("x-podium-reference"),
                at=arrived,
            )
        except (ValueError, zlib.error) as exc:
            self._record_unrun("unreadable", use_case, arrived, f"{type(exc).__name__}: {exc}")
            return
        assert self.queue is not None
        try:
            self.queue.put_nowait(job)
            self.counts["queued"] += 1
        except asyncio.QueueFull:
            self.counts["dropped"] += 1
            self._record_unrun("dropped", use_case, arrived, f"shadow queue full ({self.queue_size} waiting)")

    def _record_unrun(self, status: Status, use_case: str, at: str, error: str) -> None:
        row = {"at": at, "status": status, "mode": self.mode, "use_case": use_case, "error": error}
        task = asyncio.get_running_loop().create_task(self._add(row))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    # ---------------------------------------------------------------------------- shadow runs

    async def work(self) -> None:
        """Run queued shadow jobs one at a time, forever (a background task)."""
        assert self.queue is not None
        while True:
            job = await self.queue.get()
            try:
                await self.run_job(job)
            except Exception as exc:  # a shadow failure must never reach the proxy path
                self.counts["errors"] += 1
                _log.exception("podium shadow: a shadow run failed")
                self._record_unrun("error", job.use_case, job.at, f"{type(exc).__name__}: {exc}")
            finally:
                self.queue.task_done()

    async def run_job(self, job: ShadowJob) -> None:
        """One shadow run and its row."""
        row: dict[str, Any] = {
            "at": job.at,
            "mode": self.mode,
            "use_case": job.use_case,
            "task_type": job.task_type,
            "reference": job.reference,
            "upstream_model": str(job.body.get("model") or ""),
            "upstream_status": job.upstream_status,
            "upstream_latency_s": job.upstream_latency_s,
        }
        try:
            answer, prompt_tokens, completion_tokens = upstream_answer(job.upstream_body)
            row.update(upstream_answer=answer, upstream_input_tokens=prompt_tokens)
            row["upstream_output_tokens"] = completion_tokens
            if self.upstream_price is not None:
                price_in, price_out = self.upstream_price
                row["upstream_cost_usd"] = (prompt_tokens * price_in + completion_tokens * price_out) / 1e6
            question = question_from_messages(job.body.get("messages") or [])
        except (ValueError, KeyError, TypeError, IndexError, InvalidQuestion) as exc:
            await self._add({**row, "status": "unreadable", "error": f"{type(exc).__name__}: {exc}"})
            return
        row["question"] = question
        if self.day is not None and self.day.cap_usd is not None and self.day.spent_usd >= self.day.cap_usd:
            self.counts["skipped_budget"] += 1
            await self._add({**row, "status": "skipped_budget", "error": "the shadow budget for today is used up"})
            return
        budget = RequestBudget(self.limits, [self.day] if self.day else [])
        tags = ("shadow", f"use-case:{job.use_case}")
        record = await self.orchestrator.run(
            question, mode="plan" if self.mode == "plan" else "run", budget=budget, tags=tags
        )
        status = _run_status(record)
        self.counts[status] += 1
        await self._add({**row, **_podium_columns(record), "status": status})


def _run_status(record: RunRecord) -> Literal["done", "over_budget", "failed"]:
    """``done`` when podium produced its plan or answer; ``over_budget`` when the shadow day's
    budget refused a call on the way (the run stopped there); ``failed`` otherwise."""
    if record.status != "error":
        return "done"
    cause = record.cause
    return "over_budget" if isinstance(cause, CostCapExceeded) and cause.scope == _DAY_SCOPE else "failed"


def _podium_columns(record: RunRecord) -> dict[str, Any]:
    workflow = record.workflow
    return {
        "request_id": record.id,
        "podium_status": record.status,
        "podium_answer": record.answer or None,
        "podium_cost_usd": record.totals.total_cost_usd,
        "podium_latency_s": record.totals.wall_time_s,
        "podium_workers": json.dumps([record.workers[s.worker] for s in workflow.steps] if workflow else []),
        "podium_steps": len(workflow) if workflow else 0,
        "error": record.error or (f"{record.fallback.reason}: {record.fallback.detail}" if record.fallback else None),
    }


def _decoded(raw: bytes, encoding: str | None) -> bytes:
    if not encoding or encoding == "identity":
        return raw
    if encoding == "gzip":
        return zlib.decompress(raw, 16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompress(raw)
    raise ValueError(f"cannot read a {encoding!r}-encoded upstream reply")


def create_shadow_app(proxy: ShadowProxy) -> FastAPI:
    """The proxy application: ``/v1/*`` forwarded, ``/healthz`` podium's own."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await proxy.start()
        worker = asyncio.create_task(proxy.work())
        try:
            yield
        finally:
            worker.cancel()
            await proxy.stop()

    app = FastAPI(title="podium shadow", lifespan=lifespan, docs_url=None, redoc_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        waiting = proxy.queue.qsize() if proxy.queue else 0
        spent = proxy.day.spent_usd if proxy.day else None
        return {"status": "ok", "upstream": proxy.upstream, "mode": proxy.mode, "waiting": waiting, **proxy.counts,
                "shadow_spent_today_usd": spent}  # fmt: skip

    @app.api_route("/v1/{path:path}", methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
    async def forward(request: Request, path: str) -> Response:
        return await proxy.forward(request, f"v1/{path}")

    return app
