"""The server-sent events of a streamed chat completion: the role, the answer's text as the
answering step generates it, the finish chunk, usage if asked, ``[DONE]`` — or an error.

The response is committed (status 200, the event-stream headers, the role chunk) only when
the first text of the answer is ready or the request has ended. Until then nothing is sent, so a
request that ends in an error without having sent text gets the status, headers (Retry-After)
and JSON error body the same request gets unstreamed (:func:`first_event` hands the
:class:`ApiError` to the route); only after text was sent is an error an SSE ``error`` event."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from podium.errors import ConfigError
from podium.records import RunRecord
from podium.serve.wire import ApiError, failure, finish_reason, internal_error, podium_json, usage_json
from podium.streaming import AnswerStream

if TYPE_CHECKING:
    from podium.serve.server import Prepared

__all__ = ["chunk", "events", "first_event", "sse", "sse_error", "unless_hung_up"]

_T = TypeVar("_T")


def sse(body: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def chunk(prepared: Prepared, created: int, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    """A ``chat.completion.chunk`` event; ``extra`` (usage) comes with no choices."""
    choices = [] if extra else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {"id": prepared.request_id, "object": "chat.completion.chunk", "created": created}
    return sse({**body, "model": prepared.model, "choices": choices, **extra})


def sse_error(error: ApiError) -> str:
    return sse({"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}})


def _refusal(prepared: Prepared, task: asyncio.Task[RunRecord]) -> ApiError | RunRecord:
    """How a finished request ended: its record, or the error to answer with."""
    try:
        record = task.result()
    except ConfigError as exc:
        headers = {"X-Request-Id": prepared.request_id}
        return ApiError(500, f"trace {prepared.request_id}: {exc}", type="server_error", headers=headers)
    except Exception as exc:  # a bug: the request's trace is written; answer in OpenAI's shape
        return internal_error(prepared.request_id, exc)
    return failure(record) if record.status == "error" else record


async def events(
    prepared: Prepared, task: asyncio.Task[RunRecord], stream: AnswerStream, queue: asyncio.Queue[str]
) -> AsyncGenerator[str | ApiError, None]:
    """The events of one request (already started, writing its answer's text to ``stream``,
    which puts it on ``queue``). The first item is an :class:`ApiError` when the request ended
    in an error before any text was ready (then nothing follows: answer it as HTTP); else the
    role chunk, the answer's text as it is generated, the finish chunk, usage if asked,
    ``[DONE]``, or an ``error`` event after text. Closing the generator before the request
    ended (the client went away) cancels the request (its trace is still written, status
    error)."""
    created = int(time.time())
    try:
        first: str | None = None
        while first is None and not task.done():  # nothing is committed yet
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                first = getter.result()
            else:
                getter.cancel()
        if first is None:  # the request ended before any text: the client has received nothing
            await asyncio.sleep(0)  # deltas a worker thread scheduled just before the end
            while not queue.empty():
                queue.get_nowait()  # never sent: the whole answer follows, or the HTTP error
            ended = _refusal(prepared, task)
            if isinstance(ended, ApiError):
                yield ended
                return
            yield chunk(prepared, created, {"role": "assistant", "content": ""})
            if ended.answer:  # whatever was generated before, the client gets exactly the answer
                yield chunk(prepared, created, {"content": ended.answer})
            async for event in _ending(prepared, created, ended):
                yield event
            return
        yield chunk(prepared, created, {"role": "assistant", "content": ""})
        yield chunk(prepared, created, {"content": first})
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
        ended = _refusal(prepared, task)
        if isinstance(ended, ApiError):
            yield sse_error(ended)
            return
        rest = stream.close(ended.answer)
        if rest is None:
            message = f"trace {ended.id}: the answer changed after streaming began (a retry or the fallback)"
            yield sse_error(ApiError(502, message, type="server_error", code="stream_diverged"))
            return
        if rest:
            yield chunk(prepared, created, {"content": rest})
        async for event in _ending(prepared, created, ended):
            yield event
    finally:
        if not task.done():
            task.cancel()  # the client went away: stop the work; the trace records it


async def _ending(prepared: Prepared, created: int, record: RunRecord) -> AsyncIterator[str]:
    yield chunk(prepared, created, {}, finish_reason(record))
    if prepared.include_usage:
        yield chunk(prepared, created, {}, usage=usage_json(record), podium=podium_json(record))
    yield "data: [DONE]\n\n"


async def first_event(
    items: AsyncGenerator[str | ApiError, None], receive: Callable[[], Awaitable[Any]]
) -> str | ApiError | None:
    """The first item of ``items`` (:func:`events`), waited for while listening on the ASGI
    ``receive`` for the client hanging up; None when it did (``items`` is closed then, which
    cancels the request)."""
    return await unless_hung_up(asyncio.ensure_future(anext(items)), receive)


async def unless_hung_up(work: asyncio.Future[_T], receive: Callable[[], Awaitable[Any]]) -> _T | None:
    """``work``'s result, waited for while listening on the ASGI ``receive`` for the client
    hanging up. None when it hung up first: ``work`` is cancelled then and awaited, so a request
    behind it stops calling workers and writes its trace (status error, cancelled)."""

    async def hang_up() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    gone = asyncio.ensure_future(hang_up())
    try:
        either: set[asyncio.Future[Any]] = {work, gone}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not work.done():
            work.cancel()
            await asyncio.wait({work})
    if work.cancelled():
        return None
    return work.result()
