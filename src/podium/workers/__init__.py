"""Worker backends, one module each, behind the :class:`~podium.workers.base.Worker` interface.

Backends are imported lazily, so a pool that does not use llama.cpp never needs it installed.
The workers a pool file describes are built by :mod:`podium.pool_workers`.
"""

from __future__ import annotations

from podium.workers.base import (
    Call,
    CallContext,
    Completion,
    Message,
    Price,
    Usage,
    Worker,
    WorkerInfo,
    WorkerSettings,
)
from podium.workers.wrapper import WorkerWrapper

__all__ = [
    "Call",
    "CallContext",
    "Completion",
    "Message",
    "Price",
    "Usage",
    "Worker",
    "WorkerInfo",
    "WorkerSettings",
    "WorkerWrapper",
]
