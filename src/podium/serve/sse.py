"""The server-sent events of a streamed chat completion: the role, the answer's text as the
answering step generates it, the finish chunk, usage if asked, ``[DONE]`` — or an error event
in OpenAI's shape."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from podium.errors import ConfigError
from podium.records import RunRecord
from podium.serve.wire import ApiError, failure, finish_reason, internal_error, podium_json, usage_json
from podium.streaming import AnswerStream

if TYPE_CHECKING:
    from podium.serve.server import Prepared

__all__ = ["chunk", "events", "sse", "sse_error"]


def sse(body: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def chunk(prepared: Prepared, created: int, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    """A ``chat.completion.chunk`` event; ``extra`` (usage) comes with no choices."""
    choices = [] if extra else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {"id": prepared.request_id, "object": "chat.completion.chunk", "created": created}
    return sse({**body, "model": prepared.model, "choices": choices, **extra})


def sse_error(error: ApiError) -> str:
    return sse({"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}})


async def events(
    prepared: Prepared, task: asyncio.Task[RunRecord], stream: AnswerStream, queue: asyncio.Queue[str]
) -> AsyncIterator[str]:
    """The SSE stream of one request (already started, writing its answer's text to ``stream``,
    which puts it on ``queue``): role, the answer's text as it is generated, the finish chunk,
    usage if asked, ``[DONE]``. A client that goes away cancels the request (its trace is still
    written, with status error)."""
    created = int(time.time())
    try:
        yield chunk(prepared, created, {"role": "assistant", "content": ""})
        while not task.done():
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield chunk(prepared, created, {"content": getter.result()})
            else:
                getter.cancel()
        await asyncio.sleep(0)  # deltas a worker thread scheduled just before the end
        while not queue.empty():
            yield chunk(prepared, created, {"content": queue.get_nowait()})
        try:
            record = task.result()
        except ConfigError as exc:
            yield sse_error(ApiError(500, f"trace {prepared.request_id}: {exc}", type="server_error"))
            return
        except Exception as exc:  # a bug: the request's trace is written; the stream still ends in OpenAI's shape
            yield sse_error(internal_error(prepared.request_id, exc))
            return
        if record.status == "error":
            yield sse_error(failure(record))
            return
        rest = stream.close(record.answer)
        if rest is None:
            message = f"trace {record.id}: the answer changed after streaming began (a retry or the fallback)"
            yield sse_error(ApiError(502, message, type="server_error", code="stream_diverged"))
            return
        if rest:
            yield chunk(prepared, created, {"content": rest})
        yield chunk(prepared, created, {}, finish_reason(record))
        if prepared.include_usage:
            yield chunk(prepared, created, {}, usage=usage_json(record), podium=podium_json(record))
        yield "data: [DONE]\n\n"
    finally:
        if not task.done():
            task.cancel()  # the client went away: stop the work; the trace records it
