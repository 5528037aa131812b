"""The llama.cpp library in this process: imported once, with OpenMP's short spin set first and
its log lines routed to Python's logging (so model loads may overlap in threads).

Every podium module that needs llama-cpp-python gets it from :func:`load_llama_cpp`.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import sys
from types import ModuleType
from typing import Any, NoReturn

from podium.errors import ConfigError

__all__ = ["exit_without_teardown", "llama_errors", "load_llama_cpp", "short_openmp_spin"]


def short_openmp_spin() -> None:
    """Make llama.cpp's OpenMP threads (libgomp) spin briefly before they sleep: sets
    ``GOMP_SPINCOUNT=10000`` unless ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set already.

    libgomp spins 300,000 rounds between kernels by default. On a loaded CPU that stalls a 64-token
    prefill chunk for seconds, so deadlines cannot hold; never spinning (``OMP_WAIT_POLICY=PASSIVE``)
    makes generation ~1.8× slower on an idle machine. A short spin keeps both (docs/overhead.md,
    measured on 2 cores): 260 tokens of the 1.5B idle 9.2 s default / 16.4 s passive / 9.5–10.7 s
    with 10,000; SmolLM2's worst prefill chunk beside two busy processes 7.8 s / 0.77 s /
    0.43–0.72 s. It only works before the OpenMP runtime loads: the llama.cpp backend calls it just
    before importing llama-cpp-python, and ``podium``'s command line at start (torch loads libgomp
    too). Importing :mod:`podium` itself changes nothing."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", "10000")


def load_llama_cpp() -> ModuleType:
    """The ``llama_cpp`` module (llama-cpp-python), imported after :func:`short_openmp_spin` so its
    OpenMP runtime loads with the short spin. Every podium module that needs llama.cpp gets it here.

    Raises ConfigError naming the install command when llama-cpp-python is missing (the ``local``
    extra)."""
    short_openmp_spin()
    try:
        import llama_cpp
    except ImportError as exc:
        raise ConfigError("llama.cpp is not installed; run: pip install -e '.[local]'") from exc
    global _LOGS_ROUTED
    if not _LOGS_ROUTED:  # once per process; loads may then overlap in threads
        _route_llama_logs(llama_cpp)
        _LOGS_ROUTED = True
    return llama_cpp


def exit_without_teardown(code: int) -> NoReturn:
    """End a one-shot command's process with exit status ``code`` without the interpreter's
    teardown, in which llama-cpp-python frees every loaded model, context and batch one by one.

    That teardown takes 0.1-0.2 s of wall time for the 1.5B worker plus the plan conductor's
    embedding model on 2 cores (measured: 0.18-0.31 s from the last line to the end of the
    process, against 0.10-0.13 s without it; docs/overhead.md); the kernel frees the same memory
    at once. Every ``atexit`` handler still runs first (logging's flush, trace stores' close, an
    exporter's shutdown), and standard output and error are flushed; what is lost is only what a
    program leaves to garbage collection at exit. Call it only after the command has closed what
    it writes (``podium run`` and ``podium plan`` do)."""
    atexit._run_exitfuncs()  # the handlers Python would run at exit, in the same order
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream takes nothing more
            stream.flush()
    os._exit(code)


_LOGS_ROUTED = False
_llama_log = logging.getLogger("podium.llama_cpp")
#: llama.cpp's last ERROR-level messages, for the error of a load that fails
_LLAMA_ERRORS: collections.deque[str] = collections.deque(maxlen=4)


def llama_errors() -> str:
    """llama.cpp's error messages since the last call, joined ("" if none), and forgets them:
    call it before a load to start afresh and after a failed one for what llama.cpp said."""
    lines = []
    while _LLAMA_ERRORS:
        lines.append(_LLAMA_ERRORS.popleft().strip())
    return " ".join(line for line in lines if line)


def _route_llama_logs(llama_cpp: ModuleType) -> None:
    """Send llama.cpp's log lines to Python's logger ``podium.llama_cpp`` (DEBUG) instead of
    stderr, and stop llama-cpp-python's own silencing of a model load.

    llama-cpp-python silences a load by pointing file descriptors 1 and 2 at /dev/null and back
    (``suppress_stdout_stderr``). Each load restores what it found, so two loads that overlap in
    threads without nesting (a model preloaded while a conductor embeds the question) leave the
    process's stdout on /dev/null, and while a load runs nothing any thread prints is seen. Every
    line llama.cpp writes goes through its log callback, so podium takes that instead: nothing
    reaches the terminal, nothing is redirected, and a failed load's error names what llama.cpp
    said (:func:`llama_errors`)."""
    import ctypes

    def record(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        line = text.decode("utf-8", errors="replace")
        if level == 3:  # GGML_LOG_LEVEL_ERROR
            _LLAMA_ERRORS.append(line)
        _llama_log.debug("%s", line.rstrip("\n"))

    callback = llama_cpp.llama_log_callback(record)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    _KEEP.append(callback)  # the C side holds a pointer: keep the ctypes object alive
    for name in ("llama", "_internals", "llama_chat_format"):
        module = sys.modules.get(f"llama_cpp.{name}")
        if module is not None and hasattr(module, "suppress_stdout_stderr"):
            setattr(module, "suppress_stdout_stderr", _NoRedirect)  # noqa: B010 - an untyped module


_KEEP: list[Any] = []


class _NoRedirect:
    """Stands in for llama-cpp-python's ``suppress_stdout_stderr`` (:func:`_route_llama_logs`)."""

    def __init__(self, disable: bool = True) -> None:
        pass

    def __enter__(self) -> _NoRedirect:
        return self

    def __exit__(self, *_: object) -> None:
        return None
