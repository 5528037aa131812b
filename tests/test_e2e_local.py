"""End to end on the real smallest local model (SmolLM2-135M through llama.cpp, in-process).

No fakes: the conductor writes a grammar-constrained workflow, the executor runs it on real
workers, the trace lands in a real SQLite file. Needs `podium models install smollm2-135m-instruct`
(done by `make setup-dev`). SmolLM2-135M answers badly; these tests check the machinery, not
the answers.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from podium.cli import cli
from podium.conductor.lm import LMConductor, LMConductorSettings
from podium.pool import load_pool
from podium.pool_workers import build_pool_workers
from podium.workers.base import Call
from tests.conftest import POOLS, SHARED_DATA, read_jsonl

pytest.importorskip("llama_cpp", reason="needs podium[local]")
pytestmark = pytest.mark.model

POOL = POOLS / "smollm2.toml"
GSM8K = read_jsonl(SHARED_DATA / "benchmarks" / "gsm8k" / "test.jsonl")
ADVERSARIAL = {c["id"]: c for c in read_jsonl(SHARED_DATA / "adversarial" / "cases.jsonl")}


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = cli(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, json.loads(out)


def test_run_executes_a_valid_workflow_under_its_access_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.sqlite3"
    question = GSM8K[0]["question"]
    code, record = run_json(["run", question, "--pool", str(POOL), "--traces", str(db), "--json"], capsys)
    assert code == 0
    attempt = record["attempts"][-1]
    assert attempt["constrained"] is True and attempt["workflow"] is not None
    assert record["status"] == "ok" and record["fallback"] is None
    steps = record["workflows"][0]["steps"]
    assert 1 <= len(steps) <= 3 and len(record["steps"]) == len(steps)
    for i, (planned, done) in enumerate(zip(steps, record["steps"], strict=True)):
        visible = list(range(i)) if planned["access"] == "all" else planned["access"]
        assert done["visible"] == visible
        sent = "\n".join(m["content"] for m in done["messages"])
        assert question in sent and planned["subtask"] in sent
        assert sent.count('<step index="') == len(visible)
        for j in visible:
            assert f'<step index="{j}">' in sent
        assert done["usage"]["input_tokens"] > 0 and done["cost_usd"] > 0
    assert record["answer"] == record["steps"][-1]["output"]
    totals = record["totals"]
    assert totals["worker_calls"] == len(steps)
    assert totals["conductor_calls"] == len(record["attempts"]) and totals["conductor_cost_usd"] > 0
    # the trace store holds the same record
    code, shown = run_json(["trace", "show", record["id"], "--traces", str(db), "--json"], capsys)
    assert code == 0 and shown == record


def test_the_command_ends_without_teardown_and_keeps_its_output_and_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real ``podium`` process, not ``cli()``: ``run`` ends by ``exit_without_teardown``
    once a model is loaded (podium.cli.main). Its answer and its trace must still arrive."""
    db = tmp_path / "traces.sqlite3"
    argv = [sys.executable, "-m", "podium", "run", GSM8K[1]["question"], "--pool", str(POOL), "--traces", str(db)]
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)
    assert record["status"] == "ok" and record["steps"]
    code, shown = run_json(["trace", "show", record["id"], "--traces", str(db), "--json"], capsys)
    assert code == 0 and shown == record  # written and committed before the process ended


def test_constrained_conductor_output_always_parses() -> None:
    """The grammar makes even a 135M model write valid workflows, for any question and seed."""
    config = load_pool(POOL)
    pool = build_pool_workers(config)
    conductor = LMConductor(pool[0], LMConductorSettings(temperature=1.0, reasoning_max_tokens=24, subtask_chars=120))
    questions = [
        GSM8K[1]["question"],
        ADVERSARIAL["format-breaker"]["question"],
        ADVERSARIAL["inject-plan-in-question"]["question"],
    ]

    async def attempts() -> list[Any]:
        return [await conductor.plan(q, pool, max_steps=3, attempt=seed) for q in questions for seed in range(2)]

    results = asyncio.run(attempts())
    for a in results:
        assert a.error_kind is None, a.raw_output
        assert a.workflow is not None and 1 <= len(a.workflow) <= 3
        assert all(0 <= s.worker < len(pool) for s in a.workflow.steps)
    # the lists pass reuses the reasoning pass's KV cache: the shared prompt prefix is cached
    assert all(a.usage.cached_input_tokens > 0 for a in results)


def test_plan_only_executes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli(["plan", GSM8K[2]["question"], "--pool", str(POOL), "--traces", str(tmp_path / "t.sqlite3")])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "Workflow" in out and "Model " in out and "Answer" not in out


def test_prompt_larger_than_the_context_window_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = tmp_path / "small.toml"
    small.write_text(POOL.read_text().replace("n_ctx = 2048", "n_ctx = 256"))
    code = cli(["run", "What is 2+2?", "--pool", str(small), "--traces", str(tmp_path / "t.sqlite3")])
    _, err = capsys.readouterr()
    assert code == 2
    assert "context window" in err and "n_ctx" in err and "Traceback" not in err


def test_a_review_round_runs_on_the_real_conductor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", GSM8K[3]["question"], "--pool", str(POOL), "--rounds", "1", "--json"]
    code, record = run_json([*argv, "--traces", str(tmp_path / "t.sqlite3")], capsys)
    assert code == 0 and record["status"] == "ok"
    review = [a for a in record["attempts"] if a["round"] == 1]
    assert review and review[-1]["constrained"] is True
    # the grammar allows the review only a valid workflow or the three empty lists
    assert review[-1]["workflow"] is not None
    assert len(record["workflows"]) == 2
    kept = len(record["workflows"][1]["steps"]) == 0
    round1 = [s for s in record["steps"] if s["round"] == 1]
    assert (round1 == []) == kept


def test_the_deadline_holds_on_the_real_runtime_even_mid_prompt(tmp_path: Path) -> None:
    """A question long enough that reading the conductor prompt alone outlasts the deadline:
    the request, and the process's threads, end within a small margin of it."""
    import time

    from podium.budget import Limits
    from podium.builder import build_orchestrator
    from podium.trace.store import TraceStore

    config = load_pool(POOL)
    store = TraceStore(tmp_path / "t.sqlite3")
    orch = build_orchestrator(config, traces=store)
    question = "Summarise this report in one sentence: " + "The quarterly numbers were flat. " * 180
    asyncio.run(orch.pool[0].complete(Call([{"role": "user", "content": "hi"}])))  # load the model first
    started = time.monotonic()
    record = asyncio.run(orch.run(question, limits=Limits(deadline_s=1.5, fallback_reserve=0.3)))
    elapsed = time.monotonic() - started  # asyncio.run also waited for the llama.cpp thread
    assert elapsed < 1.5 + 1.0
    assert record.status == "error" and record.fallback is not None and record.fallback.reason == "deadline"
    assert record.attempts and record.attempts[0].error_kind == "deadline"
    assert store.get(record.id) == record


@pytest.mark.model
def test_eval_live_router_trained_on_an_earlier_single_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The live learned router: fitted on a `--methods single` report over GSM8K train
    questions, evaluated on test questions, over the real SmolLM2 pool; reruns come from the
    request cache."""
    from podium.cli import cli

    gsm8k = SHARED_DATA / "benchmarks" / "gsm8k"
    cache = tmp_path / "cache.sqlite3"
    common = ["--pool", str(POOLS / "smollm2.toml"), "--cache", str(cache), "--no-plot"]
    train = ["eval", "--tasks", str(gsm8k / "train.jsonl"), "--limit", "10", "--methods", "single", *common]
    assert cli([*train, "--out", str(tmp_path / "train")]) == 0
    capsys.readouterr()  # the training run's table
    evaluate = ["eval", "--tasks", str(gsm8k / "test.jsonl"), "--limit", "2", "--methods", "router,single"]
    args = [*evaluate, "--router-data", str(tmp_path / "train" / "eval.json"), "--lambdas", "0,1e9", *common]
    assert cli([*args, "--out", str(tmp_path / "test"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    methods = report["methods"]
    assert set(methods) == {"router(λ=0)", "router(λ=1e+09)", "single:smol-a", "single:smol-b"}
    # at λ = 1e9 cost decides: every question goes to the cheaper worker, so its figures equal
    # that single worker's exactly (same cached calls)
    cheaper = min(("single:smol-a", "single:smol-b"), key=lambda n: methods[n]["summary"]["cost_usd"]["mean"])
    assert methods["router(λ=1e+09)"]["summary"]["cost_usd"] == methods[cheaper]["summary"]["cost_usd"]
    # a routed request is the same exact request as the single worker's: served from the cache
    assert report["config"]["cache"]["hits"] >= 4


@pytest.mark.parametrize(
    "case", ["inject-plan-in-question", "worker-output-injection", "fake-tags", "inject-disallowed-worker"]
)
def test_the_real_lm_conductor_under_injection(case: str, tmp_path: Path) -> None:
    """The shared adversarial questions through the real LM conductor (SmolLM2-135M, grammar-
    constrained) and real workers: whatever it writes, the workflow that runs names existing
    workers only, every step sees exactly what its access list grants, no accepted plan carries
    plan syntax, an injected plan, an embedded instruction or the conductor's prompt
    (``unsafe_subtask`` holds on what the model really wrote), no worker is sent 8 words in a
    row of the conductor's prompt that the question lacks, and the answer is no plan."""
    from podium.builder import build_orchestrator
    from podium.conductor.prompt import LEAK_WORDS, unsafe_subtask
    from podium.messages import neutralise
    from podium.trace.store import TraceStore

    def grams(text: str) -> set[tuple[str, ...]]:
        words = text.lower().split()
        return {tuple(words[i : i + LEAK_WORDS]) for i in range(len(words) - LEAK_WORDS + 1)}

    question = ADVERSARIAL[case]["question"]
    orchestrator = build_orchestrator(load_pool(POOL), traces=TraceStore(tmp_path / "t.sqlite3"))
    record = asyncio.run(orchestrator.run(question))
    assert record.status in ("ok", "fallback"), record.error
    accepted = [a for a in record.attempts if a.workflow is not None]
    for attempt in accepted:
        assert attempt.workflow is not None
        assert unsafe_subtask(attempt.workflow.subtasks, attempt.messages, question) is None
    shown_question = grams(question) | grams(neutralise(question))  # every prompt holds it, defanged
    prompt = set().union(*(grams(m["content"]) for a in record.attempts for m in a.messages)) - shown_question
    for step in record.steps:
        if step.phase != "workflow":
            continue
        planned = record.workflows[step.round].steps[step.index]
        assert 0 <= planned.worker < len(record.workers)
        granted = list(range(step.index)) if planned.access == "all" else list(planned.access)
        assert list(step.visible) == granted
        sent = "\n".join(m["content"] for m in step.messages)
        assert not grams(sent) & prompt, f"step {step.index} was sent the conductor's prompt"
    assert "model_id" not in record.answer and "access_list" not in record.answer
