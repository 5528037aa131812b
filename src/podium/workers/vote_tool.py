"""The vote tool: a deterministic worker (no model) that returns the majority answer.

Self-consistency (Wang et al. 2023): several independent answers are sampled and the answer most
of them reach wins. A ``vote`` step (:mod:`podium.roles`) sees those answers through its access
list; this worker reads the outputs of exactly the steps its message shows (in step order),
groups them by :func:`podium.answers.answer_key` — math by the final number, a choice by its
letter, code by its normalised syntax tree, other text by its last line — and returns the
**whole text** of the earliest answer of the largest group (ties: the group whose first answer
came earliest). It counts every step it sees but a ``program`` (code; its sandbox ``run`` is the
answer) and an earlier ``vote`` (a copy of an answer), so a vote with access ``all`` — a
cascade's second round, which sees the first round too — counts each answer once
(:func:`podium.roles.counts_in_vote`). Returning a whole earlier output, never a new text, is what makes a vote replay
exactly on any outcome matrix that records responses: its score is the selected response's.

When it also sees ``check`` steps (the code of an answer run with the question's own tests), it
counts only the answers whose code passed one, when any did (:func:`podium.answers.vote`):
generate, then filter by the stated tests, then vote.

What it sees is what the executor put in its message: the steps its access list grants, framed
by :func:`podium.messages.worker_messages`, whose neutralisation guarantees that an output
cannot close its own ``<output>`` section, so the outputs are read back exactly.
"""

from __future__ import annotations

import time

from podium.answers import vote
from podium.roles import counts_in_vote, role_of
from podium.workers.base import Call, Completion, Price, Usage, WorkerInfo, WorkerSettings

__all__ = ["VoteToolWorker", "granted_outputs", "granted_steps"]

_OPEN = "\n<output>\n"
_CLOSE = "\n</output>\n"
_QUESTION_END = "</question>"
_SUBTASK = "\n<subtask>\n"
_SUBTASK_END = "\n</subtask>\n"


def granted_outputs(message: str) -> list[str]:
    """The outputs of the steps shown in a worker message, in order (one pass, linear)."""
    return [output for _, output in granted_steps(message)]


def granted_steps(message: str) -> list[tuple[str, str]]:
    """(subtask, output) of each step shown in a worker message, in order (one pass, linear)."""
    start = message.find(_QUESTION_END)
    pos = 0 if start == -1 else start
    steps: list[tuple[str, str]] = []
    while (opened := message.find(_OPEN, pos)) != -1:
        body = opened + len(_OPEN)
        closed = message.find(_CLOSE, body - 1)
        if closed == -1:
            break
        task_at = message.rfind(_SUBTASK, pos, opened)
        task_end = message.find(_SUBTASK_END, task_at) if task_at != -1 else -1
        subtask = message[task_at + len(_SUBTASK) : task_end] if -1 < task_at < task_end < opened else ""
        steps.append((subtask, message[body:closed] if closed >= body else ""))
        pos = closed + len(_CLOSE) - 1
    return steps


class VoteToolWorker:
    """A tool worker that returns the majority answer of the steps it sees (module docstring).

    Args:
        name: its name in the pool.
        description: what the conductor reads about it.

    ``complete`` never calls a model and costs nothing; with no step to vote on it answers with
    an error line (a workflow error the conductor can learn from, not an exception).
    """

    def __init__(self, name: str, *, description: str = "") -> None:
        self.info = WorkerInfo(
            name, description, Price(), WorkerSettings(max_tokens=0, temperature=0.0), kind="tool", backend="vote"
        )

    async def complete(self, call: Call) -> Completion:
        messages = call.messages
        started = time.perf_counter()
        shown = granted_steps(messages[-1]["content"] if messages else "")
        outputs = [output for subtask, output in shown if counts_in_vote(subtask)]
        checks = [output for subtask, output in shown if (role := role_of(subtask)) and role.name == "check"]
        if not outputs:
            text = "error: no earlier answer to vote on (give the vote step access to the answers)"
        else:
            text = outputs[vote(outputs, checks)]
        return Completion(text=text, usage=Usage(), cost_usd=0.0, latency_s=time.perf_counter() - started)
