"""A sandbox for model-written Python: the Python tool worker and the code verifier run it.

:func:`run_python` runs a program in a separate ``python -I`` process (no user site, no
``PYTHON*`` variables, no inherited environment) in a fresh temporary directory, with:

* a wall-time limit: when it passes, the program's whole session (the program and anything
  it started) is killed with ``SIGKILL``; the same happens when the awaiting task is cancelled;
* an address-space limit (``RLIMIT_AS``), a CPU-time limit (``RLIMIT_CPU``, the wall limit
  rounded up plus 1 s) and a file-size limit (``RLIMIT_FSIZE``, 16 MiB);
* sockets disabled inside the interpreter, and — where the process may create a network
  namespace (root with ``unshare``) — no network at all;
* stdout and stderr each cut to ``output_chars`` characters (read while the program runs, so a
  program printing without end neither blocks nor fills memory).

It is a guard against mistakes and casual misuse by model-written code, not a security boundary
against a determined attacker; run untrusted pools in a container.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["SandboxResult", "run_python"]

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

_FILE_SIZE_LIMIT = 16 << 20
_DRAIN_AFTER_KILL_S = 2.0


@dataclass(frozen=True)
class SandboxResult:
    """What one sandboxed run did.

    Attributes:
        exit_code: the program's exit status (negative: killed by that signal, e.g. ``-9``
            when ``RLIMIT_CPU`` ran out), or None when the wall-time limit killed it.
        stdout: its standard output, decoded as UTF-8 (invalid bytes replaced), cut to
            ``output_chars`` characters with a ``… [N more characters cut]`` note.
        stderr: its standard error, cut the same way.
        timed_out: True when the wall-time limit killed it.
        wall_s: wall time of the run, seconds (process start to exit, or to the kill).
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float

    @property
    def passed(self) -> bool:
        """True when the program exited with status 0 within the time limit."""
        return self.exit_code == 0 and not self.timed_out


async def run_python(
    code: str, *, timeout_s: float = 10.0, memory_mb: int = 512, output_chars: int = 4000
) -> SandboxResult:
    """Run the Python program ``code`` in the sandbox (see the module docstring).

    Args:
        code: the program's source text; it runs as ``__main__`` from ``program.py``.
        timeout_s: wall-time limit, seconds.
        memory_mb: address-space limit, MiB.
        output_chars: stdout and stderr are each cut to this many characters.

    Returns:
        The exit status, the (cut) output and whether the time limit killed it. A program
        that fails (exception, non-zero exit, killed) is a result, not an error.

    Raises:
        OSError: the interpreter could not be started. On cancellation the program is killed
            before ``CancelledError`` propagates.
    """
    started = time.perf_counter()
    byte_cap = max(4 * output_chars + 4, 1 << 20)  # enough bytes for output_chars UTF-8 characters
    with tempfile.TemporaryDirectory(prefix="podium-sandbox-") as tmp:
        Path(tmp, "program.py").write_text(code, encoding="utf-8")
        prelude = _PRELUDE.format(memory=memory_mb << 20, cpu=max(1, int(timeout_s) + 1), fsize=_FILE_SIZE_LIMIT)
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
            start_new_session=True,  # its own process group: one kill reaches what it started
        )
        assert proc.stdout is not None and proc.stderr is not None  # both were asked for as PIPE
        readers = (
            asyncio.ensure_future(_read_capped(proc.stdout, byte_cap)),
            asyncio.ensure_future(_read_capped(proc.stderr, byte_cap)),
        )
        timed_out = False
        try:
            await asyncio.wait_for(_exited(proc), timeout=timeout_s)
        except TimeoutError:
            timed_out = True
        except BaseException:  # cancelled: leave nothing running behind us
            _kill_session(proc.pid)
            for reader in readers:
                reader.cancel()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_exited(proc), timeout=_DRAIN_AFTER_KILL_S)
            raise
        wall_s = time.perf_counter() - started
        _kill_session(proc.pid)  # the program, and any process it left behind holding the pipes
        done, pending = await asyncio.wait(readers, timeout=_DRAIN_AFTER_KILL_S)
        for reader in pending:
            reader.cancel()
        with contextlib.suppress(TimeoutError):  # SIGKILL was sent; its status is all we wait for
            await asyncio.wait_for(_exited(proc), timeout=_DRAIN_AFTER_KILL_S)
        (out, out_dropped), (err, err_dropped) = (r.result() if r in done else (b"", 0) for r in readers)
    return SandboxResult(
        exit_code=None if timed_out else proc.returncode,
        stdout=_cap(out, out_dropped, output_chars),
        stderr=_cap(err, err_dropped, output_chars),
        timed_out=timed_out,
        wall_s=wall_s,
    )


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Return once ``proc`` has exited.

    ``Process.wait()`` also waits for the output pipes to close, which a process the program
    left running in the background can hold open; the exit status itself is set at exit.
    """
    delay = 0.001
    while proc.returncode is None:
        await asyncio.sleep(delay)
        delay = min(2 * delay, 0.02)


async def _read_capped(stream: asyncio.StreamReader, byte_cap: int) -> tuple[bytes, int]:
    """Read ``stream`` to its end, keeping the first ``byte_cap`` bytes; returns them and the
    count of bytes dropped."""
    kept = bytearray()
    dropped = 0
    while chunk := await stream.read(1 << 16):
        room = max(0, byte_cap - len(kept))
        kept += chunk[:room]
        dropped += len(chunk) - min(room, len(chunk))
    return bytes(kept), dropped


def _cap(data: bytes, dropped_bytes: int, output_chars: int) -> str:
    """Decoded ``data`` cut to ``output_chars`` characters, with a note of how much was cut
    (bytes dropped while reading count as characters: exact for ASCII output)."""
    text = data.decode("utf-8", "replace")
    cut = max(0, len(text) - output_chars) + dropped_bytes
    if cut:
        return text[:output_chars] + f"\n… [{cut} more characters cut]"
    return text


def _kill_session(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (the sandboxed program and its children)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@cache
def _can_unshare_network() -> bool:
    """Whether ``unshare --net`` works here (root in a namespace-capable kernel)."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    try:
        done = subprocess.run([unshare, "--net", "--", "true"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
