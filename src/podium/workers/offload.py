"""Where a local model's blocking computation runs: a helper thread, or the process's main thread.

llama.cpp's CPU backend is built with OpenMP (libgomp). A team of threads started from the
process's main thread spin-waits between operations; started from any other thread, libgomp
counts one thread more than there are CPUs and throttles to sleeping between operations, which on
an idle machine makes generation slower (docs/overhead.md: 100 tokens of the 1.5B took 4.5 s from
the main thread, 6.0 s from another). An asyncio program normally offloads blocking calls to
helper threads (:func:`asyncio.to_thread`), so every llama.cpp call in podium paid that.

A command that owns its main thread for one request (``podium run``) can turn this around with
:func:`run_on_loop_thread`: the event loop runs on a helper thread, and the blocking model
computations it hands to :func:`offload` run one after another on the main thread. Everything else
— a server, an evaluation, tests — offloads to helper threads as before. ``podium run`` uses the
main thread unless ``PODIUM_COMPUTE_THREAD=helper`` (:func:`main_thread_wanted`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

__all__ = ["main_thread_wanted", "offload", "run_on_loop_thread"]

_T = TypeVar("_T")

_Job = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]


class _MainThread:
    """The main thread's job queue while :func:`run_on_loop_thread` runs."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None


_RUNNER: _MainThread | None = None


async def offload(fn: Callable[..., _T], *args: Any, otherwise: Literal["thread", "inline"] = "thread") -> _T:
    """``fn(*args)``, run on the main thread when :func:`run_on_loop_thread` drives this event
    loop; otherwise on a helper thread (``otherwise="thread"``, :func:`asyncio.to_thread`) or right
    here on the event loop (``"inline"``, for short computations that ran there before). Its
    exceptions propagate; cancelling the caller does not stop a computation already running (the
    caller's own cancel flag must, as the llama.cpp worker's does)."""
    runner = _RUNNER
    if runner is None or runner.loop is not asyncio.get_running_loop():
        return await asyncio.to_thread(fn, *args) if otherwise == "thread" else fn(*args)
    future: asyncio.Future[_T] = runner.loop.create_future()
    runner.jobs.put((fn, args, future))
    return await future


def run_on_loop_thread(make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run the coroutine ``make()`` on an event loop in a helper thread, while this (the main)
    thread runs the computations the loop hands to :func:`offload`, in the order they arrive.

    Returns the coroutine's result or raises its exception. Ctrl-C (KeyboardInterrupt, delivered
    to the main thread) cancels the coroutine; once it has finished, KeyboardInterrupt is raised
    again. Raises RuntimeError when not called from the main thread or when already running."""
    global _RUNNER
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run_on_loop_thread must be called from the main thread")
    if _RUNNER is not None:
        raise RuntimeError("run_on_loop_thread is already running")
    runner = _MainThread()
    outcome: dict[str, Any] = {}

    async def main() -> _T:
        runner.loop, runner.task = asyncio.get_running_loop(), asyncio.current_task()
        return await make()

    def loop_thread() -> None:
        try:
            outcome["value"] = asyncio.run(main())
        except BaseException as exc:  # handed to the main thread, which raises it
            outcome["error"] = exc
        finally:
            runner.jobs.put(None)

    _RUNNER = runner
    interrupted = False
    thread = threading.Thread(target=loop_thread, name="podium-event-loop", daemon=True)
    try:
        thread.start()
        while True:
            try:
                job = runner.jobs.get(timeout=0.2)  # a timeout, so Ctrl-C is seen while waiting
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                interrupted = True
                _cancel(runner)
                continue
            if job is None:
                break
            fn, args, future = job
            try:
                _settle(runner, future, fn(*args), None)
            except KeyboardInterrupt:
                interrupted = True
                _settle(runner, future, None, asyncio.CancelledError())
                _cancel(runner)
            except BaseException as exc:  # the caller's exception, raised where it awaits
                _settle(runner, future, None, exc)
    finally:
        thread.join()
        _RUNNER = None
    if interrupted:
        raise KeyboardInterrupt
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


def _settle(runner: _MainThread, future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    def settle() -> None:
        if future.done():  # its caller was cancelled meanwhile
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)

    assert runner.loop is not None
    with contextlib.suppress(RuntimeError):  # the loop has finished already (its request was cancelled)
        runner.loop.call_soon_threadsafe(settle)


def _cancel(runner: _MainThread) -> None:
    if runner.loop is not None and runner.task is not None:
        with contextlib.suppress(RuntimeError):
            runner.loop.call_soon_threadsafe(runner.task.cancel)


def main_thread_wanted() -> bool:
    """Whether ``podium run`` should compute on the main thread (:func:`run_on_loop_thread`):
    yes, unless ``PODIUM_COMPUTE_THREAD=helper``. With the short OpenMP spin podium sets
    (``podium/__init__.py``) the main thread is faster on an idle machine and holds deadlines on
    a loaded one (docs/overhead.md)."""
    return os.environ.get("PODIUM_COMPUTE_THREAD", "main").strip().lower() != "helper"
