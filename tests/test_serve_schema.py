"""``podium serve`` fuzzed from its own OpenAPI schema (schemathesis), bounded for CI: whatever
the generated request — valid, or schemathesis's negative cases — the server never answers 5xx
and every error comes in the OpenAI shape. The workers are fakes (ScriptedWorker)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from podium.serve.app import Server, create_app  # noqa: E402
from podium.trace.store import TraceStore  # noqa: E402
from tests.test_serve import POOL, fake_pool  # noqa: E402

_TRACES = TraceStore(Path(tempfile.mkdtemp(prefix="podium-schema-")) / "traces.sqlite3")
APP = create_app(Server(pool=POOL, traces=_TRACES, workers=list(fake_pool())))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@pytest.mark.slow
def test_no_generated_request_gets_a_server_error(case) -> None:  # type: ignore[no-untyped-def]
    response = case.call()
    assert response.status_code < 500, response.text[:500]
    content_type = response.headers.get("content-type") or [""]
    if response.status_code >= 400 and content_type[0].startswith("application/json"):
        assert set(response.json()["error"]) >= {"message", "type", "code"}
