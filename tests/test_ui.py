"""The trace browser in ``podium serve`` (/ui), against a server seeded with real records (the
orchestrator with scripted fake workers) through Starlette's in-process client: list, filter,
search, open a request with every access edge, purge with confirmation; loopback-only access and
key sign-in; the report pages (eval runs, two runs with the gate's flips, shadow report,
conductor registry) on stored reports made by the real code paths. The real-browser walk is in
tests/test_ui_browser.py."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi", reason="needs podium[serve]")
from fastapi import FastAPI
from fastapi.testclient import TestClient

from podium.serve.app import Server, create_app
from podium.serve.keys import KeyStore
from podium.serve.ui import ReportSources, ui_router
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
    assert '<option value="cancelled"' in page.text  # every status the store filters by, as trace list
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
    gone = client.get("/ui/requests/" + "0" * 32)
    assert gone.status_code == 404 and 'id="nav-requests"' in gone.text and "(purged, or never stored)" in gone.text
    nowhere = client.get("/ui/nope")  # a page with the navigation, not a bare line (a first user's report)
    assert nowhere.status_code == 404 and 'id="nav-requests"' in nowhere.text and "no page /ui/nope" in nowhere.text

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


def test_paging_goes_to_older_requests_and_skips_none_that_started_together(tmp_path: Path) -> None:
    """60 requests, 20 of them started in the same millisecond across the page boundary: the
    "older" page (its cursor is start time and id) lists the 10 the first page did not, none
    twice and none skipped (a cursor of start time alone skipped the 10 tied ones left)."""
    traces = TraceStore(tmp_path / "t.sqlite3")
    base = make_record("paging")
    for i in range(60):
        at = "2026-11-01T10:00:05.000Z" if i < 20 else f"2026-11-01T10:00:{i:02d}.000Z"  # 41st-60th tie
        store_copy(traces, base, id=f"{i:032x}", started_at=at)
    client = TestClient(create_app(Server(pool=str(POOLS / "three-fakes.toml"), traces=traces)))
    first = client.get("/ui")
    assert first.text.count('class="request"') == 50 and 'id="older"' in first.text
    cursor = re.search(r'name="before" value="([^"]+)"', first.text)
    assert cursor is not None and '<form method="get" action="/ui">' in first.text  # a link one can share
    older = client.post("/ui", data={"before": html.unescape(cursor.group(1))})
    assert older.text.count('class="request"') == 10 and 'id="older"' not in older.text
    shown = re.findall(r'data-id="([0-9a-f]{32})"', first.text + older.text)
    assert sorted(shown) == sorted(f"{i:032x}" for i in range(60))
    assert client.post("/ui", data={"before": "2026-11-01T10:00:10.000Z"}).status_code == 400  # not a cursor
    linked = client.get("/ui", params={"before": html.unescape(cursor.group(1))})  # a shared "older" URL
    assert re.findall(r'data-id="([0-9a-f]{32})"', linked.text) == re.findall(r'data-id="([0-9a-f]{32})"', older.text)
    for private in ({"q": "paging"}, {"subject": "customer-7"}):  # never read from a URL, and says so
        refused = client.get("/ui", params=private)
        assert refused.status_code == 400 and "never in URLs" in refused.text, refused.text


def test_only_loopback_clients_and_with_keys_only_admin_ones(server: Server) -> None:
    """No key: loopback clients only. With keys: an admin key, from any address; an API key opens
    nothing of the UI (it shows every team's traces and can purge them)."""
    remote = TestClient(create_app(server), client=("203.0.113.9", 5000))
    assert remote.get("/ui").status_code == 403 and "--scope admin" in remote.get("/ui").text
    assert server.keys is not None
    api = server.keys.create("team-a")
    admin = server.keys.create("ops", scope="admin")
    client = TestClient(create_app(server))
    assert client.get("/ui", follow_redirects=False).status_code == 303  # to the sign-in page
    assert client.post("/ui/login", data={"key": "pk-podium-wrong"}).status_code == 401
    refused = client.post("/ui/login", data={"key": api})
    assert refused.status_code == 401 and "is an API key" in refused.text and "--scope admin" in refused.text
    assert client.get("/ui", headers={"Authorization": f"Bearer {api}"}, follow_redirects=False).status_code == 303
    signed = client.post("/ui/login", data={"key": admin}, follow_redirects=False)
    assert signed.status_code == 303 and "httponly" in signed.headers["set-cookie"].lower()
    assert client.get("/ui").text.count('class="request"') == 4  # the cookie now opens it
    assert remote.get("/ui", headers={"Authorization": f"Bearer {admin}"}).status_code == 200  # from anywhere
    assert remote.get("/ui", headers={"Authorization": f"Bearer {api}"}).status_code == 403
    server.keys.revoke("ops")
    assert client.get("/ui", follow_redirects=False).status_code == 303  # a revoked key's cookie opens nothing


# ---------------------------------------------------------------------------- report pages
#
# Eval runs are made by `podium eval --replay` on a small outcome matrix written here (with the
# matrix's optional latency column, so the reports carry p95 latencies); the shadow store is
# filled through ShadowStore.add as the shadow proxy fills it; the registry through Registry's
# create / promote / rollback with a train.json and learning curve as `podium train` writes them
# (no training run: that needs the embedding model). Every expected number below is worked out
# from the rows written here.

MODELS = ("big", "mid", "tiny")
COST = {"big": 0.01, "mid": 0.002, "tiny": 0.0005}
OLD = {"q1": (1, 1, 0), "q2": (1, 0, 0), "q3": (0, 0, 1), "q4": (1, 1, 1), "t1": (1, 0, 0), "t2": (0, 1, 0)}
NEW = dict(OLD, q1=(1, 0, 0), q2=(0, 0, 0), q3=(1, 0, 1))  # big: q2 lost, q3 won; mid: q1 lost


def _latency(i: int, model: str) -> float:
    """Row i's recorded seconds: big 1, 2, 3, 4 on the test rows q1..q4; mid and tiny faster."""
    return {"big": 1.0 + i, "mid": 0.5 + i / 10, "tiny": 0.1 * (i + 1)}[model]


def _matrix(path: Path, scores: dict[str, tuple[int, ...]]) -> Path:
    import csv

    with path.open("w", encoding="utf-8", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(
            ["sample_id", "eval_name", "split", "prompt", *MODELS, *(f"{m}|model_response" for m in MODELS),
             *(f"{m}|total_cost" for m in MODELS), *(f"{m}|latency_s" for m in MODELS)]
        )  # fmt: skip
        for i, (sid, row) in enumerate(scores.items()):
            out.writerow(
                [sid, "gsm8k" if sid in ("q1", "q2") else "quiz", "test" if sid[0] == "q" else "train", f"{sid}?",
                 *row, *(f"{m} on {sid}" for m in MODELS), *(COST[m] for m in MODELS),
                 *(_latency(i, m) for m in MODELS)]
            )  # fmt: skip
    return path


SHADOW_ROWS = [  # use case "support": exact answers with a reference; one dropped "billing" request
    {"upstream_answer": "Paris", "podium_answer": "Paris", "upstream_cost_usd": 0.002, "podium_cost_usd": 0.001,
     "upstream_latency_s": 1.0, "podium_latency_s": 0.5, "request_id": "a" * 32},
    {"upstream_answer": "Paris", "podium_answer": "Rome", "upstream_cost_usd": 0.004, "podium_cost_usd": 0.001,
     "upstream_latency_s": 2.0, "podium_latency_s": 1.5, "request_id": "b" * 32},
    {"upstream_answer": "Lyon", "podium_answer": "Lyon", "upstream_cost_usd": 0.006, "podium_cost_usd": 0.004,
     "upstream_latency_s": 3.0, "podium_latency_s": 2.5, "request_id": "c" * 32},
]  # fmt: skip


def seed_reports(root: Path, shadow: str | Path | None = None) -> ReportSources:
    """Two eval runs (``old``, then ``new``), a shadow store (``shadow``: a database URL, default a
    file under ``root``) and a registry under ``root``."""
    from podium.cli import cli
    from podium.eval.plot import learning_curve_plot
    from podium.registry import Registry
    from podium.store.shadow import ShadowStore

    evals = root / "evals"
    root.mkdir(parents=True, exist_ok=True)
    for name, scores in (("old", OLD), ("new", NEW)):
        matrix = _matrix(root / f"{name}.csv", scores)
        assert cli(["eval", "--replay", str(matrix), "--methods", "single,oracle", "--out", str(evals / name)]) == 0
    shadow = shadow or root / "shadow.sqlite3"
    store = ShadowStore(shadow)
    for i, row in enumerate(SHADOW_ROWS):
        store.add({"at": f"2026-12-01T10:00:0{i}.000Z", "status": "done", "mode": "execute", "use_case": "support",
                   "task_type": "exact", "reference": "Paris", "question": "Capital of France?",
                   "podium_workers": '["drafter"]', **row})  # fmt: skip
    store.add({"at": "2026-12-02T09:00:00.000Z", "status": "dropped", "mode": "execute", "use_case": "billing"})
    registry = Registry(root / "conductors")
    history = [{"generation": g, "best_reward": 0.5 + g / 10, "mean_reward": 0.4 + g / 10} for g in range(3)]
    for lam in (10.0, 0.0):
        version = registry.create("light")
        record = {"policy": "light", "config": {"lam": lam}, "data": {"matrix": "m.csv"}, "history": history}
        (version.path / "train.json").write_text(json.dumps(record), encoding="utf-8")
        learning_curve_plot(
            version.path / "learning-curve.png", [h["generation"] for h in history],
            {"best": [h["best_reward"] for h in history]}, xlabel="CMA-ES generation",
        )  # fmt: skip
        registry.promote(version, evidence={"against": "single:big", "reason": f"promoted v{version.number}"})
    registry.rollback("light")
    return ReportSources(evals, shadow, root / "conductors")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The report pages over real stored reports; built once per module (the pages only read)."""
    folder = tmp_path_factory.mktemp("reports")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PODIUM_CACHE_DIR", str(folder / "cache"))  # nothing of the user's caches is read
        sources = seed_reports(folder / "reports")
        app = FastAPI()
        app.include_router(ui_router(SimpleNamespace(traces=None, keys=None), sources))  # type: ignore[arg-type]
        yield TestClient(app)


def _cell(html: str, row: str, cls: str) -> str:
    """The text of the cell with class ``cls`` in the row whose data attribute is ``row``."""
    match = re.search(rf'{re.escape(row)}">.*?<td class="num {cls}">([^<]*)</td>', html, re.S)
    assert match, (row, cls)
    return match.group(1).strip()


def test_eval_run_page_shows_the_stored_tables_slices_and_plot(reports: TestClient) -> None:
    listed = reports.get("/ui/evals")
    assert listed.status_code == 200 and listed.text.count('class="run"') == 2
    assert listed.text.index('data-id="new"') < listed.text.index('data-id="old"')  # newest first
    page = reports.get("/ui/evals/run?id=old")
    assert page.status_code == 200
    # single:big on the test rows q1..q4: right on q1, q2, q4 (3/4), $0.01 each, latencies 1, 2, 3, 4 s:
    # p95 by linear interpolation = 3 + 0.85 · (4 − 3) = 3.85 (the replay adds the planning's microseconds)
    big = 'data-method="single:big'
    assert _cell(page.text, big, "quality") == "0.750"
    assert _cell(page.text, big, "cost") == "0.010000"
    assert _cell(page.text, big, "p95") == "3.85"
    assert _cell(page.text, 'data-method="single:mid', "quality") == "0.500"  # q1, q4
    assert _cell(page.text, 'data-method="oracle', "quality") == "1.000"  # someone is right on each
    # slice gsm8k = q1, q2: big right on both
    assert re.search(r'data-tag="gsm8k"><td>gsm8k</td><td class="num">2</td>\s*<td class="num">1.000', page.text)
    assert 'id="pareto" src="/ui/evals/pareto.png?id=old"' in page.text
    png = reports.get("/ui/evals/pareto.png?id=old")
    assert png.headers["content-type"] == "image/png" and png.content[:4] == b"\x89PNG"


def test_two_runs_side_by_side_with_the_gates_flips(reports: TestClient) -> None:
    page = reports.get("/ui/evals/compare?new=new&baseline=old")
    assert page.status_code == 200
    # mid: q1, q4 right before (0.500), only q4 now (0.250): a drop beyond the 0.02 margin
    mid = 'class="pair" data-method="single:mid'
    assert (_cell(page.text, mid, "old-quality"), _cell(page.text, mid, "new-quality")) == ("0.500", "0.250")
    verdict = re.search(r'data-method="single:mid" data-metric="quality">.*?<td class="(ok|bad)">', page.text, re.S)
    assert verdict and verdict.group(1) == "bad"
    # oracle 1.0 → 0.75 (q2 now wrong for everyone) is the other regression; big keeps 0.75
    assert "2 regression(s) over 4 method(s)" in page.text
    flips = re.findall(r'class="flip" data-method="([^"]+)">.*?class="failing">([^<]*)</td>\s*'
                       r'<td class="passing">([^<]*)</td>', page.text, re.S)  # fmt: skip
    assert ("single:big", "1: q2", "1: q3") in flips and ("single:mid", "1: q1", "0") in flips
    assert ("single:tiny", "0", "0") in flips
    relaxed = reports.get("/ui/evals/compare?new=new&baseline=old&max_quality_drop=0.3")
    assert "0 regression(s)" in relaxed.text  # both drops are 0.25


def test_bad_run_ids_and_margins_are_clear_pages(reports: TestClient) -> None:
    missing = reports.get("/ui/evals/run?id=../../etc")
    assert missing.status_code == 404 and "no eval run &#39;../../etc&#39;" in missing.text
    assert reports.get("/ui/evals/run").status_code == 400
    assert reports.get("/ui/evals/pareto.png?id=nope").status_code == 404
    bad = reports.get("/ui/evals/compare?new=new&baseline=old&max_cost_rise=lots")
    assert bad.status_code == 400 and "max cost rise &#39;lots&#39; is not a number" in bad.text
    assert reports.get("/ui/evals/compare?new=new").status_code == 400
    assert reports.get("/ui/shadow?since=yesterday").status_code == 400
    assert reports.get("/ui/conductors/version?ref=light@v9").status_code == 404
    assert reports.get("/ui/conductors/version?ref=../x").status_code == 400


def test_shadow_page_renders_the_report_per_use_case(reports: TestClient) -> None:
    page = reports.get("/ui/shadow")
    assert page.status_code == 200 and page.text.count('class="use-case"') == 2
    support = 'data-case="support'
    # exact answers: rows 1 and 3 agree (2/3); the reference Paris: upstream right twice, podium once
    assert _cell(page.text, support, "agreement") == f"{2 / 3:.3f}"
    assert _cell(page.text, support, "quality-upstream") == f"{2 / 3:.3f}"
    assert _cell(page.text, support, "quality-podium") == f"{1 / 3:.3f}"
    assert _cell(page.text, support, "cost-upstream") == f"{(0.002 + 0.004 + 0.006) / 3:.6f}"
    assert _cell(page.text, support, "cost-podium") == f"{(0.001 + 0.001 + 0.004) / 3:.6f}"
    # p50 / p95 of 1, 2, 3 s: 2 and 2 + 0.9 · 1 = 2.9; podium 0.5, 1.5, 2.5: 1.5 and 2.4
    assert _cell(page.text, support, "latency-upstream") == "2.00 / 2.90"
    assert _cell(page.text, support, "latency-podium") == "1.50 / 2.40"
    assert "dropped 1" in page.text and "/ui/requests/" + "b" * 32 in page.text  # the disagreement links its trace
    day = reports.get("/ui/shadow?since=2026-12-02")
    assert day.text.count('class="use-case"') == 1 and 'data-case="billing"' in day.text
    markdown = reports.get("/ui/shadow.md")
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert "| support | 3 | done 3 | 0.667 |" in markdown.text  # report_markdown's table


@pytest.mark.slow
def test_shadow_page_reads_the_shared_store(tmp_path: Path, store_url_postgresql: str) -> None:
    """With the shadow records in PostgreSQL (``PODIUM_DATABASE_URL``) the page shows the same
    report as from the file."""
    sources = seed_reports(tmp_path / "reports", shadow=store_url_postgresql)
    app = FastAPI()
    app.include_router(ui_router(SimpleNamespace(traces=None, keys=None), sources))  # type: ignore[arg-type]
    page = TestClient(app).get("/ui/shadow")
    assert page.status_code == 200 and page.text.count('class="use-case"') == 2
    assert _cell(page.text, 'data-case="support', "agreement") == f"{2 / 3:.3f}"


def test_conductor_registry_page(reports: TestClient) -> None:
    page = reports.get("/ui/conductors")
    assert page.status_code == 200 and page.text.count('class="version"') == 2
    assert "serving v1" in page.text  # v2 was promoted after v1, then rolled back
    assert page.text.count('class="event event-promote"') == 2 and "(from v2)" in page.text
    version = reports.get("/ui/conductors/version?ref=light@v2")
    assert version.status_code == 200 and 'id="curve"' in version.text
    assert version.text.count("<tr><td class") == 3  # the three generations of the history
    curve = reports.get("/ui/conductors/curve.png?ref=light@v2")
    assert curve.content[:4] == b"\x89PNG"


def test_empty_sources_say_what_to_do(tmp_path: Path) -> None:
    app = FastAPI()
    sources = ReportSources(tmp_path / "no-evals", tmp_path / "no-shadow.sqlite3", tmp_path / "no-conductors")
    app.include_router(ui_router(SimpleNamespace(traces=None, keys=None), sources))  # type: ignore[arg-type]
    client = TestClient(app)
    for url in ("/ui/evals", "/ui/shadow", "/ui/conductors"):
        page = client.get(url)
        assert page.status_code == 200 and 'id="empty"' in page.text, url
    assert not (tmp_path / "no-shadow.sqlite3").exists()  # the UI reads; it never creates the store


@pytest.mark.slow
def test_podium_ui_serves_the_report_folders_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from podium.cli import cli

    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))
    sources = seed_reports(tmp_path / "reports")
    served: list[FastAPI] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: served.append(app))
    options = ["--eval-dir", str(sources.eval_dir), "--shadow-store", str(sources.shadow_store),
               "--conductors", str(sources.conductors)]  # fmt: skip
    assert cli(["ui", "--traces", str(tmp_path / "t.sqlite3"), "--keys", str(tmp_path / "k.sqlite3"), *options]) == 0
    client = TestClient(served[0])
    assert client.get("/ui/evals").text.count('class="run"') == 2
    assert client.get("/ui/shadow").text.count('class="use-case"') == 2
    assert client.get("/ui/conductors").text.count('class="version"') == 2


@pytest.mark.slow
def test_podium_serve_takes_the_eval_folder_from_its_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``podium serve --eval-dir DIR``: the server's /ui eval pages list the runs in DIR, not
    those of $PODIUM_EVAL_DIR (set here to an empty folder, so the flag must win)."""
    import uvicorn

    from podium.cli import cli
    from podium.serve.ui_reports import EVAL_DIR_ENV

    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(EVAL_DIR_ENV, str(tmp_path / "elsewhere"))  # restored after the test
    sources = seed_reports(tmp_path / "reports")
    served: list[FastAPI] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: served.append(app))
    argv = ["serve", "--pool", str(POOLS / "three-fakes.toml"), "--traces", str(tmp_path / "t.sqlite3"),
            "--keys", str(tmp_path / "k.sqlite3"), "--eval-dir", str(sources.eval_dir)]  # fmt: skip
    assert cli(argv) == 0
    page = TestClient(served[0]).get("/ui/evals")
    assert page.status_code == 200 and page.text.count('class="run"') == 2


def test_the_ui_purge_also_purges_the_shadow_store_and_refuses_what_is_not_there(tmp_path: Path) -> None:
    """Purging a shadow-mode request from its page removes the shadow store's copy (question and
    both answers) as `podium trace purge` does — the walk-through found the row and its text left
    behind; an id that is not stored is a 404, not a 'Purged 0' page."""
    from podium.store.shadow import ShadowStore

    traces = seeded(TraceStore(tmp_path / "t.sqlite3"))
    shadow_path = tmp_path / "shadow.sqlite3"
    shadow = ShadowStore(shadow_path)
    for request_id in ("b" * 32, "c" * 32):
        shadow.add({"at": "2026-12-01T10:00:00.000Z", "status": "done", "mode": "execute", "use_case": "support",
                    "request_id": request_id, "question": f"question of {request_id[0]}"})  # fmt: skip
    shadow.close()
    app = FastAPI()
    sources = ReportSources(tmp_path / "evals", shadow_path, tmp_path / "conductors")
    app.include_router(ui_router(SimpleNamespace(traces=traces, keys=None), sources))  # type: ignore[arg-type]
    client = TestClient(app)
    done = client.post(f"/ui/requests/{'b' * 32}/purge", data={"confirm": "b" * 32})
    assert 'id="purged"' in done.text and "Also removed 1 shadow record(s)" in done.text
    left = ShadowStore(shadow_path)
    assert [r["request_id"] for r in left.rows()] == ["c" * 32]
    left.close()
    assert client.post(f"/ui/requests/{'d' * 31}e/purge", data={"confirm": "d" * 31 + "e"}).status_code == 404


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"until": "9999-12-31"}, "outside the dates"),
        ({"since": "0001-01-01T00:00+01:00"}, "outside the dates"),
        ({"min_cost": "nan"}, "is not a number"),
        ({"max_latency": "1e309"}, "is not a number"),
        ({"before": "xyz|abc"}, "page cursor"),
    ],
)
def test_extreme_or_meaningless_filters_are_a_400_page(server: Server, form: dict[str, str], says: str) -> None:
    """The walk-through's 500s (a date whose next midnight overflows, an offset past year 1) and
    silently accepted values (NaN and infinite bounds, a garbage cursor) are 400 pages that name
    the value; an oversized form is 413, never read as an empty one."""
    client = TestClient(create_app(server))
    page = client.post("/ui", data=form)
    assert page.status_code == 400 and says in html.unescape(page.text), page.text[:300]
    assert client.post("/ui", content=b"q=" + b"a" * 70_000,
                       headers={"content-type": "application/x-www-form-urlencoded"}).status_code == 413  # fmt: skip


def test_every_page_forbids_scripts_unknown_paths_are_html_404s_and_sign_out_forgets_the_key(server: Server) -> None:
    """The walk-through: only the request page carried a CSP; /ui/nope was FastAPI's JSON 404;
    there was no way to sign out."""
    client = TestClient(create_app(server))
    for path in ("/ui", "/ui/evals", "/ui/shadow", "/ui/conductors"):
        csp = client.get(path).headers.get("content-security-policy", "")
        assert "default-src 'none'" in csp and "script-src" not in csp, path
    for path in ("/ui/nope", "/ui/requests/", "/ui/evals/nope/deeper", "/ui/requests/" + "0" * 32):
        missing = client.get(path)
        assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html"), path
        assert "default-src 'none'" in missing.headers.get("content-security-policy", ""), path
    page = client.get(
        "/ui/requests/" + "b" * 32
    )  # the request page: its meta CSP, and the header that can forbid framing
    assert (
        page.headers["x-frame-options"] == "DENY"
        and "frame-ancestors 'none'" in page.headers["content-security-policy"]
    )
    assert "content-security-policy" not in client.get("/healthz").headers  # the API is not touched
    client.cookies.set("podium_ui_key", "some-key", path="/ui")
    out = client.get("/ui/logout", follow_redirects=False)
    assert out.status_code == 303 and 'podium_ui_key=""' in out.headers["set-cookie"]


def test_a_search_says_when_it_shows_only_the_best_matches_and_a_short_id_opens_its_request(tmp_path: Path) -> None:
    """The walk-through: a search with 429 matches showed 50 and said nothing; /ui/requests/
    with an id prefix (what every CLI command accepts) was a 404."""
    traces = TraceStore(tmp_path / "t.sqlite3")
    base = make_record("lava")
    for i in range(55):
        store_copy(traces, base, id=f"{i + 1:02x}" + "e" * 30, started_at=f"2026-11-01T10:00:{i:02d}.000Z")
    client = TestClient(create_app(Server(pool=str(POOLS / "three-fakes.toml"), traces=traces)))
    many = client.post("/ui", data={"q": "lava"})
    assert many.text.count('class="request"') == 50 and 'id="capped"' in many.text
    few = client.post("/ui", data={"q": "lava", "since": "2026-11-01T10:00:50Z"})
    assert few.text.count('class="request"') == 5 and 'id="capped"' not in few.text
    full = f"{55:02x}" + "e" * 30
    short = client.get("/ui/requests/" + full[:2], follow_redirects=False)  # "37": too short to take
    assert short.status_code == 404
    prefix = client.get("/ui/requests/" + full[:8], follow_redirects=False)  # unique: only request 55
    assert prefix.status_code == 303 and prefix.headers["location"] == "/ui/requests/" + full


def test_a_purge_whose_shadow_store_cannot_be_read_says_the_traces_went(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The re-check: a shadow store that is not a database gave a plain 500 after the trace was
    already purged; the page now says what was purged and what is left, and the CLI the same."""
    from podium.cli import cli

    traces = seeded(TraceStore(tmp_path / "t.sqlite3"))
    broken = tmp_path / "shadow.sqlite3"
    broken.write_text("this is not sqlite")
    app = FastAPI()
    sources = ReportSources(tmp_path / "evals", broken, tmp_path / "conductors")
    app.include_router(ui_router(SimpleNamespace(traces=traces, keys=None), sources))  # type: ignore[arg-type]
    done = TestClient(app).post(f"/ui/requests/{'b' * 32}/purge", data={"confirm": "b" * 32})
    assert done.status_code == 500 and 'id="shadow-error"' in done.text and "b" * 32 in done.text
    assert traces.get("b" * 32) is None
    traces.flush()
    argv = ["trace", "purge", "--request", "c" * 32, "--yes", "--traces", str(tmp_path / "t.sqlite3"),
            "--shadow-store", str(broken)]  # fmt: skip
    assert cli(argv) == 2
    err = capsys.readouterr().err
    assert "purged 1 request(s) from the traces, but not their shadow copies" in err and "Traceback" not in err
