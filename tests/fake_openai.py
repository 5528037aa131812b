"""A small OpenAI-compatible server for tests, served by a real uvicorn on 127.0.0.1
(tests.conftest.ThreadedUvicorn), that can behave like the servers podium meets: list models or
not (404), echo the requested model name or answer with its own, stream with or without usage."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

REPLY = "Sure: the rainbow has seven colours, red first."


def fake_openai_app(
    *,
    listed: tuple[str, ...] | None = ("smollm2",),
    answers_as: str | None = None,
    stream_usage: bool = True,
    reply: str = REPLY,
    prompt_tokens: str = "words",
) -> FastAPI:
    """The app. ``listed``: what ``GET /v1/models`` lists (None: 404, as servers without the
    endpoint). ``answers_as``: the reply's ``model`` field (None: echo the requested name, as
    llama-cpp-python's server does whatever it serves). ``stream_usage``: a stream ends with a
    usage chunk when the client asks for one (False: never, as llama-cpp-python's server).
    Usage counts words (not a tokenizer); ``prompt_tokens="bytes"`` reports one prompt token per
    UTF-8 byte instead, the most podium's worst-case bound allows (so a call costs what it
    reserved, and a budget binds)."""
    app = FastAPI()
    app.state.bodies = []

    @app.get("/v1/models")
    async def models() -> Response:
        if listed is None:
            return JSONResponse({"error": {"message": "not found"}}, status_code=404)
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "t"} for m in listed]})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        app.state.bodies.append(body)
        model = answers_as or body.get("model", "")
        texts = [str(m.get("content", "")) for m in body.get("messages", [])]
        if prompt_tokens == "bytes":
            prompt = sum(len(t.encode("utf-8")) for t in texts)
        else:
            prompt = sum(len(t.split()) for t in texts)
        usage = {"prompt_tokens": prompt, "completion_tokens": len(reply.split())}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        base: dict[str, Any] = {"id": "chatcmpl-1", "created": 1700000000, "model": model}
        if not body.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
            return JSONResponse({**base, "object": "chat.completion", "choices": [choice], "usage": usage})
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def events() -> AsyncIterator[str]:
            for k, word in enumerate(reply.split(" ")):
                delta = {"content": word if k == 0 else " " + word}
                chunk = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
                yield f"data: {json.dumps(chunk)}\n\n"
            end = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
            yield f"data: {json.dumps(end)}\n\n"
            if stream_usage and wants_usage:
                last = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                yield f"data: {json.dumps(last)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app
