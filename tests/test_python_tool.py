"""The sandboxed Python tool worker, run for real (subprocesses, limits, no network)."""

from __future__ import annotations

import asyncio

import pytest

from podium.answers import sandbox_answer, tally
from podium.messages import GrantedStep, worker_messages
from podium.pool import load_pool
from podium.pool_workers import build_pool_workers
from podium.workers.base import Call
from podium.workers.python_tool import PythonToolWorker, extract_code
from podium.workers.vote_tool import VoteToolWorker

TOOL = PythonToolWorker("py", timeout_s=5, memory_mb=256, output_chars=2000)


def run(code: str) -> str:
    return asyncio.run(TOOL.run(code))


def test_runs_the_last_code_block_of_the_granted_steps_not_the_question() -> None:
    messages = worker_messages(
        "Fix this:\n```python\nprint('CODE FROM THE QUESTION')\n```",
        [GrantedStep(0, "Write code.", "First try:\n```python\nprint(1)\n```\nBetter:\n```python\nprint(6 * 7)\n```")],
        "Run the program.",
    )
    out = asyncio.run(TOOL.complete(Call(messages))).text
    assert out.startswith("[python: exit code 0]") and "42" in out
    assert "CODE FROM THE QUESTION" not in out


def test_no_code_block_is_reported_not_guessed() -> None:
    out = asyncio.run(TOOL.complete(Call(worker_messages("q", [], "Run it.")))).text
    assert "no ```python code block" in out


def test_extract_code_accepts_py_and_bare_fences() -> None:
    assert extract_code("x\n```py\na = 1\n```") == "a = 1"
    assert extract_code("x\n```\nb = 2\n```") == "b = 2"
    assert extract_code("no code") is None


def test_errors_and_exit_codes_are_reported() -> None:
    out = run("import sys\nprint('partial')\nsys.exit(3)")
    assert out.startswith("[python: exit code 3]") and "partial" in out
    assert "ZeroDivisionError" in run("1/0")


def test_a_vote_reads_a_report_as_the_programs_output_and_a_crash_as_no_answer() -> None:
    """The vote's reading of the real sandbox's reports (podium.answers.sandbox_answer): stdout
    when the program exited 0; a traceback's line numbers are not an answer."""
    printed = run("print(17 * 23)")
    crashed = run("x = 1\ny = 2\nraise ValueError('no')")
    assert sandbox_answer(printed).strip() == "391"
    assert sandbox_answer(crashed) == "" and "line 3" in crashed
    assert sandbox_answer("The answer is 7.") == "The answer is 7."
    # the crash no longer votes for 3 (its line number) against the direct answer's 3 + the program's 4
    assert tally([crashed, "So the answer is 3.", "The answer is 4."]).winner == 1
    assert tally([run("print('Autumn wind, bare trees')"), "Crisp leaves drift"]).kind == "text"
    # the winner is what a person reads: the worker's answer, not the report that agrees with it
    assert tally([printed, "17 * 23 = 391. The answer is 391.", "It is 390."]).winner == 1
    assert tally([printed, "It is 390."]).winner == 0  # a tie: the earliest group, here the report alone


@pytest.mark.slow
def test_wall_time_limit_kills_the_program() -> None:
    assert "killed after the 5 s time limit" in asyncio.run(PythonToolWorker("p", timeout_s=5).run("while True: pass"))


def test_network_is_unavailable() -> None:
    out = run("import socket\nsocket.create_connection(('127.0.0.1', 9))")
    assert "network access is disabled" in out


def test_memory_limit_holds() -> None:
    assert "MemoryError" in run("x = bytearray(1_000_000_000)")


def test_output_is_capped() -> None:
    out = run("print('a' * 10_000)")
    assert "more characters cut" in out and len(out) < 3000


def test_environment_and_directory_are_fresh() -> None:
    out = run("import os\nprint(sorted(os.environ))\nprint(os.listdir('.'))")
    assert "PODIUM" not in out and "['program.py']" in out


def test_local_tools_preset_has_the_local_pools_workers_the_python_and_vote_tools() -> None:
    pool = load_pool("local-tools")
    workers = build_pool_workers(pool)
    assert isinstance(workers[-2], PythonToolWorker) and workers[-2].info.is_tool
    assert isinstance(workers[-1], VoteToolWorker) and workers[-1].info.is_tool
    assert [w.name for w in pool.workers] == [w.name for w in load_pool().workers]
