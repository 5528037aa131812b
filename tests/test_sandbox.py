"""The sandbox, run for real: exit status, limits, and nothing left running after a kill."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from podium.sandbox import SandboxResult, run_python


def run(code: str, **kwargs: float) -> SandboxResult:
    return asyncio.run(run_python(code, **kwargs))  # type: ignore[arg-type]


def test_a_clean_exit_passes_and_keeps_its_output() -> None:
    result = run("print(6 * 7)")
    assert result.passed and result.exit_code == 0 and not result.timed_out
    assert result.stdout == "42\n" and result.stderr == ""


def test_a_failing_program_reports_its_status_and_traceback() -> None:
    result = run("import sys\nprint('partial')\nsys.exit(3)")
    assert (result.exit_code, result.passed, result.stdout) == (3, False, "partial\n")
    assert "AssertionError" in run("assert 1 == 2").stderr


@pytest.mark.slow
def test_the_wall_time_limit_kills_it_and_says_so() -> None:
    result = run("while True: pass", timeout_s=1)
    assert result.timed_out and result.exit_code is None and not result.passed
    assert 1.0 <= result.wall_s < 2.0


@pytest.mark.slow
def test_processes_the_program_started_die_with_it() -> None:
    # `sleep` inherits the output pipes: killing only the program would leave the reader
    # waiting 60 s for them to close.
    started = time.perf_counter()
    result = run("import subprocess\nsubprocess.Popen(['sleep', '60'])\nwhile True: pass", timeout_s=1)
    assert result.timed_out and time.perf_counter() - started < 5
    started = time.perf_counter()
    result = run("import subprocess\nsubprocess.Popen(['sleep', '60'])\nprint('done')", timeout_s=10)
    assert result.passed and result.stdout == "done\n" and time.perf_counter() - started < 5


def test_cancelling_the_run_kills_the_program(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    async def cancel_midway() -> int:
        task = asyncio.ensure_future(
            run_python(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)")
        )
        while not pid_file.exists() or not pid_file.read_text():
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return int(pid_file.read_text())

    pid = asyncio.run(cancel_midway())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_endless_output_is_cut_with_an_exact_count_and_does_not_block() -> None:
    result = run("import sys\nsys.stdout.write('a' * 10_000_000)", output_chars=4000)
    assert result.passed
    assert result.stdout == "a" * 4000 + "\n… [9996000 more characters cut]"


def test_memory_and_network_are_limited() -> None:
    assert "MemoryError" in run("x = bytearray(1_000_000_000)", memory_mb=256).stderr
    assert "network access is disabled" in run("import socket\nsocket.create_connection(('127.0.0.1', 9))").stderr
