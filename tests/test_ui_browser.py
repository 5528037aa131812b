"""The trace browser (/ui) in a real headless Chromium against a real ``podium serve`` app on
127.0.0.1 (uvicorn in a thread), seeded with records made by the orchestrator with scripted fake
workers: list → filter → search → open a request → every access edge visible → back → purge
with confirmation → gone from list and search. Skips without Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs podium[serve]")
pytest.importorskip("selenium", reason="needs podium[browser]")

from podium.serve.app import Server, create_app
from podium.testing import ThreadedUvicorn
from podium.trace.store import TraceStore
from tests.conftest import POOLS
from tests.test_trace_html_edges import SAMPLE_EDGES, chromium
from tests.test_trace_search import seeded

pytestmark = pytest.mark.browser


def test_browse_filter_search_open_and_purge_in_a_real_browser(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    traces = seeded(TraceStore(tmp_path / "t.sqlite3"))
    server = ThreadedUvicorn(create_app(Server(pool=str(POOLS / "three-fakes.toml"), traces=traces)))
    try:
        with chromium() as browser:
            browser.implicitly_wait(5)  # each click loads a page: wait for its elements
            browser.get(server.url + "/ui")
            assert len(browser.find_elements(By.CSS_SELECTOR, "tr.request")) == 4
            browser.find_element(By.NAME, "status").send_keys("fallback")
            browser.find_element(By.ID, "apply").click()
            rows = browser.find_elements(By.CSS_SELECTOR, "tr.request")
            assert [r.get_attribute("data-id") for r in rows] == ["c" * 32]
            assert browser.current_url.removeprefix(server.url) == "/ui"  # nothing typed went into the URL
            browser.find_element(By.NAME, "status").send_keys("any")
            box = browser.find_element(By.NAME, "q")
            box.clear()
            box.send_keys("glaciers")
            browser.find_element(By.ID, "apply").click()
            [row] = browser.find_elements(By.CSS_SELECTOR, "tr.request")
            assert row.get_attribute("data-id") == "b" * 32 and "glaciers" in row.text
            row.find_element(By.TAG_NAME, "a").click()
            assert browser.current_url.endswith("/ui/requests/" + "b" * 32)
            edges = browser.execute_script(SAMPLE_EDGES)
            assert edges and all(e["covered"] == [] and e["own"] >= e["total"] / 3 for e in edges), edges
            browser.find_element(By.ID, "back").click()
            assert len(browser.find_elements(By.CSS_SELECTOR, "tr.request")) == 4
            browser.get(server.url + "/ui/requests/" + "b" * 32)
            browser.find_element(By.ID, "purge").click()
            browser.find_element(By.ID, "confirm").click()
            assert "Purged 1 request" in browser.find_element(By.ID, "purged").text
            browser.get(server.url + "/ui")
            assert "b" * 32 not in [
                r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "tr.request")
            ]
    finally:
        server.stop()
    assert traces.search("glaciers") == []
