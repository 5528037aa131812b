"""Write-behind for a trace store: a bounded queue drained by one thread in group commits.

A request hands its trace writes (``begin``, the finished record) to :class:`WriteBehind` and
goes on at once; one writer thread takes everything queued — up to ``max_batch`` operations —
and stores it in **one transaction** (the store's ``commit`` callable), so under load many
requests share a commit and its index updates instead of paying for one each. What arrives while
a commit runs forms the next batch. A writer woken by an operation less than ``gather_s`` seconds
after its last commit waits up to ``gather_s`` (no caller waits: they have handed their writes
over) for more to share its commit; without that, traffic that trickles in at a few hundred
requests per second is committed one request at a time, each paying a transaction and a wake-up
of the thread. Sparser writes are committed at once, as before.

Holding: operations the owner marks ``hold`` (a request's start) are not committed at once but
kept up to ``hold_s`` seconds, waiting for a later operation with the same ``key`` (that
request's finished record); when it comes, both go into the queue together and the store
writes the finished record alone — one insert and one index update instead of a ``running``
row, its removal and a second index update, and one writer wake-up instead of two. A held
operation whose ``hold_s`` runs out is committed like any other (the request is still running:
its row shows it), and everything held is committed at once by :meth:`WriteBehind.flush`,
:meth:`WriteBehind.close`, and when the queue is full.

Back-pressure, never a silent drop: when ``max_pending`` operations are waiting, the caller
that finds the queue full waits until the writer has made room (its request still gets its
answer, a little later); every such wait is counted in :class:`WriterStats` and logged (at most
once per :attr:`WriteBehind.LOG_EVERY_S`). An operation whose commit fails is retried alone;
one that fails alone is counted as ``lost`` and logged with its request id and the error.

Durability: :meth:`WriteBehind.flush` returns once everything queued before it is committed;
:meth:`WriteBehind.close` flushes, then stops the thread (stores are also closed at interpreter
exit). A crash (SIGKILL, power loss, an interpreter that cannot run exit handlers) loses what was
still queued: at most ``max_pending`` operations, in practice the writes of the last
``gather_s`` seconds and a few milliseconds, and the held operations of the last ``hold_s``
seconds.

The class knows nothing about SQLite: a store for another database gives it its own ``commit``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["WriteBehind", "WriterStats"]

_log = logging.getLogger("podium.trace")

_T = TypeVar("_T")


@dataclass(frozen=True)
class WriterStats:
    """What a trace writer has done since the store opened.

    Attributes:
        pending: operations queued (held ones included) and not yet committed (or failed).
        written: operations committed.
        batches: transactions committed (``written / batches`` is the mean batch size).
        largest_batch: most operations committed in one transaction.
        full_waits: times a caller found the queue full and waited for room (nothing dropped).
        full_wait_s: seconds callers spent waiting so, in all.
        lost: operations that could not be stored even alone (each logged with its error).
        last_error: the last commit error, or None.
        coalesced: held operations that a later operation of the same key took along before
            their ``hold_s`` ran out (a request's start stored with its finished record).
    """

    pending: int = 0
    written: int = 0
    batches: int = 0
    largest_batch: int = 0
    full_waits: int = 0
    full_wait_s: float = 0.0
    lost: int = 0
    last_error: str | None = None
    coalesced: int = 0


class WriteBehind(Generic[_T]):
    """A bounded queue of write operations and the thread that commits them in batches.

    Args:
        commit: stores a batch of operations in one transaction; raises on failure (then
            nothing of the batch may be stored).
        describe: names an operation in log lines (e.g. its request id).
        max_pending: most operations queued, held ones included; a caller finding it full
            waits (see module doc).
        max_batch: most operations per transaction.
        name: the thread's name.
        hold: which operations may wait for a later one of the same ``key`` (see the module
            doc); None holds nothing.
        key: what ties a held operation to the one that takes it along (e.g. a request id).
        hold_s: most seconds an operation is held.
        gather_s: most seconds a writer woken by an operation within ``gather_s`` of its last
            commit waits for more before it commits (0: commit at once); a flush, a close or a
            full batch ends the wait.

    The thread starts with the first operation and ends after ``IDLE_S`` seconds with nothing
    to do (the next operation starts it again), so an idle store holds no thread.
    """

    IDLE_S = 2.0
    """Seconds an idle writer thread waits for work before it ends."""

    LOG_EVERY_S = 10.0
    """Least seconds between two "queue full" log lines (each says how many waits so far)."""

    def __init__(
        self,
        commit: Callable[[Sequence[_T]], None],
        *,
        describe: Callable[[_T], str] = repr,
        max_pending: int = 1000,
        max_batch: int = 256,
        name: str = "podium-trace-writer",
        hold: Callable[[_T], bool] | None = None,
        key: Callable[[_T], object] = id,
        hold_s: float = 0.0,
        gather_s: float = 0.0,
    ) -> None:
        if max_pending < 1 or max_batch < 1:
            raise ValueError(f"max_pending and max_batch must be at least 1, got {max_pending}, {max_batch}")
        if hold_s < 0 or gather_s < 0:
            raise ValueError(f"hold_s and gather_s must not be negative, got {hold_s}, {gather_s}")
        self._commit = commit
        self._describe = describe
        self.max_pending = max_pending
        self.max_batch = max_batch
        self._name = name
        self._hold = hold if hold_s > 0 else None
        self._key = key
        self.hold_s = hold_s
        self.gather_s = gather_s
        self._gathering = False  # the writer waits for more operations to share a commit
        self._queue: deque[_T] = deque()  # ready to commit, in order
        self._held: dict[object, tuple[_T, float]] = {}  # key -> (operation, monotonic deadline), oldest first
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._urgent = 0  # callers in flush() or waiting for room: nothing may be held meanwhile
        self._queued = 0  # operations ever put
        self._done = 0  # operations committed or lost
        self._written = self._batches = self._largest = self._waits = self._lost = self._coalesced = 0
        self._waited_s = 0.0
        self._last_error: str | None = None
        self._logged_at = -self.LOG_EVERY_S

    # ----------------------------------------------------------------------------- callers

    def put(self, op: _T) -> None:
        """Queue ``op`` (or hold it, see the module doc); waits while the queue is full. After
        :meth:`close` (or if the thread died) the operation is committed in the caller's thread
        instead, so it is never lost for want of a writer."""
        with self._cond:
            inline = self._closed or not self._writer_alive()
            if not inline and len(self._queue) + len(self._held) >= self.max_pending:
                self._wait_for_room()
                inline = not self._writer_alive()
            if not inline:
                self._queued += 1
                hold = self._hold is not None and not self._urgent and self._hold(op)
                if self._held and (held := self._held.pop(self._key(op), None)) is not None:
                    self._queue.append(held[0])  # it goes first, and in the same batch as op
                    if not hold:
                        self._coalesced += 1
                if hold:  # the writer looks at what is held whenever it wakes
                    self._held[self._key(op)] = (op, time.monotonic() + self.hold_s)
                else:
                    self._queue.append(op)
                # a gathering writer wakes at its deadline or for a full batch, not for each write
                if self._queue and (not self._gathering or len(self._queue) >= self.max_batch):
                    self._cond.notify_all()
        if inline:
            self._store([op])

    def _writer_alive(self) -> bool:
        """(Holding the condition.) Start the thread if none runs; False only if it failed."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        return self._thread.is_alive()

    def _wait_for_room(self) -> None:
        """Block (holding nothing but the condition) until the writer has taken a batch."""
        self._waits += 1
        started = time.monotonic()
        if started - self._logged_at >= self.LOG_EVERY_S:
            self._logged_at = started
            _log.warning(
                "podium: trace writer is behind: %d writes queued (the limit); requests wait for room "
                "before finishing (%d such waits so far; nothing is dropped)",
                len(self._queue) + len(self._held),
                self._waits,
            )
        self._urgent += 1
        self._cond.notify_all()  # held operations go now
        try:
            while (
                len(self._queue) + len(self._held) >= self.max_pending
                and self._thread is not None
                and self._thread.is_alive()
            ):
                self._cond.wait(timeout=1.0)
        finally:
            self._urgent -= 1
        self._waited_s += time.monotonic() - started

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every operation queued before this call, held ones included, is
        committed (or counted lost). Returns False when ``timeout`` (seconds) ran out first. A
        no-op on the writer thread."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if threading.current_thread() is self._thread:
                return True
            target = self._queued
            self._urgent += 1
            self._cond.notify_all()  # held operations go now
            try:
                while self._done < target and self._thread is not None and self._thread.is_alive():
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._cond.wait(timeout=1.0 if left is None else min(left, 1.0))
                return self._done >= target
            finally:
                self._urgent -= 1

    def close(self) -> None:
        """Flush, then stop the thread; later operations are committed inline. Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def stats(self) -> WriterStats:
        with self._cond:
            return WriterStats(
                pending=self._queued - self._done,
                written=self._written,
                batches=self._batches,
                largest_batch=self._largest,
                full_waits=self._waits,
                full_wait_s=round(self._waited_s, 6),
                lost=self._lost,
                last_error=self._last_error,
                coalesced=self._coalesced,
            )

    # ------------------------------------------------------------------------------ writer

    def _release(self) -> float | None:
        """(Holding the condition.) Move the held operations that may not wait any longer into
        the queue — all of them when closing, flushing or full — and return the deadline of the
        oldest one left (None when none is held)."""
        if not self._held:
            return None
        everything = self._closed or self._urgent > 0 or len(self._queue) + len(self._held) >= self.max_pending
        now = time.monotonic()
        while self._held:
            key, (op, deadline) = next(iter(self._held.items()))
            if not everything and deadline > now:
                return deadline
            del self._held[key]
            self._queue.append(op)
        return None

    def _gather(self) -> None:
        """(Holding the condition.) Wait up to ``gather_s`` for more operations to join the
        batch; a flush, a close, a full queue or a full batch ends the wait."""
        self._gathering = True
        end = time.monotonic() + self.gather_s
        try:
            while len(self._queue) < self.max_batch and not (self._closed or self._urgent):
                left = end - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(timeout=left)
        finally:
            self._gathering = False

    def _run(self) -> None:
        idle_since = time.monotonic()
        while True:
            with self._cond:
                waited = False
                while True:
                    deadline = self._release()
                    if self._queue:
                        # woken by a write less than gather_s after the last commit: writes are
                        # arriving close together, so let the next ones join this commit
                        if waited and time.monotonic() - idle_since < self.gather_s:
                            self._gather()
                            self._release()
                        break
                    waited = True
                    now = time.monotonic()
                    if deadline is None and (self._closed or now - idle_since >= self.IDLE_S):
                        # closed and drained, or idle: the next put starts a thread
                        self._thread = None
                        self._cond.notify_all()
                        return
                    if deadline is not None:
                        self._cond.wait(timeout=deadline - now)
                    else:  # a held operation put meanwhile is looked at within hold_s
                        nap = self.IDLE_S - (now - idle_since)
                        self._cond.wait(timeout=min(nap, self.hold_s) if self._hold is not None else nap)
                batch = [self._queue.popleft() for _ in range(min(len(self._queue), self.max_batch))]
                self._cond.notify_all()  # room for callers waiting on a full queue
            try:
                self._store(batch)
            finally:
                with self._cond:
                    self._done += len(batch)
                    self._cond.notify_all()
                idle_since = time.monotonic()

    def _store(self, batch: list[_T]) -> None:
        """Commit ``batch`` in one transaction; if that fails, each operation alone, counting
        (and logging) the ones that still fail as lost. Never raises."""
        try:
            self._commit(batch)
        except Exception as exc:
            if len(batch) == 1:
                self._failed(batch[0], exc)
                return
            with self._cond:
                self._last_error = f"{type(exc).__name__}: {exc}"
            for op in batch:  # isolate the operation at fault; the others are stored
                try:
                    self._commit([op])
                except Exception as alone:
                    self._failed(op, alone)
                else:
                    self._counted(1)
            return
        self._counted(len(batch))

    def _counted(self, n: int) -> None:
        with self._cond:
            self._written += n
            self._batches += 1
            self._largest = max(self._largest, n)

    def _failed(self, op: _T, exc: Exception) -> None:
        with self._cond:
            self._lost += 1
            self._last_error = f"{type(exc).__name__}: {exc}"
        _log.error("podium: the trace of %s was not stored: %s", self._describe(op), exc)
