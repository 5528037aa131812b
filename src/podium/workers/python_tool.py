"""The Python tool worker: runs the last Python code block it can see, in a sandbox.

With it the conductor can plan program-aided workflows — a model writes code, the tool runs it,
a model states the answer from the printed output. "What it can see" is what the executor put
in its message after the question: the steps its access list grants and its own subtask. Code
inside the question itself is the user's data and is never run.

The sandbox is :func:`podium.sandbox.run_python`: a separate ``python -I`` process in a fresh
temporary directory with a wall-time limit, address-space, CPU-time and file-size limits, no
inherited environment, sockets disabled and, where a network namespace can be made, no network;
output is capped. It is a guard against mistakes and casual misuse by model-written code, not a
security boundary against a determined attacker; run untrusted pools in a container.
"""

from __future__ import annotations

import re
import time

from podium.sandbox import SandboxResult, run_python
from podium.workers.base import Call, Completion, Price, Usage, WorkerInfo, WorkerSettings

__all__ = ["PythonToolWorker", "extract_code"]

_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_QUESTION_END = "</question>"


def extract_code(message: str) -> str | None:
    """The last fenced Python code block after the question section of a worker message
    (or anywhere, for text without one), or None."""
    visible = message.split(_QUESTION_END, 1)[1] if _QUESTION_END in message else message
    blocks = _BLOCK.findall(visible)
    return blocks[-1].strip("\n") if blocks else None


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
        code = extract_code(messages[-1]["content"] if messages else "")
        if code is None:
            text = "error: no ```python code block found in the subtask or the steps this tool can see"
        else:
            text = await self.run(code)
        return Completion(text=text, usage=Usage(), cost_usd=0.0, latency_s=time.perf_counter() - started)

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
