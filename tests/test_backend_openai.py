"""The OpenAI-compatible backend against a real ``python -m llama_cpp.server`` on 127.0.0.1,
serving the smallest embedded model (SmolLM2-135M). No fakes: real HTTP, real usage, real
errors."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from podium.cli import cli
from podium.errors import ClientError, TransportError
from podium.local_models import resolve_model
from podium.workers.base import Call, Price, WorkerSettings

pytest.importorskip("llama_cpp.server.app", reason="needs llama-cpp-python's server extra (make setup-dev)")
pytest.importorskip("openai", reason="needs podium[openai]")
pytestmark = pytest.mark.model

from podium.workers.openai_compat import OpenAICompatWorker  # noqa: E402
from tests.serve_support import free_port  # noqa: E402

ALIAS = "smollm2"
MESSAGES = [{"role": "user", "content": "Name one colour of the rainbow."}]


def start_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(resolve_model("smollm2-135m-instruct")),
         "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("llama_cpp.server did not come up within 120 s")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    proc = start_server(port)
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=30)


def worker(base_url: str, **kw: object) -> OpenAICompatWorker:
    return OpenAICompatWorker(
        "smol-http",
        str(kw.pop("model", ALIAS)),
        base_url=base_url,
        settings=WorkerSettings(max_tokens=24, temperature=0.0),
        price=Price(input=0.094, output=0.22),
        **kw,  # type: ignore[arg-type]
    )


def test_chat_completion_reports_usage_and_cost(server: str) -> None:
    result = asyncio.run(worker(server).complete(Call(MESSAGES)))  # type: ignore[arg-type]
    assert result.text.strip()
    assert result.usage.input_tokens > 10 and 0 < result.usage.output_tokens <= 24
    assert result.cost_usd == pytest.approx(
        (result.usage.input_tokens * 0.094 + result.usage.output_tokens * 0.22) / 1e6
    )


def test_streaming_gives_the_same_text_with_usage(server: str) -> None:
    plain = asyncio.run(worker(server).complete(Call(MESSAGES)))  # type: ignore[arg-type]
    streamed = asyncio.run(worker(server, stream=True).complete(Call(MESSAGES)))  # type: ignore[arg-type]
    assert streamed.text == plain.text  # greedy decoding: identical
    assert plain.usage_reported and plain.usage.output_tokens > 0
    # llama_cpp.server sends no usage in streams even when asked: podium counts the tokens (the
    # alias is no model podium has a tokenizer for: the UTF-8 byte bound), marks them estimated,
    # and budgets keep the call's worst case
    assert not streamed.usage_reported and streamed.usage.estimated
    assert streamed.usage.input_tokens >= plain.usage.input_tokens  # a bound of the server's real count
    assert streamed.usage.output_tokens >= plain.usage.output_tokens > 0
    assert streamed.cost_usd >= plain.cost_usd > 0


def test_connection_refused_is_a_transport_error() -> None:
    w = worker(f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(TransportError) as info:
        asyncio.run(w.complete(Call(MESSAGES)))  # type: ignore[arg-type]
    assert info.value.worker == "smol-http"


def test_bad_request_is_a_client_error(server: str) -> None:
    bad = [{"role": "user", "content": "word " * 3000}]  # longer than the server's 2048-token context
    with pytest.raises(ClientError) as info:
        asyncio.run(worker(server).complete(Call(bad)))  # type: ignore[arg-type]
    assert info.value.status is not None and 400 <= info.value.status < 500


def test_server_stopped_mid_request_is_a_transport_error() -> None:
    port = free_port()
    proc = start_server(port)
    w = worker(f"http://127.0.0.1:{port}/v1")
    w.info = dataclasses.replace(w.info, settings=WorkerSettings(max_tokens=200, temperature=0.8))
    # ~1,400 prompt tokens: the server is still reading them (seconds) when it is killed
    long_prompt = [{"role": "user", "content": "Summarise: " + "the cat sat on the mat. " * 200}]

    async def call_then_kill() -> BaseException | None:
        task = asyncio.create_task(w.complete(Call(long_prompt)))  # type: ignore[arg-type]
        await asyncio.sleep(0.5)
        proc.kill()
        try:
            await task
        except BaseException as exc:  # the test inspects it
            return exc
        return None

    error = asyncio.run(call_then_kill())
    proc.wait(timeout=30)
    assert isinstance(error, TransportError)


def test_podium_run_over_http_uses_the_tolerant_parser(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = tmp_path / "http.toml"
    pool.write_text(
        f"""
name = "http"
max_steps = 2
[defaults]
max_tokens = 32
[conductor]
worker = "smol"
resamples = 1
recursion_rounds = 0
max_tokens = 200
[fallback]
worker = "smol"
[[workers]]
name = "smol"
backend = "openai"
model = "{ALIAS}"
base_url = "{server}"
api_key_env = "PODIUM_TEST_KEY"
price = {{ input = 0.094, output = 0.22 }}
"""
    )
    os.environ["PODIUM_TEST_KEY"] = "sk-test-secret-value"
    try:
        code = cli(["run", "What is 2+3?", "--pool", str(pool), "--json", "--traces", str(tmp_path / "t.sqlite3")])
    finally:
        del os.environ["PODIUM_TEST_KEY"]
    out, _ = capsys.readouterr()
    assert code == 0
    record = json.loads(out)
    assert all(a["constrained"] is False for a in record["attempts"])  # HTTP: no grammar
    assert record["status"] in {"ok", "fallback"} and record["answer"]
    assert "sk-test-secret-value" not in out
    for db_file in tmp_path.glob("t.sqlite3*"):  # the database and its WAL
        assert b"sk-test-secret-value" not in db_file.read_bytes()
