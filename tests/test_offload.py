"""Where blocking model computation runs (podium.workers.offload): on the main thread under
``podium run``, on helper threads elsewhere (issue: overhead — llama.cpp's OpenMP threads
throttle when started off the main thread)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from podium.workers.offload import main_thread_wanted, offload, run_on_loop_thread


def where() -> str:
    return "main" if threading.current_thread() is threading.main_thread() else "other"


def test_the_loop_runs_on_a_helper_thread_and_offloaded_work_on_the_main_thread() -> None:
    async def request() -> tuple[str, str, int]:
        loop_thread = where()
        computed = await offload(where)
        total = await offload(sum, [1, 2, 3])
        return loop_thread, computed, total

    assert run_on_loop_thread(request) == ("other", "main", 6)


def test_without_the_runner_offload_uses_a_helper_thread_or_runs_inline() -> None:
    async def request() -> tuple[str, str]:
        return await offload(where), await offload(where, otherwise="inline")

    assert asyncio.run(request()) == ("other", "main")  # asyncio.run's loop is on the main thread


def test_errors_reach_the_caller_and_the_caller_s_errors_reach_the_command() -> None:
    def broken() -> None:
        raise ValueError("model file is corrupt")

    async def request() -> str:
        try:
            await offload(broken)
        except ValueError as exc:
            return f"caught: {exc}"
        return "not raised"

    assert run_on_loop_thread(request) == "caught: model file is corrupt"

    async def failing() -> None:
        raise LookupError("no such worker")

    with pytest.raises(LookupError, match="no such worker"):
        run_on_loop_thread(failing)


def test_a_caller_that_times_out_leaves_the_computation_to_finish_and_nothing_breaks() -> None:
    finished = threading.Event()

    def slow() -> str:
        time.sleep(0.3)
        finished.set()
        return "late"

    async def request() -> str:
        try:
            return await asyncio.wait_for(offload(slow), timeout=0.05)
        except TimeoutError:
            return "timed out"

    assert run_on_loop_thread(request) == "timed out"
    assert finished.is_set()  # the main thread ran it to its end; its result went nowhere


def test_ctrl_c_during_a_computation_cancels_the_request_and_is_raised_again() -> None:
    cleaned = []

    def interrupted() -> None:
        raise KeyboardInterrupt  # what SIGINT does to the main thread mid-computation

    async def request() -> None:
        try:
            await offload(interrupted)
        finally:
            cleaned.append("request cleaned up")

    with pytest.raises(KeyboardInterrupt):
        run_on_loop_thread(request)
    assert cleaned == ["request cleaned up"]


def test_only_the_main_thread_may_run_it_and_only_once_at_a_time() -> None:
    errors: list[BaseException] = []

    async def nothing() -> None:
        return None

    def elsewhere() -> None:
        try:
            run_on_loop_thread(nothing)
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert len(errors) == 1 and "main thread" in str(errors[0])

    async def nested() -> None:
        run_on_loop_thread(nothing)  # called from the loop's thread: refused

    with pytest.raises(RuntimeError, match="main thread"):
        run_on_loop_thread(nested)


def test_the_main_thread_unless_the_environment_says_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODIUM_COMPUTE_THREAD", raising=False)
    assert main_thread_wanted() is True
    monkeypatch.setenv("PODIUM_COMPUTE_THREAD", "helper")
    assert main_thread_wanted() is False
    monkeypatch.setenv("PODIUM_COMPUTE_THREAD", "main")
    assert main_thread_wanted() is True
