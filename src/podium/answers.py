"""Final answers: what an answer text says, for the verifiers and the vote tool.

The verifiers (:mod:`podium.eval.verifiers`) score a final answer; the vote tool
(:mod:`podium.workers.vote_tool`) groups several answers by what they say. Both read answers
the same way, with the functions here (rules in :mod:`podium.eval.verifiers`' docstring):

* :func:`extract_math_answer` — the final number or expression (boxed > marker > last number);
* :func:`extract_code_answer` — the code (the last block that defines the function under test);
* :func:`extract_choice` — a multiple-choice letter;
* :func:`normalize_exact` — text as the exact-match verifier compares it.

:func:`sandbox_answer` reads a Python sandbox report as the program's output (nothing when it
failed); :func:`checked_code` reads a ``check`` step's report (the code it ran, by fingerprint,
when the question's tests passed); :func:`answer_key` turns one answer into a comparable key
(numbers as exact fractions, code as its normalised syntax tree); :func:`tally` is the majority
vote over several answers (self-consistency, Wang et al. 2023, "Self-Consistency Improves Chain
of Thought Reasoning in Language Models", ICLR): the largest group of equal keys wins, ties go to the group whose first
answer came earliest, and the winner is that group's earliest answer — a worker's own answer
before a sandbox report that says the same, since the winner is what a person reads.
:func:`vote` is the vote tool's choice: the tally over the answers whose code passed a check it
sees, when any did, else over all.

Everything here is pure Python, linear-time on any text, and never raises on a bad answer.
"""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from podium.messages import neutralise

__all__ = [
    "MAX_MATH_CHARS",
    "AnswerKind",
    "Tally",
    "answer_key",
    "answer_kind",
    "checked_code",
    "code_fingerprint",
    "defines",
    "extract_choice",
    "extract_code_answer",
    "extract_math_answer",
    "last_code_block",
    "normalize_exact",
    "sandbox_answer",
    "sandbox_passed",
    "tally",
    "vote",
]

MAX_MATH_CHARS = 500
"""Longest final-answer candidate compared (characters); longer ones count as wrong."""

AnswerKind = Literal["math", "code", "choice", "text"]

# --- math -------------------------------------------------------------------------------------

_NUMBER = (
    r"(?<![\w.])(?:\\\$|\$)?[-−]?(?:\\\$|\$)?"
    r"(?:\d{1,3}(?:[,\u00a0\u2009\u202f]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:/\d+(?:\.\d+)?)?(?:\s?(?:\\?%|percent\b))?"
)
_FRAC = r"[-−]?\\[dt]?frac\{[^{}]{1,50}\}\{[^{}]{1,50}\}"
_MATH_TOKEN = re.compile(rf"{_FRAC}|{_NUMBER}")
_MATH_MARKER = re.compile(r"####|\b(?:final\s+)?answer\b(?:\s*\*\*)?\s*(?:is\b|[:=])(?:\s*\*\*)?\s*:?", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")


def extract_math_answer(answer: str) -> str | None:
    """The final answer of a math solution, cleaned for math-verify (boxed > marker > last
    number; see the module docstring), or None when there is none."""
    boxed = _last_boxed(answer)
    if boxed is not None and boxed.strip():
        return _clean_math(boxed)
    markers = list(_MATH_MARKER.finditer(answer))
    if markers:
        rest = answer[markers[-1].end() :].lstrip()
        line = rest.split("\n", 1)[0]
        token = _MATH_TOKEN.search(line)
        if token:
            return _clean_math(token.group(0))
    last = None
    for last in _MATH_TOKEN.finditer(answer):  # noqa: B007 - we want the last match
        pass
    return _clean_math(last.group(0)) if last else None


def _last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{…}`` with balanced braces (or ``\\boxed x``).

    Braces are matched over at most ``2 * MAX_MATH_CHARS`` characters (a longer content is
    returned cut, and then rejected as too long), and only the last few ``\\boxed`` are tried,
    so the scan stays linear on any text."""
    window = 2 * MAX_MATH_CHARS
    for match in list(_BOXED.finditer(text))[-5:][::-1]:
        start = match.end()
        if start < len(text) and text[start] == "{":
            depth = 0
            for i in range(start, min(len(text), start + window)):
                if text[i] == "{":
                    depth += 1
                elif text[i] == "}":
                    depth -= 1
                    if depth == 0:
                        return text[start + 1 : i]
            if start + window < len(text):
                return text[start + 1 : start + window]
            continue  # unbalanced (a cut-off answer): try an earlier one
        word = re.match(r"[^\s$]+", text[start : start + window])
        if word:
            return word.group(0)
    return None


def _clean_math(candidate: str) -> str:
    text = candidate.strip().replace("−", "-")
    text = text.replace("\\$", "").replace("$", "")
    text = re.sub(r"(?<=\d)(?:,|\\,|[\u00a0\u2009\u202f])(?=\d{3}(?!\d))", "", text)
    text = re.sub(r"\s*(?:\\?%|percent\b)", r"\\%", text)
    return text.strip()


# --- code -------------------------------------------------------------------------------------

_FENCE_INFO = re.compile(r"[ \t]*([A-Za-z0-9_+-]*)")
_PY_LANGS = {"python", "python3", "py", "py3"}


def extract_code_answer(answer: str, entry_point: str | None = None) -> str | None:
    """The code of a code answer (see the module docstring), or None."""
    blocks = _fenced_blocks(answer)
    python = [body for lang, body in blocks if lang in _PY_LANGS] or [body for lang, body in blocks if not lang]
    # a fence inside a Markdown list item is indented with it (CommonMark strips that indent)
    python = [textwrap.dedent(body).strip("\n") for body in python if body.strip()]
    if python:
        if entry_point:
            defining = [body for body in python if defines(body, entry_point)]
            if defining:
                return defining[-1]
        return python[-1]
    if "```" in answer:
        return None
    text = textwrap.dedent(answer).strip("\n")
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    trivial = all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Name | ast.Constant) for n in module.body)
    return None if trivial else text


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of each fenced block, in order; an unclosed last fence runs to the
    end. One pass over the text (a regex here backtracks quadratically on fence-heavy garbage)."""
    blocks: list[tuple[str, str]] = []
    pos = 0
    while (start := text.find("```", pos)) != -1:
        eol = text.find("\n", start + 3, start + 3 + 200)
        info = text[start + 3 : eol] if eol != -1 else ""
        if eol == -1 or "```" in info:  # not an opening fence (inline code, or no newline soon)
            pos = start + 3
            continue
        end = text.find("```", eol + 1)
        language = _FENCE_INFO.match(info)
        blocks.append(((language.group(1) if language else "").lower(), text[eol + 1 : end if end != -1 else None]))
        if end == -1:
            break
        pos = end + 3
    return blocks


def defines(code: str, name: str) -> bool:
    """Whether ``code`` defines ``name`` (a def, class or assignment; text search when it
    does not parse)."""
    try:
        module = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
    return False


# --- choice -----------------------------------------------------------------------------------


def extract_choice(answer: str, n_choices: int = 0) -> str | None:
    """The multiple-choice letter of ``answer`` (see the module docstring), or None.

    Args:
        answer: the answer text.
        n_choices: how many options the task has (letters A… up to it); 0 means A–J.
    """
    last = chr(ord("A") + min(n_choices, 26) - 1) if n_choices > 0 else "J"
    letter = f"[A-{last}]"  # uppercase only: a lowercase "a" is the article
    end = r"(?![A-Za-z0-9])"
    not_a_word = r"(?![AI]\s+[a-z])"  # "A robe takes…", "I think…": words, not letters
    decoration = r"[\s*(\[]*"
    subject = r"(?i:\b(?:(?:correct|final|right|best)\s+)?(?:answer|option|choice)\b)(?:\s*\*\*)?\s*"
    after_is = re.compile(rf"{subject}(?i:is\b)\s*:?{decoration}(?i:(?:option|choice)\s+)?({letter}){end}")
    after_colon = re.compile(rf"{subject}[:=]{decoration}(?i:(?:option|choice)\s+)?{not_a_word}({letter}){end}")
    found = sorted([*after_is.finditer(answer), *after_colon.finditer(answer)], key=lambda m: m.start(1))
    if found:
        return found[-1].group(1)
    lines = [line.strip() for line in answer.splitlines() if line.strip()]
    if not lines:
        return None
    lone = re.fullmatch(rf"{decoration}({letter})[\s*)\].:]*", lines[-1])
    if lone:
        return lone.group(1)
    option = re.compile(rf"{decoration}({letter})\s*[).:]\s+\S")
    options = [m for m in (option.match(line) for line in lines) if m]
    if len(options) == 1 and (option.match(lines[0]) or option.match(lines[-1])):
        return options[0].group(1)
    marked = list(re.finditer(rf"\(({letter})\)|\[({letter})\]|\*\*({letter})\*\*", answer))
    if marked:
        return next(x for x in marked[-1].groups() if x)
    return None


# --- exact ------------------------------------------------------------------------------------

_QUOTES = "\"'`“”‘’«»„"


def normalize_exact(text: str) -> str:
    """``text`` as the exact verifier compares it: NFKC, casefolded, whitespace collapsed,
    surrounding quotes and a trailing period removed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = unicodedata.normalize("NFKC", text)
    text = " ".join(text.split())
    previous = None
    while previous != text:
        previous = text
        text = text.strip()
        if text.endswith("."):
            text = text[:-1]
        if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
            text = text[1:-1]
    return text


# --- keys and the vote ------------------------------------------------------------------------

_SANDBOX_REPORT = re.compile(r"\A\[python: (?:exit code (-?\d+)|[^\]\n]*)\]\nstdout:\n")


def sandbox_passed(text: str) -> bool:
    """Whether ``text`` is a Python sandbox report of a program that exited with code 0 (a
    test run whose assertions all held); False for a failed, killed or timed-out run and for
    any other text."""
    match = _SANDBOX_REPORT.match(text)
    return match is not None and match.group(1) == "0"


def sandbox_answer(text: str) -> str:
    """What ``text`` answers when it is the Python sandbox's report (status line, stdout,
    stderr; :mod:`podium.workers.python_tool`): the program's stdout when it exited with code
    0, else ``""`` — a failed or killed program answers nothing, and its traceback's line
    numbers are no answer. Any other text is returned unchanged."""
    match = _SANDBOX_REPORT.match(text)
    if match is None:
        return text
    if match.group(1) != "0":
        return ""
    body = text[match.end() :]
    end = body.rfind("\nstderr:")
    return body if end < 0 else body[:end]


_LATEX_FRAC = re.compile(r"^(-?)\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}$")
_KEY_CHARS = 200


def answer_kind(answers: Sequence[str]) -> AnswerKind:
    """What kind of answers these are, by majority of what each one contains: ``code`` when at
    least half have a Python code block (or parse as code), else ``choice`` when at least half
    name an option letter, else ``math`` when at least half end in a number or expression,
    else ``text``."""
    half = max(1, (len(answers) + 1) // 2)
    if sum("```" in a and extract_code_answer(a) is not None for a in answers) >= half:
        return "code"
    if sum(extract_choice(a) is not None for a in answers) >= half:
        return "choice"
    if sum(extract_math_answer(a) is not None for a in answers) >= half:
        return "math"
    return "text"


def answer_key(answer: str, kind: AnswerKind) -> str | None:
    """A key that equal answers share, or None when ``answer`` has no answer of ``kind``.

    * ``math``: the final answer as an exact fraction (``18``, ``18.00`` and ``$18`` share
      ``18``; ``0.5``, ``1/2`` and ``\\frac{1}{2}`` share ``1/2``; a percent is kept apart as
      ``50%``), else the cleaned expression text;
    * ``code``: the syntax tree of the extracted code without docstrings, formatting, comments
      or line numbers (``ast.dump``), else its stripped text when it does not parse;
    * ``choice``: the letter;
    * ``text``: the last non-empty line, normalised as the exact-match verifier does.
    """
    if kind == "math":
        value = extract_math_answer(answer)
        if value is None or not value or len(value) > MAX_MATH_CHARS:
            return None
        return _number_key(value)
    if kind == "code":
        code = extract_code_answer(answer)
        return None if code is None else _code_key(code)
    if kind == "choice":
        return extract_choice(answer)
    last = next((line for line in reversed(answer.splitlines()) if line.strip()), "")
    return normalize_exact(last)[:_KEY_CHARS] or None


def _number_key(value: str) -> str:
    percent = value.endswith("\\%")
    text = value.removesuffix("\\%").strip()
    frac = _LATEX_FRAC.match(text)
    if frac:
        text = f"{frac.group(1)}{frac.group(2)}/{frac.group(3)}"
    try:
        number = Fraction(text.replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return value[:_KEY_CHARS]
    return f"{number}%" if percent else str(number)


def _code_key(code: str) -> str:
    try:
        module = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return "\n".join(line.rstrip() for line in code.strip().splitlines())
    for node in ast.walk(module):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    try:
        return ast.dump(module, annotate_fields=False, include_attributes=False)
    except RecursionError:
        return code.strip()


@dataclass(frozen=True)
class Tally:
    """The result of a majority vote over answers (in step order).

    Attributes:
        kind: what was compared (:func:`answer_kind`).
        keys: each answer's key (None: it had no answer of that kind; it does not vote).
        winner: index of the answer returned: the earliest answer of the largest group (ties:
            the group whose first answer is earliest) that is not a sandbox report, else the
            group's earliest; the first answer when none has a key.
        votes: size of the winning group (0 when no answer had a key).
    """

    kind: AnswerKind
    keys: tuple[str | None, ...]
    winner: int
    votes: int

    @property
    def agreement(self) -> float:
        """Fraction of all answers in the winning group, in [0, 1] (0 for no answers)."""
        return self.votes / len(self.keys) if self.keys else 0.0


def tally(answers: Sequence[str], kind: AnswerKind | None = None) -> Tally:
    """Majority vote over ``answers`` (see the module docstring), each read through
    :func:`sandbox_answer`; ``kind`` defaults to :func:`answer_kind` of what they say. Raises
    ValueError for no answers."""
    if not answers:
        raise ValueError("a vote needs at least one answer")
    said = [sandbox_answer(a) for a in answers]
    chosen = kind or answer_kind(said)
    keys = tuple(answer_key(a, chosen) for a in said)
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
            first.setdefault(key, index)
    if not counts:
        return Tally(chosen, keys, 0, 0)
    best = max(counts, key=lambda k: (counts[k], -first[k]))
    # the reply a person reads: a worker's own answer rather than a sandbox report that says the same
    group = [i for i, key in enumerate(keys) if key == best]
    winner = next((i for i in group if not _SANDBOX_REPORT.match(answers[i])), group[0])
    return Tally(chosen, keys, winner, counts[best])


# --- checks: code run with the question's own tests -------------------------------------------

_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_CHECKED = re.compile(r"\n\[checked code sha256:([0-9a-f]{16})\]\Z")


def last_code_block(text: str) -> str | None:
    """The last fenced Python (or unlabelled) code block of ``text``, without its fences, or
    None — the code the Python tool runs and a ``check`` step checks."""
    blocks = _BLOCK.findall(text)
    return blocks[-1].strip("\n") if blocks else None


def code_fingerprint(code: str) -> str:
    """16 hex digits of the SHA-256 of ``code`` as a worker's message shows it (framing
    look-alikes neutralised, :func:`podium.messages.neutralise`), so the code a ``check`` step
    ran and the same answer read from a recorded response get one fingerprint."""
    return hashlib.sha256(neutralise(code).strip("\n").encode("utf-8")).hexdigest()[:16]


def checked_code(report: str) -> str | None:
    """The fingerprint of the code a ``check`` step's ``report`` ran when the question's tests
    passed on it (exit code 0); None for a failed check and for any other text."""
    match = _CHECKED.search(report)
    return match.group(1) if match is not None and sandbox_passed(report) else None


def vote(answers: Sequence[str], checks: Sequence[str] = ()) -> int:
    """Index into ``answers`` of the answer the vote tool returns: :func:`tally` over the answers
    whose code (:func:`last_code_block`) a passed check in ``checks`` ran, when there are any
    (generate, then filter by the stated tests; ties go to the earliest), else over all.
    Raises ValueError for no answers."""
    passed = {fp for report in checks if (fp := checked_code(report)) is not None}
    if passed:
        kept = [i for i, a in enumerate(answers) if (code := last_code_block(a)) and code_fingerprint(code) in passed]
        if kept:
            return kept[tally([answers[i] for i in kept]).winner]
    return tally(answers).winner
