"""Streaming the answer: the final step's text reaches the caller while it is generated.

Only the step whose output becomes the answer streams; earlier steps never reach the caller.
The orchestrator hands an :class:`AnswerStream` to the executor, which puts it on that one
step's call (``Call.context.stream``); backends that generate token by token (in-process
llama.cpp, streamed OpenAI-compatible calls) report the text generated so far with
``call.context.report_text``. Everything else — cached calls, non-streaming backends, tools —
simply reports nothing, and the caller gets the answer when the request ends.

The stream only ever *extends* what it sent. Backends report cumulative text, so a retried
call that regenerates the same text sends nothing twice; if a retry (or the fallback pipeline)
writes a different text, the stream stops sending and :meth:`AnswerStream.close` tells the
caller whether the final answer still extends what was sent (then only the rest follows) or not.

What is sent is always a prefix of the answer the request ends with, which is the step's text
stripped of surrounding whitespace and made valid Unicode (:mod:`podium.unicode`): the stream
never sends leading whitespace, holds trailing whitespace back until more text follows it, holds
back a trailing high surrogate (its pair may come in the next chunk) and sends a lone surrogate
as U+FFFD, as the answer has it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Protocol

from podium.unicode import stream_safe

__all__ = ["AnswerStream", "TextSink"]


class TextSink(Protocol):
    """Where a generating call reports its cumulative text: an :class:`AnswerStream`, or a
    wrapper that transforms the text first (e.g. PII restoration for an external worker)."""

    def update(self, text: str) -> None:
        """The text generated so far (cumulative)."""


class AnswerStream:
    """The answer's text as it is generated, for one request.

    Args:
        on_delta: called with each new piece of text (never empty) on the event loop thread
            of whoever created the stream, whichever thread the backend generates in.

    Thread-safe: :meth:`update` may be called from worker threads (llama.cpp runs in one).
    """

    def __init__(self, on_delta: Callable[[str], None]) -> None:
        self._on_delta = on_delta
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self.sent = ""
        """All text passed to ``on_delta`` so far."""
        self.diverged = False
        """True once a report did not extend what was sent (nothing more is sent live)."""

    def update(self, text: str) -> None:
        """Report the text generated so far by the answering call (cumulative, not a delta).
        Only its part that the final answer must start with is sent: stripped, valid Unicode
        (see the module doc)."""
        text = stream_safe(text).strip()
        with self._lock:
            if self.diverged:
                return
            if len(text) <= len(self.sent):  # a retry catching up: fine while it repeats what was sent
                self.diverged = not self.sent.startswith(text)
                return
            if not text.startswith(self.sent):
                self.diverged = True
                return
            delta, self.sent = text[len(self.sent) :], text
        if _on_loop(self._loop):
            self._on_delta(delta)
        else:
            self._loop.call_soon_threadsafe(self._on_delta, delta)

    def close(self, answer: str) -> str | None:
        """The text still to send so the caller holds exactly ``answer`` (possibly ""), or
        None when ``answer`` does not extend what was already sent (a retry or the fallback
        pipeline wrote something else after streaming began)."""
        with self._lock:
            if not answer.startswith(self.sent):
                return None
            rest, self.sent = answer[len(self.sent) :], answer
            return rest


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
