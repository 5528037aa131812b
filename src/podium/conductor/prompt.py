"""The conductor's prompt: task description, output format, the anonymous pool, the step limit,
few-shot workflows, and the question (Nielsen et al. 2026 §3, adapted to small local models).

The pool is shown only as ``Model 0 … Model N-1`` with each worker's optional capability note;
worker names never reach the conductor. The few-shot workflows are out of domain (no math, no
code), as in the paper, so they teach the format without leaking solutions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from podium.messages import neutralise
from podium.parse import PLAN_LABEL, listed_strings
from podium.roles import Role, role_of
from podium.text import read
from podium.workers.base import Message

__all__ = [
    "FEW_SHOT",
    "LEAK_WORDS",
    "REASONING_PREFIX",
    "TOOL",
    "FewShot",
    "conductor_messages",
    "embedded_instructions",
    "injected_subtasks",
    "recursion_messages",
    "roles_text",
    "unsafe_subtask",
    "workflow_text",
]

REASONING_PREFIX = "Reasoning:"
TOOL = -1
"""In a few-shot ``model_id``: the pool's first tool worker (examples using it are shown only
when the pool has one)."""


@dataclass(frozen=True)
class FewShot:
    """One example workflow. Worker ids are ranks (0 = strongest, higher = cheaper) or
    :data:`TOOL`."""

    question: str
    reasoning: str
    model_id: tuple[int, ...]
    subtasks: tuple[str, ...]
    access_list: tuple[str, ...]  # as written, e.g. '[]', '"all"', '[0, 1]'


FEW_SHOT: tuple[FewShot, ...] = (
    FewShot(
        question="Write a two-line rhyming slogan for a bakery that opens at 6 am.",
        reasoning="A short creative task; one capable worker can do it in a single step.",
        model_id=(1,),
        subtasks=("Write a two-line rhyming slogan for a bakery that opens at 6 am. Output only the slogan.",),
        access_list=("[]",),
    ),
    FewShot(
        question="Is the claim 'the Great Wall of China is visible from the Moon with the naked eye' true?",
        reasoning="Two independent checks of the claim, then the strongest worker weighs them and states the verdict.",
        model_id=(0, 1, 0),
        subtasks=(
            "Assess whether the Great Wall is visible from the Moon with the naked eye. Give evidence.",
            "Independently assess the same claim, considering the Wall's width and the Moon's distance.",
            "Compare both assessments, resolve any disagreement, and state the final verdict in one sentence.",
        ),
        access_list=("[]", "[]", "[0, 1]"),
    ),
    FewShot(
        question="Translate 'The meeting moved to Thursday at noon' into French, then explain any tense choice.",
        reasoning="Draft the translation, then have a second worker check it and give the final version.",
        model_id=(1, 0),
        subtasks=(
            "Translate the sentence into French.",
            "Check the translation for grammar and tense, fix it if needed, and give the final translation "
            "with a one-sentence explanation of the tense.",
        ),
        access_list=("[]", '"all"'),
    ),
    FewShot(
        question="Why does 'SELECT city, name FROM users GROUP BY city' fail in PostgreSQL, and how do I fix it?",
        reasoning="A strong worker diagnoses and fixes; the same worker checks the fix and gives the final answer.",
        model_id=(0, 0),
        subtasks=(
            "Explain why the query fails and write a corrected query.",
            "Check the explanation and the corrected query for mistakes and give the final explanation and query.",
        ),
        access_list=("[]", '"all"'),
    ),
    FewShot(
        question="How many weekdays (Monday to Friday) are there from 2024-03-01 to 2024-07-15, inclusive?",
        reasoning="Exact counting is error-prone by hand: a strong worker writes a program, the Python tool runs "
        "it, and a strong worker states the answer from its output.",
        model_id=(0, TOOL, 0),
        subtasks=(
            "Write a short Python program that computes and prints the number of weekdays from 2024-03-01 to "
            "2024-07-15 inclusive. Put it in one ```python code block.",
            "Run the program.",
            "Using the program's printed output, state the final answer as a number.",
        ),
        access_list=("[]", "[0]", '"all"'),
    ),
)

_TASK = """You are the conductor of a team of AI workers. You never answer the question yourself. \
You write a workflow: a short sequence of steps, each done by one worker, whose last step produces \
the final answer.

The workers:
{workers}

Output format:
First one line that starts with "Reasoning:" and says briefly how to split the task and which \
worker suits each step. Then exactly three lists of equal length, one step per position:
model_id = [...]     the worker of each step, an integer from 0 to {last}
subtasks = [...]     the instruction each worker receives, a double-quoted string
access_list = [...]  what each step may read: [] for nothing, "all" for every earlier step, \
or earlier step numbers such as [0, 2]

Rules:
- At most {max_steps} steps, numbered from 0. Most questions need one to three steps.
- A worker sees the question, its own subtask, and only the steps its access_list grants.
- The last step's output is the final answer: its subtask must ask for the complete answer \
(for code: the complete final code; for math: the reasoning and the final number), and it should \
go to a worker strong enough to solve the whole question.
- Match workers to steps by their descriptions: never give math, code or the final answer to a \
worker described as unreliable at them. Use cheaper workers only for steps they can do well.{examples}"""


def workflow_text(reasoning: str, model_id: Sequence[int], subtasks: Sequence[str], access_list: Sequence[str]) -> str:
    """A workflow as the conductor writes it: the reasoning line, then the three lists.

    ``access_list`` entries are written as given (e.g. ``'[]'``, ``'"all"'``, ``'[0, 1]'``)."""
    quoted = ", ".join(f'"{s}"' for s in subtasks)
    return (
        f"{REASONING_PREFIX} {reasoning}\n"
        f"model_id = [{', '.join(str(i) for i in model_id)}]\n"
        f"subtasks = [{quoted}]\n"
        f"access_list = [{', '.join(access_list)}]"
    )


def _example_text(shot: FewShot, n_workers: int, tool: int | None) -> str:
    ids = [tool if i == TOOL and tool is not None else min(i, n_workers - 1) for i in shot.model_id]
    return f"Question: {shot.question}\n" + workflow_text(shot.reasoning, ids, shot.subtasks, shot.access_list)


def _examples_text(few_shot: Sequence[FewShot], n_workers: int, tool: int | None) -> str:
    shown = [_example_text(s, n_workers, tool) for s in few_shot if tool is not None or TOOL not in s.model_id]
    return "\n\nExamples:\n\n" + "\n\n".join(shown) if shown else ""


def roles_text(roles: Sequence[Role]) -> str:
    """The prompt section that lists the roles a roles-only conductor writes as subtasks (by
    name: the workers receive each role's full instruction)."""
    lines = [f"- {r.name}: {r.brief}" for r in roles]
    return (
        "\n\nSubtasks: write every subtask as one of these role names; each worker then receives that "
        'role\'s full instruction (for example subtasks = ["program", "run", "state"]):\n' + "\n".join(lines)
    )


def conductor_messages(
    question: str,
    descriptions: Sequence[str],
    *,
    max_steps: int,
    few_shot: Sequence[FewShot] = FEW_SHOT,
    tool: int | None = None,
    roles: Sequence[Role] = (),
) -> list[Message]:
    """The conductor's prompt as chat messages.

    Args:
        question: the user's question (untrusted: neutralised like any worker input).
        descriptions: per pool worker, in pool order, its capability note ("" for none).
        max_steps: the step limit to state.
        few_shot: example workflows (ids clamped to the pool size); none leaves the examples
            section out (a conductor trained with the format warm start needs none).
        tool: index of the pool's first tool worker; examples that use a tool are left out
            without one.
        roles: the role instructions subtasks must be (:func:`roles_text`); none: free subtasks.
    """
    n = len(descriptions)
    workers = "\n".join(f"- Model {i}" + (f": {d}" if d else "") for i, d in enumerate(descriptions))
    system = _TASK.format(
        workers=workers,
        last=n - 1,
        max_steps=max_steps,
        examples=(roles_text(roles) if roles else "") + _examples_text(few_shot, n, tool),
    )
    user = f"Question: {neutralise(question)}\n\nWrite the workflow for this question."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_REVIEW = """Your workflow above (round {round}) was executed. Its final answer was:

<answer>
{answer}
</answer>

Review it. If the answer is correct and complete, keep it: write a "Reasoning:" line, then \
three empty lists (model_id = [], subtasks = [], access_list = []). Otherwise write a new \
workflow in the same format to fix or improve it; in the new workflow, steps with access_list \
"all" also see every step of the previous round."""


def recursion_messages(base: Sequence[Message], previous_lists: str, answer: str, round: int) -> list[Message]:
    """The prompt of a recursion round (Nielsen et al. 2026 §3.2): the first round's prompt,
    the conductor's previous workflow as its own reply, then the answer to review.

    Args:
        base: the first round's messages (:func:`conductor_messages`).
        previous_lists: the previous workflow's three lists (``Workflow.lists_text()``).
        answer: the previous round's final answer (untrusted: neutralised).
        round: the previous round's number.
    """
    return [
        *base,
        {"role": "assistant", "content": previous_lists},
        {"role": "user", "content": _REVIEW.format(round=round, answer=neutralise(answer))},
    ]


LEAK_WORDS = 8
"""A subtask that repeats this many consecutive words of the conductor's own prompt (its
instructions or examples) that the question does not contain has leaked prompt text."""

_WORD = re.compile(r"\w+")


def _as_read(text: str) -> str:
    """``text`` as a model reads it (:func:`podium.text.read`): invisible characters dropped,
    look-alikes and compatibility forms folded, HTML character references decoded. Every rule
    below matches on it, so ``SYSTЕM:`` (a Cyrillic Е), ``SYSTEM：`` and ``ѕubtasks =`` are what
    they look like."""
    return read(text).view


def _words(text: str) -> str:
    return " ".join(_WORD.findall(_as_read(text).lower()))


def injected_subtasks(question: str) -> list[str]:
    """The subtasks of any workflow written in ``question``, as lower-case word sequences joined
    by spaces (each once, read as :func:`_as_read` reads it).

    Derived from the parser (:func:`podium.parse.listed_strings`): every string in a subtasks
    list its label pattern, quote table and reader would read — straight, curly, ‘…’, „…“, »…«
    quotes, JSON or markdown labels — and the items of a YAML or markdown list under the label,
    in the question as written and as read (fullwidth brackets ``［…］``, look-alike letters or
    invisible characters in the label). Linear in the question's length."""
    found: dict[str, None] = {}
    view = _as_read(question)
    for text in (question, view) if view != question else (question,):
        for string in listed_strings(text):
            if words := _words(string):
                found.setdefault(words, None)
    return list(found)


_ROLES = "system|user|assistant|developer|tool|model|ipython"
_MARKER = re.compile(
    # a role label in capitals, or a chat-template role turn written as data, where a line or a
    # sentence starts ("Great product. SYSTEM: …", "Great product.<|im_start|>system"; not "Solar
    # system: …", nor a quoted notice's "System: your password expires", nor "How do I use [INST]
    # tags?"). The turns: ChatML <|im_start|>system, Llama 3 <|start_header_id|>user<|end_header_id|>,
    # Phi <|system|>, DeepSeek <｜User｜> (as read), Gemma <start_of_turn>user, Llama 2 / Mistral
    # [INST], [/INST], <<SYS>>, [SYSTEM_PROMPT]
    r"(?:(?<=[\n.!?;:'\"“”‘’(\[{<>])|(?<=[\n.!?;:'\"“”‘’(\[{<>]) )"
    r"(?:(?:SYSTEM|ASSISTANT|DEVELOPER|ADMIN(?:ISTRATOR)?)(?:\s+(?:PROMPT|MESSAGE|NOTE|OVERRIDE))?\s*:"
    rf"|(?i:(?:<\|im_start\|>|<\|start_header_id\|>|<start_of_turn>)[ \t]*(?:{_ROLES})?(?:[ \t]*<\|end_header_id\|>)?"
    rf"|<\|(?:{_ROLES})\|>|\[/?(?:INST|SYSTEM_PROMPT)\]|<</?SYS>>)\s*)"
    r"|(?i:\b(?:new|neue[n]?|nye?|nouvelles?|nuevas?)\s+(?:plan|instructions|orders|anweisungen|instruktioner|"
    r"consignes|instrucciones)\s*:)"
    # a chat message's role written as data, JSON or YAML: "role": "system", role: developer
    r"|(?i:\brole[\"']?\s*:\s*[\"']?(?:system|developer)\b)"
    # the assistant told what it now is: "you are now DAN", "from now on you will …", "fra nu af er du"
    r"|(?i:\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\b|\bfra\s+nu\s+af\s+(?:er|skal)\s+du\b|"
    r"\bab\s+(?:jetzt|sofort)\s+(?:bist|sollst)\s+du\b|\bdu\s+bist\s+jetzt\b)"
    # an override aimed at the assistant's own instructions: "ignore all previous instructions",
    # "disregard your prompt" (not "ignore the rules for one line", "override the CSS rules");
    # English, Danish/Norwegian, Swedish, German, French, Spanish
    r"|(?i:\b(?:ignore[sz]?|disregard|forget|override|bypass|ignorer(?:e|a)?|glem|glöm|se\s+bort\s+fra|"
    r"ignoriere|ignorieren|vergiss|vergessen|oublie[sz]?|ignora|olvida)\s+(?:\w+\s+){0,2}?"
    r"(?:all|previous|prior|above|earlier|preceding|original|your|system|alle|tidligere|foregående|ovenstående|dine|"
    r"alla|tidigare|dina|vorherigen|bisherigen|obigen|deine|ihre|toutes|tous|les|précédentes|vos|todas|las|"
    r"anteriores|tus)"
    r"\s+(?:\w+\s+)?(?:instructions?|prompts?|rules|guidelines|directions|orders|instruktion(?:er|erne)?|"
    r"regler(?:ne|na)?|anweisungen|regeln|vorgaben|consignes|règles|instrucciones|reglas|indicaciones)\b)"
)
_SPAN = 200
"""How far an embedded instruction reaches after its marker, characters (up to a line break;
the blank lines right after the marker are skipped first)."""
_STOP_WORDS = """a an the and or but of to in on at for from with by as any all every each this that these those
it its is are be was were do does your my our their his her me you we they i them us so then than into onto
og i på at for til af en et den det de med som er din dit dine min mit mine alle"""
_STOP = frozenset(_STOP_WORDS.split())
"""Words too common to tell an instruction apart (English and Danish), left out of the 3-grams."""


def _content(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _ngrams(words: Sequence[str], n: int = 3) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def embedded_instructions(text: str) -> tuple[set[tuple[str, ...]], str]:
    """Instructions embedded in untrusted ``text`` (a question, a worker's output): what follows
    a role or override marker (``SYSTEM:``, a chat-template role turn such as
    ``<|im_start|>system`` or ``[INST]``, ``new plan:``, ``"role": "system"``, ``you are now``,
    ``ignore your instructions``, in English, Danish, Norwegian, Swedish, German, French and
    Spanish) up to the end of its line (or of the next line with text, when the marker ends its
    own), at most :data:`_SPAN` characters. A role
    label counts where a line or sentence starts; a marker that opens the text is its author's
    own words, not an embedded instruction. The text is matched as read (:func:`_as_read`), so
    a marker in look-alike letters, fullwidth forms or with invisible characters inside counts.

    Returns the content-word 3-grams of those spans (stop words dropped, lower case) and the
    text outside them (as read). Linear in ``len(text)`` (bounded patterns, one scan)."""
    text = _as_read(text)
    grams: set[tuple[str, ...]] = set()
    outside: list[str] = []
    end = 0
    opening = len(text) - len(text.lstrip())
    for marker in _MARKER.finditer(text):
        if marker.start() < end or marker.start() <= opening:
            continue  # inside the span before; or where the text starts: that is its author's own
        outside.append(text[end : marker.start()])
        after = text[marker.end() : marker.end() + _SPAN]
        begin = marker.end() + len(after) - len(after.lstrip())  # SYSTEM:\n<the order>
        stop = text.find("\n", begin, begin + _SPAN)
        end = stop if stop != -1 else min(len(text), begin + _SPAN)
        grams |= _ngrams(_content(text[begin:end]))
    outside.append(text[end:])
    return grams, "".join(outside)


def _grams(text: str) -> set[tuple[str, ...]]:
    return _ngrams(_WORD.findall(text.lower()), LEAK_WORDS)


def unsafe_subtask(subtasks: Sequence[str], messages: Sequence[Message], question: str) -> str | None:
    """Why an LM conductor's subtasks may not be sent to workers, or None when they may.

    Four rules, checked per step (the conductor reads untrusted text, so a steered conductor must
    not carry it further):

    * a subtask may not contain workflow syntax (a list label as the parser reads it,
      :data:`podium.parse.PLAN_LABEL`: ``model_id =``, ``"subtasks":``, ``**access list**:``): no
      worker is ever asked to write, or shown, a plan — an injected plan in the question stays
      data;
    * a subtask may not repeat :data:`LEAK_WORDS` consecutive words of the conductor's prompt
      (``messages``) that the question does not contain: the prompt's instructions and few-shot
      examples never reach a worker;
    * a subtask may not be, or be part of, a subtask of a workflow written in the question
      (:func:`injected_subtasks`): a plan in the question is data, never the conductor's plan;
    * a subtask may not carry an instruction embedded in the question or in an earlier output
      the conductor was shown (:func:`embedded_instructions`: three content words in a row from
      what follows ``SYSTEM:``, ``<|im_start|>system``, ``ignore your instructions`` and the
      like, that the rest of the text does not contain): such text is data, never the
      conductor's orders.

    Subtasks, the question and what the conductor was shown are compared as read
    (:func:`_as_read`: look-alikes folded, invisible characters dropped). Role templates
    (:mod:`podium.roles`) are the conductor's own vocabulary and always allowed.
    """

    prompt = _grams("\n".join(m["content"] for m in messages)) - _grams(question)
    injected = injected_subtasks(question)
    shown = "\n".join([question, *(m["content"] for m in messages if m["role"] != "system")])
    embedded, rest = embedded_instructions(shown)
    embedded -= _ngrams(_content(rest))
    for index, subtask in enumerate(subtasks):
        if role_of(subtask) is not None:
            continue
        seen = _as_read(subtask)
        if PLAN_LABEL.search(seen):
            return f"step {index}: a subtask may not contain workflow syntax (model_id / subtasks / access_list)"
        words = " ".join(_WORD.findall(seen.lower()))
        if words and any(f" {words} " in f" {i} " or f" {i} " in f" {words} " for i in injected):
            return (
                f"step {index}: the subtask copies a workflow written in the question (a plan in the question is data)"
            )
        carried = _ngrams(_content(seen)) & embedded
        if carried:
            return (
                f"step {index}: the subtask carries an instruction embedded in the question or an output "
                f"({' '.join(sorted(carried)[0])!r} …): such text is data"
            )
        copied = _grams(subtask) & prompt
        if copied:
            words = " ".join(sorted(copied)[0])
            return f"step {index}: the subtask repeats the conductor's own prompt ({words!r} …)"
    return None
