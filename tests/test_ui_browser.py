"""The trace browser (/ui) in a real headless Chromium against a real ``podium serve`` app on
127.0.0.1 (uvicorn in a thread), seeded with records made by the orchestrator with scripted fake
workers: list → filter → search → open a request → every access edge visible → back → purge
with confirmation → gone from list and search. Skips without Chromium."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

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


def shot(browser: Any, name: str) -> None:
    """With ``PODIUM_UI_SCREENSHOTS=DIR``, save the page whole as ``DIR/ui-NAME.png`` (the images
    in docs/serve.md); otherwise nothing."""
    shots = os.environ.get("PODIUM_UI_SCREENSHOTS")
    if not shots:
        return
    for _ in range(50):  # the plots first: an image still loading has no height yet
        if browser.execute_script("return [...document.images].every(i => i.complete)"):
            break
        time.sleep(0.1)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(max(height + 160, 500), 2600))
    browser.save_screenshot(str(Path(shots) / f"ui-{name}.png"))
    browser.set_window_size(1280, 900)


def click_and_load(browser: Any, element: Any) -> None:
    """Click ``element`` and wait (up to 10 s) until the page it loads has replaced this one. Finding
    elements straight after a click could still find the old page's, which then went stale under
    the test (a race seen in CI).

    The old page is marked with a window property that a newly loaded document does not have;
    holding an element of the old page instead (selenium's ``staleness_of``) failed in CI when
    Chrome reported the stale node as an "unhandled inspector error", not as a stale element."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    browser.execute_script("window.__podiumOldPage = true")
    element.click()

    def replaced(driver: Any) -> bool:
        try:
            return bool(driver.execute_script("return window.__podiumOldPage === undefined"))
        except WebDriverException:  # mid-navigation: ask again
            return False

    WebDriverWait(browser, 10).until(replaced)


def test_browse_filter_search_open_and_purge_in_a_real_browser(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    traces = seeded(TraceStore(tmp_path / "t.sqlite3"))
    server = ThreadedUvicorn(create_app(Server(pool=str(POOLS / "three-fakes.toml"), traces=traces)))
    try:
        with chromium() as browser:
            browser.implicitly_wait(5)  # each click loads a page: wait for its elements
            browser.get(server.url + "/ui")
            assert len(browser.find_elements(By.CSS_SELECTOR, "tr.request")) == 4
            shot(browser, "requests")
            browser.find_element(By.NAME, "status").send_keys("fallback")
            click_and_load(browser, browser.find_element(By.ID, "apply"))
            rows = browser.find_elements(By.CSS_SELECTOR, "tr.request")
            assert [r.get_attribute("data-id") for r in rows] == ["c" * 32]
            assert browser.current_url.removeprefix(server.url) == "/ui"  # nothing typed went into the URL
            browser.find_element(By.NAME, "status").send_keys("any")
            box = browser.find_element(By.NAME, "q")
            box.clear()
            box.send_keys("glaciers")
            click_and_load(browser, browser.find_element(By.ID, "apply"))
            [row] = browser.find_elements(By.CSS_SELECTOR, "tr.request")
            assert row.get_attribute("data-id") == "b" * 32 and "glaciers" in row.text
            click_and_load(browser, row.find_element(By.TAG_NAME, "a"))
            WebDriverWait(browser, 10).until(lambda b: "/ui/requests/" in b.current_url)
            assert browser.current_url.endswith("/ui/requests/" + "b" * 32)
            shot(browser, "request")
            edges = browser.execute_script(SAMPLE_EDGES)
            assert edges and all(e["covered"] == [] and e["own"] >= e["total"] / 3 for e in edges), edges
            click_and_load(browser, browser.find_element(By.ID, "back"))
            assert len(browser.find_elements(By.CSS_SELECTOR, "tr.request")) == 4
            browser.get(server.url + "/ui/requests/" + "b" * 32)
            click_and_load(browser, browser.find_element(By.ID, "purge"))
            click_and_load(browser, browser.find_element(By.ID, "confirm"))
            assert "Purged 1 request" in browser.find_element(By.ID, "purged").text
            browser.get(server.url + "/ui")
            assert "b" * 32 not in [
                r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "tr.request")
            ]
    finally:
        server.stop()
    assert traces.search("glaciers") == []


def test_report_pages_in_a_real_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eval runs → a run (its numbers, its Pareto plot drawn) → the compare form → the gate's
    flips → the shadow report → the registry → a version's learning curve, by clicking. With
    ``PODIUM_UI_SCREENSHOTS=DIR`` each page is also saved there (the images in docs/serve.md)."""
    from types import SimpleNamespace

    from fastapi import FastAPI
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from podium.serve.ui import ui_router
    from tests.test_ui import seed_reports

    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))
    sources = seed_reports(tmp_path / "reports")
    app = FastAPI()
    traces = seeded(TraceStore(tmp_path / "t.sqlite3"))
    app.include_router(ui_router(SimpleNamespace(traces=traces, keys=None), sources))  # type: ignore[arg-type]
    server = ThreadedUvicorn(app)

    def drawn(browser: Any, selector: str) -> bool:
        """Whether the image ``selector`` has loaded and has pixels, waiting up to 10 s for it
        (a page is done before its images are: asking at once was a race)."""
        from selenium.common.exceptions import TimeoutException

        script = f"const i = document.querySelector('{selector}'); return !!i && i.complete && i.naturalWidth > 0;"
        try:
            return bool(WebDriverWait(browser, 10).until(lambda b: b.execute_script(script)))
        except TimeoutException:
            return False

    try:
        with chromium() as browser:
            browser.implicitly_wait(5)
            browser.get(server.url + "/ui")
            click_and_load(browser, browser.find_element(By.ID, "nav-evals"))
            assert [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "tr.run")] == [
                "new",
                "old",
            ]
            shot(browser, "evals")
            click_and_load(browser, browser.find_element(By.LINK_TEXT, "old"))
            big = browser.find_element(By.CSS_SELECTOR, 'tr[data-method="single:big"]')
            assert big.find_element(By.CSS_SELECTOR, "td.quality").text == "0.750"  # q1, q2, q4 of q1..q4
            assert big.find_element(By.CSS_SELECTOR, "td.p95").text == "3.85"  # 1, 2, 3, 4 s
            assert drawn(browser, "#pareto")
            shot(browser, "eval-run")
            browser.back()
            click_and_load(
                browser, browser.find_element(By.ID, "compare")
            )  # defaults: the newest against the one before
            WebDriverWait(browser, 10).until(lambda b: "/ui/evals/compare" in b.current_url)
            assert "/ui/evals/compare?new=new&baseline=old" in browser.current_url
            flip = browser.find_element(By.CSS_SELECTOR, 'tr.flip[data-method="single:big"]')
            assert flip.find_element(By.CSS_SELECTOR, "td.failing").text == "1: q2"
            assert flip.find_element(By.CSS_SELECTOR, "td.passing").text == "1: q3"
            assert "2 regression(s)" in browser.find_element(By.ID, "gate-verdict").text
            shot(browser, "eval-compare")
            click_and_load(browser, browser.find_element(By.ID, "nav-shadow"))
            support = browser.find_element(By.CSS_SELECTOR, 'tr.use-case[data-case="support"]')
            assert support.find_element(By.CSS_SELECTOR, "td.agreement").text == f"{2 / 3:.3f}"
            assert support.find_element(By.CSS_SELECTOR, "td.latency-upstream").text == "2.00 / 2.90"
            shot(browser, "shadow")
            click_and_load(browser, browser.find_element(By.ID, "nav-conductors"))
            assert len(browser.find_elements(By.CSS_SELECTOR, "tr.version")) == 2
            shot(browser, "conductors")
            click_and_load(browser, browser.find_element(By.LINK_TEXT, "light@v2"))
            assert drawn(browser, "#curve")
            shot(browser, "conductor-version")
    finally:
        server.stop()


@pytest.mark.model
def test_real_traces_of_the_tiny_local_model_in_a_real_browser(tmp_path: Path) -> None:
    """Requests answered by the real SmolLM2-135M (llama.cpp) through the orchestrator, then
    browsed: the list shows each, search finds a word of a real answer, and a request's page draws
    an unobstructed edge for every access the executor recorded (step → step it saw) and to the
    answer."""
    import asyncio

    from selenium.webdriver.common.by import By

    from podium.builder import build_orchestrator
    from podium.pool import load_pool

    traces = TraceStore(tmp_path / "t.sqlite3")
    orchestrator = build_orchestrator(load_pool(POOLS / "smollm2.toml"), traces=traces)

    async def answer_all() -> list[Any]:
        return [await orchestrator.run(q) for q in ("What is 12 + 30?", "Name one colour of a clear sky.")]

    records = asyncio.run(answer_all())
    traces.flush()
    ran = [r for r in records if r.status == "ok" and r.steps]
    assert ran, [(r.status, r.error) for r in records]
    record = max(ran, key=lambda r: sum(len(s.visible) for s in r.steps))
    expected = {(f"r{s.round}-s{j}", f"r{s.round}-s{s.index}") for s in record.steps if s.phase == "workflow"
                for j in s.visible}  # fmt: skip
    word = max(record.answer.split(), key=len).strip(".,;:!?\"'()")
    server = ThreadedUvicorn(create_app(Server(pool=str(POOLS / "three-fakes.toml"), traces=traces)))
    try:
        with chromium() as browser:
            browser.implicitly_wait(5)
            browser.get(server.url + "/ui")
            ids = [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "tr.request")]
            assert sorted(ids) == sorted(r.id for r in records)
            box = browser.find_element(By.NAME, "q")
            box.send_keys(word)
            click_and_load(browser, browser.find_element(By.ID, "apply"))
            found = [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "tr.request")]
            assert record.id in found, (word, found)
            browser.get(server.url + "/ui/requests/" + record.id)
            edges = browser.execute_script(SAMPLE_EDGES)
            drawn = {tuple(e["edge"].split(" -> ")) for e in edges}
            assert expected <= drawn and any(to == "answer" for _, to in drawn), (expected, drawn)
            assert all(e["covered"] == [] and e["own"] >= e["total"] / 3 for e in edges), edges
    finally:
        server.stop()
