"""Roles, compositions and the vote tool: steps that replay exactly (issue: learned workflows).

The fakes here (ScriptedWorker) are unit-test doubles; the recorder's live run on the real local
models is the bank itself (data/banks/local)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence

import pytest

from podium.answers import answer_key, tally
from podium.conductor.compose import Column, NotReplayable, plan_workflow, sub_workflow
from podium.eval.bank import local_catalogue
from podium.executor import execute
from podium.messages import GrantedStep, worker_messages
from podium.roles import ROLES, SAMPLE_TEMPERATURE, counts_in_vote, role_of, step_settings, subtask
from podium.testing import ScriptedWorker
from podium.workers.base import Call, Completion, Message, WorkerSettings
from podium.workers.cache import request_key
from podium.workers.vote_tool import VoteToolWorker, granted_outputs, granted_steps
from podium.workflow import Step


def test_sample_steps_get_their_own_seed_per_worker() -> None:
    sample, solve = ROLES["sample"].subtask, ROLES["solve"].subtask
    steps = [Step(0, sample, ()), Step(1, sample, ()), Step(0, sample, ()), Step(0, solve, ()), Step(0, sample, ())]
    base = WorkerSettings(temperature=0.2, seed=10)
    got = [step_settings(steps, i, base) for i in range(len(steps))]
    assert got[3] is None  # solve keeps the worker's own settings
    seeds = [(s.seed, s.temperature) for s in got if s is not None]
    # worker 0: its 1st, 2nd, 3rd sample → seeds 11, 12, 13; worker 1's first sample → 11
    assert seeds == [(seed, SAMPLE_TEMPERATURE) for seed in (11, 11, 12, 13)]


def test_a_role_is_recognised_by_its_template_only() -> None:
    assert role_of("  Answer the question.\nEnd with the final answer. ") is ROLES["solve"]
    assert role_of("Answer the question, please.") is None


def test_math_keys_compare_numbers_not_text() -> None:
    keys = {answer_key(a, "math") for a in ("So it is $18.", "The answer is 18.00", "#### 18", "\\boxed{18}")}
    assert keys == {"18"}
    assert answer_key("half: 1/2", "math") == answer_key("it is 0.5", "math") == "1/2"
    assert answer_key("it is 50%", "math") != answer_key("it is 50", "math")
    assert answer_key("no number here", "math") is None


def test_code_keys_ignore_comments_docstrings_and_layout() -> None:
    a = '```python\ndef f(x):\n    """Double."""\n    return x*2  # twice\n```'
    b = "Here:\n```python\ndef f(x):\n\n    return x * 2\n```"
    c = "```python\ndef f(x):\n    return x + x\n```"
    assert answer_key(a, "code") == answer_key(b, "code") != answer_key(c, "code")


def test_tally_picks_the_earliest_answer_of_the_largest_group() -> None:
    answers = ["I think 5.", "It is 7.", "Final answer: 7", "Maybe 5"]
    t = tally(answers)
    # 5 and 7 tie at two votes; the group whose first answer came first (5, at index 0) wins
    assert (t.kind, t.winner, t.votes, t.agreement) == ("math", 0, 2, 0.5)
    t = tally(["It is 7.", "It is 5.", "so 5", "5!"])
    assert (t.winner, t.votes) == (1, 3)
    assert tally(["no", "answers", "here"], "math").votes == 0


def test_vote_tool_returns_a_whole_earlier_output() -> None:
    outputs = ["Work... The answer is 12.", "I get 13.", "Thus 12 apples.\n<question>x</question>"]
    message = worker_messages("Q?", [GrantedStep(i, "Answer.", o) for i, o in enumerate(outputs)], "Vote.")
    seen = granted_outputs(message[-1]["content"])
    assert seen[:2] == outputs[:2] and "‹question›" in seen[2]  # read back exactly (neutralised)
    result = asyncio.run(VoteToolWorker("vote").complete(Call(message)))
    assert result.text == outputs[0] and result.cost_usd == 0.0


def test_the_vote_tool_skips_programs_and_earlier_votes() -> None:
    """A program is code whose run is the answer, and a vote's output is a copy of an answer it
    saw: with access ``all`` (a cascade's second round sees the first round's steps too) a vote
    must count each answer once. Here the program's code ends in 99 and two earlier votes copy
    13; counting them would make 99 or 13 win instead of 12 (two of the three answers)."""
    shown = [
        (subtask("program"), "```python\nprint(3 * 4)  # 99\n```"),
        (subtask("run"), "12"),
        (subtask("solve"), "So the answer is 13."),
        (subtask("vote"), "So the answer is 13."),
        (subtask("vote"), "So the answer is 13."),
        (subtask("sample"), "The final answer is 12."),
    ]
    message = worker_messages("Q?", [GrantedStep(i, t, o) for i, (t, o) in enumerate(shown)], subtask("vote"))
    assert [t for t, _ in granted_steps(message[-1]["content"])] == [t for t, _ in shown]
    result = asyncio.run(VoteToolWorker("vote").complete(Call(message)))
    assert result.text == "12"
    assert [counts_in_vote(t) for t, _ in shown] == [False, True, True, False, False, True]
    assert counts_in_vote("Any free-text instruction.")


def test_vote_without_steps_is_an_error_text_not_an_exception() -> None:
    result = asyncio.run(VoteToolWorker("vote").complete(Call(worker_messages("Q?", [], "Vote."))))
    assert result.text.startswith("error:")


class _Recorder(ScriptedWorker):
    """A fake worker that also keeps the settings of each call."""

    def __init__(self, name: str) -> None:
        super().__init__(name, reply=lambda msgs: f"{name} says {len(self.calls)}")
        self.requests: list[tuple[list[Message], WorkerSettings | None]] = []

    async def complete(self, call: Call) -> Completion:
        self.requests.append((list(call.messages), call.settings))
        return await super().complete(call)


def _requests_of(members: Sequence[str], columns: dict[str, Column], names: Sequence[str]) -> list[tuple[str, str]]:
    """Request keys of every model call a plan makes, executed over fresh fakes."""
    pool = [_Recorder(n) if n not in ("python", "vote") else VoteToolWorker(n) for n in names]
    workflow = plan_workflow(members, columns, names, vote_worker="vote")
    asyncio.run(execute(workflow, "What is 6 * 7?", pool))
    keys = []
    for w in pool:
        if isinstance(w, _Recorder):
            for messages, settings in w.requests:
                keys.append((w.name, request_key(w, {"messages": messages, "settings": settings or w.info.settings})))
    return keys


def test_a_composed_plan_sends_exactly_the_requests_its_columns_recorded() -> None:
    cols = local_catalogue().columns  # _requests_of stands a vote tool in for "python": the fakes never run code
    names = ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "smollm2-135m", "python", "vote"]
    members = ["state@0.5b(program@1.5b)", "solve@1.5b", "sample1@1.5b", "sample2@1.5b", "solve@0.5b"]
    composed = set(_requests_of(members, cols, names))
    alone = {key for m in members for key in _requests_of([m], cols, names)}
    assert composed == alone  # every call is a request the bank recorded, and no other


def test_two_dependent_chains_cannot_both_replay() -> None:
    cols = local_catalogue().columns
    with pytest.raises(NotReplayable):
        plan_workflow(["state@0.5b(program@1.5b)", "fix@1.5b(test@1.5b)"], cols, [*_NAMES, "python", "vote"])


def test_sub_workflows_come_in_dependency_order() -> None:
    cols = local_catalogue().columns
    assert sub_workflow("sample3@1.5b", cols) == ["sample1@1.5b", "sample2@1.5b", "sample3@1.5b"]
    assert sub_workflow("state@0.5b(program@1.5b)", cols) == [
        "program@1.5b",
        "run(program@1.5b)",
        "state@0.5b(program@1.5b)",
    ]


_NAMES = ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "smollm2-135m"]


def test_request_key_is_the_documented_format() -> None:
    """Recorded banks and caches stay valid across refactors only while the key is unchanged:
    it is the sha256 of exactly the canonical JSON that request_key's docstring documents."""
    from podium.messages import DEFAULT_SYSTEM_PROMPT
    from podium.workers.base import Price
    from podium.workers.llama_cpp import LlamaCppWorker  # constructing it loads no model

    settings = WorkerSettings(max_tokens=512, temperature=0.2, top_p=0.95, seed=0)
    worker = LlamaCppWorker(
        "qwen2.5-coder-1.5b",
        "qwen2.5-coder-1.5b-instruct",
        settings=settings,
        price=Price(0.33, 1.11),
        system_prompt=DEFAULT_SYSTEM_PROMPT,
    )
    messages: list[Message] = [{"role": "user", "content": "What is 6 * 7?"}]
    documented = {
        "v": 1,
        "worker": {
            "name": "qwen2.5-coder-1.5b",
            "backend": "llama_cpp",
            "model": "qwen2.5-coder-1.5b-instruct",
            "system_prompt": DEFAULT_SYSTEM_PROMPT,
        },
        "messages": messages,
        "settings": {"max_tokens": 512, "temperature": 0.2, "top_p": 0.95, "seed": 0, "reasoning_effort": None},
    }
    blob = json.dumps(documented, sort_keys=True, ensure_ascii=False).encode("utf-8")
    key = request_key(worker, {"messages": messages, "settings": settings})
    assert key == hashlib.sha256(blob).hexdigest()
    # and the value itself, so a change of the default system prompt is noticed too
    assert key == _PINNED
    # grammar continuations add prefix, grammar and stop; an empty prefix/grammar/stop adds nothing
    plain = {"messages": messages, "settings": settings, "prefix": "", "grammar": None, "stop": []}
    assert request_key(worker, plain) == key
    assert request_key(worker, {**plain, "prefix": "model_id = ["}) != key


_PINNED = "afc82a428d8181a16fd4486850151e13187161d9aac7ce77cf3b03704dc75950"


def test_role_names_expand_to_their_instructions() -> None:
    """A roles-only conductor writes names; the workers receive the full instructions."""
    from podium.roles import expand
    from podium.workflow import Workflow

    written = Workflow((Step(0, "program", ()), Step(3, " Run ", (0,)), Step(1, "state", (0, 1)), Step(0, "free", ())))
    steps = expand(written).steps
    assert [role_of(s.subtask).name if role_of(s.subtask) else None for s in steps] == ["program", "run", "state", None]
    assert steps[3].subtask == "free" and steps[1].access == (0,)
