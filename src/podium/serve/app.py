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
could be produced, 500 a bug (the trace id is in the message and header). A streamed request
gets the same error (status, headers, body) while none of its answer's text was sent: its
response starts only with the first text (:mod:`podium.serve.sse`); after that an error is an
SSE ``error`` event.

``POST /v1/chat/completions`` is declared as a FastAPI route (it is in the OpenAPI schema, and
served so under a ``root_path``), but :class:`_ServeApp` calls its endpoint straight from the
ASGI entry, inside Starlette's :class:`~starlette.middleware.errors.ServerErrorMiddleware`
alone: the same answers, errors and exception handling without FastAPI's per-request
middleware, routing and dependency layers (a fifth of the server's CPU per request under load,
docs/serve.md#load-benchmark). Middleware added to the app does not see that route.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from podium import __version__
from podium.errors import ConfigError
from podium.serve.server import Prepared, Server
from podium.serve.sse import events, first_event, sse_error, unless_hung_up
from podium.serve.wire import (
    MAX_JSON_DEPTH,
    ApiError,
    ChatRequest,
    chat_body_schema,
    failure,
    finish_reason,
    internal_error,
    podium_json,
    question_from_messages,
    read_json,
    usage_json,
)
from podium.streaming import AnswerStream

__all__ = [
    "MAX_JSON_DEPTH",
    "ApiError",
    "Prepared",
    "Server",
    "create_app",
    "question_from_messages",
]

_log = logging.getLogger("podium.serve")

_CHAT_PATH = "/v1/chat/completions"


class _ServeApp(FastAPI):
    """FastAPI, with ``POST /v1/chat/completions`` dispatched to :attr:`chat` before the
    middleware stack (see the module doc); every other request, and every request under a
    ``root_path``, takes FastAPI's way."""

    chat: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.chat is not None
            and scope["type"] == "http"
            and scope["path"] == _CHAT_PATH
            and scope["method"] == "POST"
            and not scope.get("root_path")
            and not self.root_path
        ):
            scope["app"] = self
            await self.chat(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


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

    app = _ServeApp(title="podium", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
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

    @app.post(_CHAT_PATH, openapi_extra={"requestBody": chat_body_schema()})
    async def chat(request: Request) -> Response:
        key = server.authenticate(request)
        payload = await read_json(request, server.current.config.max_body_bytes)
        if not isinstance(payload, dict):
            raise ApiError(400, "the body must be a JSON object with 'model' and 'messages'")
        try:
            body = ChatRequest.model_validate(payload)
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
            items = events(prepared, task, stream, queue)
            opening = await first_event(items, request.receive)  # nothing is committed before it
            if opening is None:  # the client hung up first: the request is cancelled, its trace written
                return Response(status_code=499)
            if isinstance(opening, ApiError):  # no text sent: the unstreamed answer's status, headers, body
                await items.aclose()
                raise opening
            return StreamingResponse(_after(opening, items), media_type="text/event-stream", headers=headers)
        try:  # a client that hangs up stops the request (its trace says so) instead of paying for it
            record = await unless_hung_up(server.start(prepared), request.receive)
        except ConfigError as exc:
            raise ApiError(500, f"trace {prepared.request_id}: {exc}", type="server_error", headers=headers) from None
        except Exception as exc:  # a bug: the request's trace is written; answer in OpenAI's shape
            raise internal_error(prepared.request_id, exc) from None
        if record is None:  # nobody is listening; uvicorn sends nothing to a closed connection
            return Response(status_code=499)
        if record.status == "error":
            raise failure(record)
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
                        "finish_reason": finish_reason(record),
                    }
                ],
                "usage": usage_json(record),
                "podium": podium_json(record),
            },
            headers=headers,
        )

    async def chat_asgi(scope: Scope, receive: Receive, send: Send) -> None:
        """The chat endpoint as FastAPI serves it: its exception handlers, then a 500 for a bug."""
        request = Request(scope, receive, send)
        try:
            response = await chat(request)
        except ApiError as exc:
            response = await api_error(request, exc)
        except StarletteHTTPException as exc:
            response = await http_error(request, exc)
        await response(scope, receive, send)

    app.chat = ServerErrorMiddleware(chat_asgi)
    return app


async def _after(first: str, items: AsyncGenerator[str | ApiError, None]) -> AsyncIterator[str]:
    """The committed stream: ``first``, then the rest of ``items`` (events, never an ApiError)."""
    try:
        yield first
        async for item in items:
            yield item if isinstance(item, str) else sse_error(item)
    finally:
        await items.aclose()  # a client gone mid-stream: the request is cancelled
