"""Shadow mode over real HTTP on 127.0.0.1: a fixed-reply upstream (a fake, podium.serve.
fake_upstream), the shadow proxy under uvicorn, and podium's shadow runs on fake workers
(podium.testing.ScriptedWorker). The real-upstream test (llama_cpp.server) is in
test_serve_e2e.py."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from podium.builder import build_orchestrator
from podium.pool import load_pool
from podium.serve.fake_upstream import REPLY, create_upstream
from podium.serve.shadow import ShadowProxy, create_shadow_app, report_markdown, shadow_report
from podium.store.shadow import ShadowStore
from podium.testing import ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.base import Message, Price
from tests.conftest import ThreadedUvicorn

POOL = str(Path(__file__).parent / "pools" / "three-fakes.toml")
PLAN = 'model_id = [1]\nsubtasks = ["Solve it and end with the number."]\naccess_list = [[]]'
BODY = {"model": "fixed", "messages": [{"role": "user", "content": "What is 6 * 7?"}], "temperature": 0}


def reply(messages: Sequence[Message]) -> str:
    return PLAN if any("model_id" in m["content"] for m in messages) else "So the answer is 41"


Uvicorn = ThreadedUvicorn


@pytest.fixture
def upstream() -> Iterator[Uvicorn]:
    server = Uvicorn(create_upstream(latency_s=0.01))
    yield server
    server.stop()


def make_proxy(
    upstream: Uvicorn, tmp_path: Path, *, price: float = 1.0, delay_s: float = 0.0, **kw: Any
) -> ShadowProxy:
    workers = [
        ScriptedWorker(n, reply, price=Price(price, price), delay_s=delay_s) for n in ("smol-a", "smol-b", "smol-c")
    ]
    orchestrator = build_orchestrator(
        load_pool(POOL), traces=TraceStore(tmp_path / "traces.sqlite3"), workers=list(workers)
    )
    return ShadowProxy(upstream.url, orchestrator, ShadowStore(tmp_path / "shadow.sqlite3"), **kw)


def shadowed_once(proxy: ShadowProxy) -> dict[str, Any]:
    """Send one chat completion through a shadow proxy for ``proxy``; its shadow row."""
    shadow = Uvicorn(create_shadow_app(proxy))
    try:
        httpx.post(shadow.url + "/v1/chat/completions", json=BODY)
        (row,) = drain(proxy, 1)
    finally:
        shadow.stop()
    return row


def drain(proxy: ShadowProxy, expected: int, timeout_s: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while len(rows := proxy.store.rows()) < expected:
        assert time.monotonic() < deadline, f"only {len(rows)} of {expected} shadow rows"
        time.sleep(0.05)
    return rows


def test_the_client_gets_the_upstreams_bytes_and_the_shadow_run_is_recorded(upstream: Uvicorn, tmp_path: Path) -> None:
    proxy = make_proxy(upstream, tmp_path, mode="execute", upstream_price=(2.0, 4.0))
    shadow = Uvicorn(create_shadow_app(proxy))
    try:
        for stream in (False, True):
            body = {**BODY, "stream": stream}
            direct = httpx.post(upstream.url + "/v1/chat/completions", json=body)
            proxied = httpx.post(
                shadow.url + "/v1/chat/completions", json=body, headers={"X-Podium-Use-Case": "support"}
            )
            assert proxied.status_code == direct.status_code == 200
            assert proxied.content == direct.content  # byte for byte
            assert proxied.headers["content-type"] == direct.headers["content-type"]
        models = httpx.get(shadow.url + "/v1/models")  # anything under /v1 is forwarded
        assert models.json()["data"][0]["id"] == "fixed"
        rows = drain(proxy, 2)
    finally:
        shadow.stop()
    assert [r["status"] for r in rows] == ["done", "done"] and {r["use_case"] for r in rows} == {"support"}
    for row in rows:
        assert row["upstream_answer"].strip() == REPLY and row["podium_answer"] == "So the answer is 41"
        assert row["upstream_cost_usd"] == pytest.approx((5 * 2.0 + 5 * 4.0) / 1e6)  # 5 + 5 words × USD per 1M
        assert row["question"] == "What is 6 * 7?" and row["podium_workers"] == '["smol-b"]'
        record = proxy.orchestrator.traces.get(row["request_id"]) if proxy.orchestrator.traces else None
        assert record is not None and "shadow" in record.tags and "use-case:support" in record.tags
    assert upstream.uvicorn.config.app.state.requests == 4  # the shadow never calls the upstream itself


def test_plan_mode_records_the_workflow_without_executing_it(upstream: Uvicorn, tmp_path: Path) -> None:
    row = shadowed_once(make_proxy(upstream, tmp_path, mode="plan"))
    assert row["status"] == "done" and row["podium_steps"] == 1 and row["podium_workers"] == '["smol-b"]'
    assert row["podium_answer"] is None  # planned, not executed


@pytest.mark.slow
def test_the_shadow_budget_holds_per_request_and_per_day(upstream: Uvicorn, tmp_path: Path) -> None:
    daily = 0.02
    proxy = make_proxy(upstream, tmp_path, price=5.0, mode="execute", request_cap_usd=0.01, daily_budget_usd=daily)
    shadow = Uvicorn(create_shadow_app(proxy))
    try:
        for _ in range(12):
            assert httpx.post(shadow.url + "/v1/chat/completions", json=BODY).status_code == 200
        rows = drain(proxy, 12)
    finally:
        shadow.stop()
    spent = [r["podium_cost_usd"] for r in rows if r["podium_cost_usd"] is not None]
    assert all(cost <= 0.01 for cost in spent)  # the per-request cap
    assert sum(spent) <= daily  # the day's cap: reserved before each call, never overshot
    assert any(r["status"] == "skipped_budget" for r in rows) or any(r["podium_status"] != "ok" for r in rows)
    assert ShadowStore(tmp_path / "shadow.sqlite3").spent_since("2000-01-01") == pytest.approx(sum(spent))


def test_a_run_stopped_by_the_days_budget_is_over_budget_and_any_other_error_failed(
    upstream: Uvicorn, tmp_path: Path
) -> None:
    """The status comes from the typed refusal (the budget's scope), not from the error's text:
    a day's budget smaller than any call's reservation stops the run at its first call; a
    per-request cap as small stops it too, but that is the request's own cap, so ``failed``."""
    by_day = shadowed_once(make_proxy(upstream, tmp_path / "day", mode="execute", daily_budget_usd=1e-9))
    assert by_day["status"] == "over_budget" and by_day["podium_status"] == "error", by_day
    assert "shadow/day" in by_day["error"]
    by_request = shadowed_once(make_proxy(upstream, tmp_path / "request", mode="execute", request_cap_usd=1e-9))
    assert by_request["status"] == "failed" and "CostCapExceeded" in by_request["error"], by_request


@pytest.mark.slow
def test_a_full_queue_drops_visibly(upstream: Uvicorn, tmp_path: Path) -> None:
    proxy = make_proxy(upstream, tmp_path, mode="execute", delay_s=0.5, queue_size=1)
    shadow = Uvicorn(create_shadow_app(proxy))
    try:
        for _ in range(5):  # the shadow takes 1 s a request; the upstream answers in 10 ms
            httpx.post(shadow.url + "/v1/chat/completions", json=BODY)
        health = httpx.get(shadow.url + "/healthz").json()
        rows = drain(proxy, 5)
    finally:
        shadow.stop()
    dropped = [r for r in rows if r["status"] == "dropped"]
    assert dropped and health["dropped"] == len(dropped) and "queue full" in dropped[0]["error"]


def test_the_report_compares_per_use_case_against_hand_counted_values() -> None:
    def row(case: str, ours: str, theirs: str, ref: str | None, task: str | None, cost: float) -> dict[str, Any]:
        return {
            "at": "2026-11-30T00:00:00Z", "status": "done", "use_case": case, "task_type": task, "reference": ref,
            "question": "q", "request_id": "ab", "podium_answer": ours, "upstream_answer": theirs,
            "podium_cost_usd": cost, "upstream_cost_usd": 0.01, "podium_latency_s": 2.0, "upstream_latency_s": 1.0,
            "podium_workers": '["w"]',
        }  # fmt: skip

    rows = [
        row("math", "so it is 42", "The answer is 42.", "42", "math", 0.001),
        row("math", "it is 41", "The answer is 42.", "42", "math", 0.003),
        row("support", "Reset it in settings", "Reset it in settings", None, None, 0.002),
        {"at": "2026-11-30T00:00:01Z", "status": "skipped_budget", "use_case": "math"},
    ]
    report = shadow_report(rows)
    math_case = report["use_cases"]["math"]
    assert math_case["requests"] == 3 and math_case["statuses"] == {"done": 2, "skipped_budget": 1}
    assert math_case["agreement"] == 0.5  # one of two final numbers equal
    assert math_case["quality"] == {"upstream": 1.0, "podium": 0.5, "with_reference": 2}
    assert math_case["cost_usd"]["podium_mean"] == pytest.approx(0.002)
    assert math_case["largest_disagreements"][0]["podium_answer"] == "it is 41"
    assert report["use_cases"]["support"]["agreement"] == 1.0  # identical texts
    assert "| math | 3 | done 2, skipped_budget 1 | 0.500 |" in report_markdown(report)  # every status shown


def test_purging_shadow_rows_leaves_none_of_their_text_in_the_files(tmp_path: Path) -> None:
    store = ShadowStore(tmp_path / "shadow.sqlite3")
    rows = [
        ("2026-11-01T00:00:00Z", "aa" * 16, "MARKER-PURGED-BY-ID"),
        ("2026-11-02T00:00:00Z", None, "MARKER-PURGED-BY-DATE"),  # skipped: no trace, only a date
        ("2026-11-29T00:00:00Z", "bb" * 16, "MARKER-KEPT"),
    ]
    for at, request_id, question in rows:
        store.add({"at": at, "status": "done", "mode": "plan", "use_case": "x", "request_id": request_id,
                   "question": question})  # fmt: skip
    assert store.purge(request_ids=["aa" * 16], before="2026-11-15T00:00:00Z") == 2
    files = b"".join(p.read_bytes() for p in tmp_path.glob("shadow.sqlite3*"))
    assert b"MARKER-PURGED-BY-ID" not in files and b"MARKER-PURGED-BY-DATE" not in files
    assert b"MARKER-KEPT" in files  # the check can fail: kept text is found
    assert [r["question"] for r in store.rows()] == ["MARKER-KEPT"]


@pytest.mark.slow
def test_trace_purge_also_purges_the_shadow_copies(upstream: Uvicorn, tmp_path: Path) -> None:
    from podium.cli import cli

    row = shadowed_once(make_proxy(upstream, tmp_path, mode="execute"))
    code = cli(["trace", "purge", "--request", row["request_id"], "--yes", "--traces", str(tmp_path / "traces.sqlite3"),
                "--shadow-store", str(tmp_path / "shadow.sqlite3")])  # fmt: skip
    assert code == 0 and ShadowStore(tmp_path / "shadow.sqlite3").rows() == []
    assert b"What is 6 * 7?" not in b"".join(p.read_bytes() for p in tmp_path.glob("*.sqlite3*"))


def test_report_periods_are_validated_and_read_like_the_trace_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from podium.cli import cli

    store = ShadowStore(tmp_path / "shadow.sqlite3")
    for at in ("2026-11-29T23:59:00.000Z", "2026-11-30T08:00:00.000Z"):
        store.add({"at": at, "status": "dropped", "mode": "plan", "use_case": "x"})
    path = str(tmp_path / "shadow.sqlite3")

    def count(*period: str) -> int:
        assert cli(["shadow", "report", "--json", "--store", path, *period]) == 0
        return int(json.loads(capsys.readouterr().out)["rows"])

    assert count("--until", "2026-11-30") == 2  # a date alone includes that whole day
    assert count("--since", "2026-11-30") == 1
    assert count("--since", "2026-11-30T09:30:00+02:00") == 1  # the offset is converted: 07:30 UTC
    assert cli(["shadow", "report", "--store", path, "--since", "yesterday"]) == 2


REPORT_WITHOUT_SERVE_EXTRA = """
import sys
for name in ("fastapi", "uvicorn", "starlette", "httpx"):
    sys.modules[name] = None  # the serve extra is not installed
from podium.cli import cli
sys.exit(cli(["shadow", "report", "--json", "--store", sys.argv[1]]))
"""


def test_the_report_needs_no_serve_extra_and_a_mistyped_store_creates_nothing(tmp_path: Path) -> None:
    """A fresh user without the serve extra could not read a report of records made elsewhere;
    and a report on a mistyped --store path created an empty store there."""
    import subprocess
    import sys

    store = ShadowStore(tmp_path / "shadow.sqlite3")
    store.add({"at": "2026-11-30T08:00:00.000Z", "status": "dropped", "mode": "plan", "use_case": "x"})
    argv = [sys.executable, "-c", REPORT_WITHOUT_SERVE_EXTRA]
    done = subprocess.run([*argv, str(tmp_path / "shadow.sqlite3")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == 1
    typo = tmp_path / "shadw.sqlite3"
    done = subprocess.run([*argv, str(typo)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and f"no shadow store at {typo}" in done.stderr and "Traceback" not in done.stderr
    assert not typo.exists()


def test_a_report_on_a_folder_or_a_file_that_is_no_store_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial user's text file drew "file is not a database; is the folder writable ...", and a
    folder "no shadow store at ..."; a report only reads, so neither is touched."""
    from podium.cli import cli

    notes = tmp_path / "notes.sqlite3"
    notes.write_text("my notes")
    assert cli(["shadow", "report", "--store", str(notes)]) == 2
    assert f"{notes} is not a shadow store (not an SQLite database file)" in capsys.readouterr().err
    assert notes.read_text() == "my notes"
    assert cli(["shadow", "report", "--store", str(tmp_path)]) == 2
    assert f"{tmp_path} is a folder; --store takes the shadow store's file" in capsys.readouterr().err
    traces = tmp_path / "traces.sqlite3"  # a reviewer's find: another podium database got a shadow table
    TraceStore(traces).close()
    before = traces.read_bytes()
    assert cli(["shadow", "report", "--store", str(traces)]) == 2
    assert f"{traces} is not a shadow store (it holds meta, " in capsys.readouterr().err
    assert traces.read_bytes() == before  # nothing written
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    assert cli(["shadow", "report", "--store", str(empty)]) == 0 and empty.stat().st_size == 0  # no rows, no table


def test_shadow_quality_uses_the_eval_loops_verifiers() -> None:
    """``shadow report`` compared math answers as floats and exact answers as whole texts, so the
    same answer could count as right in ``podium eval`` and wrong in a shadow report; both now go
    through podium.eval.verifiers (math-verify for math, the last line for exact)."""
    from podium.serve.shadow import correct

    math = {"task_type": "math", "reference": "0.5"}
    assert correct("The share is \\boxed{\\frac{1}{2}}.", math) == 1.0  # float compare: 0
    assert correct("The share is \\boxed{\\frac{1}{3}}.", math) == 0.0
    exact = {"task_type": "exact", "reference": "Copenhagen"}
    assert correct("Let me think.\nAnswer: Copenhagen", exact) == 1.0  # whole-text compare: 0
    assert correct("Oslo", exact) == 0.0
    assert correct("anything", {"task_type": "open", "reference": "x"}) is None


def test_the_pools_cost_cap_holds_in_the_shadow_unless_request_cap_replaces_it(tmp_path: Path) -> None:
    """``--request-cap`` left out dropped the pool file's per-request cost cap (the shadow's limits
    were the pool's with the cap set to None), so a shadow run could spend without limit."""
    from types import SimpleNamespace

    from podium.budget import Limits

    def limits(**kw: Any) -> Limits:
        upstream = cast(Uvicorn, SimpleNamespace(url="http://127.0.0.1:9"))
        proxy = make_proxy(upstream, tmp_path / str(len(list(tmp_path.iterdir()))), mode="execute", **kw)
        config = proxy.orchestrator.config.updated(limits=Limits(deadline_s=30, cost_cap_usd=0.05))
        orchestrator = dataclasses.replace(proxy.orchestrator, config=config)
        return ShadowProxy(upstream.url, orchestrator, proxy.store, mode="execute", **kw).limits

    assert limits() == Limits(deadline_s=30, cost_cap_usd=0.05)
    assert limits(request_cap_usd=0.01) == Limits(deadline_s=30, cost_cap_usd=0.01)
