"""The Python tool worker: runs the last Python code block it can see, in a sandbox.

With it the conductor can plan program-aided workflows — a model writes code, the tool runs it,
a model states the answer from the printed output. "What it can see" is what the executor put
in its message after the question: the steps its access list grants and its own subtask. Code
inside the question itself is the user's data and is never run — with one exception, on
purpose: a ``check`` step (:mod:`podium.roles`) runs the code it sees followed by the tests the
question states (:func:`question_tests`: its ``assert`` lines, else its ``>>>`` examples as a
doctest), the tests a user gives so that the code is checked against them. Its report ends with
a line naming the code it ran by fingerprint (:func:`podium.answers.code_fingerprint`), which
is how a vote that sees the check knows which answer passed.

The sandbox is :func:`podium.sandbox.run_python`: a separate ``python -I`` process in a fresh
temporary directory with a wall-time limit, address-space, CPU-time and file-size limits, no
inherited environment, sockets disabled and, where a network namespace can be made, no network;
output is capped. It is a guard against mistakes and casual misuse by model-written code, not a
security boundary against a determined attacker; run untrusted pools in a container.
"""

from __future__ import annotations

import re
import time

from podium.answers import code_fingerprint, last_code_block
from podium.roles import role_of
from podium.sandbox import SandboxResult, run_python
from podium.workers.base import Call, Completion, Price, Usage, WorkerInfo, WorkerSettings

__all__ = ["PythonToolWorker", "extract_code", "question_tests"]

_QUESTION = "<question>\n"
_QUESTION_END = "</question>"
_SUBTASK = "<your_subtask>\n"
_SUBTASK_END = "\n</your_subtask>"
_ASSERT = re.compile(r"^[ \t]*assert\b.*$", re.MULTILINE)


def extract_code(message: str) -> str | None:
    """The last fenced Python code block after the question section of a worker message
    (or anywhere, for text without one), or None."""
    visible = message.split(_QUESTION_END, 1)[1] if _QUESTION_END in message else message
    return last_code_block(visible)


def question_tests(question: str) -> str | None:
    """A program that tests code against what ``question`` states, or None when it states no
    test: its ``assert`` lines (MBPP's "Your code should pass these tests"), else its ``>>>``
    examples, each with the expected output on the lines after it (HumanEval's docstrings), run
    by :mod:`doctest` (exit code 1 when one fails)."""
    asserts = [line.strip() for line in _ASSERT.findall(question)]
    if asserts:
        return "\n".join(asserts)
    lines = question.splitlines()
    doc: list[str] = []
    for i, line in enumerate(lines):
        if not line.strip().startswith(">>>"):
            continue
        doc.append(line.strip())
        for after in lines[i + 1 :]:
            said = after.strip()
            if not said or said.startswith(">>>") or '"""' in said or "'''" in said:
                break
            doc.append(said)
    if not doc:
        return None
    text = "\n".join(doc) + "\n"
    return (
        "import doctest as _doctest, sys as _sys\n"
        f"_test = _doctest.DocTestParser().get_doctest({text!r}, dict(globals()), 'question', None, 0)\n"
        "_sys.exit(1 if _doctest.DocTestRunner(verbose=False).run(_test, out=lambda _: None).failed else 0)\n"
    )


def _section(message: str, start: str, end: str, *, last: bool = False) -> str:
    at = message.rfind(start) if last else message.find(start)
    if at < 0:
        return ""
    stop = message.find(end, at + len(start))
    return message[at + len(start) : stop if stop >= 0 else len(message)]


class PythonToolWorker:
    """A tool worker that executes Python (see the module docstring for the sandbox).

    Args:
        name: its name in the pool.
        description: what the conductor reads about it.
        timeout_s: wall-time limit of one run, seconds.
        memory_mb: address-space limit, MiB.
        output_chars: stdout and stderr are each cut to this many characters.
        price: USD per 1M tokens (tools use no tokens; cost is 0 unless you price calls).
    """

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        timeout_s: float = 10.0,
        memory_mb: int = 512,
        output_chars: int = 4000,
        price: Price | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.output_chars = output_chars
        self.info = WorkerInfo(
            name,
            description,
            price or Price(),
            WorkerSettings(max_tokens=0, temperature=0.0),
            kind="tool",  # the conductor's prompt shows tool examples
            backend="python",
        )

    async def complete(self, call: Call) -> Completion:
        messages = call.messages
        started = time.perf_counter()
        message = messages[-1]["content"] if messages else ""
        code = extract_code(message)
        role = role_of(_section(message, _SUBTASK, _SUBTASK_END, last=True))
        if code is None:
            text = "error: no ```python code block found in the subtask or the steps this tool can see"
        elif role is not None and role.name == "check":
            text = await self.check(code, _section(message, _QUESTION, "\n" + _QUESTION_END))
        else:
            text = await self.run(code)
        return Completion(text=text, usage=Usage(), cost_usd=0.0, latency_s=time.perf_counter() - started)

    async def check(self, code: str, question: str) -> str:
        """Run ``code`` followed by the tests ``question`` states (:func:`question_tests`);
        returns the run's report and a last line ``[checked code sha256:…]`` naming ``code``
        (:func:`podium.answers.checked_code` reads it), or a report of no run when the question
        states no test."""
        tests = question_tests(question)
        if tests is None:
            return "[python: not run: the question states no tests]\nstdout:\n\nstderr:"
        report = await self.run(f"{code}\n\n{tests}\n")
        return f"{report}\n[checked code sha256:{code_fingerprint(code)}]"

    async def run(self, code: str) -> str:
        """Run ``code``; returns a report with the exit status, stdout and stderr."""
        result = await run_python(
            code, timeout_s=self.timeout_s, memory_mb=self.memory_mb, output_chars=self.output_chars
        )
        return _report(result, self.timeout_s)


def _report(result: SandboxResult, timeout_s: float) -> str:
    """The text the conductor's workers read: status line, then stdout and stderr."""
    status = f"killed after the {timeout_s:g} s time limit" if result.timed_out else f"exit code {result.exit_code}"
    return f"[python: {status}]\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}".rstrip()
