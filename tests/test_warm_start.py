"""The GRPO format warm start's targets (podium.train.warmstart): every target is a valid
workflow in the conductor's format, its shapes respect the step limit, and its worker choices
are uniform — the warm start must teach the format and nothing about which worker to use."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from podium.conductor.lm import LMConductor, LMConductorSettings
from podium.conductor.prompt import FEW_SHOT, conductor_messages
from podium.parse import parse_workflow
from podium.testing import ScriptedWorker
from podium.train.warmstart import SHAPES, format_target
from podium.workers.base import Call, Completion


@pytest.mark.parametrize("max_steps", [1, 2, 3, 5])
def test_every_target_parses_within_the_step_limit(max_steps: int) -> None:
    rng = random.Random(0)
    lengths: Counter[int] = Counter()
    for n_workers in (1, 2, 3, 7):
        for _ in range(200):
            workflow = parse_workflow(
                format_target(n_workers, max_steps, rng), pool_size=n_workers, max_steps=max_steps
            )
            assert all(0 <= s.worker < n_workers for s in workflow.steps)
            lengths[len(workflow)] += 1
    # every shape that fits is written, and no longer one
    assert set(lengths) == {len(s.subtasks) for s in SHAPES if len(s.subtasks) <= max_steps}


def test_access_lists_are_the_shapes() -> None:
    """Solve → verify sees the solution; the aggregate step of the three-step shape reads exactly
    the two independent samples, which read nothing; every subtask is a role template."""
    rng = random.Random(1)
    seen: dict[int, list[object]] = {}
    for _ in range(100):
        workflow = parse_workflow(format_target(3, 3, rng), pool_size=3, max_steps=3)
        seen[len(workflow)] = [s.access for s in workflow.steps]
    assert seen[1] == [()]
    assert seen[2] == [(), (0,)]
    assert seen[3] == [(), (), (0, 1)]
    from podium.roles import role_of

    assert all(role_of(s.subtask) is not None for s in workflow.steps)


def test_worker_choices_are_uniform() -> None:
    """Final-step workers over 3,000 targets for a 3-worker pool: each worker is the final one
    a third of the time (±3 points; the binomial standard deviation is 0.9 points)."""
    rng = random.Random(2)
    finals = Counter(parse_workflow(format_target(3, 3, rng), pool_size=3).steps[-1].worker for _ in range(3000))
    for worker in range(3):
        assert abs(finals[worker] / 3000 - 1 / 3) < 0.03


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        format_target(0, 3, random.Random(0))
    with pytest.raises(ValueError, match="at least one worker"):
        format_target(2, 0, random.Random(0))


@pytest.mark.parametrize("few_shot", [True, False])
def test_lm_conductor_shows_examples_only_when_trained_with_them(few_shot: bool) -> None:
    """A conductor trained without the example workflows (the CPU preset, after the warm start)
    must run on the prompt it was trained on: no examples section. The conductor's model here is
    a fake worker (unit test) that answers with a warm-start target and records its prompt."""
    model = ScriptedWorker("conductor", format_target(2, 1, random.Random(0)))
    conductor = LMConductor(model, LMConductorSettings(constrained=False, few_shot=few_shot))
    pool = [ScriptedWorker("a", description="strong"), ScriptedWorker("b", description="cheap")]
    attempt = asyncio.run(conductor.plan("What is 6 × 7?", pool, max_steps=3))
    assert attempt.workflow is not None and len(attempt.workflow) == 1
    system = model.calls[0][0]["content"]
    assert ("Examples:" in system) is few_shot
    assert (FEW_SHOT[0].question in system) is few_shot
    assert system.startswith(conductor_messages("x", ["strong", "cheap"], max_steps=3, few_shot=())[0]["content"])


class _SeedRecorder(ScriptedWorker):
    """Fake conductor model (unit test): records the seed of every call."""

    def __init__(self) -> None:
        super().__init__("conductor", format_target(2, 1, random.Random(0)))
        self.seeds: list[int | None] = []

    async def complete(self, call: Call) -> Completion:
        self.seeds.append(None if call.settings is None else call.settings.seed)
        return await super().complete(call)


@pytest.mark.slow
def test_seed_per_question_decorrelates_questions_and_keeps_each_reproducible() -> None:
    """With one seed for every question, a near-uniform policy makes the same draw on every
    question (the held-out evaluation of the warm-started conductor picked worker 0 on 24 of 24);
    a trained conductor therefore seeds each question by its own hash."""
    pool = [ScriptedWorker("a"), ScriptedWorker("b")]
    questions = ["What is 6 × 7?", "What is 2 + 2?", "Name a prime above 10."]
    seeds = {}
    for per_question in (False, True):
        model = _SeedRecorder()
        conductor = LMConductor(model, LMConductorSettings(constrained=False, seed_per_question=per_question))
        for q in [*questions, questions[0]]:
            asyncio.run(conductor.plan(q, pool, max_steps=3))
        seeds[per_question] = model.seeds
    assert seeds[False] == [0, 0, 0, 0]
    assert len(set(seeds[True][:3])) == 3 and seeds[True][3] == seeds[True][0]
