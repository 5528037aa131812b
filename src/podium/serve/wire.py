"""The OpenAI wire format of ``podium serve``: what a chat-completions request may hold and how it
is read at the edge (size, depth, UTF-8, lone surrogates; :func:`read_json`), the per-request
options (body ``podium`` object or ``X-Podium-*`` headers), the conversation turned into a
question, and podium's answers and errors in OpenAI's shapes (:class:`ApiError`, :func:`failure`).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from podium._args import DECIMAL_HINT, plain_number
from podium.errors import CostCapExceeded, DeadlineExceeded, InvalidQuestion
from podium.records import RunRecord
from podium.request import is_blank

__all__ = [
    "MAX_JSON_DEPTH",
    "OPTION_HEADERS",
    "ApiError",
    "ChatMessage",
    "ChatRequest",
    "RequestOptions",
    "chat_body_schema",
    "failure",
    "finish_reason",
    "internal_error",
    "json_nesting",
    "lone_surrogate",
    "podium_json",
    "question_from_messages",
    "read_json",
    "request_options",
    "usage_json",
]

_log = logging.getLogger("podium.serve")


class ApiError(Exception):
    """An error answered in the OpenAI error shape with HTTP ``status``."""

    def __init__(
        self, status: int, message: str, *, type: str = "invalid_request_error", code: str | None = None,
        param: str | None = None, headers: Mapping[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class RequestOptions(BaseModel):
    """A request's podium options; numbers must be JSON numbers (``true`` is no deadline, a
    header's text is read by :func:`request_options`)."""

    model_config = ConfigDict(extra="forbid")
    deadline_s: float | None = Field(default=None, gt=0, strict=True)
    cost_cap_usd: float | None = Field(default=None, gt=0, strict=True)
    workers: list[str] | None = None
    rounds: int | None = Field(default=None, ge=0, le=5, strict=True)
    tags: list[str] = Field(default_factory=list)
    subject: str | None = None


class ChatRequest(BaseModel):
    """The fields podium reads; the other OpenAI fields are accepted and ignored (decoding is
    the pool's and the conductor's business)."""

    model_config = ConfigDict(extra="allow")
    model: str = ""
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool | None = Field(default=False, strict=True)  # "yes" or 1 is refused; null is false, as OpenAI has it
    stream_options: dict[str, Any] | None = None
    user: str | None = None
    podium: Any = None  # validated by _options, so errors name the field as the client wrote it


def question_from_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """The question for the conductor from an OpenAI conversation.

    One user message (after optional system messages) is the question itself, with the system
    text first as instructions; a longer conversation is written out as a transcript followed
    by the last user message. Raises InvalidQuestion for non-text content or no user message.
    """
    texts: list[tuple[str, str]] = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise InvalidQuestion(f"messages[{i}]: podium serves text only (got a {part.get('type')!r} part)")
                parts.append(part["text"])
            content = "\n".join(parts)
        texts.append((str(m.get("role")), content or ""))
    if not texts or texts[-1][0] != "user":
        raise InvalidQuestion("the last message must be the user's question (role 'user')")
    system = "\n".join(t for r, t in texts if r in ("system", "developer") and t.strip())
    turns = [(r, t) for r, t in texts if r not in ("system", "developer")]
    last = turns[-1][1]
    if is_blank(last):
        raise InvalidQuestion(
            f"messages[{len(messages) - 1}]: the user's question is empty (only spaces or invisible characters)"
        )
    parts = [f"Instructions: {system}"] if system else []
    if len(turns) > 1:
        names = {"user": "User", "assistant": "Assistant", "tool": "Tool"}
        transcript = "\n".join(f"{names[r]}: {t}" for r, t in turns[:-1])
        parts.append(f"Conversation so far:\n{transcript}\n\nThe user now asks:")
    parts.append(last)
    return "\n\n".join(parts)


OPTION_HEADERS = {
    "x-podium-deadline": "deadline_s",
    "x-podium-cost-cap": "cost_cap_usd",
    "x-podium-workers": "workers",
    "x-podium-rounds": "rounds",
    "x-podium-tags": "tags",
    "x-podium-subject": "subject",
}
"""Per-request option headers and the body option each stands for."""


def request_options(body: ChatRequest, raw_podium: Any, headers: Mapping[str, str]) -> RequestOptions:
    """Options from the body's ``podium`` object, then ``X-Podium-*`` headers (a header wins).
    Raises ApiError naming the field or header as the client wrote it."""
    if raw_podium is not None and not isinstance(raw_podium, dict):
        fields = ", ".join(RequestOptions.model_fields)
        raise ApiError(400, f"podium: give an object with any of {fields}", param="podium")
    merged: dict[str, Any] = dict(raw_podium or {})
    given_as: dict[str, str] = {name: f"podium.{name}" for name in merged}
    for name, kind in _NUMBERS.items():  # a JSON number, never a boolean or a string
        value = merged.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float))
        ):
            wanted = "an integer" if kind is int else "a number"
            raise ApiError(
                400, f"podium.{name}: must be {wanted} (got {json.dumps(value)[:40]})", param=f"podium.{name}"
            )
    for header, name in OPTION_HEADERS.items():
        value = headers.get(header)
        if value is None:
            continue
        where = "X-Podium-" + "-".join(p.capitalize() for p in header.split("-")[2:])
        if name in _NUMBERS:
            merged[name] = _header_number(where, value, _NUMBERS[name])
        elif name in ("workers", "tags"):
            merged[name] = [v.strip() for v in value.split(",") if v.strip()]
        else:
            merged[name] = value
        given_as[name] = where
    for name in ("deadline_s", "cost_cap_usd"):  # before the range check, which NaN fails confusingly
        value = merged.get(name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ApiError(400, f"{given_as[name]}: must be a finite number (got {value})", param=given_as[name])
    try:
        return RequestOptions.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        where = given_as.get(field, f"podium.{field}")
        raise ApiError(400, f"{where}: {first['msg']}", param=where) from None


_NUMBERS: dict[str, type] = {"deadline_s": float, "cost_cap_usd": float, "rounds": int}
"""The numeric options and their kind."""

_WHOLE = re.compile(r"[0-9]+")


def _header_number(where: str, value: str, kind: type) -> float | int:
    """A numeric header's value: ASCII digits (a number also with a decimal point and an
    exponent: ``2.5``, ``1e-05``); no sign, underscore, other script's digits or words such as
    ``inf``. Raises ApiError 400 naming the header."""
    text = value.strip(" \t")
    if kind is float:  # the command line's rule (podium._args.plain_number)
        number = plain_number(text) if not text.startswith(("+", "-")) else None
        if number is None:
            raise ApiError(400, f"{where}: must be a number in {DECIMAL_HINT}; got {value[:24]!r}", param=where)
        return number
    if _WHOLE.fullmatch(text) is None:
        raise ApiError(400, f"{where}: must be an integer (ASCII digits), got {value[:24]!r}", param=where)
    try:
        return int(text)
    except ValueError:  # more digits than int() reads
        raise ApiError(400, f"{where}: {value[:20]!r}… is too long a number", param=where) from None


def usage_json(record: RunRecord) -> dict[str, Any]:
    t = record.totals
    prompt = t.input_tokens + t.conductor_input_tokens
    completion = t.output_tokens + t.conductor_output_tokens
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cost_usd": round(t.total_cost_usd, 10),
    }
    if t.estimated_calls:  # some upstream sent no usage: its tokens were counted by podium
        usage["estimated"] = True
        usage["estimated_calls"] = t.estimated_calls
    return usage


def podium_json(record: RunRecord) -> dict[str, Any]:
    return {
        "request_id": record.id,
        "status": record.status,
        "fallback_reason": record.fallback.reason if record.fallback else None,
        "conductor": record.conductor,
        "steps": len(record.steps),
        "workers": sorted({s.worker for s in record.steps}),
        "wall_time_s": round(record.totals.wall_time_s, 3),
    }


def finish_reason(record: RunRecord) -> str:
    answering = [s for s in record.steps if s.output and s.output == record.answer]
    return "length" if answering and answering[-1].finish_reason == "length" else "stop"


def failure(record: RunRecord) -> ApiError:
    """The HTTP answer to a request that ended with status error, chosen by the type and fields
    of the error that ended it (``record.cause``), never by its text: a period budget's refusal
    (the pool's or the key's) is 429 with Retry-After until the period rolls over; the request's
    own cap 400; a worker that overcharged 502; the deadline 504; anything else 502."""
    error, cause = record.error or "", record.cause
    headers = {"X-Request-Id": record.id}
    if isinstance(cause, CostCapExceeded) and cause.by_period_budget:
        if cause.retry_after_s is not None:
            headers["Retry-After"] = str(max(1, math.ceil(cause.retry_after_s)))
        return ApiError(
            429,
            f"no answer within the budget (trace {record.id}): {error}",
            type="insufficient_quota",
            code="insufficient_quota",
            headers=headers,
        )
    if isinstance(cause, CostCapExceeded) and record.totals.incidents:
        # a worker reported more usage than its reservation allowed (or the conductor cost more
        # than the budget had left), and the request stopped calling: the upstream misbehaved,
        # not the client's request or cap
        first = record.totals.incidents[0]
        return ApiError(
            502,
            f"no answer (trace {record.id}): {first.role} {first.worker!r} reported more usage than its limits "
            f"allow; {error}",
            type="server_error",
            code="upstream_overcharged",
            headers=headers,
        )
    if isinstance(cause, CostCapExceeded):  # the request's own cap is too small for a call
        return ApiError(
            400,
            f"no answer within the budget (trace {record.id}): {error}",
            code="cost_cap_exceeded",
            headers=headers,
        )
    timeout = isinstance(cause, DeadlineExceeded)
    return ApiError(
        504 if timeout else 502,
        f"no answer (trace {record.id}): {record.error}",
        type="server_error",
        code="deadline_exceeded" if timeout else "no_answer",
        headers=headers,
    )


def internal_error(request_id: str, exc: Exception) -> ApiError:
    """A 500 in OpenAI's shape for an unexpected error of request ``request_id`` (logged with its
    traceback; the request's trace holds the error too)."""
    _log.error("podium: request %s failed: %s: %s", request_id, type(exc).__name__, exc, exc_info=exc)
    return ApiError(
        500,
        f"internal error (trace {request_id}): {type(exc).__name__}",
        type="server_error",
        code="internal_error",
        headers={"X-Request-Id": request_id},
    )


def chat_body_schema() -> dict[str, Any]:
    """The OpenAPI request body of ``POST /v1/chat/completions`` (the body is read and validated
    by hand, so the schema is declared here, its references inlined): clients and API fuzzers
    (schemathesis, in the test suite) see what the endpoint accepts."""
    schema = ChatRequest.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.rsplit("/", 1)[1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return {"required": True, "content": {"application/json": {"schema": inline(schema)}}}


MAX_JSON_DEPTH = 32
"""Deepest JSON nesting a request body may have (a chat request needs about 5)."""


async def read_json(request: Request, limit: int) -> Any:
    """The request body as JSON, read at most ``limit`` bytes far. Raises ApiError: 413 when
    the body is larger (Content-Length is checked before reading), 400 when it is not UTF-8
    JSON, nests deeper than :data:`MAX_JSON_DEPTH`, or holds a lone surrogate (``\\ud800``, text
    no store can keep)."""
    declared = request.headers.get("content-length")
    too_large = ApiError(
        413, f"the body is larger than {limit:,} bytes (max_body_bytes in the server config)", code="body_too_large"
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the body is not UTF-8 (byte {exc.start})") from None
    # no deeper than its brackets: a chat request has a handful, so the scan rarely runs
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and json_nesting(text) > MAX_JSON_DEPTH:
        raise ApiError(400, f"the body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        raise ApiError(400, "the body is not JSON") from None
    # valid UTF-8 holds no surrogate: only a \ud800–\udfff escape can (a pair joins into one character)
    where = lone_surrogate(payload) if _SURROGATE_ESCAPE.search(text) else None
    if where is not None:
        raise ApiError(400, f"{where or 'body'}: a lone surrogate escape (\\ud800–\\udfff) is not text", param=where)
    return payload


_JSON_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)|[\[\]{}]', re.S)
"""A JSON string (to its closing quote, or to the end of an unterminated one) or a bracket."""


def json_nesting(text: str) -> int:
    """The deepest bracket nesting of a JSON text outside strings (one pass; the regular
    expression skips strings and other text, a loop over every character cost ~0.1 µs each)."""
    depth = deepest = 0
    for token in _JSON_TOKEN.findall(text):
        if token in "[{":  # a string token starts with '"' and is never one of these
            depth += 1
            if depth > deepest:
                deepest = depth
        elif token in "]}":
            depth -= 1
    return deepest


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def lone_surrogate(value: Any, where: str = "") -> str | None:
    """Where in a parsed JSON value a string holds a surrogate code point, or None."""
    if isinstance(value, str):
        return where if _SURROGATE.search(value) is not None else None
    if isinstance(value, dict):
        for k, v in value.items():
            found = lone_surrogate(k, where) if isinstance(k, str) else None
            found = found if found is not None else lone_surrogate(v, f"{where}.{k}" if where else str(k))
            if found is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = lone_surrogate(v, f"{where}.{i}" if where else str(i))
            if found is not None:
                return found
    return None
