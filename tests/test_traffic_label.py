"""``podium tasks label --judge WORKER``: candidates confirmed by a judge worker of a pool.

The judge is the real OpenAI-compatible backend talking to a small scoring server on 127.0.0.1
(a fake: it reads the answer out of the judge prompt and replies with a fixed score rule), run
by uvicorn as tests/conftest.ThreadedUvicorn; the set comes from a real trace file
(tests/traffic_support.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI, Request

from podium.cli import cli
from podium.eval.tasks import load_tasks
from tests.conftest import ThreadedUvicorn, read_jsonl
from tests.traffic_support import Request as Traffic
from tests.traffic_support import at, gsm8k_questions, run_requests

JANET, ROBE, HOUSE = gsm8k_questions(0, 3)


def scoring_app() -> FastAPI:
    """Scores the answer in the judge's prompt: 18 or 3 pass (9), "shrug" gets no score, not even
    when asked again for the number alone (a follow-up message after its reply), else 2."""
    app = FastAPI()
    app.state.seen = []

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, object]:
        body = await request.json()
        prompt = body["messages"][1]["content"]  # the judge's prompt (after the system message)
        answer = re.search(r"<answer>\n(.*?)\n</answer>", prompt, re.DOTALL)
        shown = answer.group(1) if answer else ""
        app.state.seen.append(shown)
        reply = "Looks right. Score: 9" if shown in ("18", "3") else "Hmm." if shown == "shrug" else "Score: 2"
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


def pool_file(tmp_path: Path, url: str) -> Path:
    pool = tmp_path / "judge.toml"
    pool.write_text(
        f"""
name = "judging"
[conductor]
worker = "grader"
recursion_rounds = 0
[fallback]
worker = "grader"
[[workers]]
name = "grader"
backend = "openai"
model = "judge-model"
base_url = "{url}/v1"
external = false
price = {{ input = 1.0, output = 1.0 }}
"""
    )
    return pool


def test_the_judge_confirms_candidates_it_passes_and_leaves_the_rest_to_review(
    judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = tmp_path / "traces.sqlite3"
    run_requests(
        traces,
        [
            Traffic(JANET, at(1, 9), ("task:math",), "The answer is 18."),
            Traffic(ROBE, at(1, 10), ("task:math",), "The answer is 3."),
            Traffic(HOUSE, at(1, 11), ("task:math",), "The answer is 12."),  # wrong: 70000
            Traffic("Say something.", at(1, 12), (), "shrug"),
        ],
    )
    out = tmp_path / "set.jsonl"
    assert cli(["tasks", "export", "--traces", str(traces), "--out", str(out), "--allow-pii"]) == 0
    pool = pool_file(tmp_path, judge.url)
    cache = ["--cache", str(tmp_path / "cache.sqlite3")]
    assert cli(["tasks", "label", str(out), "--judge", "grader", "--pool", str(pool), *cache, "--json"]) == 0
    printed = capsys.readouterr().out
    assert '"confirmed": 2' in printed and '"unscored": 1' in printed
    assert "the judge's reply gives no score" in printed and "Hmm." in printed  # why, with the reply
    sources = [r["reference_source"] for r in read_jsonl(out)]
    assert sources == ["judge:grader", "judge:grader", "candidate:podium", "candidate:podium"]
    assert judge.uvicorn.config.app.state.seen == ["18", "3", "12", "shrug", "shrug"]  # asked twice
    assert [t.reference_source for t in load_tasks(out)] == sources  # the eval loop reads the marks
    # a second run sends only what is still a candidate, and those it judged before come from
    # the request cache, as in the loop; --no-cache asks again
    assert cli(["tasks", "label", str(out), "--judge", "grader", "--pool", str(pool), *cache]) == 0
    assert judge.uvicorn.config.app.state.seen[5:] == []
    assert "confirmed 0 candidate(s)" in " ".join(capsys.readouterr().out.split())
    assert cli(["tasks", "label", str(out), "--judge", "grader", "--pool", str(pool), "--no-cache"]) == 0
    assert judge.uvicorn.config.app.state.seen[5:] == ["12", "shrug", "shrug"]


def test_a_judge_that_is_not_in_the_pool_is_named(
    judge: ThreadedUvicorn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "set.jsonl"
    out.write_text('{"id": "a", "question": "q", "task_type": "open", "reference_source": "candidate:podium"}\n')
    pool = pool_file(tmp_path, judge.url)
    assert cli(["tasks", "label", str(out), "--judge", "gpt-9", "--pool", str(pool)]) == 2
    assert "'gpt-9' is not a worker of pool 'judging' (grader)" in capsys.readouterr().err
    assert cli(["tasks", "label", str(tmp_path / "none.jsonl"), "--judge", "grader", "--pool", str(pool)]) == 2
