"""The one order of worker wrappers (podium.workers.stack): the pool builder's stacks are, from
the outside in, retries → circuit breaker → budget guard → PII guard → request cache → backend,
and no other module builds those wrappers itself (so the order cannot drift between the server,
podium run and evaluation)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from podium.builder import build_orchestrator
from podium.pool import load_pool
from podium.store.request_cache import RequestCache
from podium.testing import ScriptedWorker
from podium.workers.budget_guard import BudgetGuard
from podium.workers.cache import CachedWorker
from podium.workers.failover import Failover
from podium.workers.pii_guard import PIIGuard
from podium.workers.resilience import CircuitBreaker, Retrying

SRC = Path(__file__).parents[1] / "src" / "podium"
POOL = """name = "stack"
[pii]
enabled = false
[conductor]
worker = "local"
[fallback]
worker = "local"
[[workers]]
name = "local"
model = "smollm2-135m-instruct"
[[workers]]
name = "remote"
backend = "openai"
model = "gpt-x"
base_url = "https://api.example.com/v1"
allow_pii = true
price = { input = 1.0, output = 2.0 }
equivalent = "local"
"""


def _chain(worker: object) -> list[type]:
    kinds = []
    while worker is not None:
        kinds.append(type(worker))
        worker = getattr(worker, "inner", None)
    return kinds


def test_the_pool_builder_stacks_every_worker_in_the_one_order(tmp_path: Path) -> None:
    pool_file = tmp_path / "pool.toml"
    pool_file.write_text(POOL)
    raw = [ScriptedWorker("local", "x"), ScriptedWorker("remote", "y")]
    orchestrator = build_orchestrator(load_pool(pool_file), workers=list(raw), cache=RequestCache(tmp_path / "c.db"))
    local, remote = orchestrator.pool
    assert _chain(local) == [Retrying, CircuitBreaker, BudgetGuard, CachedWorker, ScriptedWorker]  # nothing leaves
    assert isinstance(remote, Failover)
    assert _chain(remote.inner) == [Retrying, CircuitBreaker, BudgetGuard, PIIGuard, CachedWorker, ScriptedWorker]
    assert remote.equivalent is local  # the equivalent's own stack, shared with its pool slot


def test_a_judge_is_stacked_under_its_data_policy_like_a_pool_step(tmp_path: Path) -> None:
    """A live evaluation's judge reads questions, answers and references: an external judge sits
    under the PII guard as a pool step does (it was the bare cached worker), a local one does not."""
    from podium.builder import judge_stack

    pool_file = tmp_path / "pool.toml"
    pool_file.write_text(POOL)
    config = load_pool(pool_file)
    cache = RequestCache(tmp_path / "c.db")
    assert _chain(judge_stack(config, 1, ScriptedWorker("remote", "y"), cache)) == [
        PIIGuard,
        CachedWorker,
        ScriptedWorker,
    ]
    assert _chain(judge_stack(config, 0, ScriptedWorker("local", "x"), cache)) == [CachedWorker, ScriptedWorker]


def _wrapper_classes(trees: dict[Path, ast.Module]) -> set[str]:
    """Every class of the package that derives from WorkerWrapper, directly or not (by name)."""
    bases: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                named = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                bases.setdefault(node.name, set()).update(named)
    found = {"WorkerWrapper"}
    while grown := {name for name, of in bases.items() if name not in found and of & found}:
        found |= grown
    return found - {"WorkerWrapper"}


def test_no_module_but_the_stack_builds_the_wrappers() -> None:
    """Every wrapper class of the package, a new one too, is built in workers/stack.py only."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in SRC.rglob("*.py")}
    wrappers = _wrapper_classes(trees)
    assert {"CachedWorker", "PIIGuard", "BudgetGuard", "CircuitBreaker", "Retrying", "Failover"} <= wrappers
    # budget_guarded: the orchestrator's guard for a worker that has none (a pool built by hand)
    allowed = {SRC / "workers" / "stack.py", SRC / "workers" / "budget_guard.py"}
    builders = []
    for path, tree in trees.items():
        if path in allowed:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if called in wrappers:  # CachedWorker(...) and module.CachedWorker(...) alike
                builders.append(f"{path.relative_to(SRC)}:{node.lineno} {called}")
    assert not builders, builders


def test_stack_pool_fails_over_to_the_equivalents_own_stack_and_refuses_a_bad_index() -> None:
    from podium.workers.stack import stack_pool

    a, b = ScriptedWorker("a", "x"), ScriptedWorker("b", "y")
    pool = stack_pool([a, b], equivalents=[1, None], policies=[None, None])
    assert isinstance(pool[0], Failover) and pool[0].equivalent is pool[1]
    with pytest.raises(ValueError, match="outside the pool of 2"):
        stack_pool([a, b], equivalents=[2, None], policies=[None, None])
