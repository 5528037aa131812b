"""The LM conductor (Nielsen et al. 2026): a language model writes reasoning, then the lists.

With a backend that supports grammars (in-process llama.cpp) it decodes in two passes over one
prompt: (1) the reasoning line, free text, stopped at a newline or at ``reasoning_max_tokens``;
(2) the three lists under :func:`~podium.conductor.grammar.workflow_grammar`, so they are valid
by construction. The second pass reuses the first's KV cache (reported as cached tokens). Other
backends get one unconstrained call, read by the tolerant parser.
"""

from __future__ import annotations

import asyncio
import functools
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from podium.conductor.base import PreviousRound
from podium.conductor.catalogue import plan_lists
from podium.conductor.grammar import choice_grammar, max_plan_chars, workflow_grammar
from podium.conductor.prompt import (
    FEW_SHOT,
    REASONING_PREFIX,
    conductor_messages,
    recursion_messages,
    unsafe_subtask,
)
from podium.errors import PlanParseError
from podium.parse import try_parse_workflow
from podium.records import PlanAttempt
from podium.roles import ROLES, expand
from podium.workers.base import NO_CONTEXT, Call, CallContext, Completion, Message, Usage, Worker, WorkerSettings
from podium.workers.budget_guard import budget_guarded
from podium.workflow import Workflow

__all__ = ["LMConductor", "LMConductorSettings"]

_REASONING_LINE = 'root ::= " " [^\\n]+ "\\n"\n'
"""One line of reasoning after the prefix: at least one character, ended by a newline."""


@dataclass(frozen=True)
class LMConductorSettings:
    """Decoding settings of the LM conductor.

    Attributes:
        temperature: sampling temperature (paper: 1.0 in training).
        seed: base seed; attempt ``k`` samples with ``seed + k`` (plus the question's offset when
            ``seed_per_question``).
        reasoning_max_tokens: token budget of the reasoning line (0 = no reasoning).
        max_tokens: token budget of the whole reply when unconstrained. Constrained lists get
            :func:`~podium.conductor.grammar.max_plan_chars` tokens, which no valid plan exceeds.
        constrained: use the workflow grammar when the backend supports it.
        subtask_chars: longest subtask the grammar allows, characters.
        few_shot: show the prompt's example workflows (a conductor trained without them, after
            the format warm start, runs without them too).
        seed_per_question: offset the seed by a hash of the question (CRC-32), so sampled plans
            are independent across questions yet reproducible per question. Without it every
            question's first attempt draws the same random numbers, and a policy that is close to
            uniform over workers makes the same choice on every question.
        roles: write only role names (:mod:`podium.roles`) as subtasks, expanded to the roles'
            instructions before anything runs: the prompt lists them and, under the grammar, no
            other subtask can be written — every step is one a workflow bank records, and no text
            of the question can become an instruction.
        plans: under the grammar, write only one of the catalogue's one-round plans the pool can
            run (:func:`~podium.conductor.catalogue.plan_lists`, needs ``roles``): the workflows
            a conductor trained with ``--rollouts llama.cpp`` on a bank chose among. Falls back to
            the roles grammar when no plan fits the pool.
    """

    temperature: float = 0.7
    seed: int = 0
    reasoning_max_tokens: int = 160
    max_tokens: int = 800
    constrained: bool = True
    subtask_chars: int = 240
    few_shot: bool = True
    seed_per_question: bool = False
    roles: bool = False
    plans: bool = False


class LMConductor:
    """A conductor backed by a pool worker's language model.

    Args:
        model: the worker whose model writes workflows (it is not a step of the workflow).
        settings: decoding settings.
        name: the conductor's name in reports and traces (default ``lm:<model's name>``).
    """

    def __init__(self, model: Worker, settings: LMConductorSettings | None = None, *, name: str | None = None) -> None:
        self.model = budget_guarded(model)  # the conductor's calls count against the request's cap
        self.settings = settings or LMConductorSettings()
        self.name = name or f"lm:{model.info.name}"

    def keeps_answer(self, workflow: Workflow, pool: Sequence[Worker], max_steps: int) -> bool:
        """False: a review round asks the model again, which may replace the answer."""
        return False

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
        tool = next((i for i, w in enumerate(pool) if w.info.is_tool), None)
        examples = FEW_SHOT if self.settings.few_shot and not self.settings.roles else ()
        descriptions = [w.info.description for w in pool]
        roles = tuple(ROLES.values()) if self.settings.roles else ()
        messages = conductor_messages(
            question, descriptions, max_steps=max_steps, tool=tool, few_shot=examples, roles=roles
        )
        if previous is not None:
            messages = recursion_messages(messages, previous.workflow.lists_text(), previous.answer, previous.round)
        recursing = previous is not None
        s = self.settings
        seed = s.seed + attempt + (zlib.crc32(question.encode()) % 1_000_003 if s.seed_per_question else 0)
        constrained = s.constrained and self.model.info.grammar
        if constrained:
            raw, calls = await self._constrained(messages, pool, max_steps, seed, context, allow_empty=recursing)
        else:
            settings = WorkerSettings(max_tokens=s.max_tokens, temperature=s.temperature, seed=seed)
            reply = await self.model.complete(Call(messages, settings, context=context))
            raw, calls = reply.text, [reply]
        usage = sum((c.usage for c in calls), Usage())
        cost = sum(c.cost_usd for c in calls)
        # parsing is CPU work (linear, up to 100k characters): keep it off the event loop
        workflow, failure = await asyncio.to_thread(
            try_parse_workflow, raw, pool_size=len(pool), max_steps=max_steps, allow_empty=recursing
        )
        if workflow is not None and s.roles:
            workflow = expand(workflow)
        if workflow is not None and (problem := unsafe_subtask(workflow.subtasks, messages, question)):
            workflow, failure = None, PlanParseError("unsafe_subtask", problem)
        return PlanAttempt(
            attempt=attempt,
            messages=tuple(messages),
            raw_output=raw,
            workflow=workflow,
            round=0 if previous is None else previous.round + 1,
            error_kind=failure.kind if failure else None,
            error=failure.detail if failure else None,
            usage=usage,
            cost_usd=cost,
            # a cached rerun reports the latency of the original calls (see Completion.cached)
            latency_s=sum(c.latency_s for c in calls)
            if all(c.cached for c in calls)
            else time.perf_counter() - started,
            constrained=constrained,
        )

    async def _constrained(
        self,
        messages: list[Message],
        pool: Sequence[Worker],
        max_steps: int,
        seed: int,
        context: CallContext,
        *,
        allow_empty: bool = False,
    ) -> tuple[str, list[Completion]]:
        """Reasoning line, then the grammar-constrained lists; returns (raw text, calls)."""
        s = self.settings
        calls: list[Completion] = []
        pool_size = len(pool)
        prefix = REASONING_PREFIX
        if s.reasoning_max_tokens:
            settings = WorkerSettings(max_tokens=s.reasoning_max_tokens, temperature=s.temperature, seed=seed)
            reasoning = await self.model.complete(
                Call(messages, settings, prefix=prefix, grammar=_REASONING_LINE, context=context)
            )
            calls.append(reasoning)
            prefix += reasoning.text.rstrip() + ("…" if reasoning.finish_reason == "length" else "")
        prefix += "\n"
        templates = list(ROLES) if s.roles else None  # role names: expanded to their instructions
        chars = max(len(t) for t in templates) if templates else s.subtask_chars
        settings = WorkerSettings(
            max_tokens=max_plan_chars(pool_size, max_steps, chars), temperature=s.temperature, seed=seed
        )
        grammar = workflow_grammar(pool_size, max_steps, chars, allow_empty=allow_empty, subtasks=templates)
        if s.plans and not allow_empty:
            names = tuple(w.info.name for w in pool)
            vote = next((w.info.name for w in pool if w.info.backend == "vote"), None)
            grammar = _plans_grammar(names, max_steps, vote) or grammar
        lists = await self.model.complete(Call(messages, settings, prefix=prefix, grammar=grammar, context=context))
        calls.append(lists)
        return prefix + lists.text, calls


@functools.lru_cache(maxsize=64)
def _plans_grammar(pool: tuple[str, ...], max_steps: int, vote_worker: str | None) -> str | None:
    """The grammar of the catalogue's plans ``pool`` can run, or None when none fits; built once
    per pool (about 1 ms), not on every request."""
    choices = plan_lists(pool, max_steps, vote_worker=vote_worker)
    return choice_grammar(choices) if choices else None
