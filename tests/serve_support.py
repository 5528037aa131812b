"""Starting ``podium serve`` / ``podium shadow`` as a user does: the CLI in a subprocess, ready
once ``/healthz`` answers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Mapping

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_podium(args: list[str], port: int, env: Mapping[str, str], wait_s: float = 120) -> subprocess.Popen[bytes]:
    """``python -m podium ARGS --port PORT`` with ``env``, once its ``/healthz`` answers 200.

    Raises RuntimeError with the process's output when it exits first, or after ``wait_s``.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "podium", *args, "--port", str(port)],
        env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            raise RuntimeError(f"podium {args[0]} exited with {proc.returncode}: {output}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"podium {args[0]} did not come up within {wait_s:g} s")
