"""A streamed request (``stream: true``) that ends in an error before any answer text was sent
gets what the same request gets unstreamed: the status, headers (Retry-After) and JSON error
body, so the OpenAI SDK raises the same exception (RateLimitError, BadRequestError, …). Only
after text was sent is an error an SSE ``error`` event (docs/serve.md, Streaming and Errors).
Over real HTTP (uvicorn on 127.0.0.1); the workers are fakes (podium.testing.ScriptedWorker)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import openai
import pytest

from podium.errors import ServerError
from podium.serve.app import Server, create_app
from podium.serve.keys import KeyStore
from podium.testing import ScriptedWorker, ThreadedUvicorn
from podium.trace.store import TraceStore
from podium.workers.base import Call, Completion, Message, Price
from tests.test_serve_upstream_text import finished

POOL = (Path(__file__).parent / "pools" / "three-fakes.toml").read_text()
PLAN = 'model_id = [1]\nsubtasks = ["Write the final answer."]\naccess_list = [[]]'
MESSAGES: list[Message] = [{"role": "user", "content": "What is 6 * 7?"}]


def reply(messages: Sequence[Message]) -> str:
    return PLAN if any("model_id" in m["content"] for m in messages) else "The answer is 42."


class _FailsAfterText(ScriptedWorker):
    """Streams the start of its answer, then fails (every call): the fallback must answer."""

    async def complete(self, call: Call) -> Completion:
        if call.context.stream is not None:
            call.context.report_text("The answer")
        raise ServerError("the upstream broke mid-answer", worker=self.name)


def serve(
    tmp_path: Path, pool_extra: str = "", keys: KeyStore | None = None, workers: list[ScriptedWorker] | None = None
) -> tuple[ThreadedUvicorn, TraceStore]:
    pool = tmp_path / "pool.toml"
    pool.write_text(POOL + pool_extra)
    traces = TraceStore(tmp_path / "traces.sqlite3")
    workers = workers or [ScriptedWorker(n, reply, price=Price(5.0, 5.0)) for n in ("smol-a", "smol-b", "smol-c")]
    server = Server(pool=str(pool), traces=traces, keys=keys, workers=list(workers))
    return ThreadedUvicorn(create_app(server)), traces


def post(url: str, stream: bool, headers: dict[str, str]) -> httpx.Response:
    body = {"model": "podium", "messages": MESSAGES, "stream": stream}
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=60)


def sdk_error(url: str, stream: bool, key: str, headers: dict[str, str]) -> Exception:
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, default_headers=headers)
    try:
        reply = client.chat.completions.create(model="podium", messages=MESSAGES, stream=stream)
        if stream:
            for _ in reply:  # type: ignore[union-attr]
                pass
    except Exception as exc:
        return exc
    raise AssertionError("no error")


REFUSALS = {  # pool file extra, key budget, headers -> status, code, SDK exception
    "pool day budget": ("\n[limits]\ndaily_budget_usd = 0.001\n", None, {}, 429, "insufficient_quota",
                        openai.RateLimitError),
    "key budget": ("", 0.001, {}, 429, "insufficient_quota", openai.RateLimitError),
    "request cost cap": ("", None, {"X-Podium-Cost-Cap": "0.000001"}, 400, "cost_cap_exceeded",
                         openai.BadRequestError),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_streamed_refusal_before_any_text_is_the_unstreamed_http_error(tmp_path: Path, case: str) -> None:
    extra, key_budget, headers, status, code, sdk = REFUSALS[case]
    keys, secret = None, "x"
    if key_budget is not None:
        keys = KeyStore(tmp_path / "keys.sqlite3")
        secret = keys.create("tiny", budget_usd=key_budget, period="day")  # nothing spent, but no call fits
    running, traces = serve(tmp_path, extra, keys)
    try:
        sent = {**headers, "Authorization": f"Bearer {secret}"}
        plain, streamed = post(running.url, False, sent), post(running.url, True, sent)
        for response in (plain, streamed):
            assert response.status_code == status, response.text
            assert response.headers["content-type"] == "application/json"
            error = response.json()["error"]
            assert error["code"] == code and response.headers["x-request-id"] in error["message"]
            # these budgets fit no call at all: no new period helps, so no Retry-After (the budget
            # tests cover a used-up one's); streamed or not, the same headers
            assert "retry-after" not in response.headers
            assert status != 429 or "it never will: raise the budget above $" in error["message"]
        record = finished(traces, streamed.headers["x-request-id"])  # one trace, status error
        assert record.status == "error" and record.answer == ""
        for stream in (False, True):  # the SDK raises the same exception, streamed or not
            exc = sdk_error(running.url, stream, secret, headers)
            assert type(exc) is sdk, (stream, exc)
            assert isinstance(exc, openai.APIStatusError) and exc.status_code == status
            assert "retry-after" not in exc.response.headers
    finally:
        running.stop()


def test_a_streamed_refusal_by_a_used_up_key_budget_keeps_its_retry_after(tmp_path: Path) -> None:
    """A key budget that one call fits but today's spending has used up: a new period helps, so
    the refusal is 429 with Retry-After until midnight UTC, streamed as unstreamed (the SDK backs
    off by that header)."""
    keys = KeyStore(tmp_path / "keys.sqlite3")
    secret = keys.create("spent", budget_usd=0.05, period="day")  # a call reserves about $0.02
    keys.record("spent", "earlier-request", 0.05)  # today's budget is gone
    running, traces = serve(tmp_path, "", keys)
    try:
        sent = {"Authorization": f"Bearer {secret}"}
        # each is refused before any work by the key check (the first too: the key's ledger is read
        # when the server first meets the key), traced, its id in the header and message
        for response in (post(running.url, False, sent), post(running.url, True, sent), post(running.url, True, sent)):
            assert response.status_code == 429 and response.headers["content-type"] == "application/json"
            error = response.json()["error"]
            assert error["code"] == "insufficient_quota" and "never" not in error["message"]
            assert "key 'spent' has used its budget of $0.05 per day (trace " in error["message"], error
            assert 1 <= int(response.headers["retry-after"]) <= 86_400, response.headers
            assert response.headers["x-request-id"] in error["message"]
            record = finished(traces, response.headers["x-request-id"])
            assert record.status == "error" and "key:spent" in record.tags
    finally:
        running.stop()


def test_a_streamed_deadline_before_any_text_is_504(tmp_path: Path) -> None:
    workers = [ScriptedWorker(n, reply, delay_s=2.0) for n in ("smol-a", "smol-b", "smol-c")]
    running, _ = serve(tmp_path, workers=workers)
    try:
        for stream in (False, True):
            started = time.monotonic()
            response = post(running.url, stream, {"X-Podium-Deadline": "0.5"})
            assert response.status_code == 504, response.text
            assert response.json()["error"]["code"] == "deadline_exceeded"
            assert time.monotonic() - started < 1.9
    finally:
        running.stop()


def test_an_error_after_text_was_sent_is_an_sse_error_event(tmp_path: Path) -> None:
    """The answering step streamed text, then failed, and the fallback wrote another answer:
    the status was sent with the text, so the stream ends with an error event (no [DONE])."""
    workers = [ScriptedWorker("smol-a", reply), ScriptedWorker("smol-b", reply), _FailsAfterText("smol-c")]
    running, traces = serve(tmp_path, workers=workers)
    plan = 'model_id = [2]\nsubtasks = ["Write the final answer."]\naccess_list = [[]]'
    workers[0].reply = lambda m: plan if any("model_id" in x["content"] for x in m) else "Fallback says 42."
    try:
        body = {"model": "podium", "messages": MESSAGES, "stream": True}
        with httpx.stream("POST", running.url + "/v1/chat/completions", json=body, timeout=60) as response:
            assert response.status_code == 200
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
        events = [json.loads(line[6:]) for line in lines if line != "data: [DONE]"]
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
        assert text == "The answer" and events[-1]["error"]["code"] == "stream_diverged"
        assert "data: [DONE]" not in lines
        record = finished(traces, response.headers["x-request-id"])
        assert record.answer == "Fallback says 42."
    finally:
        running.stop()


@pytest.mark.parametrize("streamed", [True, False])
def test_a_client_that_hangs_up_before_any_text_cancels_the_request(tmp_path: Path, streamed: bool) -> None:
    """Nothing is sent while the request plans; a client that goes away meanwhile still cancels
    it (streamed or not: an unstreamed request ran to the end and paid for it before), and its
    trace is written."""
    workers = [ScriptedWorker(n, reply, delay_s=3.0) for n in ("smol-a", "smol-b", "smol-c")]
    running, traces = serve(tmp_path, workers=workers)
    try:
        body = json.dumps({"model": "podium", "messages": MESSAGES, "stream": streamed}).encode()
        host, port = running.url[7:].split(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
            time.sleep(0.5)  # planning: no status line yet
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
        until = time.monotonic() + 2.0  # well before the 3 s the first call alone would take
        while not traces.list(limit=1) or traces.list(limit=1)[0].status == "running":
            assert time.monotonic() < until, "the abandoned request was not cancelled"
            time.sleep(0.05)
            traces.flush()
        (row,) = traces.list(limit=5)
        record = traces.get(row.id)
        assert record is not None and record.status == "error" and "Cancelled" in (record.error or "")
        assert httpx.get(running.url + "/healthz").json()["in_flight"] == 0
    finally:
        running.stop()
