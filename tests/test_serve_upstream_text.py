"""``podium serve`` in front of a scripted OpenAI-compatible upstream whose text is awkward: an
answer that starts or ends with whitespace, a lone surrogate (valid JSON ``"\\ud800"``), a
surrogate pair split between two stream chunks. The client is the official ``openai`` SDK; each
request must end as documented (a whole stream with its finish chunk and ``[DONE]``, or a JSON
answer) and leave one finished trace whose answer is what the client got."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from podium.records import RunRecord
from podium.serve.app import Server, create_app
from podium.testing import ScriptedWorker, ThreadedUvicorn
from podium.trace.store import TraceStore

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


class Upstream(ThreadedUvicorn):
    """An OpenAI-compatible server that answers every call with ``pieces``: streamed one chunk
    per piece (written with ``json.dumps``, so a lone surrogate goes out as ``\\ud800``), or
    joined in one message."""

    def __init__(self) -> None:
        self.pieces: list[str] = ["ok"]

        async def chat(request: Request) -> Response:
            body = await request.json()
            head = {"id": "x", "created": 0, "model": "m"}
            if not body.get("stream"):
                message = {"role": "assistant", "content": "".join(self.pieces)}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                out = {**head, "object": "chat.completion", "usage": USAGE, "choices": [choice]}
                return Response(json.dumps(out), media_type="application/json")

            async def events() -> AsyncIterator[str]:
                chunk = {**head, "object": "chat.completion.chunk"}
                for piece in self.pieces:
                    delta = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
                    yield f"data: {json.dumps({**chunk, 'choices': [delta]})}\n\n"
                yield f"data: {json.dumps({**chunk, 'choices': [], 'usage': USAGE})}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")

        super().__init__(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]))


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Upstream, str, TraceStore]]:
    monkeypatch.setenv("UPSTREAM_TEXT_KEY", "x")
    upstream = Upstream()
    pool = tmp_path / "pool.toml"
    pool.write_text(
        'name = "awkward"\n[conductor]\nworker = "up"\n[fallback]\nworker = "up"\n'
        f'[[workers]]\nname = "up"\nbackend = "openai"\nmodel = "m"\nbase_url = "{upstream.url}/v1"\n'
        'api_key_env = "UPSTREAM_TEXT_KEY"\nprice = { input = 1.0, output = 1.0 }\nexternal = false\n'
    )
    config = tmp_path / "serve.toml"
    config.write_text(f'pool = "{pool}"\n[models.podium]\nconductor = "single:up"\n')
    traces = TraceStore(tmp_path / "traces.sqlite3")
    server = ThreadedUvicorn(create_app(Server(config_path=config, traces=traces)))
    try:
        yield upstream, server.url, traces
    finally:
        server.stop()
        upstream.stop()


def finished(traces: TraceStore, request_id: str) -> RunRecord:
    """The request's stored trace once it is no longer ``running`` (the writer is a thread)."""
    until = time.monotonic() + 10
    while True:
        traces.flush()
        record = traces.get(request_id)
        if record is not None or time.monotonic() > until:
            break
        time.sleep(0.05)
    assert record is not None, f"no finished trace of {request_id}"
    return record


def streamed(url: str) -> tuple[str, str, str | None]:
    """(the text, the request id, the finish reason) of a streamed request through the SDK; the
    SDK raises if the stream ends in an error event."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    text, ids, finish = "", set(), None
    for chunk in client.chat.completions.create(
        model="podium", messages=[{"role": "user", "content": "What is 6 * 7?"}], stream=True
    ):
        ids.add(chunk.id)
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    (request_id,) = ids
    return text, request_id, finish


WHITESPACE = [
    ["The", " answer", " is", " 42.", "\n"],
    [" The", " answer", " is", " 42."],
    ["\n", "The answer", "\n\n", "is 42.", "  \n"],
    ["The ", "answer ", "is ", "42. "],  # what serve/fake_upstream.py streams
    ["\u3000The", " answer", " is 42.\u00a0"],  # Unicode spaces, which str.strip() strips too
]


@pytest.mark.parametrize("pieces", WHITESPACE)
def test_a_streamed_answer_with_surrounding_whitespace_ends_cleanly(
    served: tuple[Upstream, str, TraceStore], pieces: list[str]
) -> None:
    upstream, url, traces = served
    upstream.pieces = pieces
    text, request_id, finish = streamed(url)
    answer = "".join(pieces).strip()
    assert text == answer and finish == "stop"
    record = finished(traces, request_id)
    assert record.status == "ok" and record.answer == answer


def test_a_lone_surrogate_from_the_upstream_is_answered_as_u_fffd_and_traced(
    served: tuple[Upstream, str, TraceStore],
) -> None:
    upstream, url, traces = served
    upstream.pieces = ["bad \ud800 text"]
    response = httpx.post(
        url + "/v1/chat/completions",
        json={"model": "podium", "messages": [{"role": "user", "content": "What is 6 * 7?"}]},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["choices"][0]["message"]["content"] == "bad \ufffd text"
    record = finished(traces, body["id"])
    assert record.status == "ok" and record.answer == "bad \ufffd text" and record.totals.total_cost_usd > 0

    text, request_id, finish = streamed(url)
    assert text == "bad \ufffd text" and finish == "stop"
    record = finished(traces, request_id)
    assert record.status == "ok" and record.answer == text


def test_a_surrogate_pair_split_between_chunks_streams_as_its_character(
    served: tuple[Upstream, str, TraceStore],
) -> None:
    upstream, url, traces = served
    upstream.pieces = ["smile \ud83d", "\ude00 and \udc00 done"]  # the pair split; then a lone low one
    text, request_id, finish = streamed(url)
    assert text == "smile \U0001f600 and \ufffd done" and finish == "stop"
    assert finished(traces, request_id).answer == text


def test_an_unexpected_error_is_a_500_in_the_openai_shape_and_is_traced(tmp_path: Path) -> None:
    """A bug (an exception that is no podium error) still answers in OpenAI's shape, streamed or
    not, and the request's trace is written."""
    pool = str(Path(__file__).parent / "pools" / "three-fakes.toml")
    workers = [ScriptedWorker(n, error=RuntimeError("a bug")) for n in ("smol-a", "smol-b", "smol-c")]
    traces = TraceStore(tmp_path / "traces.sqlite3")
    server = ThreadedUvicorn(create_app(Server(pool=pool, traces=traces, workers=list(workers))))
    body = {"model": "podium", "messages": [{"role": "user", "content": "What is 6 * 7?"}]}
    try:
        response = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=30)
        assert response.status_code == 500
        error = response.json()["error"]
        assert error["code"] == "internal_error" and error["type"] == "server_error"
        request_id = response.headers["x-request-id"]
        assert request_id in error["message"]
        record = finished(traces, request_id)
        assert record.status == "error" and record.error is not None and "RuntimeError" in record.error

        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIError, match="internal error"):
            for _ in client.chat.completions.create(**body, stream=True):  # type: ignore[call-overload]
                pass
    finally:
        server.stop()
