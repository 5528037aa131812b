"""``podium drift --judge WORKER``: a judge's pass rate on each window's stored answers, where
nobody labelled the traffic.

The traces are real SQLite files written by the real orchestrator with scripted workers
(tests/traffic_support.py). The judge is the real OpenAI-compatible backend talking to a small
scoring server on 127.0.0.1 (a fake, run by uvicorn as tests/conftest.ThreadedUvicorn): it passes
an answer that says 18 or defines a function, fails any other, and gives "shrug" no score."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI, Request

from podium.cli import cli
from podium.errors import ServerError
from podium.loop.settings import RunOptions, Settings
from podium.loop.stages import Context, drift_stage
from podium.loop.state import Folder
from podium.testing import ScriptedWorker
from tests.conftest import ThreadedUvicorn
from tests.test_traffic_label import pool_file
from tests.traffic_support import Request as Traffic
from tests.traffic_support import at, gsm8k_questions, mbpp_questions, request_id, run_requests

WINDOWS = ["--reference-since", "2026-11-01", "--reference-until", "2026-11-07", "--since", "2026-11-08",
           "--until", "2026-11-14", "--embedder", "none", "--min-requests", "5"]  # fmt: skip
RIGHT, WRONG, CODE = "The answer is 18.", "The answer is 5.", "def f():\n    return 1"


def scoring_app() -> FastAPI:
    """Scores the answer in the judge's prompt; "shrug" gets no score, not even when asked again
    for the number alone (a follow-up after the judge's reply: kept apart, in ``asked_again``)."""
    app = FastAPI()
    app.state.seen = []
    app.state.asked_again = []

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, object]:
        body = await request.json()
        shown = re.search(r"<answer>\n(.*?)\n</answer>", body["messages"][1]["content"], re.DOTALL)
        answer = shown.group(1) if shown else ""
        (app.state.asked_again if len(body["messages"]) > 2 else app.state.seen).append(answer)
        reply = "Hmm." if answer == "shrug" else "Score: 9" if "18" in answer or "def " in answer else "Score: 2"
        message = {"role": "assistant", "content": reply}
        return {"id": "1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}  # fmt: skip

    return app


@pytest.fixture
def judge() -> Iterator[ThreadedUvicorn]:
    server = ThreadedUvicorn(scoring_app())
    yield server
    server.stop()


def week(questions: list[str], first_day: int, tag: str, answer: str) -> list[Traffic]:
    return [Traffic(q, at(first_day + i % 7, 8 + i // 7), (tag,), answer) for i, q in enumerate(questions)]


REQUESTS = [
    *week(gsm8k_questions(0, 12), 1, "use-case:math", RIGHT),
    *week(mbpp_questions(0, 12), 1, "use-case:code", CODE),
    *week(gsm8k_questions(12, 12), 8, "use-case:math", WRONG),  # the math answers went wrong
    *week(mbpp_questions(12, 12), 8, "use-case:code", CODE),
    *week(gsm8k_questions(24, 2), 8, "use-case:math", "shrug"),  # the judge gives these no score
]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("judged") / "traces.sqlite3"
    run_requests(path, REQUESTS)
    return path


def drift(
    traces: Path, judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, pytest.CaptureResult[str]]:
    pool = pool_file(tmp_path, judge.url)
    argv = ["drift", "--traces", str(traces), *WINDOWS, "--judge", "grader", "--pool", str(pool), *extra]
    code = cli([*argv, "--cache", str(tmp_path / "cache.sqlite3")])
    return code, capsys.readouterr()


def math_labels(tmp_path: Path, *, task_type: str, reference: str, source: str) -> Path:
    """A labelled set (``tmp_path/labels.jsonl``) naming every answered math request's trace
    (24: 12 a window), each with this type, reference and reference source."""
    math = [(i, r) for i, r in enumerate(REQUESTS) if r.tags == ("use-case:math",) and r.answer != "shrug"]
    labels = [
        {"id": f"t{i}", "question": r.question, "task_type": task_type, "reference": reference,
         "reference_source": source, "origin": f"trace:{request_id(r)}"}
        for i, r in math
    ]  # fmt: skip
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(label) + "\n" for label in labels))
    return path


@pytest.mark.slow  # 2–3 s: make check's loop stays under a minute
def test_the_judge_grades_both_windows_and_a_falling_pass_rate_alerts(
    traces: Path, judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, printed = drift(traces, judge, tmp_path, capsys, "--json", "--judge-sample", "100")
    report = json.loads(printed.out)
    assert code == 4  # an outcome shift
    assert report["judge"] == {"worker": "grader", "per_slice": 100, "judged": 48, "unscored": 2}
    assert len(judge.uvicorn.config.app.state.seen) == 50  # every answer once, whatever slices it is in
    math = report["slices"]["use-case:math"]
    quality = [a for a in math["alerts"] if a["metric"] == "quality_drop"]
    assert [a["detail"] for a in quality] == ["judge's pass rate 1.000 → 0.000"]
    ref, rec = math["outcome"]["reference"], math["outcome"]["recent"]
    assert (ref["judged"], rec["judged"]) == (12, 12)  # the two answers without a score are left out
    assert (ref["quality"], ref["labelled"]) == (None, 0)  # never mixed with labelled quality
    code_slice = report["slices"]["use-case:code"]
    assert code_slice["outcome"]["recent"]["judged_quality"] == 1.0
    assert not [a for a in code_slice["alerts"] if a["metric"] == "quality_drop"]
    assert "judged 50/50" in printed.err

    seen = len(judge.uvicorn.config.app.state.seen)  # the same report again: every verdict from the cache
    code, printed = drift(traces, judge, tmp_path, capsys, "--judge-sample", "100")
    assert code == 4 and len(judge.uvicorn.config.app.state.seen) == seen
    assert "Judge `grader` graded 48 sampled answer(s)" in printed.out
    assert "| `use-case:math` | – → – (0, 0) | 1.000 → 0.000 (12, 12) |" in printed.out


def test_the_judge_grades_a_seeded_sample_per_slice_and_window(
    traces: Path, judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, printed = drift(traces, judge, tmp_path, capsys, "--json", "--judge-sample", "3")
    report = json.loads(printed.out)
    seen = list(judge.uvicorn.config.app.state.seen)
    assert 3 <= len(seen) <= 2 * 3 * 3  # 3 per slice (all, code, math) and window, each answer once
    for name in ("use-case:math", "use-case:code"):
        assert report["slices"][name]["outcome"]["reference"]["judged"] >= 3  # its own draw of 3
    judge.uvicorn.config.app.state.seen.clear()
    other = tmp_path / "again"
    other.mkdir()
    drift(traces, judge, other, capsys, "--json", "--judge-sample", "3")  # a fresh cache: the same draw
    assert sorted(judge.uvicorn.config.app.state.seen) == sorted(seen)


def test_a_windows_draw_does_not_depend_on_its_role_so_next_weeks_reference_costs_no_call(
    traces: Path, judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Next week's reference window is this week's recent one: with the windows swapped, every
    sampled answer is one judged before, so the request cache answers them all."""
    drift(traces, judge, tmp_path, capsys, "--judge-sample", "3")
    seen = len(judge.uvicorn.config.app.state.seen)
    swapped = ["--reference-since", "2026-11-08", "--reference-until", "2026-11-14", "--since", "2026-11-01",
               "--until", "2026-11-07", "--embedder", "none", "--min-requests", "5"]  # fmt: skip
    pool = pool_file(tmp_path, judge.url)
    argv = ["drift", "--traces", str(traces), *swapped, "--judge", "grader", "--pool", str(pool)]
    code = cli([*argv, "--judge-sample", "3", "--cache", str(tmp_path / "cache.sqlite3"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code in (0, 3, 4) and report["judge"]["judged"] >= 3
    assert len(judge.uvicorn.config.app.state.seen) == seen


def test_labels_come_first_and_labelled_answers_are_not_sent_to_the_judge(
    traces: Path, judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = math_labels(tmp_path, task_type="math", reference="18", source="human")
    code, printed = drift(traces, judge, tmp_path, capsys, "--json", "--judge-sample", "100", "--labels", str(path))
    report = json.loads(printed.out)
    assert code == 4
    assert len(judge.uvicorn.config.app.state.seen) == 50 - 24  # the 24 labelled math answers stay home
    alert = [a for a in report["slices"]["use-case:math"]["alerts"] if a["metric"] == "quality_drop"]
    assert [a["detail"] for a in alert] == ["quality 1.000 → 0.000"]  # the labels', not the judge's


def test_a_judge_that_is_not_in_the_pool_is_named_before_any_work(
    traces: Path, judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = pool_file(tmp_path, judge.url)
    code = cli(["drift", "--traces", str(traces), *WINDOWS, "--judge", "gpt-9", "--pool", str(pool)])
    err = capsys.readouterr().err
    assert code == 2
    assert "--judge 'gpt-9' is not a worker of pool" in err and "grader" in err
    assert judge.uvicorn.config.app.state.seen == []


def test_labelled_open_tasks_are_graded_by_the_judge_against_their_reference(
    traces: Path, judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Open tasks (no rule can check them) that a person labelled count as labelled quality once
    a judge grades the stored answer against the reference: the judge's score over 10, as
    ``podium eval`` scores open tasks. Without a judge they are left out."""
    path = math_labels(tmp_path, task_type="open", reference="It is 18.", source="human")
    code, printed = drift(traces, judge, tmp_path, capsys, "--json", "--judge-sample", "100", "--labels", str(path))
    report = json.loads(printed.out)
    assert code == 4
    outcome = report["slices"]["use-case:math"]["outcome"]
    assert (outcome["reference"]["labelled"], outcome["recent"]["labelled"]) == (12, 12)
    assert (outcome["reference"]["quality"], outcome["recent"]["quality"]) == (0.9, 0.2)  # Score: 9 and 2
    alert = [a for a in report["slices"]["use-case:math"]["alerts"] if a["metric"] == "quality_drop"]
    assert [a["detail"] for a in alert] == ["quality 0.900 → 0.200"]
    assert len(judge.uvicorn.config.app.state.seen) == 50  # 24 labelled + 26 sampled: each answer once
    code = cli(["drift", "--traces", str(traces), *WINDOWS, "--labels", str(path), "--json"])
    outcome = json.loads(capsys.readouterr().out)["slices"]["use-case:math"]["outcome"]
    assert (outcome["reference"]["labelled"], outcome["recent"]["labelled"]) == (0, 0)  # no judge: left out


def test_references_a_judge_confirmed_are_graded_again_not_counted_as_labels(
    traces: Path, judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A judge's confirmations are only the candidates it passed (its rejections stay
    candidates), so as labels they would count passes alone: drift leaves them out of labelled
    quality and its judge grades those answers like any unlabelled one."""
    path = math_labels(tmp_path, task_type="math", reference="18", source="judge:grader")
    code, printed = drift(traces, judge, tmp_path, capsys, "--json", "--judge-sample", "100", "--labels", str(path))
    report = json.loads(printed.out)
    assert code == 4 and len(judge.uvicorn.config.app.state.seen) == 50  # every answer, as without labels
    assert judge.uvicorn.config.app.state.asked_again == ["shrug", "shrug"]  # no score: asked once more, each
    outcome = report["slices"]["use-case:math"]["outcome"]
    assert (outcome["reference"]["labelled"], outcome["recent"]["labelled"]) == (0, 0)
    alert = [a for a in report["slices"]["use-case:math"]["alerts"] if a["metric"] == "quality_drop"]
    assert [a["detail"] for a in alert] == ["judge's pass rate 1.000 → 0.000"]


def test_a_window_with_nothing_to_compare_costs_no_judge_call(
    traces: Path, judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = pool_file(tmp_path, judge.url)
    empty = ["--reference-since", "2026-10-01", "--reference-until", "2026-10-07", "--since", "2026-11-08",
             "--until", "2026-11-14", "--embedder", "none"]  # fmt: skip
    code = cli(["drift", "--traces", str(traces), *empty, "--judge", "grader", "--pool", str(pool)])
    err = capsys.readouterr().err
    assert code == 2 and "the reference window 2026-10-01" in err and "has no request" in err
    assert judge.uvicorn.config.app.state.seen == []


@pytest.mark.slow  # 2–3 s: make check's loop stays under a minute
def test_the_loops_drift_stage_goes_on_without_a_judge_that_fails(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drift informs the weekly loop and never stops it: a judge whose calls fail (a fake
    worker, raising the provider error a 5xx gives) leaves the report without judged quality,
    says why, and the stage is done."""
    broken = ScriptedWorker("grader", error=ServerError("upstream 503", worker="grader", status=503))
    monkeypatch.setattr("podium.traffic.drift_run._judge_worker", lambda query: broken)
    folder = Folder(tmp_path / "loop")
    folder.root.mkdir()
    settings = Settings(traces=str(traces), judge="grader")
    said: list[str] = []
    window = ("2026-11-08T00:00:00.000Z", "2026-11-15T00:00:00.000Z")
    ctx = Context(folder, settings, RunOptions(), "0002", window, {}, said.append, lambda: None)
    (ctx.run_dir).mkdir(parents=True)
    stage = drift_stage(ctx)
    assert stage["status"] == "done" and "judge" not in stage and len(broken.calls) == 1
    assert stage["judge_error"] == "ServerError: upstream 503"
    assert any("the judge grader failed (ServerError: upstream 503); compared without it" in line for line in said)
    report = json.loads((ctx.run_dir / "drift.json").read_text())
    assert report["slices"]["all"]["outcome"]["recent"]["judged"] == 0 and "judge" not in report


def test_use_case_keeps_only_its_requests_in_both_windows(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--use-case NAME`` compares one use case's traffic (traces tagged ``use-case:NAME``), as
    ``podium tasks export --use-case`` selects it, so the retrain loop of one use case watches that
    use case alone; a use case no request has is named with the ones there are."""
    assert cli(["drift", "--traces", str(traces), *WINDOWS, "--use-case", "code", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["slices"]) == {"all", "use-case:code"}
    outcome = report["slices"]["all"]["outcome"]
    assert (outcome["reference"]["requests"], outcome["recent"]["requests"]) == (12, 12)
    assert cli(["drift", "--traces", str(traces), *WINDOWS, "--use-case", "billing"]) == 2
    assert "'use-case:billing'" in capsys.readouterr().err
