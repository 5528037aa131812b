"""Stored traffic for the tests of ``podium tasks`` and ``podium drift``: real SQLite trace files
written by the real :class:`~podium.orchestrator.Orchestrator`, whose workers and conductor are
podium.testing's scripted fakes (no model is called). Each request's clock is set by patching
the orchestrator's ``utc_now``, so the stored ``started_at`` is the time the test chose, and its
trace id is derived from the request (:func:`request_id`) instead of a fresh uuid4 — exported
task ids (``traffic/<request id>``) and with them the seeded train/test split of an outcome
matrix (podium.eval.matrix.assign_splits shuffles the sorted ids) are the same on every run."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from podium import orchestrator as orchestrator_module
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.records import RunRecord
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.base import Price

ROOT = Path(__file__).resolve().parent.parent
GSM8K = ROOT / "data" / "benchmarks" / "gsm8k" / "test.jsonl"
MBPP = ROOT / "data" / "benchmarks" / "mbpp" / "mbpp.jsonl"

PLAN = 'Reasoning: one step.\nmodel_id = [0]\nsubtasks = ["Solve it; end with the answer."]\naccess_list = [[]]'
BROKEN = "I would ask Model 7 to do everything."  # never a workflow: re-sampled, then the fallback answers
CONDUCTORS = {"ok": [PLAN], "flaky": [BROKEN, PLAN], "broken": [BROKEN]}
"""Conductor scripts: ``ok`` plans at once; ``flaky`` fails to parse once, then plans (a parse
failure, answered by the workflow); ``broken`` never plans (the fallback pipeline answers)."""


@dataclass(frozen=True)
class Request:
    """One request to store: the question, when it arrived, its tags, podium's answer, the
    conductor's behaviour (:data:`CONDUCTORS`) and the worker's price (USD per 1M tokens)."""

    question: str
    at: str
    tags: tuple[str, ...] = ()
    answer: str = "The answer is 42."
    conductor: str = "ok"
    price: float = 1.0
    finish_reason: str = "stop"  # "length": the answer was cut off at the token limit


def request_id(request: Request, occurrence: int = 0) -> str:
    """The trace id :func:`run_requests` stores ``request`` under: 32 hex digits of a hash of
    the request (and of ``occurrence``, its count among identical requests of one call)."""
    key = json.dumps([request.question, request.at, list(request.tags), request.answer, request.conductor,
                      request.price, occurrence])  # fmt: skip
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def run_requests(path: Path, requests: Sequence[Request]) -> list[RunRecord]:
    """Run each request through a real orchestrator that writes its trace to ``path``; the
    store is closed (every write stored) before returning."""
    store = TraceStore(path)
    records: list[RunRecord] = []
    seen: dict[Request, int] = {}
    try:
        with pytest.MonkeyPatch.context() as patch:
            for request in requests:
                patch.setattr(orchestrator_module, "utc_now", lambda at=request.at: at)
                price, finish = Price(request.price, request.price), request.finish_reason
                solver = ScriptedWorker("solver", reply=request.answer, price=price, finish_reason=finish)
                orch = Orchestrator(
                    [solver, ScriptedWorker("backup", reply=request.answer)],
                    ScriptedConductor(CONDUCTORS[request.conductor]),
                    Fallback(1, "Answer the question."),
                    traces=store,
                    config=OrchestratorConfig(resamples=1),
                )
                occurrence = seen[request] = seen.get(request, -1) + 1
                trace_id = request_id(request, occurrence)
                records.append(asyncio.run(orch.run(request.question, tags=request.tags, request_id=trace_id)))
    finally:
        store.close()
    return records


def at(day: int, hour: int = 12, minute: int = 0) -> str:
    """``2026-11-<day>T<hour>:<minute>Z`` in the store's form."""
    moment = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=day - 1, hours=hour, minutes=minute)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def gsm8k_questions(start: int, count: int) -> list[str]:
    """GSM8K test questions ``start`` … ``start + count - 1`` (the shipped file, MIT)."""
    lines = GSM8K.read_text(encoding="utf-8").splitlines()[start : start + count]
    return [json.loads(line)["question"] for line in lines]


def mbpp_questions(start: int, count: int) -> list[str]:
    """MBPP problem texts with their first test, as a client would ask them (the shipped file)."""
    lines = MBPP.read_text(encoding="utf-8").splitlines()[start : start + count]
    out = []
    for line in lines:
        rec = json.loads(line)
        out.append(f"{rec['text']}\nYour code should pass this test:\n{rec['test_list'][0]}")
    return out
