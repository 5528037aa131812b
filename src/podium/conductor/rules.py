"""A hand-written rule pipeline: the kind of router teams write before they learn one
(``podium eval --methods rules:FILE.toml``; a server preset ``conductor = "rules:FILE.toml"``).

The file lists rules in order; the first whose ``match`` (a Python regular expression, searched
in the question) matches picks the workflow, and the last rule has no ``match`` (the default)::

    [[rule]]
    match = "(?i)```python|\\bdef |\\bpython\\b|\\bfunction\\b"   # coding questions
    steps = ["solve@qwen2.5-coder-1.5b"]

    [[rule]]                                                       # everything else
    steps = ["solve@qwen2.5-coder-0.5b", "verify@qwen2.5-coder-1.5b"]

A step is ``ROLE@WORKER``: a role of :mod:`podium.roles` (its subtask is the role's template)
on a pool worker by name. The steps form a chain: each sees the step before it. The workflow is
a function of the question alone, so the rule pipeline replays exactly from the request cache.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from podium.conductor.base import DirectConductor
from podium.errors import ConfigError
from podium.roles import ROLES, RoleName, subtask
from podium.workers.base import Worker
from podium.workflow import Step

__all__ = ["Rule", "RulePipeline", "load_rules"]


@dataclass(frozen=True)
class Rule:
    """One rule: ``match`` (a compiled pattern, None for the default) and its chain of
    ``(role, worker name)`` steps."""

    match: re.Pattern[str] | None
    steps: tuple[tuple[RoleName, str], ...]


def load_rules(path: Path) -> tuple[Rule, ...]:
    """The rules of a rule file (module docstring). Raises ConfigError naming the file and rule
    for a missing or unreadable file, a bad pattern, a step that is not ``ROLE@WORKER`` with a
    known role, no rules, or a last rule that has a ``match`` (a question could match none)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"rules:{path}: no such file (a TOML file of [[rule]] tables)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"rules:{path}: cannot read it: {exc}") from exc
    raw = data.get("rule")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"rules:{path}: no [[rule]] tables")
    rules = []
    for n, entry in enumerate(raw, 1):
        where = f"rules:{path}: rule {n}"
        if not isinstance(entry, dict) or set(entry) - {"match", "steps"}:
            raise ConfigError(f"{where}: a rule has only 'match' and 'steps'")
        pattern = entry.get("match")
        try:
            match = re.compile(pattern) if pattern is not None else None
        except (re.error, TypeError) as exc:
            raise ConfigError(f"{where}: 'match' is not a regular expression: {exc}") from exc
        steps = entry.get("steps")
        if not isinstance(steps, list) or not steps:
            raise ConfigError(f"{where}: 'steps' must be a non-empty list of \"ROLE@WORKER\"")
        chain: list[tuple[RoleName, str]] = []
        for step in steps:
            role, _, worker = str(step).partition("@")
            if role not in ROLES or not worker:
                known = ", ".join(ROLES)
                raise ConfigError(f"{where}: step {step!r} is not ROLE@WORKER with a known role ({known})")
            chain.append((role, worker))
        rules.append(Rule(match, tuple(chain)))
    if rules[-1].match is not None:
        raise ConfigError(f"rules:{path}: the last rule must have no 'match' (the default for every other question)")
    return tuple(rules)


class RulePipeline(DirectConductor):
    """The first matching rule's chain of steps (module docstring). Raises ConfigError at
    planning when a step names a worker that is not in the pool."""

    def __init__(self, rules: Sequence[Rule], name: str) -> None:
        super().__init__(name)
        self.rules = tuple(rules)

    def steps(self, question: str, pool: Sequence[Worker], max_steps: int) -> Sequence[Step]:
        by_name = {w.info.name: i for i, w in enumerate(pool)}
        rule = next(r for r in self.rules if r.match is None or r.match.search(question))
        out = []
        for k, (role, worker) in enumerate(rule.steps):
            if worker not in by_name:
                raise ConfigError(f"{self.name}: no worker {worker!r} in the pool ({', '.join(by_name)})")
            out.append(Step(by_name[worker], subtask(role), (k - 1,) if k else ()))
        return out
