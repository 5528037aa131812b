"""Verifiers: is an answer right? The correctness part of the evaluation reward.

:func:`verify` reads a :class:`~podium.eval.tasks.Task` and a final answer text and returns a
:class:`Verdict` (score in [0, 1], correct, parsed, what was compared, why). It dispatches on
``task.task_type``:

``math``
    The answer's final answer is taken as, in order: the content of the last ``\\boxed{…}``
    (or ``\\fbox{…}``); else the first number or expression after the last explicit marker
    (``#### n``, ``answer is``, ``Answer:``, ``final answer:``, bold allowed) on its line (or
    the next non-empty line); else the last number in the text. A number may carry a sign
    (``-3``, ``−3``), a currency sign (``$1,234.50``), thousands separators (commas, thin or
    no-break spaces; not plain spaces), decimals, a ``/`` fraction (``3/4``), a percent sign
    or word, or be a LaTeX ``\\frac{a}{b}``. Currency signs and thousands separators are
    dropped, a percent becomes ``\\%``, and the candidate is compared to ``task.reference`` with
    math-verify (Hugging Face, https://github.com/huggingface/Math-Verify), which decides
    ``18.00 == 18``, ``0.5 == \\frac{1}{2}``, ``-3 != 3``. Percentages follow math-verify:
    ``50%`` equals both ``50`` and ``0.5`` (GSM8K asks "what percent…" with reference ``50``;
    other sets write the fraction). math-verify runs in a separate helper process
    (:mod:`podium.eval.math_helper`) with its own timeouts (:data:`MATH_TIMEOUT_S` per
    parse/compare); the helper is killed after
    :data:`MATH_HARD_TIMEOUT_S` per comparison, so an answer like ``\\boxed{9^{9^{9^9}}}`` cannot
    hang the caller; a candidate longer than :data:`MAX_MATH_CHARS` is not compared.
    ``parsed`` is False when no number or expression is found, or math-verify cannot read it.
``code``
    The code is the last fenced ``python``/``py`` block (a bare fence if there is none); the last
    block that defines the function under test wins over later ones (usage examples, a block of
    the task's own asserts). The function under test is the task's ``entry_point``, else (MBPP)
    the first function the tests call that neither Python's builtins nor ``setup`` define. A
    block indented inside a Markdown list item is dedented, as CommonMark does. With no block,
    the whole answer if it parses as Python (``ast.parse``) and is more than a bare name or
    constant. The program is ``setup + code + tests + check(entry_point)`` (the call only when
    the tests define ``check``) — HumanEval's check convention (Chen et al. 2021,
    https://github.com/openai/human-eval) — or, with no entry point, ``code + setup + tests``
    — MBPP's assert lists (Austin et al. 2021,
    https://github.com/google-research/google-research/tree/master/mbpp), whose
    ``test_setup_code`` builds fixtures from the solution's own classes. When a task has an
    ``entry_point`` and a ``setup`` (HumanEval: the prompt) but the code does not define the
    entry point, the code is taken as the function's body: ``setup`` + the code re-indented to
    the prompt's last line. As in the HumanEval harness, ``if __name__ == "__main__":`` blocks
    do not run. The program runs in :func:`podium.sandbox.run_python`; correct iff it exits
    with status 0 within ``code_timeout_s``. ``parsed`` is False when no code is found.
``choice``
    The letter (A… up to ``len(task.choices)``, else A–J; uppercase only) is taken from, in
    order: the last explicit marker (``Answer: B``, ``The correct answer is (B).``,
    ``answer: **B**``); a last line that is only a letter (``B``, ``(B)``, ``**B**``, ``B.``);
    a single option-style line ``B) text`` / ``B. text`` at the start or end of the answer; the
    last ``(B)``, ``[B]`` or ``**B**`` in the text. After ``Answer:`` the words "A" and "I"
    followed by a lowercase word ("Answer: A robe takes…") are prose, not letters; after
    "answer is" a capital letter is a choice ("The answer is A because…"); prose without a
    marker, a lone letter or a bracketed one gives no letter (parsed False). Compared
    case-insensitively with ``task.reference``.
``exact``
    Both sides are normalised (Unicode NFKC, casefold, whitespace stripped and collapsed,
    surrounding quotes and a trailing period removed); correct when the answer equals the
    reference, or its last non-empty line does (an ``Answer:`` / ``Final answer:`` prefix on
    that line is dropped).
``open``
    A judge worker grades the answer against a rubric (question, reference if any, answer)
    and is asked to end with ``Score: N``, N from 1 to 10; its grade is read as
    :func:`parse_judge_score` says and clamped to 1–10; score = N / 10; correct when N >=
    :data:`JUDGE_PASS_SCORE`. A reply with no grade is asked once more for the number alone (a
    llama.cpp judge continues its own reply after ``Score: `` under a grammar; another gets a
    follow-up message). Still none gives parsed False and score 0; so does an empty answer,
    which is not sent. The judge is called with ``max_tokens=256, temperature=0`` (4 tokens
    when asked again); its provider errors propagate (the caller's retry policy applies). The
    answer shown to the judge is cut to 12,000 characters.

Verifiers never raise on a bad answer (empty, garbage, huge); they raise
:class:`~podium.errors.ConfigError` on configuration errors only: an unknown task type, a
task without the reference or tests its type needs, an ``open`` task without a judge, or
math-verify missing.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import dataclasses
import re
import textwrap
from dataclasses import dataclass

from podium.answers import (
    MAX_MATH_CHARS,
    defines,
    extract_choice,
    extract_code_answer,
    extract_math_answer,
    normalize_exact,
)
from podium.errors import ConfigError
from podium.eval.math_helper import MATH_HARD_TIMEOUT_S, MATH_TIMEOUT_S, compare_math
from podium.eval.math_helper import MathProcess as _MathProcess  # noqa: F401 (tests build their own helper)
from podium.eval.tasks import Task
from podium.extras import install_command
from podium.sandbox import run_python
from podium.workers.base import Call, Message, Worker, WorkerSettings

__all__ = [
    "JUDGE_PASS_SCORE",
    "JUDGE_SETTINGS",
    "JUDGE_SYSTEM",
    "MATH_HARD_TIMEOUT_S",
    "MATH_TIMEOUT_S",
    "MAX_MATH_CHARS",
    "Verdict",
    "build_program",
    "extract_choice",
    "extract_code_answer",
    "extract_math_answer",
    "function_under_test",
    "judge_messages",
    "normalize_exact",
    "parse_judge_score",
    "verify",
]

JUDGE_PASS_SCORE = 7
"""An ``open`` answer is correct when the judge's score (1–10) is at least this."""

JUDGE_SETTINGS = WorkerSettings(max_tokens=256, temperature=0.0)
"""Decoding settings of every judge call."""

_JUDGE_ANSWER_CHARS = 12_000
_DETAIL_CHARS = 200


@dataclass(frozen=True)
class Verdict:
    """How an answer fared against its task.

    Attributes:
        score: reward in [0, 1]; 1.0 or 0.0 except for ``open`` (judge score / 10).
        correct: whether the answer counts as right.
        parsed: the answer had the expected form (a number, a letter, a code block, a judge
            score) — the format check.
        extracted: what was compared (the final number, the letter, the code), or None.
        detail: a short human-readable reason.
    """

    score: float
    correct: bool
    parsed: bool
    extracted: str | None
    detail: str


async def verify(task: Task, answer: str, *, judge: Worker | None = None, code_timeout_s: float = 10.0) -> Verdict:
    """Check ``answer`` against ``task`` with the verifier of ``task.task_type`` (rules in the
    module docstring).

    Args:
        task: the question with its reference or tests.
        answer: the final answer text to judge.
        judge: the worker that grades ``open`` tasks (``--judge NAME``); unused otherwise.
        code_timeout_s: wall-time limit of a ``code`` task's program, seconds.

    Raises:
        ConfigError: unknown task type, missing reference or tests, ``open`` without a judge,
            math-verify not installed.
        ProviderError: the judge's call failed (``open`` only).
    """
    if task.task_type == "math":
        return await _verify_math(task, _require_reference(task), answer)
    if task.task_type == "code":
        return await _verify_code(task, answer, code_timeout_s)
    if task.task_type == "choice":
        return _verify_choice(task, _require_reference(task), answer)
    if task.task_type == "exact":
        return _verify_exact(_require_reference(task), answer)
    if task.task_type == "open":
        if judge is None:
            raise ConfigError(
                f"task {task.id!r} is an open task, graded by an LLM judge: configure a judge worker (--judge NAME)"
            )
        return await _verify_open(task, answer, judge)
    raise ConfigError(f"task {task.id!r}: unknown task_type {task.task_type!r}")


def _require_reference(task: Task) -> str:
    if task.reference is None or not task.reference.strip():
        raise ConfigError(f"task {task.id!r}: a {task.task_type} task needs a reference answer")
    return task.reference


def _wrong(detail: str, *, parsed: bool, extracted: str | None = None) -> Verdict:
    return Verdict(score=0.0, correct=False, parsed=parsed, extracted=extracted, detail=detail)


def _short(text: str, limit: int = _DETAIL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- math -------------------------------------------------------------------------------------


async def _verify_math(task: Task, reference: str, answer: str) -> Verdict:
    candidate = extract_math_answer(answer)
    if candidate is None or not candidate:
        return _wrong("no number or expression found in the answer", parsed=False)
    if len(candidate) > MAX_MATH_CHARS:
        return _wrong(
            f"final answer too long to compare ({len(candidate)} characters)",
            parsed=True,
            extracted=candidate[:50] + "…",
        )
    outcome = await asyncio.to_thread(compare_math, reference, candidate)
    if outcome.status == "equal":
        return Verdict(1.0, True, True, candidate, f"{candidate} equals the reference {reference}")
    if outcome.status == "different":
        return _wrong(f"{candidate} does not equal the reference {reference}", parsed=True, extracted=candidate)
    if outcome.status == "unparsed":
        return _wrong(f"math-verify cannot read {_short(candidate, 60)!r}", parsed=False, extracted=candidate)
    if outcome.status == "timeout":
        return _wrong(
            f"math-verify took longer than {MATH_HARD_TIMEOUT_S:g} s comparing {_short(candidate, 60)!r}",
            parsed=True,
            extracted=candidate,
        )
    if outcome.status == "bad_reference":
        raise ConfigError(f"task {task.id!r}: math-verify cannot read the reference {reference!r}")
    if outcome.status == "missing":
        raise ConfigError(
            f"math tasks need math-verify: {install_command('eval')} (or math-verify==0.9.0); {outcome.detail}"
        )
    return _wrong(
        f"math-verify failed on {_short(candidate, 60)!r}: {outcome.detail}", parsed=True, extracted=candidate
    )


# --- code -------------------------------------------------------------------------------------

_FUTURE_IMPORT = re.compile(r"^[ \t]*(from[ \t]+__future__[ \t]+import[^\n]*)$", re.MULTILINE)


def build_program(task: Task, code: str) -> str:
    """The program run for a code answer.

    HumanEval style (the task has an ``entry_point``): ``setup`` (the prompt), the code (or,
    when it does not define the entry point, the code as the prompt function's body), the
    tests, ``check(entry_point)`` when the tests define ``check``. MBPP style (no entry point):
    the code, then ``setup`` (MBPP's ``test_setup_code`` builds test fixtures from the solution's own classes, e.g.
    ``root = Node(1)`` in mbpp/367), then the tests.
    """
    setup = task.setup or ""
    if not task.entry_point:
        program = code + "\n" + setup + "\n"
    elif setup.strip() and not defines(code, task.entry_point):
        last_line = next((line for line in reversed(setup.splitlines()) if line.strip()), "")
        indent = last_line[: len(last_line) - len(last_line.lstrip())]
        if last_line.rstrip().endswith(":"):  # a signature without docstring: one level deeper
            indent += "    "
        body = textwrap.indent(textwrap.dedent(code), indent or "    ", lambda line: True)
        program = setup.rstrip("\n") + "\n" + body + "\n"
    else:
        program = setup + "\n" + code + "\n"
    program += task.tests or ""
    if task.entry_point and defines(task.tests or "", "check"):
        program += f"\ncheck({task.entry_point})"
    # `from __future__` imports must open the file; the answer's ones move to the top.
    futures = _FUTURE_IMPORT.findall(program)
    program = _FUTURE_IMPORT.sub("", program)
    # As in the HumanEval harness, a model's `if __name__ == "__main__":` demo does not run.
    return "".join(f"{line}\n" for line in futures) + '__name__ = "__podium_check__"\n' + program + "\n"


async def _verify_code(task: Task, answer: str, timeout_s: float) -> Verdict:
    if not (task.tests or "").strip():
        raise ConfigError(f"task {task.id!r}: a code task needs tests (Python asserts)")
    code = extract_code_answer(answer, task.entry_point or function_under_test(task.tests or "", task.setup))
    if code is None:
        return _wrong("no Python code block found in the answer", parsed=False)
    result = await run_python(build_program(task, code), timeout_s=timeout_s, output_chars=2000)
    if result.passed:
        return Verdict(1.0, True, True, code, "all tests passed")
    if result.timed_out:
        return _wrong(f"timed out after {timeout_s:g} s (killed)", parsed=True, extracted=code)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    reason = lines[-1].strip() if lines else f"exit code {result.exit_code}"
    return _wrong(f"tests failed: {_short(reason)}", parsed=True, extracted=code)


# --- choice -----------------------------------------------------------------------------------


def _verify_choice(task: Task, reference: str, answer: str) -> Verdict:
    expected = reference.strip().strip("()").upper()
    letter = extract_choice(answer, len(task.choices))
    if letter is None:
        return _wrong("no answer letter found", parsed=False)
    if letter == expected:
        return Verdict(1.0, True, True, letter, f"chose {letter}, the reference")
    return _wrong(f"chose {letter}, the reference is {expected}", parsed=True, extracted=letter)


# --- exact ------------------------------------------------------------------------------------


_ANSWER_PREFIX = re.compile(r"^(?:\*\*)?(?:final\s+)?answer(?:\*\*)?\s*:\s*(?:\*\*)?\s*", re.IGNORECASE)


def _verify_exact(reference: str, answer: str) -> Verdict:
    expected = normalize_exact(reference)
    whole = normalize_exact(answer)
    if not whole:
        return _wrong("empty answer", parsed=False)
    if whole == expected:
        return Verdict(1.0, True, True, whole, "the answer matches the reference")
    last_line = next((line for line in reversed(answer.splitlines()) if line.strip()), "")
    tail = normalize_exact(_ANSWER_PREFIX.sub("", last_line.strip()))
    if tail == expected:
        return Verdict(1.0, True, True, tail, "the answer's last line matches the reference")
    return _wrong(f"{_short(tail, 80)!r} does not match the reference {reference!r}", parsed=True, extracted=tail)


# --- open -------------------------------------------------------------------------------------

JUDGE_SYSTEM = (
    "You are a strict, fair grader. You judge whether an answer to a question is correct, "
    "complete and well supported. You do not answer the question yourself."
)

_JUDGE_SCORE = re.compile(r"\b(?:score|rating|grade)\b[^\d\n]{0,24}?(\d{1,3}(?:\.\d+)?)", re.IGNORECASE)
"""A grade as judges write it: "Score: 7", "**Score:** 7", "the score is 7", "a rating of 7/10"."""
_OUT_OF_TEN = re.compile(r"(?<![\d.])(\d{1,2}(?:\.\d+)?)\s*(?:/|out of)\s*10\b", re.IGNORECASE)
"""A bare "7/10" or "7 out of 10", read when no line names the score."""


def judge_messages(task: Task, answer: str) -> list[Message]:
    """The system and user messages sent to the judge of an ``open`` task."""
    shown = answer
    if len(shown) > _JUDGE_ANSWER_CHARS:
        shown = shown[:_JUDGE_ANSWER_CHARS] + f"\n… [{len(answer) - _JUDGE_ANSWER_CHARS} more characters cut]"
    parts = [f"<question>\n{task.question}\n</question>"]
    if task.reference:
        parts.append(f"<reference_answer>\n{task.reference}\n</reference_answer>")
    parts.append(f"<answer>\n{shown}\n</answer>")
    rubric = (
        "Grade the answer to the question"
        + (" against the reference answer" if task.reference else "")
        + ". Scale: 10 = fully correct and complete; 7 = correct with minor omissions; "
        "4 = partly correct or with a significant error; 1 = wrong, off-topic or empty. "
        "Give one or two sentences of reasons, then end with a line of the form `Score: N` "
        "with N an integer from 1 to 10."
    )
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": "\n\n".join([*parts, rubric])},
    ]


def parse_judge_score(text: str) -> float | None:
    """The judge's grade, clamped to 1–10, or None: the last number after the word score,
    rating or grade on its line (``Score: N`` as asked, also "the score is N", "a score of
    N/10"), else the last bare "N/10" or "N out of 10". Small judges seldom keep the format:
    the 1.5B worker ends its reply with "Therefore, the score is 10."."""
    matches = _JUDGE_SCORE.findall(text) or _OUT_OF_TEN.findall(text)
    if not matches:
        return None
    return min(10.0, max(1.0, float(matches[-1])))


_SCORE_GRAMMAR = 'root ::= [1-9] | "10"'
"""What a llama.cpp judge may write after ``Score: `` when asked again."""
_SCORE_FOLLOW_UP = "Now give your score alone: one integer from 1 to 10, nothing else."
_BARE_NUMBER = re.compile(r"^\D{0,12}?(\d{1,2})\b")


async def _score_asked_again(judge: Worker, messages: list[Message], reply: str) -> float | None:
    """The score of a judge whose reply named none, asked for once more: a judge that can
    continue text under a grammar (llama.cpp) continues its own reply after ``Score: `` with a
    number from 1 to 10; any other gets a follow-up message and its reply's leading number is
    read. None when it still gives none."""
    settings = dataclasses.replace(JUDGE_SETTINGS, max_tokens=4)
    if judge.info.grammar:
        prefix = reply.rstrip() + "\nScore: "
        completion = await judge.complete(Call(messages, settings, prefix=prefix, grammar=_SCORE_GRAMMAR))
        text = completion.text.strip()
        return float(text) if text.isdigit() and 1 <= int(text) <= 10 else None
    asked: list[Message] = [
        *messages,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": _SCORE_FOLLOW_UP},
    ]
    completion = await judge.complete(Call(asked, settings))
    found = parse_judge_score(completion.text)
    if found is None and (bare := _BARE_NUMBER.match(completion.text.strip())) is not None:
        found = float(bare.group(1))
    return None if found is None else min(10.0, max(1.0, found))


async def _verify_open(task: Task, answer: str, judge: Worker) -> Verdict:
    if not answer.strip():
        return _wrong("empty answer (not sent to the judge)", parsed=False)
    messages = judge_messages(task, answer)
    completion = await judge.complete(Call(messages, JUDGE_SETTINGS))
    score = parse_judge_score(completion.text)
    if score is None:  # small judges often stop after their reasons: ask for the number alone
        score = await _score_asked_again(judge, messages, completion.text)
    if score is None:
        return _wrong(
            f"the judge's reply gives no score (asked for 'Score: N'): {_short(completion.text.strip(), 80)!r}",
            parsed=False,
        )
    return Verdict(
        score=score / 10,
        correct=score >= JUDGE_PASS_SCORE,
        parsed=True,
        extracted=f"{score:g}",
        detail=f"judge {judge.info.name} scored {score:g}/10 (pass: {JUDGE_PASS_SCORE})",
    )


def function_under_test(tests: str, setup: str | None = None) -> str | None:
    """The first function ``tests`` call by name (``assert f(…) == …``, ``assert set(f(…)) ==
    …``, ``math.isclose(f(…), …)``) that is neither a builtin nor defined in ``setup``, else the
    first called name at all (mbpp/126's solution is named ``sum``); None when nothing is called
    by name or the tests do not parse. MBPP names no entry point; its asserts do."""
    try:
        module = ast.parse(tests)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    skip = set(dir(builtins))
    if setup:
        with contextlib.suppress(SyntaxError, ValueError, MemoryError, RecursionError):
            skip |= {n.name for n in ast.walk(ast.parse(setup)) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    calls = sorted(  # source order (ast.walk is breadth-first)
        (node.lineno, node.col_offset, node.func.id)
        for node in ast.walk(module)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    )
    names = [name for _, _, name in calls]
    return next((n for n in names if n not in skip), names[0] if names else None)
