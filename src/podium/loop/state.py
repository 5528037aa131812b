"""The loop's working folder and its state file, ``loop.json``.

Layout of ``--dir`` (:class:`Folder`)::

    loop.json                 the state: the folder's settings, every run, the review files written
    set.jsonl                 the regression set (podium tasks export --append)
    review/review-NNNN.csv    the review file of run NNNN's new tasks (podium tasks export --review)
    set.csv                   the outcome matrix (podium eval --matrix … --matrix-split)
    bank/                     the workflow bank (--bank: podium bank record)
    runs/NNNN/                run NNNN's files: drift.md / drift.json, eval/, bank-ids.txt,
                              report.md / report.json

Everything a stage decides is derived from these files (which tasks are in the set, which review
file names which ids, the sha256 of the set and the matrix an eval or a training used), so a run
interrupted anywhere is resumed by running again. ``loop.json`` is replaced atomically; a second
``podium loop run`` on the same folder while one works is refused (:func:`locked`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.errors import ConfigError

__all__ = ["FORMAT", "Folder", "atomic_write", "load_state", "locked", "save_state", "sha256_file"]

FORMAT = "podium loop"
_VERSION = 1


@dataclass(frozen=True)
class Folder:
    """The paths of a loop folder (module docstring)."""

    root: Path

    @property
    def state(self) -> Path:
        return self.root / "loop.json"

    @property
    def set(self) -> Path:
        return self.root / "set.jsonl"

    @property
    def matrix(self) -> Path:
        return self.root / "set.csv"

    @property
    def reviews(self) -> Path:
        return self.root / "review"

    @property
    def bank(self) -> Path:
        return self.root / "bank"

    def run(self, run_id: str) -> Path:
        """Run ``run_id``'s folder."""
        return self.root / "runs" / run_id

    def review(self, run_id: str) -> Path:
        """The review file run ``run_id`` writes."""
        return self.reviews / f"review-{run_id}.csv"

    def relative(self, path: Path) -> str:
        """``path`` relative to the folder where it is inside it (as ``loop.json`` stores paths)."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def check(self, *, new_ok: bool = True) -> None:
        """ConfigError unless the folder exists (a typo in --dir must not start a new loop); the
        fix offers a new folder only where a new loop can start (``new_ok``: not for a status)."""
        if self.root.is_dir():
            return
        if self.root.exists():
            raise ConfigError(f"--dir {self.root} is a file, not a folder; name the loop's folder")
        fix = (
            f"create it (mkdir -p {self.root}) for a new loop, or name the existing one"
            if new_ok
            else "name an existing loop's folder"
        )
        raise ConfigError(
            f"--dir {self.root} does not exist; the loop keeps its set, review files and state in a folder: {fix}"
        )


def sha256_file(path: Path) -> str | None:
    """The file's sha256 (hex), or None when it does not exist."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a reader never sees half
    of it, and a failure leaves the old file as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_state(folder: Folder) -> dict[str, Any]:
    """The folder's ``loop.json``, or a fresh state when there is none. ConfigError for a file
    that is not a loop state (nothing is changed then)."""
    if not folder.state.exists():
        return {"format": FORMAT, "version": _VERSION, "settings": {}, "runs": [], "reviews": []}
    try:
        state = json.loads(folder.state.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            f"{folder.state} is not readable JSON ({exc}); restore it from a backup, or start a new loop in another "
            "--dir (the set, review files and matrix here can be copied over)"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ConfigError(f'{folder.state} is not a podium loop state file (no "format": "{FORMAT}")')
    if state.get("version") != _VERSION:
        raise ConfigError(f"{folder.state} is version {state.get('version')!r}; this podium reads version {_VERSION}")
    for key, kind in (("settings", dict), ("runs", list), ("reviews", list)):
        if not isinstance(state.setdefault(key, kind()), kind):
            raise ConfigError(f"{folder.state}: {key!r} must be a JSON {'object' if kind is dict else 'list'}")
    return state


def save_state(folder: Folder, state: dict[str, Any]) -> None:
    """Replace ``loop.json`` with ``state`` atomically."""
    atomic_write(folder.state, json.dumps(state, indent=1, ensure_ascii=False) + "\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def locked(folder: Folder) -> Iterator[None]:
    """Hold ``DIR/.loop.lock`` (this process's id) for the block. ConfigError when a live
    process holds it; a lock left by a process that is gone (killed) is taken over."""
    lock = folder.root / ".loop.lock"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(lock.read_text(encoding="utf-8").strip() or 0)
            except (OSError, ValueError):
                holder = 0
            if holder and holder != os.getpid() and _alive(holder):
                raise ConfigError(
                    f"another podium loop run (process {holder}) is working in {folder.root}; wait for it to end "
                    f"(or, if no such run exists, remove {lock})"
                ) from None
            lock.unlink(missing_ok=True)  # left by a run that was killed: take it over
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
        break
    else:
        raise ConfigError(f"cannot take the lock {lock}; remove it if no podium loop run is working there")
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
