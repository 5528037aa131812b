"""The trace page's graph in a real headless browser: no edge is hidden behind a box or runs
along another edge (Chromium driven by Selenium; skipped when none is installed).

Each edge is sampled point by point along its SVG path, and the browser says which element is
drawn on top at each point (``document.elementFromPoint``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from podium.orchestrator import Fallback, Orchestrator
from podium.records import RunRecord
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.html import render_html
from podium.trace.store import TraceStore
from tests.test_trace_html import _browser, graph, store, stored, two_rounds

__all__ = ["store", "two_rounds"]  # the fixtures, shared with tests/test_trace_html.py


@pytest.fixture
def skipping(store: TraceStore) -> RunRecord:
    """A chain of three steps where step 2 sees steps 0 and 1: the 0 → 2 edge skips a column,
    and step 1's box lies on the straight way between them."""
    orch = Orchestrator(
        [ScriptedWorker("qwen-1.5b", reply="a"), ScriptedWorker("qwen-0.5b", reply="b"), ScriptedWorker("smol")],
        ScriptedConductor(['model_id = [0, 1, 2]\nsubtasks = ["A.", "B.", "C."]\naccess_list = [[], [0], [0, 1]]']),
        Fallback(0, "Answer."),
        traces=store,
    )
    return stored(store, orch, "Chain?")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium driven by Selenium (skips when none is installed)."""
    binary, driver_path = _browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield browser
    finally:
        browser.quit()


SAMPLE_EDGES = """
// For every edge: walk its path every 2 px (skipping its first 4 px, inside the source's border,
// and its last 12, under the arrowhead), scroll the point into view, and ask the browser which
// element is drawn on top there.
const graph = document.querySelector('.graph');
const screen = (path, pt) => {
  const m = path.getScreenCTM();
  return [pt.x * m.a + pt.y * m.c + m.e, pt.x * m.b + pt.y * m.d + m.f];
};
return Array.from(document.querySelectorAll('svg path.edge')).map(path => {
  const length = path.getTotalLength();
  let total = 0, own = 0, others = 0;
  const covered = new Set();
  for (let d = 4; d < length - 12; d += 2) {
    const pt = path.getPointAtLength(d);
    let [x, y] = screen(path, pt);
    const box = graph.getBoundingClientRect();
    if (x < box.left + 20 || x > box.right - 20) graph.scrollLeft += x - (box.left + box.width / 2);
    if (y < 20 || y > innerHeight - 20) window.scrollBy(0, y - innerHeight / 2);
    [x, y] = screen(path, pt);
    const top = document.elementFromPoint(x, y);
    total += 1;
    const node = top && top.closest('g.node');
    if (node) covered.add(node.dataset.key);
    else if (top === path) own += 1;
    else if (top && top.matches('path.edge')) others += 1;
  }
  return {edge: path.dataset.from + ' -> ' + path.dataset.to, total, own, others, covered: Array.from(covered)};
});
"""


def edge_visibility(browser: Any, page: Path) -> list[dict[str, Any]]:
    """Per edge: sampled points, at how many it is on top itself, at how many another edge is,
    and the node boxes drawn over any of its points."""
    browser.get(page.as_uri())
    return list(browser.execute_script(SAMPLE_EDGES))


@pytest.mark.browser
@pytest.mark.parametrize("scenario", ["skipping", "two_rounds"])
def test_every_edge_is_visible_in_a_real_browser(scenario: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """No edge runs behind a box: at no sampled point of any edge is a node drawn on top (the
    step 0 → step 2 edge of a chain used to run straight behind step 1's box). Nor does an edge
    run along another one: at most a tenth of its points have another edge drawn over them
    (crossings take a few), and the edge itself is the topmost element at a third of them at
    least (dashed edges show the background between their dashes)."""
    record: RunRecord = request.getfixturevalue(scenario)
    page = tmp_path / "trace.html"
    page.write_text(render_html(record), encoding="utf-8")
    with chromium() as browser:
        edges = edge_visibility(browser, page)
    expected = {f"{s} -> {t}" for s, t, _ in graph(render_html(record)).edges}
    assert {e["edge"] for e in edges} == expected
    for e in edges:
        assert e["total"] >= 10, e  # long enough to see
        assert e["covered"] == [], f"{e['edge']} runs behind {e['covered']}"
        assert e["others"] <= 0.1 * e["total"], f"{e['edge']} runs along other edges: {e}"
        assert e["own"] >= e["total"] / 3, f"{e['edge']} is not drawn where it runs: {e}"
