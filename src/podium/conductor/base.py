"""The conductor contract: every policy that writes workflows — the paper's LM conductor, a
light learned policy, every baseline — implements :class:`Conductor`; those that write the
workflow directly, with no language-model call, build on :class:`DirectConductor`, except the
plan conductor (:class:`podium.conductor.plans.PlanConductor`), which writes a cascade's second
round too and builds its workflows from the pool's worker names within the step limit."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from podium.errors import PlanParseError
from podium.records import PlanAttempt
from podium.workers.base import NO_CONTEXT, CallContext, Worker
from podium.workers.offload import offload
from podium.workflow import Step, Workflow, validate_lists

__all__ = ["Conductor", "DirectConductor", "PreviousRound", "StepsFn"]


@dataclass(frozen=True)
class PreviousRound:
    """What a recursion round shows the conductor (Nielsen et al. 2026 §3.2).

    Attributes:
        round: the previous round's number (0 = the first workflow).
        workflow: the workflow it executed.
        answer: its final answer.
        outputs: the output of each of its steps, in step order (a light conductor's cascade
            reads its vote's agreement from them).
    """

    round: int
    workflow: Workflow
    answer: str
    outputs: tuple[str, ...] = ()


@runtime_checkable
class Conductor(Protocol):
    """Writes a workflow for a question over a pool.

    Attributes:
        name: shown in traces (e.g. ``"lm:qwen2.5-coder-1.5b"``).

    Budgets: the orchestrator puts every pool worker behind the request's cost cap and deadline,
    but it cannot see a model a conductor holds itself. A conductor that calls its own model
    should wrap it in :func:`podium.workers.budget_guard.budget_guarded` and make its calls with
    the ``context`` it is given (as :class:`~podium.conductor.lm.LMConductor` does), so each call
    is reserved before it is made. Whatever an attempt's ``cost_usd`` reports beyond what those
    guarded calls settled (``context.tally``) is settled by the orchestrator when the attempt
    returns, on the request's cap and every period budget; a cost that is NaN, infinite or
    negative is the conductor's error (:class:`~podium.errors.InvalidCost`).
    """

    name: str

    async def plan(
        self,
        question: str,
        pool: Sequence[Worker],
        *,
        max_steps: int,
        attempt: int = 0,
        previous: PreviousRound | None = None,
        context: CallContext = NO_CONTEXT,
    ) -> PlanAttempt:
        """One attempt at a workflow. Never raises for a bad plan: a failed parse is returned
        as a PlanAttempt with ``workflow=None`` and ``error_kind`` set, so it can be traced and
        re-sampled. Provider failures raise ProviderError.

        With ``previous`` (a recursion round) the conductor reviews the previous workflow and
        its answer; an empty workflow (three empty lists) means "keep the answer". ``context``
        is the request's (:class:`~podium.workers.base.CallContext`): a conductor that calls a
        model passes it on its calls (``Call(..., context=context)``)."""
        ...

    def keeps_answer(self, workflow: Workflow, pool: Sequence[Worker], max_steps: int) -> bool:
        """Whether every review round keeps the answer of ``workflow``, a first-round workflow
        this conductor wrote for ``pool``: then its answering step streams to the client as it
        is written even when review rounds follow (their workflow is empty). False whenever a
        review may replace the answer."""
        ...


StepsFn = Callable[[str, Sequence[Worker], int], Sequence[Step]]
"""(question, pool, max_steps) → the workflow's steps."""


class DirectConductor:
    """A conductor that writes its workflow directly, as a function of the question and pool,
    with no language-model call: the base of the baselines, the rule pipeline, the learned router
    and the light conductor. It checks the steps against the pool and step limit, keeps the
    answer in recursion rounds, and records the attempt.

    Args:
        name: shown in traces and reports (e.g. ``"single:qwen-1.5b"``).
        steps: builds the steps from (question, pool, max_steps); subclasses may instead
            override :meth:`steps`.
    """

    def __init__(self, name: str, steps: StepsFn | None = None) -> None:
        self.name = name
        self._steps = steps

    def keeps_answer(self, workflow: Workflow, pool: Sequence[Worker], max_steps: int) -> bool:
        """True: it keeps the answer in every recursion round."""
        return True

    def steps(self, question: str, pool: Sequence[Worker], max_steps: int) -> Sequence[Step]:
        """The workflow's steps for ``question`` over ``pool``."""
        if self._steps is None:
            raise NotImplementedError(f"{type(self).__name__} must pass steps= or override steps()")
        return self._steps(question, pool, max_steps)

    async def plan(
        self,
        question: str,
        pool: Sequence[Worker],
        *,
        max_steps: int,
        attempt: int = 0,
        previous: PreviousRound | None = None,
        context: CallContext = NO_CONTEXT,
    ) -> PlanAttempt:
        started = time.perf_counter()
        problem: PlanParseError | None = None
        if previous is not None:  # keep the answer
            workflow = Workflow(())
        else:
            # a light conductor embeds the question here: on the main thread under podium run
            workflow = Workflow(tuple(await offload(self.steps, question, pool, max_steps, otherwise="inline")))
            try:  # the rules an LM conductor's lists are held to (podium.workflow.validate_lists)
                lists = (workflow.model_id, workflow.subtasks, workflow.access_list)
                validate_lists(*lists, pool_size=len(pool), max_steps=max_steps, allow_empty=True)
            except PlanParseError as exc:
                problem = exc
        return PlanAttempt(
            attempt=attempt,
            messages=(),
            raw_output=workflow.lists_text(),
            workflow=None if problem else workflow,  # a bad plan is returned, not raised (Conductor.plan)
            error_kind=problem.kind if problem else None,
            error=problem.detail if problem else None,
            round=0 if previous is None else previous.round + 1,
            latency_s=time.perf_counter() - started,  # e.g. a light conductor's embedding pass
        )
