"""The conductor registry: trained conductors, versioned, with their config, data and eval reports.

Layout under ``<data dir>/conductors/`` (``PODIUM_HOME``, default ``~/.local/share/podium``)::

    <name>/v<N>/policy.npz        the trained parameters
    <name>/v<N>/train.json        config, data, per-generation history
    <name>/v<N>/learning-curve.png
    <name>/v<N>/eval/             held-out eval reports (``podium conductor eval``)
    <name>/promotions.jsonl       every promotion and rollback, in order (UTC ISO 8601)

Promotions form a stack: a promotion pushes a version, a rollback pops the current one so the
version promoted before it is current again. Both are appended to ``promotions.jsonl``; nothing is
ever deleted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.records import utc_now
from podium.trace import data_dir

__all__ = ["Registry", "Version", "parse_ref"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME@vN`` → (name, N or None). Raises ConfigError for a malformed ref."""
    name, _, version = ref.partition("@")
    if not _NAME.match(name):
        raise ConfigError(f"conductor name {name!r}: use letters, digits, '.', '_' or '-' (at most 64)")
    if not version:
        return name, None
    if not re.fullmatch(r"v?\d+", version):
        raise ConfigError(f"conductor version {version!r}: write NAME@vN, e.g. {name}@v2")
    return name, int(version.lstrip("v"))


@dataclass(frozen=True)
class Version:
    """One stored version: ``name@v<number>`` in ``path``."""

    name: str
    number: int
    path: Path

    @property
    def ref(self) -> str:
        return f"{self.name}@v{self.number}"

    @property
    def policy_path(self) -> Path:
        return self.path / "policy.npz"

    def train_info(self) -> dict[str, Any]:
        """The stored ``train.json`` ({} if absent)."""
        file = self.path / "train.json"
        return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}


class Registry:
    """Trained conductors on disk (see the module docstring).

    Args:
        root: the registry folder (default ``<data dir>/conductors``).
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or data_dir() / "conductors"

    def create(self, name: str) -> Version:
        """A new, empty version folder ``name@v<next>``."""
        parse_ref(name)
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        number = max((v.number for v in self.versions(name)), default=0) + 1
        path = folder / f"v{number}"
        path.mkdir()
        return Version(name, number, path)

    def names(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []

    def versions(self, name: str) -> list[Version]:
        folder = self.root / name
        if not folder.is_dir():
            return []
        found = [Version(name, int(p.name[1:]), p) for p in folder.iterdir() if re.fullmatch(r"v\d+", p.name)]
        return sorted(found, key=lambda v: v.number)

    def get(self, ref: str, *, bare: str = "promoted") -> Version:
        """``NAME@vN``, or for a bare ``NAME`` its promoted version (else its latest) — or, with
        ``bare="latest"``, its latest version.

        Raises ConfigError naming the known versions when there is no such version."""
        name, number = parse_ref(ref)
        versions = self.versions(name)
        if not versions:
            known = ", ".join(self.names()) or "none yet (train one: podium train)"
            raise ConfigError(f"no conductor named {name!r} in {self.root}; known: {known}")
        if number is None:
            promoted = self.promoted(name) if bare == "promoted" else None
            return promoted if promoted is not None else versions[-1]
        for version in versions:
            if version.number == number:
                return version
        raise ConfigError(f"{name} has no v{number}; versions: {', '.join(v.ref for v in versions)}")

    def history(self, name: str) -> list[dict[str, Any]]:
        """Promotions and rollbacks of ``name``, oldest first."""
        file = self.root / name / "promotions.jsonl"
        if not file.is_file():
            return []
        return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]

    def _stack(self, name: str) -> list[int]:
        """Promoted versions as a stack: a promotion pushes, a rollback pops."""
        stack: list[int] = []
        for entry in self.history(name):
            if entry["action"] == "promote":
                stack.append(int(entry["version"]))
            elif stack:
                stack.pop()
        return stack

    def promoted(self, name: str) -> Version | None:
        stack = self._stack(name)
        return self.get(f"{name}@v{stack[-1]}") if stack else None

    def promote(self, version: Version, *, evidence: dict[str, Any]) -> None:
        """Record ``version`` as promoted, with the evaluation that justified it."""
        self._log(version.name, {"action": "promote", "version": version.number, "at": utc_now(), **evidence})

    def rollback(self, name: str) -> Version:
        """Undo the latest promotion: the version promoted before it is current again.
        Raises ConfigError when there is nothing to roll back to."""
        stack = self._stack(name)
        if len(stack) < 2:
            state = f"v{stack[-1]} is the only promoted version" if stack else "it was never promoted"
            raise ConfigError(f"cannot roll back {name}: {state}")
        target = self.get(f"{name}@v{stack[-2]}")
        self._log(name, {"action": "rollback", "version": target.number, "from": stack[-1], "at": utc_now()})
        return target

    def _log(self, name: str, entry: dict[str, Any]) -> None:
        file = self.root / name / "promotions.jsonl"
        with file.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
