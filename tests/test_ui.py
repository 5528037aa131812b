"""The trace browser in ``podium serve`` (/ui), against a server seeded with real records (the
orchestrator with scripted fake workers) through Starlette's in-process client: list, filter,
search, open a request with every access edge, purge with confirmation; loopback-only access and
key sign-in. The real-browser walk is in tests/test_ui_browser.py."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs podium[serve]")
from fastapi.testclient import TestClient

from podium.serve.app import Server, create_app
from podium.serve.keys import KeyStore
from podium.trace.store import TraceStore
from tests.conftest import POOLS
from tests.test_trace_search import make_record, seeded, store_copy


@pytest.fixture
def server(tmp_path: Path) -> Server:
    traces = seeded(TraceStore(tmp_path / "t.sqlite3"))
    return Server(pool=str(POOLS / "three-fakes.toml"), traces=traces, keys=KeyStore(tmp_path / "k.sqlite3"))


def test_list_filter_search_open_and_purge(server: Server) -> None:
    client = TestClient(create_app(server))
    page = client.get("/ui")
    assert page.status_code == 200 and page.text.count('class="request"') == 4
    assert "Are volcanoes still running?" in page.text and "<td>checker, drafter</td>" in page.text
    fallback = client.post("/ui", data={"status": "fallback"})
    assert fallback.text.count('class="request"') == 1 and "sourdough" in fallback.text
    assert client.get("/ui?status=running").text.count('class="request"') == 1  # plain filters may be links
    cheap = client.post("/ui", data={"max_cost": "0.005"})
    assert cheap.text.count('class="request"') == 1  # a ($0.001); the running d has no cost yet
    found = client.post("/ui", data={"q": "glaciers"})
    assert found.text.count('class="request"') == 1 and "<mark>" not in found.text  # snippet as text
    assert "glaciers" in found.text
    bad = client.post("/ui", data={"min_cost": "lots"})
    assert bad.status_code == 400 and "min cost &#39;lots&#39; is not a number" in bad.text  # escaped
    none = client.post("/ui", data={"q": "zzyzx"})
    assert 'id="empty"' in none.text

    request = client.get("/ui/requests/" + "b" * 32)
    assert request.status_code == 200 and "<svg" in request.text and 'id="purge"' in request.text
    assert "Tell me about glaciers?" in request.text
    assert client.get("/ui/requests/" + "0" * 32).status_code == 404

    confirm = client.post(f"/ui/requests/{'b' * 32}/purge", data={})
    assert 'id="confirm"' in confirm.text and server.traces.get("b" * 32) is not None  # asked first
    done = client.post(f"/ui/requests/{'b' * 32}/purge", data={"confirm": "b" * 32})
    assert 'id="purged"' in done.text and server.traces.get("b" * 32) is None
    assert client.post("/ui", data={"q": "glaciers"}).text.count('class="request"') == 0


def test_a_data_subject_is_purged_from_the_filtered_list_after_a_confirmation(server: Server) -> None:
    client = TestClient(create_app(server))
    listed = client.post("/ui", data={"subject": "customer-7"})
    assert listed.text.count('class="request"') == 2 and 'id="purge-subject"' in listed.text
    assert 'id="purge-subject"' not in client.get("/ui").text  # only for a list filtered by subject
    asked = client.post("/ui/purge-subject", data={"subject": "customer-7"})
    assert "2 request(s)" in asked.text and len(server.traces.list()) == 4  # nothing deleted yet
    done = client.post("/ui/purge-subject", data={"subject": "customer-7", "confirm": "customer-7"})
    assert "Purged 2 request(s)" in done.text
    assert sorted(r.id[0] for r in server.traces.list()) == ["a", "d"]


def test_paging_goes_to_older_requests(tmp_path: Path) -> None:
    traces = TraceStore(tmp_path / "t.sqlite3")
    base = make_record("paging")
    for i in range(60):
        store_copy(traces, base, id=f"{i:032x}", started_at=f"2026-11-01T10:{i // 60:02d}:{i % 60:02d}.000Z")
    client = TestClient(create_app(Server(pool=str(POOLS / "three-fakes.toml"), traces=traces)))
    first = client.get("/ui")
    assert first.text.count('class="request"') == 50 and 'id="older"' in first.text
    older = client.post("/ui", data={"before": "2026-11-01T10:00:10.000Z"})
    assert older.text.count('class="request"') == 10 and 'id="older"' not in older.text


def test_only_loopback_clients_and_with_keys_only_signed_in_ones(server: Server) -> None:
    remote = TestClient(create_app(server), client=("203.0.113.9", 5000))
    assert remote.get("/ui").status_code == 403
    assert server.keys is not None
    secret = server.keys.create("ops")
    client = TestClient(create_app(server))
    assert client.get("/ui", follow_redirects=False).status_code == 303  # to the sign-in page
    assert client.post("/ui/login", data={"key": "pk-podium-wrong"}).status_code == 401
    signed = client.post("/ui/login", data={"key": secret}, follow_redirects=False)
    assert signed.status_code == 303 and "httponly" in signed.headers["set-cookie"].lower()
    assert client.get("/ui").text.count('class="request"') == 4  # the cookie now opens it
    bearer = TestClient(create_app(server))
    assert bearer.get("/ui", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
