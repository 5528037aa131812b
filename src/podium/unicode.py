"""Text that is valid Unicode, whatever a worker or a provider sent.

A Python ``str`` can hold surrogate code points (U+D800–U+DFFF) that are no text: JSON's
``"\\ud800"`` decodes to one, and a stream whose provider split a surrogate pair between two
chunks holds the pair as two separate code points. Such a string cannot be encoded as UTF-8, so
it would break every byte count, database write and HTTP body it reaches. Text enters podium from
workers in :class:`~podium.workers.base.Completion` and in the text a backend reports to an
answer stream; both pass through :func:`valid_text`, and the trace stores apply it once more to
every text they write.
"""

from __future__ import annotations

import re

__all__ = ["is_valid_text", "stream_safe", "utf8_length", "valid_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def is_valid_text(text: str) -> bool:
    """Whether ``text`` holds no surrogate code point (it encodes as UTF-8)."""
    return _SURROGATE.search(text) is None


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: a surrogate pair held as two code points becomes the
    character it encodes, and every lone surrogate becomes U+FFFD (the replacement character).
    Text without surrogates comes back as it is (the same object)."""
    if text.isascii() or _SURROGATE.search(text) is None:  # isascii: a flag CPython keeps, O(1)
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def stream_safe(text: str) -> str:
    """A streamed text so far (cumulative) as valid Unicode that a later, longer text extends:
    a trailing high surrogate is held back (its pair may come with the next chunk); everything
    else is :func:`valid_text`."""
    if text and "\ud800" <= text[-1] <= "\udbff":
        text = text[:-1]
    return valid_text(text)


def utf8_length(text: str) -> int:
    """Bytes of ``text`` in UTF-8, never raising: a surrogate counts 3 bytes, as the U+FFFD
    that :func:`valid_text` makes of it does."""
    return len(text.encode("utf-8", "surrogatepass"))
