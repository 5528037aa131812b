"""``podium serve`` and ``podium shadow`` as real processes with real models: the CLI started as a
user starts it, SmolLM2-135M through llama.cpp as every worker, the official ``openai`` client,
and for shadow mode a real ``llama_cpp.server`` upstream on 127.0.0.1. No fakes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import POOLS
from tests.serve_support import free_port
from tests.serve_support import start_podium as start_serving
from tests.test_backend_openai import ALIAS, start_server

openai = pytest.importorskip("openai", reason="needs podium[openai]")
pytestmark = pytest.mark.model

QUESTION = "What is 2 + 3? Answer with the number."


def start_podium(args: list[str], port: int, home: Path) -> subprocess.Popen[bytes]:
    """``podium ARGS`` on the SmolLM2 test pool, with ``home`` as PODIUM_HOME (ready when up)."""
    env = {**os.environ, "PODIUM_HOME": str(home)}
    return start_serving([*args, "--pool", str(POOLS / "smollm2.toml")], port, env, wait_s=60)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    port = free_port()
    traces = tmp_path / "traces.sqlite3"
    proc = start_podium(["serve", "--traces", str(traces)], port, tmp_path)
    yield f"http://127.0.0.1:{port}", traces, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=60)


def stored(traces: Path, request_id: str, wait_s: float = 10.0) -> tuple[str, str]:
    """The finished trace row, read from another process: the server's background writer commits
    a finished record within milliseconds (docs/traces.md), longer on a loaded machine, so poll
    for up to ``wait_s`` seconds until the row is no longer ``running``."""
    until = time.monotonic() + wait_s
    while True:
        with sqlite3.connect(traces) as db:
            row = db.execute("SELECT status, answer FROM requests WHERE id = ?", (request_id,)).fetchone()
        if (row is not None and row[0] != "running") or time.monotonic() > until:
            break
        time.sleep(0.05)
    assert row is not None, f"no trace {request_id}"
    return row[0], row[1]


def test_serve_answers_and_streams_with_the_real_runtime(served: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    url, traces, _ = served
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    response = client.chat.completions.create(model="podium", messages=[{"role": "user", "content": QUESTION}])
    status, answer = stored(traces, response.id)
    assert status in ("ok", "fallback") and answer == response.choices[0].message.content and answer
    pieces, ids = [], set()
    for chunk in client.chat.completions.create(
        model="podium-fast", messages=[{"role": "user", "content": QUESTION}], stream=True
    ):
        ids.add(chunk.id)
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    (request_id,) = ids
    status, answer = stored(traces, request_id)
    assert "".join(pieces) == answer and len(pieces) > 1  # llama.cpp's tokens arrive as they are made


def test_sigterm_lets_the_in_flight_stream_finish(served: tuple[str, Path, subprocess.Popen[bytes]]) -> None:
    url, traces, proc = served
    got: dict[str, object] = {}

    def call() -> None:
        body = {"model": "podium-fast", "messages": [{"role": "user", "content": QUESTION}], "stream": True}
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as response:
            got["id"] = response.headers["x-request-id"]
            got["lines"] = [line for line in response.iter_lines() if line]

    caller = threading.Thread(target=call)
    caller.start()
    while "id" not in got:  # the request is in flight
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    caller.join(timeout=120)
    # uvicorn re-raises the signal after its graceful shutdown, so the exit is "terminated by SIGTERM"
    assert proc.wait(timeout=120) in (0, -signal.SIGTERM)
    lines = got["lines"]
    assert isinstance(lines, list) and lines[-1] == "data: [DONE]"
    status, _ = stored(traces, str(got["id"]))
    assert status in ("ok", "fallback")


class WireTap:
    """A TCP relay on 127.0.0.1 that records every byte the upstream sends back, so the test can
    compare what the client got with what the upstream really put on the wire."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.replies: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            reply = bytearray()
            self.replies.append(reply)  # filled as it arrives
            threading.Thread(target=self._pipe, args=(client, upstream, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, reply), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, record: bytearray | None) -> None:
        try:
            while data := src.recv(65536):
                if record is not None:
                    record += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def bodies(self) -> list[bytes]:
        """The HTTP bodies of the recorded replies, in order (keep-alive connections carry
        several: each is framed by content-length or chunked encoding)."""
        out = []
        for raw in self.replies:
            rest = bytes(raw)
            while rest:
                head, _, rest = rest.partition(b"\r\n\r\n")
                fields = dict(line.split(b":", 1) for line in head.lower().split(b"\r\n")[1:] if b":" in line)
                if fields.get(b"transfer-encoding", b"").strip() == b"chunked":
                    body = b""
                    while True:
                        size_line, _, rest = rest.partition(b"\r\n")
                        size = int(size_line.split(b";")[0], 16)
                        if size == 0:
                            rest = rest[2:]  # the empty trailer line
                            break
                        body, rest = body + rest[:size], rest[size + 2 :]
                else:
                    length = int(fields.get(b"content-length", b"0"))
                    body, rest = rest[:length], rest[length:]
                out.append(body)
        return out

    def close(self) -> None:
        self.listener.close()


def test_shadow_relays_a_real_upstream_and_keeps_its_budget(tmp_path: Path) -> None:
    upstream_port, shadow_port = free_port(), free_port()
    upstream = start_server(upstream_port)
    tap = WireTap(upstream_port)
    store = tmp_path / "shadow.sqlite3"
    traces = str(tmp_path / "traces.sqlite3")
    args = ["shadow", "--upstream", f"http://127.0.0.1:{tap.port}", "--mode", "execute",
            "--daily-budget", "0.0003", "--store", str(store), "--traces", traces]  # fmt: skip
    shadow = start_podium(args, shadow_port, tmp_path)
    try:
        body = {"model": ALIAS, "messages": [{"role": "user", "content": QUESTION}], "temperature": 0, "seed": 1,
                "max_tokens": 16}  # fmt: skip
        direct = httpx.post(f"http://127.0.0.1:{upstream_port}/v1/chat/completions", json=body, timeout=60).json()
        got = []
        for stream in (False, False, True, True):
            proxied = httpx.post(
                f"http://127.0.0.1:{shadow_port}/v1/chat/completions", json={**body, "stream": stream}, timeout=60
            )
            assert proxied.status_code == 200
            got.append(proxied.content)
            if stream:
                continue
            reply = proxied.json()
            for varying in ("id", "created"):  # the only fields llama_cpp.server changes per call
                reply.pop(varying), direct.pop(varying, None)
            assert reply == direct
        deadline = time.monotonic() + 300
        while True:
            rows = (
                sqlite3.connect(store)
                .execute("SELECT status, podium_cost_usd, upstream_answer, error FROM shadow")
                .fetchall()
            )
            if len(rows) == 4:
                break
            assert time.monotonic() < deadline, f"{len(rows)} of 4 shadow rows after 300 s"
            time.sleep(1)
        health = httpx.get(f"http://127.0.0.1:{shadow_port}/healthz").json()
        assert tap.bodies() == got  # the client's bytes are exactly what the upstream sent, streams included
    finally:
        tap.close()
        shadow.terminate()
        shadow.wait(timeout=60)
        upstream.terminate()
        upstream.wait(timeout=30)
    assert all(r[2] == direct["choices"][0]["message"]["content"] for r in rows[:2])  # the upstream's own answer
    assert sum(r[1] or 0 for r in rows) <= 0.0003  # the day's shadow budget
    statuses = [r[0] for r in rows]
    assert statuses[0] == "done" and rows[0][1] > 0, rows  # the first run fits the budget
    # later ones found it used up: skipped, or stopped by a refused reservation on the day's budget
    assert any(s == "skipped_budget" or "shadow/day" in (e or "") for s, _, _, e in rows[1:]), rows
    assert health["skipped_budget"] == statuses.count("skipped_budget")
    assert health["forwarded"] >= 4


def test_requests_cut_off_by_the_grace_period_leave_finished_traces(tmp_path: Path) -> None:
    """SIGTERM with a 1 s grace period while a streamed request needs longer: the request is
    cancelled, and its trace is still written (status error), not left 'running'. The stream
    commits its headers only with the first text, so the request is found by the server's own
    count of requests in flight and by the trace store, not by its response headers."""
    port = free_port()
    traces = tmp_path / "traces.sqlite3"
    config = tmp_path / "serve.toml"
    config.write_text("graceful_shutdown_s = 1\n")
    proc = start_podium(["serve", "--traces", str(traces), "--config", str(config)], port, tmp_path)

    def call() -> None:
        body = {"model": "podium", "messages": [{"role": "user", "content": QUESTION}], "stream": True}
        with (
            contextlib.suppress(httpx.HTTPError),
            httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=120) as response,
        ):
            for _ in response.iter_lines():
                pass

    caller = threading.Thread(target=call)
    caller.start()
    until = time.monotonic() + 60
    while httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()["in_flight"] < 1:
        assert time.monotonic() < until, "the request never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)  # the conductor alone takes seconds on SmolLM2: past the grace period
    proc.wait(timeout=120)
    caller.join(timeout=60)
    with sqlite3.connect(traces) as db:
        rows = db.execute("SELECT id FROM requests").fetchall()
    assert len(rows) == 1, rows  # one request, one trace
    status, _ = stored(traces, rows[0][0])
    assert status == "error"  # cancelled, and written
