"""PII protection on the wire: podium's real OpenAI backend calls a provider on 127.0.0.1 marked
``external = true``, and the test reads the raw HTTP request bodies it received.

The provider is a small scripted server written here (a fake provider, by design): it records
each request body and answers with the question section of the message it got, placeholders and
all. Everything on podium's side is real: pool file, runtime, PII guard, Presidio, OpenAI SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podium.builder import build_orchestrator
from podium.pool import load_pool
from podium.testing import ScriptedConductor
from podium.trace.store import TraceStore
from tests.conftest import SHARED_DATA, read_jsonl
from tests.test_faults_http import _completion, _response

pytest.importorskip("openai", reason="needs podium[openai]")

CASES = [c for c in read_jsonl(SHARED_DATA / "pii" / "cases.jsonl") if c["entities"]]


async def _run_case(tmp_path: Path, question: str) -> tuple[list[bytes], str]:
    bodies: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
        body = await reader.readexactly(length)
        bodies.append(body)
        content = json.loads(body)["messages"][-1]["content"]
        writer.write(_response("200 OK", _completion(content.split("<question>\n", 1)[1].split("\n</question>", 1)[0])))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = tmp_path / "pool.toml"
    pool.write_text(
        f"""
name = "wire"
[conductor]
worker = "local"
[fallback]
worker = "local"
[[workers]]
name = "provider"
backend = "openai"
base_url = "http://127.0.0.1:{port}/v1"
model = "m"
external = true          # loopback, but treated as a third party for this test
price = {{ input = 1.0, output = 1.0 }}
[[workers]]
name = "local"
backend = "python"
""",
        encoding="utf-8",
    )
    plan = 'model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]'
    store = TraceStore(tmp_path / "t.sqlite3")
    orchestrator = build_orchestrator(load_pool(pool), traces=store, conductor=ScriptedConductor([plan]))
    try:
        record = await orchestrator.run(question)
    finally:
        server.close()
    assert record.status == "ok", record.error
    assert record.steps[0].disclosures[0].endpoint == f"http://127.0.0.1:{port}/v1"
    return bodies, record.answer


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
@pytest.mark.slow
def test_the_http_request_body_carries_no_listed_value_and_the_answer_is_restored(
    case: dict[str, Any], tmp_path: Path
) -> None:
    bodies, answer = asyncio.run(_run_case(tmp_path, case["text"]))
    assert len(bodies) == 1
    wire = json.loads(bodies[0])["messages"][-1]["content"]  # JSON-decoded: no \\u escapes hide a value
    for entity in case["entities"]:
        value = entity["value"]
        assert value not in wire and value.casefold() not in wire.casefold()
        if entity["type"] in ("DK_CPR", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE"):
            assert re.sub(r"\D", "", value) not in re.sub(r"\D", "", wire)
    assert answer == case["text"]


def test_pii_detection_is_loaded_before_requests_only_when_a_worker_is_external(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """builder.warm_pii (podium run and podium serve call it): the external worker's protection
    is warmed once, inside the announcement; a pool of local workers announces nothing. warm_up
    is replaced by a counter here (unit test: loading Presidio is what the other tests do)."""
    from podium.builder import warm_pii
    from podium.pii.protection import PIIProtection

    warmed: list[int] = []
    monkeypatch.setattr(PIIProtection, "warm_up", lambda self: warmed.append(id(self)))
    announced: list[str] = []

    @contextlib.contextmanager
    def announce() -> Iterator[None]:
        announced.append("start")
        yield
        announced.append("end")

    worker = '[[workers]]\nname = "{name}"\nbackend = "{backend}"\n{more}\n'
    external = worker.format(
        name="provider",
        backend="openai",
        more='model = "m"\nbase_url = "http://127.0.0.1:9/v1"\nexternal = true\nprice = { input = 1.0, output = 1.0 }',
    )
    local = worker.format(name="local", backend="python", more="")
    head = 'name = "p"\n[conductor]\nworker = "local"\n[fallback]\nworker = "local"\n'
    (tmp_path / "external.toml").write_text(head + external + local, encoding="utf-8")
    (tmp_path / "local.toml").write_text(head + local, encoding="utf-8")
    both = build_orchestrator(load_pool(tmp_path / "external.toml"))
    warm_pii([both, both], announce)
    assert len(warmed) == 1 and announced == ["start", "end"]  # one protection, shared, warmed once
    warm_pii([build_orchestrator(load_pool(tmp_path / "local.toml"))], announce)
    assert len(warmed) == 1 and announced == ["start", "end"]  # nothing external: no announcement
