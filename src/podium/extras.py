"""podium's optional extras (pyproject.toml ``[project.optional-dependencies]``): the command that
installs one, for the error message of a feature that needs it."""

from __future__ import annotations

import shlex
import sys
from functools import cache

__all__ = ["install_command"]


@cache
def _checkout() -> str | None:
    """The source folder podium is installed from in editable mode (``pip install -e``), or None.
    Its imports are here: most commands import this module and never need an install command,
    and ``importlib.metadata`` alone is ~10 ms of every start-up (``podium trace list``)."""
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        text = metadata.distribution("podium").read_text("direct_url.json")
        info = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError):
        return None
    if not isinstance(info, dict) or not info.get("dir_info", {}).get("editable"):
        return None
    url = urlparse(str(info.get("url", "")))
    return unquote(url.path) if url.scheme == "file" else None


def install_command(extra: str) -> str:
    """The shell command that installs podium's ``extra`` into the running interpreter's
    environment: ``PYTHON -m pip install -e 'CHECKOUT[extra]'`` for an editable install from a
    source checkout (what `make setup` makes), else ``pip install 'podium[extra]'``."""
    checkout = _checkout()
    if checkout is None:
        return f"pip install 'podium[{extra}]'"
    return f"{shlex.quote(sys.executable)} -m pip install -e {shlex.quote(f'{checkout}[{extra}]')}"
