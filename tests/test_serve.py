"""``podium serve`` over real HTTP on 127.0.0.1, driven by the official ``openai`` client.

The server (FastAPI under a real uvicorn) runs in a thread of the test process; its workers are
fakes (podium.testing.ScriptedWorker, which also plays the LM conductor by answering the
conductor's prompt with a plan), so these tests check the API, not model quality. The
end-to-end test with the real llama.cpp runtime is in test_serve_e2e.py.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from podium.serve.app import Server, create_app, question_from_messages
from podium.serve.keys import KeyStore
from podium.testing import ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.base import Message, Price
from tests.conftest import ThreadedUvicorn

POOL = str(Path(__file__).parent / "pools" / "three-fakes.toml")  # smol-a, smol-b, smol-c
PLAN = 'model_id = [1, 2]\nsubtasks = ["Draft it.", "Write the final answer."]\naccess_list = [[], "all"]'
ANSWER = "The answer is 42 and that is final"


def reply(messages: Sequence[Message]) -> str:
    """The conductor's prompt gets a plan; a worker's subtask gets its scripted text."""
    if any("model_id" in m["content"] for m in messages):
        return PLAN
    text = messages[-1]["content"]
    return ANSWER if "final answer" in text else "a draft"


def fake_pool(price: float = 1.0, delay_s: float = 0.0, word_delay_s: float = 0.01) -> list[ScriptedWorker]:
    return [
        ScriptedWorker(n, reply, price=Price(price, price), word_delay_s=word_delay_s, delay_s=delay_s)
        for n in ("smol-a", "smol-b", "smol-c")
    ]


class Running(ThreadedUvicorn):
    """``podium serve``'s app for ``server`` under a real uvicorn in a thread."""

    def __init__(self, server: Server, *, grace_s: float | None = None) -> None:
        super().__init__(create_app(server), grace_s=grace_s)
        self.server = server

    def client(self, key: str = "none") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0)


@pytest.fixture
def traces(tmp_path: Path) -> TraceStore:
    return TraceStore(tmp_path / "traces.sqlite3")


@pytest.fixture
def running(traces: TraceStore) -> Iterator[Running]:
    r = Running(Server(pool=POOL, traces=traces, workers=list(fake_pool())))
    yield r
    r.stop()


def test_a_completion_answers_with_the_last_step_and_its_trace_id(running: Running, traces: TraceStore) -> None:
    raw = running.client().chat.completions.with_raw_response.create(
        model="podium", messages=[{"role": "user", "content": "What is 6 * 7?"}]
    )
    response = raw.parse()
    assert response.choices[0].message.content == ANSWER
    assert raw.headers["x-request-id"] == response.id and len(response.id) == 32
    record = traces.get(response.id)
    assert record is not None and record.status == "ok" and record.question == "What is 6 * 7?"
    assert "model:podium" in record.tags
    assert [s.worker for s in record.steps] == ["smol-b", "smol-c"]
    usage = response.usage
    assert usage is not None and usage.model_extra is not None
    assert usage.model_extra["cost_usd"] == pytest.approx(record.totals.total_cost_usd)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > 0


def test_streaming_sends_only_the_answer_in_pieces_with_usage(running: Running, traces: TraceStore) -> None:
    stream = running.client().chat.completions.create(
        model="podium",
        messages=[{"role": "user", "content": "What is 6 * 7?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, usage, ids = [], None, set()
    for chunk in stream:
        ids.add(chunk.id)
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if chunk.usage is not None:
            usage = chunk.usage
    assert "".join(pieces) == ANSWER and len(pieces) == len(ANSWER.split(" "))  # word by word
    assert "a draft" not in "".join(pieces)  # the earlier step never reaches the client
    (request_id,) = ids
    record = traces.get(request_id)
    assert record is not None and record.answer == ANSWER
    assert usage is not None and usage.model_extra is not None and usage.model_extra["cost_usd"] > 0


def test_models_lists_the_presets_and_health_reports_the_mode(running: Running) -> None:
    models = running.client().models.list()
    assert [m.id for m in models.data] == ["podium", "podium-fast"]
    health = httpx.get(running.url + "/healthz").json()
    assert health["status"] == "ok" and health["serving"] == "conductor" and health["reload_error"] is None
    assert health["telemetry"] is None  # off unless configured


def test_bad_input_gets_the_openai_error_shape(running: Running) -> None:
    client = running.client()
    with pytest.raises(openai.NotFoundError) as not_found:
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert not_found.value.code == "model_not_found" and "podium, podium-fast" in not_found.value.message
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="podium", messages=[])
    with pytest.raises(openai.BadRequestError, match="text only"):
        client.chat.completions.create(
            model="podium",
            messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}],
        )
    with pytest.raises(openai.BadRequestError, match="deadline_s"):
        client.chat.completions.create(
            model="podium", messages=[{"role": "user", "content": "hi"}], extra_body={"podium": {"deadline_s": -1}}
        )
    with pytest.raises(openai.BadRequestError, match="X-Podium-Rounds"):  # named as the client wrote it
        client.chat.completions.create(
            model="podium", messages=[{"role": "user", "content": "hi"}], extra_headers={"X-Podium-Rounds": "9"}
        )
    response = httpx.post(running.url + "/v1/chat/completions", content=b"{not json")
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
    for method, path, status in (("GET", "/v1/nothing", 404), ("GET", "/v1/chat/completions", 405)):
        error = httpx.request(method, running.url + path).json()["error"]  # the OpenAI shape, not FastAPI's
        assert error["code"] == {404: "not_found", 405: "method_not_allowed"}[status]


def test_chat_dispatched_directly_answers_as_fastapis_route(traces: TraceStore) -> None:
    """The chat endpoint is called before FastAPI's middleware and routing (for CPU); under a
    root_path it takes FastAPI's way. Both must answer alike, errors included."""
    from fastapi.testclient import TestClient

    app = create_app(Server(pool=POOL, traces=traces, workers=list(fake_pool(word_delay_s=0.0))))
    direct, routed = TestClient(app), TestClient(app, root_path="/api")
    cases: list[dict[str, Any]] = [
        {"content": b"{not json"},
        {"json": {"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}},
        {"json": {"model": "podium", "messages": []}},
        {"json": {"model": "podium", "messages": [{"role": "user", "content": "hi"}], "podium": {"rounds": 9}}},
        {"json": {"model": "podium", "messages": [{"role": "user", "content": "What is 6 * 7?"}]}},
    ]
    for case in cases:
        a = direct.post("/v1/chat/completions", **case)
        assert app.middleware_stack is None  # FastAPI's stack was never built: the direct way
        b = routed.post("/api/v1/chat/completions", **case)
        assert app.middleware_stack is not None  # ... and this one took it
        app.middleware_stack = None
        assert a.status_code == b.status_code and a.headers["content-type"] == b.headers["content-type"]
        if a.status_code == 200:
            assert a.json()["choices"] == b.json()["choices"] and a.headers["x-request-id"] != b.headers["x-request-id"]
        else:
            assert a.json() == b.json() and a.json()["error"]["message"]


def test_request_options_restrict_workers_and_are_traced(running: Running, traces: TraceStore) -> None:
    client = running.client()
    with pytest.raises(openai.BadRequestError, match="fallback worker 'smol-a'"):
        client.chat.completions.create(
            model="podium", messages=[{"role": "user", "content": "hi"}], extra_body={"podium": {"workers": ["smol-b"]}}
        )
    response = client.chat.completions.create(
        model="podium",
        messages=[{"role": "user", "content": "What is 6 * 7?"}],
        extra_body={"podium": {"workers": ["smol-a", "smol-c", "smol-b"], "tags": ["support"]}},
        extra_headers={"X-Podium-Subject": "customer-7"},
    )
    record = traces.get(response.id)
    assert record is not None
    assert record.workers == ("smol-a", "smol-c", "smol-b")  # Model i follows the allowed order
    assert [s.worker for s in record.steps] == ["smol-c", "smol-b"]  # plan [1, 2] over that order
    assert "support" in record.tags and record.subject == "customer-7"


@pytest.mark.slow
def test_keys_are_required_once_one_exists_and_budgets_hold(tmp_path: Path, traces: TraceStore) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite3")
    # a request reserves its conductor call's worst case (~$0.02 at $5/M: the prompt's bytes plus 800
    # tokens) and its steps', then spends ~$0.003: a few requests fit, then the key is refused
    budget = 0.05
    secret = keys.create("team-a", budget_usd=budget, period="day")
    assert secret.startswith("pk-podium-")
    assert secret.encode() not in (tmp_path / "keys.sqlite3").read_bytes()  # only its digest is stored
    running = Running(Server(pool=POOL, traces=traces, keys=keys, workers=list(fake_pool(price=5.0))))
    messages: list[Message] = [{"role": "user", "content": "What is 6 * 7?"}]
    try:
        missing = httpx.post(running.url + "/v1/chat/completions", json={"model": "podium", "messages": messages})
        assert missing.status_code == 401 and "missing API key" in missing.json()["error"]["message"]
        with pytest.raises(openai.AuthenticationError, match="unknown or revoked"):
            running.client("pk-podium-wrong").chat.completions.create(model="podium", messages=messages)
        assert httpx.get(running.url + "/v1/models").status_code == 401  # every /v1 endpoint needs the key
        assert running.client(secret).models.list().data
        answered, refused = [], None
        for _ in range(40):  # each request costs ~$0.003 (fake tokens × $5/M): the budget runs out
            try:
                answered.append(running.client(secret).chat.completions.create(model="podium", messages=messages))
            except openai.RateLimitError as exc:
                refused = exc
                break
        assert answered and refused is not None and refused.code == "insufficient_quota"
        record = traces.get(answered[0].id)
        assert record is not None and "key:team-a" in record.tags
        billed = sum(r.usage.model_extra["cost_usd"] for r in answered if r.usage and r.usage.model_extra)
        deadline = time.monotonic() + 10  # usage rows are written in a thread after each answer
        while (spent := keys.spent_since("team-a", 0)) != pytest.approx(billed) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert spent == pytest.approx(billed)
        assert spent <= budget  # reserved before each call, so the cap is never overshot
    finally:
        running.stop()
    # a restarted server starts from the recorded spending, not from zero
    again = Running(Server(pool=POOL, traces=traces, keys=KeyStore(tmp_path / "keys.sqlite3"), workers=fake_pool(5.0)))
    try:
        with pytest.raises(openai.RateLimitError):
            again.client(secret).chat.completions.create(model="podium", messages=messages)
    finally:
        again.stop()
    keys.revoke("team-a")
    assert not keys.active()


@pytest.mark.slow
def test_the_kill_switch_reloads_without_a_restart(tmp_path: Path, traces: TraceStore) -> None:
    config = tmp_path / "serve.toml"
    config.write_text('serving = "conductor"\n')
    running = Running(Server(config_path=config, pool=POOL, traces=traces, workers=list(fake_pool())))
    messages: list[Message] = [{"role": "user", "content": "What is 6 * 7?"}]
    try:
        before = traces.get(running.client().chat.completions.create(model="podium", messages=messages).id)
        assert before is not None and before.conductor.startswith("lm:") and before.attempts
        config.write_text('serving = "fallback"\n')
        deadline = time.monotonic() + 10  # the server polls the file's modification time every second
        while httpx.get(running.url + "/healthz").json()["serving"] != "fallback":
            assert time.monotonic() < deadline, "the kill switch was not picked up"
            time.sleep(0.2)
        after = traces.get(running.client().chat.completions.create(model="podium", messages=messages).id)
        assert after is not None and after.conductor == "fallback"
        assert [s.worker for s in after.steps] == ["smol-a"]  # the pool's fallback worker, one step
        config.write_text('serving = "sideways"\n')  # a broken edit keeps the last good configuration
        assert not running.server.reload()
        health = httpx.get(running.url + "/healthz").json()
        assert health["serving"] == "fallback" and "serving" in health["reload_error"]
    finally:
        running.stop()


@pytest.mark.slow
def test_shutdown_lets_an_in_flight_request_finish_with_its_trace(traces: TraceStore) -> None:
    running = Running(Server(pool=POOL, traces=traces, workers=list(fake_pool(delay_s=0.5))))
    result: dict[str, str] = {}

    def call() -> None:
        response = running.client().chat.completions.create(
            model="podium", messages=[{"role": "user", "content": "What is 6 * 7?"}]
        )
        result["id"], result["answer"] = response.id, response.choices[0].message.content or ""

    caller = threading.Thread(target=call)
    caller.start()
    while running.server.in_flight == 0:
        time.sleep(0.01)
    running.stop()  # what SIGTERM does: stop accepting, let in-flight requests finish
    caller.join(timeout=30)
    assert result["answer"] == ANSWER
    # the shutdown flushed the trace writer: the file holds the finished record, read by SQLite alone
    assert traces.stats().pending == 0
    row = sqlite3.connect(traces.path).execute("SELECT status FROM requests WHERE id = ?", (result["id"],))
    assert row.fetchone() == ("ok",)
    record = traces.get(result["id"])
    assert record is not None and record.status == "ok"
    with pytest.raises(httpx.ConnectError):
        httpx.get(running.url + "/healthz")


def test_a_client_that_hangs_up_mid_stream_leaves_a_trace(traces: TraceStore) -> None:
    # the status line comes with the first word; the other words take 7 x 0.5 s more
    running = Running(Server(pool=POOL, traces=traces, workers=list(fake_pool(delay_s=0.3, word_delay_s=0.5))))
    try:
        body = {"model": "podium", "messages": [{"role": "user", "content": "What is 6 * 7?"}], "stream": True}
        with httpx.stream("POST", running.url + "/v1/chat/completions", json=body) as response:
            request_id = response.headers["x-request-id"]
            next(response.iter_lines())  # the role chunk, then hang up
        deadline = time.monotonic() + 10
        while (record := traces.get(request_id)) is None or record.error == "unfinished":
            assert time.monotonic() < deadline, "no finished trace for the abandoned request"
            time.sleep(0.1)
        assert record.status == "error" and "Cancelled" in (record.error or "")
    finally:
        running.stop()


def test_a_conversation_becomes_one_question_with_its_context() -> None:
    question = question_from_messages(
        [
            {"role": "system", "content": "Answer in Danish."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": [{"type": "text", "text": "And times 3?"}]},
        ]
    )
    assert question.startswith("Instructions: Answer in Danish.")
    assert "User: What is 2+2?\nAssistant: 4" in question and question.endswith("And times 3?")
    assert question_from_messages([{"role": "user", "content": "Just this"}]) == "Just this"


def test_served_requests_are_exported_as_spans_when_telemetry_is_on(
    traces: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="needs podium[otel]")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")  # spans to stderr; the counters are what we check
    running = Running(Server(pool=POOL, traces=traces, workers=list(fake_pool())))
    try:
        running.client().chat.completions.create(model="podium-fast", messages=[{"role": "user", "content": "6*7?"}])
        telemetry = httpx.get(running.url + "/healthz").json()["telemetry"]
    finally:
        running.stop()
    assert telemetry["requests"] == 1 and telemetry["spans_queued"] >= 3  # request, plan, a worker call
    assert telemetry["spans_dropped"] == 0


@pytest.mark.slow
def test_a_registry_rollback_changes_the_served_conductor_without_a_restart(
    tmp_path: Path, traces: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from podium.conductor.light import LightPolicy
    from podium.embed import MiniLMEncoder
    from podium.registry import Registry

    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    registry = Registry()
    for _ in range(2):  # two versions of a light conductor (parameters arbitrary: only the name is served here)
        version = registry.create("light")
        shape = LightPolicy(("smol-a",), np.zeros(384), np.zeros((2, 384)), np.zeros(0), 3, MiniLMEncoder.name)
        weights = np.zeros((shape.n_actions, shape.n_features))
        policy = LightPolicy(("smol-a",), np.zeros(384), np.zeros((2, 384)), weights, 3, MiniLMEncoder.name)
        policy.save(version.policy_path)
        registry.promote(version, evidence={})
    config = tmp_path / "serve.toml"
    config.write_text('[models.podium]\nconductor = "light:light"\n')
    running = Running(Server(config_path=config, pool=POOL, traces=traces, workers=list(fake_pool())))
    try:
        served = {m.id: (m.model_extra or {})["conductor"] for m in running.client().models.list().data}
        assert served == {"podium": "light:light@v2"}
        registry.rollback("light")  # what `podium conductor rollback light` does
        deadline = time.monotonic() + 10
        while {m.id: (m.model_extra or {})["conductor"] for m in running.client().models.list().data} != {
            "podium": "light:light@v1"
        }:
            assert time.monotonic() < deadline, "the rollback was not picked up"
            time.sleep(0.2)
    finally:
        running.stop()


def test_requests_cut_off_by_the_grace_period_still_write_their_traces(traces: TraceStore) -> None:
    running = Running(Server(pool=POOL, traces=traces, workers=list(fake_pool(delay_s=3.0))), grace_s=0.3)

    def call(stream: bool) -> None:
        body = {"model": "podium", "messages": [{"role": "user", "content": "What is 6 * 7?"}], "stream": stream}
        with contextlib.suppress(httpx.HTTPError):  # the server goes away mid-request: expected
            httpx.post(running.url + "/v1/chat/completions", json=body, timeout=30)

    callers = [threading.Thread(target=call, args=(stream,)) for stream in (False, True)]
    for caller in callers:
        caller.start()
    while running.server.in_flight < 2:
        time.sleep(0.01)
    running.stop()  # SIGTERM with requests running past the grace period
    for caller in callers:
        caller.join(timeout=30)
    rows = traces.list(limit=10)
    assert len(rows) == 2 and all(r.status == "error" for r in rows), rows  # written, not left "running"
    for row in rows:
        record = traces.get(row.id)
        assert record is not None and record.error is not None and "Cancelled" in record.error


def test_a_revoked_keys_name_is_not_reused_and_the_message_says_why(tmp_path: Path) -> None:
    """A first user rotating a team's key was told the revoked key 'exists; revoke it'."""
    from podium.errors import ConfigError

    keys = KeyStore(tmp_path / "keys.sqlite3")
    keys.create("support-team")
    with pytest.raises(ConfigError, match=r"a key named 'support-team' exists; .*podium keys rotate support-team"):
        keys.create("support-team")
    keys.revoke("support-team")
    with pytest.raises(ConfigError, match=r"was revoked \(.*\); a name is never reused.*e\.g\. support-team-2"):
        keys.create("support-team")
    assert keys.create("support-team-2").startswith("pk-podium-")


def test_rotating_a_key_replaces_its_secret_and_keeps_its_name_budget_and_spending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A team whose secret leaked wants a new one under the same name, budget and this period's
    spending (a revoked name is never reused): ``podium keys rotate NAME`` on a real key file."""
    from podium.cli import cli
    from podium.errors import ConfigError

    file = tmp_path / "keys.sqlite3"
    keys = KeyStore(file)
    old = keys.create("support-team", budget_usd=0.5, period="week", scope="admin")
    keys.record("support-team", "r1", 0.125)
    assert cli(["keys", "rotate", "support-team", "--keys", str(file)]) == 0
    new = capsys.readouterr().out.strip().splitlines()[-1]  # the secret, on a line of its own
    fresh = KeyStore(file)  # another process: nothing remembered
    assert new.startswith("pk-podium-") and new != old
    assert fresh.verify(old) is None
    key = fresh.verify(new)
    assert key is not None and (key.name, key.budget_usd, key.period) == ("support-team", 0.5, "week")
    assert key.admin  # its scope too
    assert fresh.spent_since("support-team", 0) == pytest.approx(0.125)
    keys.revoke("support-team")
    with pytest.raises(ConfigError, match=r"key 'support-team' was revoked \(.*\) and stays so"):
        keys.rotate("support-team")  # a revoked key stays revoked
    assert cli(["keys", "rotate", "nobody", "--keys", str(file)]) == 2
