"""What the options of ``podium serve``, ``ui``, ``keys``, ``kill-switch`` and ``shadow`` resolve
to: podium's default files for API keys and shadow records (in :func:`podium.trace.data_dir`),
the key store the options name, the event loop and HTTP parser uvicorn gets, and the check that
the ``serve`` extra is installed.

Raises ConfigError with the fix (the extra to install, the option to change).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.extras import install_command
from podium.trace import data_dir

__all__ = [
    "check_address",
    "default_key_path",
    "default_shadow_path",
    "key_store",
    "require_serve_extra",
    "serving_stack",
]


def default_key_path() -> Path:
    """The API key file in podium's data folder: ``keys.sqlite3``."""
    return data_dir() / "keys.sqlite3"


def default_shadow_path() -> Path:
    """The shadow store in podium's data folder: ``shadow.sqlite3``."""
    return data_dir() / "shadow.sqlite3"


def serving_stack(loop: str, http: str) -> tuple[str, str]:
    """The event loop and HTTP implementation uvicorn gets: ``auto`` is uvloop / httptools when
    importable (the ``serve`` extra installs them where the platform has wheels), else asyncio /
    h11. Raises ConfigError when one asked for by name is not installed."""
    import importlib.util

    chosen = []
    for asked, fast, plain in ((loop, "uvloop", "asyncio"), (http, "httptools", "h11")):
        found = importlib.util.find_spec(fast) is not None
        if asked == fast and not found:
            raise ConfigError(f"--{'loop' if fast == 'uvloop' else 'http'} {fast}: {fast} is not installed; "
                              f"{install_command('serve')} (or leave the option at auto)")  # fmt: skip
        chosen.append(fast if asked == fast or (asked == "auto" and found) else plain)
    return chosen[0], chosen[1]


def key_store(args: argparse.Namespace) -> Any:
    """The key store the options ask for: ``--database-url``, else ``--keys FILE``, else
    ``$PODIUM_DATABASE_URL``, else the key file in podium's data folder."""
    from podium.serve.keys import KeyStore
    from podium.store.engine import database_url

    if args.database_url:
        return KeyStore(url=args.database_url)
    if args.keys:
        return KeyStore(args.keys)
    return KeyStore(default_key_path(), url=database_url())


def require_serve_extra(command: str) -> None:
    """Raises ConfigError naming the extra when FastAPI, uvicorn or httpx is missing."""
    import importlib.util

    for module in ("fastapi", "uvicorn", "httpx"):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"podium {command} needs the serve extra ({module} is missing): {install_command('serve')}"
            )


def check_address(host: str, port: int) -> None:
    """Raises ConfigError when this machine cannot listen on ``host``:``port`` (an address it
    does not have, a port in use), so ``podium serve`` says so instead of announcing that it
    serves and then failing in uvicorn."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"--host {host}: not an address this machine can listen on ({exc})") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port, or stop what uses it"
            ) from None
