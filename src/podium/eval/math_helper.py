"""math-verify (Hugging Face, https://github.com/huggingface/Math-Verify) in a helper process:
is a math answer equal to the reference?

math-verify's timeouts use ``signal.alarm``, which works in the main thread only and cannot stop
a long C call. So comparisons run in a long-lived ``python -I`` helper, one JSON line per
comparison: there math-verify's own timeout (:data:`MATH_TIMEOUT_S` per parse and compare)
always works, the caller's event loop is never blocked, and a comparison that still overruns
:data:`MATH_HARD_TIMEOUT_S` is ended by killing the helper (a new one starts on the next call).
The helper's address space is capped at 2 GiB. :func:`compare_math` is what
:mod:`podium.eval.verifiers` calls; never raises: a missing math-verify, a timeout or a dead
helper is a :class:`MathOutcome` status.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

__all__ = ["MATH_HARD_TIMEOUT_S", "MATH_TIMEOUT_S", "MathOutcome", "MathProcess", "compare_math"]

MATH_TIMEOUT_S = 1
"""math-verify's own timeout for each parse and each comparison, seconds (``signal.alarm``)."""

MATH_HARD_TIMEOUT_S = 3.0
"""Wall-time limit of one math comparison, seconds; the helper process is killed past it."""


@dataclass(frozen=True)
class MathOutcome:
    """What the helper answered about one comparison: ``status`` (``equal``, ``different``,
    ``unparsed``: the candidate cannot be read, ``timeout``, ``bad_reference``, ``missing``:
    math-verify cannot be imported, ``error``) and, for ``missing`` and ``error``, a ``detail``."""

    status: str  # equal | different | unparsed | timeout | bad_reference | missing | error
    detail: str = ""


_MATH_CHILD = r"""
import json, resource, sys
try:
    resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
except (ValueError, OSError):
    pass
out = sys.stdout
sys.stdout = sys.stderr
def reply(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()
try:
    import logging
    logging.disable(logging.CRITICAL)
    from math_verify import parse, verify
except Exception as exc:
    reply({{"status": "missing", "detail": f"{{type(exc).__name__}}: {{exc}}"}})
    sys.exit(0)
reply({{"status": "ready"}})
def read(text):
    found = parse(text, parsing_timeout={timeout})
    if not found and "$" not in text:
        found = parse("$" + text + "$", parsing_timeout={timeout})
    return found
for line in sys.stdin:
    try:
        request = json.loads(line)
        gold = read(request["gold"])
        pred = read("$" + request["pred"] + "$")
        if not gold:
            reply({{"status": "bad_reference"}})
        elif not pred:
            reply({{"status": "unparsed"}})
        else:
            same = verify(gold, pred, timeout_seconds={timeout})
            reply({{"status": "equal" if same else "different"}})
    except BaseException as exc:
        reply({{"status": "error", "detail": f"{{type(exc).__name__}}: {{str(exc)[:200]}}"}})
"""


class MathProcess:
    """A long-lived ``python -I`` helper running math-verify, one JSON line per comparison.

    math-verify's timeouts use ``signal.alarm`` (main thread only, and blind to long C calls);
    in a helper process they always work, the event loop is never blocked, and a comparison
    that still overruns :data:`MATH_HARD_TIMEOUT_S` is ended by killing the helper (a new one
    starts on the next call). Thread-safe; one comparison at a time.
    """

    def __init__(self, *, hard_timeout_s: float = MATH_HARD_TIMEOUT_S, start_timeout_s: float = 60.0) -> None:
        self.hard_timeout_s = hard_timeout_s
        self.start_timeout_s = start_timeout_s
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = 0
        atexit.register(self.close)

    def compare(self, reference: str, candidate: str) -> MathOutcome:
        """Whether ``candidate`` equals ``reference`` per math-verify (blocking)."""
        request = (json.dumps({"gold": reference, "pred": candidate}) + "\n").encode()
        with self._lock:
            for _ in range(2):  # a helper that died since the last call is restarted once
                proc = self._ready()
                if isinstance(proc, MathOutcome):
                    return proc
                try:
                    assert proc.stdin is not None
                    proc.stdin.write(request)
                    proc.stdin.flush()
                except OSError:
                    self._kill()
                    continue
                line = self._read_line(proc, time.monotonic() + self.hard_timeout_s)
                if line is None:
                    self._kill()
                    return MathOutcome("timeout")
                if not line:
                    self._kill()
                    return MathOutcome("error", "the math-verify helper exited (out of memory?)")
                return _parse_outcome(line)
            return MathOutcome("error", "the math-verify helper process keeps dying")

    def close(self) -> None:
        """Stop the helper process, if any."""
        self._kill()

    def _ready(self) -> subprocess.Popen[bytes] | MathOutcome:
        """The running helper (started if needed), or why it cannot run."""
        if self._proc is not None and self._owner == os.getpid() and self._proc.poll() is None:
            return self._proc
        self._proc = None
        if importlib.util.find_spec("math_verify") is None:
            return MathOutcome("missing", "math_verify is not importable")
        script = _MATH_CHILD.format(memory=2 << 30, timeout=MATH_TIMEOUT_S)
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            start_new_session=True,
        )
        line = self._read_line(proc, time.monotonic() + self.start_timeout_s)
        outcome = _parse_outcome(line) if line else MathOutcome("error", "the math-verify helper did not start")
        if outcome.status != "ready":
            _stop(proc)
            return outcome
        self._proc, self._owner = proc, os.getpid()
        return proc

    @staticmethod
    def _read_line(proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        """One line from the helper; None at the deadline, empty if it exited."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        data = bytearray()
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            data += chunk
        return bytes(data)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and self._owner == os.getpid():
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill a helper process, reap it and close its pipes."""
    with contextlib.suppress(OSError):
        proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _parse_outcome(line: bytes) -> MathOutcome:
    try:
        data = json.loads(line)
        return MathOutcome(str(data["status"]), str(data.get("detail", "")))
    except (ValueError, KeyError, TypeError):
        return MathOutcome("error", f"unreadable helper reply {line[:100]!r}")


_MATH = MathProcess()
"""The helper process :func:`compare_math` uses (one per podium process, started on first use)."""


def compare_math(reference: str, candidate: str) -> MathOutcome:
    """Whether ``candidate`` equals ``reference`` per math-verify, in the shared helper process
    (blocking: call it from a thread, as :func:`podium.eval.verifiers.verify` does)."""
    return _MATH.compare(reference, candidate)
