"""The error tree: every error podium defines is in the documented tree of ``podium.errors``, and
the fallback reason a trace records comes from the error class, not from its name (the orchestrator
used to look reasons up by ``type(exc).__name__``). Scripted workers and conductors (fakes) drive
the real orchestrator."""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
from collections.abc import Sequence

import pytest

import podium
import podium.errors as errors
from podium.errors import (
    CostCapExceeded,
    DeadlineExceeded,
    PIIProtectionError,
    PodiumError,
    ProviderError,
    WorkerTimeout,
    WorkflowFailed,
)
from podium.orchestrator import Fallback, Orchestrator
from podium.records import PlanAttempt
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.workers.base import Worker

PLAN = 'model_id = [1]\nsubtasks = ["Solve."]\naccess_list = [[]]'


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def test_every_podium_error_is_in_the_documented_tree() -> None:
    for module in pkgutil.walk_packages(podium.__path__, "podium."):
        if module.name.endswith("__main__"):  # runs the CLI on import
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:  # an optional extra that is not installed defines nothing we ship by default
            continue
    tree = errors.__doc__ or ""
    defined = {c for c in _subclasses(PodiumError) if c.__module__.startswith("podium.")}
    missing = sorted(c.__name__ for c in defined if f" {c.__name__} " not in tree.replace("\n", " "))
    assert not missing, f"errors outside the documented tree in podium/errors.py: {missing}"


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ProviderError("boom", worker="w1"), "worker_error"),
        (WorkerTimeout("slow", worker="w1"), "worker_error"),
        (CostCapExceeded("cap", needed_usd=0.2, remaining_usd=0.1, scope="request"), "cost_cap"),
        (DeadlineExceeded("late", deadline_s=1.0), "deadline"),
        (PIIProtectionError("no", worker="w1", reason="detection_failed"), "pii_protection"),
        (OSError("disk"), "worker_error"),
    ],
)
def test_a_failing_step_falls_back_with_its_error_class_reason(error: Exception, reason: str) -> None:
    workers = [ScriptedWorker("w0", reply="rescued"), ScriptedWorker("w1", error=error)]
    orch = Orchestrator(workers, ScriptedConductor([PLAN]), Fallback(0, "Answer directly."), traces=None)
    record = asyncio.run(orch.run("What is 6 times 7?"))
    assert record.status == "fallback" and record.answer == "rescued"
    assert record.fallback is not None and record.fallback.reason == reason


def test_the_workflow_time_limit_and_a_foreign_cause_have_reasons_too() -> None:
    assert WorkflowFailed("late", (), "DeadlineExceeded", timed_out=True).fallback_reason == "deadline"
    assert WorkflowFailed("late", (), "DeadlineExceeded").fallback_reason == "worker_error"  # a name is not a reason
    assert WorkflowFailed("x", (), "OSError", OSError("disk")).fallback_reason == "worker_error"
    cause = CostCapExceeded("cap", needed_usd=1.0, remaining_usd=0.0, scope="request")
    assert WorkflowFailed("x", (), "CostCapExceeded", cause).fallback_reason == "cost_cap"


class _FailingConductor:
    """A fake conductor whose own call raises ``error``."""

    name = "failing"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def plan(self, question: str, pool: Sequence[Worker], *, max_steps: int, **_: object) -> PlanAttempt:
        raise self.error


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (WorkerTimeout("slow", worker="conductor"), "conductor_error"),  # was worker_error: the name table
        (ProviderError("boom", worker="conductor"), "conductor_error"),
        (DeadlineExceeded("late", deadline_s=1.0), "deadline"),
        (PIIProtectionError("no", worker="conductor", reason="detection_failed"), "pii_protection"),
    ],
)
def test_a_failing_conductor_call_falls_back_as_a_conductor_error(error: Exception, reason: str) -> None:
    workers = [ScriptedWorker("w0", reply="rescued")]
    orch = Orchestrator(workers, _FailingConductor(error), Fallback(0, "Answer directly."), traces=None)  # type: ignore[arg-type]
    record = asyncio.run(orch.run("What is 6 times 7?"))
    assert record.status == "fallback" and record.answer == "rescued"
    assert record.fallback is not None and record.fallback.reason == reason
