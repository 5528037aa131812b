"""The conductor contract: every policy that writes workflows — the paper's LM conductor, a
light learned policy, every baseline — implements :class:`Conductor`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from podium.records import PlanAttempt
from podium.workers.base import NO_CONTEXT, CallContext, Worker
from podium.workflow import Workflow

__all__ = ["Conductor", "PreviousRound"]


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
    should wrap it in :func:`podium.workers.resilience.budget_guarded` and make its calls with
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
