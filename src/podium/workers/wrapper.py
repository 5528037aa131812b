"""The base of workers that wrap a worker.

A worker has one method, :meth:`~podium.workers.base.Worker.complete`, taking one
:class:`~podium.workers.base.Call` (messages, settings, an optional grammar-bound continuation,
and the request's :class:`~podium.workers.base.CallContext`). A wrapper (budget guard, retries,
circuit breaker, failover, PII guard, request cache, or one of your own) overrides that method
and passes the call on with ``super().complete(call)``; ``call.send(other)`` makes the same call
on another worker, :meth:`~podium.workers.base.Call.with_messages` changes what is sent (the PII
guard masks it) and :meth:`~podium.workers.base.Call.with_context` what the inner call sees.

    class Timing(WorkerWrapper):
        async def complete(self, call: Call) -> Completion:
            started = time.perf_counter()
            try:
                return await super().complete(call)
            finally:
                print(self.info.name, time.perf_counter() - started)

A wrapper declares what its inner worker declares (``info``), so it stacks anywhere.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable

from podium.workers.base import Call, Completion, Preloads, Worker, WorkerInfo

__all__ = ["WorkerWrapper", "preload_in_background", "unwrap"]


class WorkerWrapper:
    """A worker around ``inner``: override :meth:`complete` to add behaviour. The wrapper is
    itself a worker with ``inner``'s :class:`~podium.workers.base.WorkerInfo`, so wrappers
    stack and the executor never knows they are there."""

    #: whether a call through this wrapper always reaches ``inner`` (so loading its model ahead
    #: is never wasted); False for a wrapper that may answer by itself (the request cache)
    reaches_inner: bool = True

    def __init__(self, inner: Worker) -> None:
        self.inner = inner

    @property
    def info(self) -> WorkerInfo:
        """The inner worker's declared data."""
        return self.inner.info

    async def complete(self, call: Call) -> Completion:
        """Make ``call`` on the inner worker; wrappers override this to add their behaviour."""
        return await call.send(self.inner)


def unwrap(worker: Worker) -> Worker:
    """The innermost worker under any wrappers."""
    while isinstance(worker, WorkerWrapper):
        worker = worker.inner
    return worker


def preload_in_background(workers: Iterable[Worker]) -> threading.Thread | None:
    """Load the models of ``workers`` that load one on first use (:class:`Preloads`, under
    wrappers that always reach them), one after another in a daemon thread, so the loads overlap
    the caller's own work (a plan conductor's embedding). Returns the thread, or None when there
    is nothing to load. A failed load is left for the real call to raise, with its context."""
    todo = []
    for worker in workers:
        while isinstance(worker, WorkerWrapper) and worker.reaches_inner:
            worker = worker.inner
        if isinstance(worker, Preloads) and not isinstance(worker, WorkerWrapper) and not worker.loaded:
            todo.append(worker)
    if not todo:
        return None

    def load() -> None:
        for worker in todo:
            with contextlib.suppress(Exception):  # the call that needs the model raises it, in context
                worker.preload()

    thread = threading.Thread(target=load, name="podium-preload", daemon=True)
    thread.start()
    return thread
