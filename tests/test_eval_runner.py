"""The eval runner: latency as the critical path of recorded call latencies, and no request
lost. Scripted workers and conductors are fakes (unit tests)."""

from __future__ import annotations

import asyncio
import dataclasses

from podium.eval.runner import Method, Scored, TaskResult, critical_path_s, evaluate
from podium.eval.tasks import Task
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.records import RunRecord
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.workers.base import Usage

DIAMOND = 'model_id = [0, 1, 0]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], [], [0, 1]]'


def _record(plan: str) -> RunRecord:
    pool = [ScriptedWorker("w0", "x"), ScriptedWorker("w1", "y")]
    orchestrator = Orchestrator(
        pool, ScriptedConductor([plan]), Fallback(0, "Answer."), config=OrchestratorConfig(recursion_rounds=0)
    )
    return asyncio.run(orchestrator.run("q"))


def test_critical_path_follows_the_access_lists() -> None:
    record = _record(DIAMOND)
    # steps 0 and 1 run in parallel (3 s and 5 s), step 2 waits for both (2 s); conductor 1 s
    latencies = {0: 3.0, 1: 5.0, 2: 2.0}
    steps = tuple(dataclasses.replace(s, latency_s=latencies[s.index]) for s in record.steps)
    called = Usage(input_tokens=60, output_tokens=20)  # a conductor model's recorded call
    attempts = tuple(dataclasses.replace(a, latency_s=1.0, usage=called) for a in record.attempts)
    timed = dataclasses.replace(record, steps=steps, attempts=attempts)
    assert critical_path_s(timed) == 1.0 + max(3.0, 5.0) + 2.0
    # a conductor that chose in-process (no call) adds nothing: its measured microseconds would
    # make a rerun from the request cache differ in the last digits
    chose = tuple(dataclasses.replace(a, latency_s=0.000123, usage=Usage()) for a in record.attempts)
    assert critical_path_s(dataclasses.replace(timed, attempts=chose)) == max(3.0, 5.0) + 2.0
    # a chain (each step sees the previous) adds up instead
    chain = _record('model_id = [0, 1, 0]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], [0], [1]]')
    steps = tuple(dataclasses.replace(s, latency_s=latencies[s.index]) for s in chain.steps)
    assert critical_path_s(dataclasses.replace(chain, steps=steps, attempts=())) == 3.0 + 5.0 + 2.0


class _FirstWordScorer:
    """Scores 1 when the answer equals the task's reference (a fake verifier)."""

    async def __call__(self, task: Task, record: RunRecord) -> Scored:
        ok = record.answer == task.reference
        return Scored(float(ok), ok, bool(record.answer), "exact")


def test_every_request_has_a_result_even_bad_input() -> None:
    pool = [ScriptedWorker("w0", "42")]
    tasks = [
        Task("a", "What is 6 * 7?", "exact", reference="42"),
        Task("b", "   ", "exact", reference="42"),  # empty question: InvalidQuestion, recorded, not lost
        Task("c", "And 40 + 3?", "exact", reference="43"),
    ]
    seen: list[tuple[str, TaskResult]] = []
    method = Method("one", ScriptedConductor(['model_id = [0]\nsubtasks = ["x"]\naccess_list = [[]]']))
    results = asyncio.run(
        evaluate(
            [method],
            tasks,
            lambda m: Orchestrator(
                pool, m.conductor, Fallback(0, "Answer."), config=OrchestratorConfig(recursion_rounds=0)
            ),
            _FirstWordScorer(),
            concurrency=2,
            on_result=lambda name, r: seen.append((name, r)),
        )
    )
    got = results["one"]
    assert [r.task_id for r in got] == ["a", "b", "c"] and len(seen) == 3
    assert [r.score for r in got] == [1.0, 0.0, 0.0]
    assert got[1].status == "error" and "InvalidQuestion" in (got[1].error or "")
    assert got[0].answer_worker == "w0" and got[0].worker_calls == 1 and got[0].trace_id
