"""The Python tool worker: runs the last Python code block it can see, in a sandbox.

With it the conductor can plan program-aided workflows — a model writes code, the tool runs it,
a model states the answer from the printed output. "What it can see" is what the executor put
in its message after the question: the steps its access list grants and its own subtask. Code
inside the question itself is the user's data and is never run.

The sandbox is a separate ``python -I`` process in a fresh temporary directory with:
a wall-time limit (killed when it passes), an address-space limit (``RLIMIT_AS``), a CPU-time
limit, no inherited environment, a file-size limit, sockets disabled inside the interpreter,
and — where the process may create a network namespace (root with ``unshare``) — no network at
all. Output is capped. It is a guard against mistakes and casual misuse by model-written code,
not a security boundary against a determined attacker; run untrusted pools in a container.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from podium.workers.base import Completion, Message, Price, Usage, WorkerSettings

__all__ = ["PythonToolWorker", "extract_code"]

_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_QUESTION_END = "</question>"

_PRELUDE = r"""
import resource, socket, sys
def _limit(kind, value):
    try:
        resource.setrlimit(kind, (value, value))
    except (ValueError, OSError):
        pass
_limit(resource.RLIMIT_AS, {memory})
_limit(resource.RLIMIT_CPU, {cpu})
_limit(resource.RLIMIT_FSIZE, {fsize})
class _NoNetwork(socket.socket):
    def __init__(self, *a, **k):
        raise OSError("network access is disabled in the podium sandbox")
socket.socket = _NoNetwork
socket.create_connection = lambda *a, **k: (_ for _ in ()).throw(OSError("network access is disabled"))
del resource, socket, _limit, _NoNetwork
__name__ = "__main__"
with open("program.py", encoding="utf-8") as _f:
    _code = compile(_f.read(), "program.py", "exec")
del _f
exec(_code)
"""


def extract_code(message: str) -> str | None:
    """The last fenced Python code block after the question section of a worker message
    (or anywhere, for text without one), or None."""
    visible = message.split(_QUESTION_END, 1)[1] if _QUESTION_END in message else message
    blocks = _BLOCK.findall(visible)
    return blocks[-1].strip("\n") if blocks else None


@cache
def _can_unshare_network() -> bool:
    """Whether ``unshare --net`` works here (root in a namespace-capable kernel)."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    try:
        import subprocess

        done = subprocess.run([unshare, "--net", "--", "true"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


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
        self.name = name
        self.description = description
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.output_chars = output_chars
        self.price = price or Price()
        self.settings = WorkerSettings(max_tokens=0, temperature=0.0)
        self.system_prompt: str | None = None
        self.is_tool = True  # capability as data: the conductor's prompt shows tool examples

    async def complete(self, messages: Sequence[Message], settings: WorkerSettings | None = None) -> Completion:
        started = time.perf_counter()
        code = extract_code(messages[-1]["content"] if messages else "")
        if code is None:
            text = "error: no ```python code block found in the subtask or the steps this tool can see"
        else:
            text = await self.run(code)
        return Completion(text=text, usage=Usage(), cost_usd=0.0, latency_s=time.perf_counter() - started)

    async def run(self, code: str) -> str:
        """Run ``code``; returns a report with the exit status, stdout and stderr."""
        with tempfile.TemporaryDirectory(prefix="podium-sandbox-") as tmp:
            Path(tmp, "program.py").write_text(code, encoding="utf-8")
            prelude = _PRELUDE.format(memory=self.memory_mb << 20, cpu=max(1, int(self.timeout_s) + 1), fsize=16 << 20)
            cmd = [sys.executable, "-I", "-c", prelude]
            if _can_unshare_network():
                cmd = [shutil.which("unshare") or "unshare", "--net", "--", *cmd]
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                cwd=tmp,
                env={"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8", "HOME": tmp},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                out, err = await asyncio.wait_for(proc.communicate(), timeout=self.timeout_s)
                status = f"exit code {proc.returncode}"
            except TimeoutError:
                proc.kill()
                out, err = await proc.communicate()
                status = f"killed after the {self.timeout_s:g} s time limit"
            except asyncio.CancelledError:
                proc.kill()
                await proc.wait()
                raise
        return (f"[python: {status}]\nstdout:\n{self._cap(out)}\nstderr:\n{self._cap(err)}").rstrip()

    def _cap(self, data: bytes) -> str:
        text = data.decode("utf-8", "replace")
        if len(text) > self.output_chars:
            return text[: self.output_chars] + f"\n… [{len(text) - self.output_chars} more characters cut]"
        return text
