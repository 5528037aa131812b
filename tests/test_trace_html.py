"""The static HTML trace viewer (``podium trace export --html``): its graph, its escaping, and the
page in a real headless browser (Chromium driven by Selenium; skipped when none is installed).

The traces are made by the real orchestrator with the scripted fakes (podium.testing), stored
in a real SQLite file and read back, as the CLI does.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from podium.cli import cli
from podium.errors import ServerError
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.records import RunRecord
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.html import render_html
from podium.trace.store import TraceStore

INJECTED = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
PLAN = (
    "Reasoning: two drafts in parallel, then a merge.\n"
    'model_id = [0, 1, 2]\nsubtasks = ["Draft A.", "Draft B.", "Merge the drafts."]\naccess_list = [[], [], [0, 1]]'
)
REVIEW = 'model_id = [2]\nsubtasks = ["Check the merged answer </pre><script>window.__pwned = 3</script>."]\naccess_list = ["all"]'  # noqa: E501


def stored(store: TraceStore, orch: Orchestrator, question: str) -> RunRecord:
    record = store.get(asyncio.run(orch.run(question)).id)
    assert record is not None
    return record


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TraceStore]:
    s = TraceStore(tmp_path / "t.sqlite3")
    yield s
    s.close()


@pytest.fixture
def two_rounds(store: TraceStore) -> RunRecord:
    """Round 0: steps 0 and 1 in parallel, step 2 merges them; round 1: one step that sees all
    of round 0. A worker output and the question carry script and markup."""
    orch = Orchestrator(
        [
            ScriptedWorker("qwen-1.5b", reply="draft A " + INJECTED),
            ScriptedWorker("qwen-0.5b", reply="draft B"),
            ScriptedWorker("smollm-135m", reply="merged: 42"),
        ],
        ScriptedConductor([PLAN], reviews=[REVIEW]),
        Fallback(0, "Answer."),
        traces=store,
    )
    return stored(store, orch, "What is 6 x 7? " + INJECTED)


@pytest.fixture
def fell_back(store: TraceStore) -> RunRecord:
    broken = ScriptedWorker("broken", error=ServerError("boom", worker="broken", status=503))
    orch = Orchestrator(
        [ScriptedWorker("qwen-1.5b", reply="fallback says 42"), broken],
        ScriptedConductor(['model_id = [1]\nsubtasks = ["Solve."]\naccess_list = [[]]']),
        Fallback(0, "Answer."),
        traces=store,
    )
    return stored(store, orch, "Will it fall back?")


class _Graph(HTMLParser):
    """Nodes (key → (css classes, rect x)) and edges (from, to, css) of the page's SVG."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes: dict[str, tuple[str, float]] = {}
        self.edges: set[tuple[str, str, str]] = set()
        self.top: dict[str, float] = {}  # key → rect y
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "g" and "node" in a.get("class", "").split():
            self._open = a["data-key"]
            self.nodes[a["data-key"]] = (a["class"], 0.0)
        elif tag == "rect" and self._open is not None:
            self.nodes[self._open] = (self.nodes[self._open][0], float(a["x"]))
            self.top[self._open] = float(a["y"])
            self._open = None
        elif tag == "path" and "edge" in a.get("class", "").split():
            self.edges.add((a["data-from"], a["data-to"], a["class"]))


def graph(page: str) -> _Graph:
    parser = _Graph()
    parser.feed(page)
    return parser


def test_the_graph_has_a_node_per_step_and_an_edge_per_visible_step(two_rounds: RunRecord) -> None:
    g = graph(render_html(two_rounds))
    assert set(g.nodes) == {"r0-s0", "r0-s1", "r0-s2", "r1-s0", "answer"}
    assert g.edges == {
        ("r0-s0", "r0-s2", "edge"),
        ("r0-s1", "r0-s2", "edge"),  # access [0, 1]
        ("r0-s0", "r1-s0", "edge previous"),  # round 1's "all" sees every step of round 0
        ("r0-s1", "r1-s0", "edge previous"),
        ("r0-s2", "r1-s0", "edge previous"),
        ("r1-s0", "answer", "edge answer"),
    }
    x = {key: left for key, (_, left) in g.nodes.items()}
    assert x["r0-s0"] == x["r0-s1"] < x["r0-s2"] < x["r1-s0"] < x["answer"]  # parallel steps share a column
    assert "parallel: 2 steps" in render_html(two_rounds)


def test_a_column_is_ordered_so_that_its_edges_do_not_cross(store: TraceStore) -> None:
    """Steps 0 and 1 in one column; step 2 sees step 1, step 3 sees step 0. Drawn in step order
    (0 over 1, 2 over 3) the two edges must cross; the layered layout orders the second column
    (or the first) by where its edges come from, so they do not: the edges' sources are in the
    same top-to-bottom order as their targets."""
    orch = Orchestrator(
        [ScriptedWorker("a", reply="x"), ScriptedWorker("b", reply="y")],
        ScriptedConductor(
            ['model_id = [0, 1, 0, 1]\nsubtasks = ["A", "B", "C", "D"]\naccess_list = [[], [], [1], [0]]']
        ),
        Fallback(0, "Answer."),
        traces=store,
    )
    g = graph(render_html(stored(store, orch, "Cross?")))
    x, y = {k: left for k, (_, left) in g.nodes.items()}, g.top
    assert x["r0-s0"] == x["r0-s1"] < x["r0-s2"] == x["r0-s3"]
    assert (y["r0-s1"] < y["r0-s0"]) == (y["r0-s2"] < y["r0-s3"])


def test_a_failed_step_and_the_fallback_are_drawn(fell_back: RunRecord) -> None:
    g = graph(render_html(fell_back))
    assert fell_back.status == "fallback"
    assert g.nodes["r0-s0"][0] == "node error" and g.nodes["fb-s0"][0] == "node fallback"
    assert ("fb-s0", "answer", "edge answer") in g.edges
    assert "fallback pipeline (worker_error)" in render_html(fell_back)


def test_untrusted_text_is_escaped_and_nothing_is_fetched(two_rounds: RunRecord) -> None:
    page = render_html(two_rounds)
    assert re.search(r"<script|<img|onerror=\"", page, re.IGNORECASE) is None
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page  # shown as text
    assert "&lt;/pre&gt;&lt;script&gt;window.__pwned = 3" in page  # a subtask cannot close its <pre>
    assert re.search(r"(src|href)=\"(https?:)?//", page) is None
    assert "default-src 'none'" in page  # and the policy allows no script or fetch anyway
    assert "Draft A." in page and "merged: 42" in page and "draft B" in page  # messages and outputs


def test_cli_export(two_rounds: RunRecord, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trace.html"
    db = ["--traces", str(tmp_path / "t.sqlite3")]
    assert cli(["trace", "export", two_rounds.id[:8], "--html", str(out), *db]) == 0
    assert out.read_text(encoding="utf-8") == render_html(two_rounds)
    assert cli(["trace", "export", two_rounds.id[:8], "--html", str(tmp_path / "no" / "such" / "x.html"), *db]) == 2
    _, err = capsys.readouterr()
    assert "cannot write" in err and "Traceback" not in err


def _browser() -> tuple[str, str]:
    """Chromium and its matching chromedriver, or skip saying what to install."""
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (pip install -e '.[browser]')"
    )
    del webdriver
    binary = next((p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))), None)
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip("no headless browser: apt-get install -y chromium chromium-driver")
    return binary, driver


@pytest.mark.browser
def test_the_page_in_a_real_browser(two_rounds: RunRecord, tmp_path: Path) -> None:
    binary, driver_path = _browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    page = tmp_path / "trace.html"
    page.write_text(render_html(two_rounds), encoding="utf-8")
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
        browser.get(page.as_uri())
        assert browser.execute_script("return typeof window.__pwned") == "undefined"  # no injected code ran
        assert browser.execute_script("return document.scripts.length + document.images.length") == 0
        question = browser.find_element(By.CSS_SELECTOR, "pre.question").text
        assert "<script>window.__pwned = 1</script>" in question  # the markup is shown as text
        nodes = browser.find_elements(By.CSS_SELECTOR, "svg g.node")
        assert sorted(n.get_attribute("data-key") for n in nodes) == ["answer", "r0-s0", "r0-s1", "r0-s2", "r1-s0"]
        assert all(n.rect["width"] > 100 and n.rect["height"] > 40 for n in nodes)  # laid out and visible
        lengths = browser.execute_script(
            "return Array.from(document.querySelectorAll('svg path.edge')).map(p => p.getTotalLength())"
        )
        assert len(lengths) == 6 and min(lengths) > 20  # every edge is drawn with real length
        browser.find_element(By.CSS_SELECTOR, "#node-r0-s2").click()  # nodes link to their step's details
        assert browser.execute_script("return location.hash") == "#step-r0-s2"
        assert "merged: 42" in browser.find_element(By.CSS_SELECTOR, "#step-r0-s2 pre.output").text
    finally:
        browser.quit()


def test_a_review_round_without_a_valid_plan_is_drawn(store: TraceStore) -> None:
    """The walk-through: a --rounds 1 request whose review attempts were all refused showed only
    round 0, as if no review had run. The round gets a band saying no plan was valid, and why."""
    orch = Orchestrator(
        [ScriptedWorker("a", reply="x")],
        ScriptedConductor(['model_id = [0]\nsubtasks = ["A"]\naccess_list = [[]]'], reviews=["not a plan at all"]),
        Fallback(0, "Answer."),
        traces=store,
        config=OrchestratorConfig(resamples=1),
    )
    record = stored(store, orch, "Review?")
    assert len(record.workflows) == 1 and any(a.round == 1 and a.workflow is None for a in record.attempts)
    page = render_html(record)
    g = graph(page)
    assert "r1-failed" in g.nodes and "no valid plan" in page and "round 1" in page
    assert "error" in g.nodes["r1-failed"][0]
