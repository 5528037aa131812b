"""The hand-written rule pipeline (``rules:FILE.toml``, podium.conductor.rules): the shift
proof's file routes each kind of question as written, and a bad file is refused with its rule."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from bench.shift_data import build

from podium.errors import ConfigError
from podium.named_conductors import named_conductor
from podium.roles import subtask
from podium.testing import ScriptedWorker
from podium.workflow import Step

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "bench" / "shift" / "rules.toml"
POOL = [ScriptedWorker("qwen2.5-coder-1.5b"), ScriptedWorker("qwen2.5-coder-0.5b"), ScriptedWorker("smollm2-135m")]


def plan(name: str, question: str) -> tuple[Step, ...]:
    conductor = named_conductor(name, POOL)
    attempt = asyncio.run(conductor.plan(question, POOL, max_steps=5))
    assert attempt.workflow is not None
    return attempt.workflow.steps


def test_the_shift_rules_send_code_to_the_1_5b_and_the_rest_to_a_checked_0_5b_draft() -> None:
    sets = build(before=8, after=8, heldout=8)
    code = [Step(0, subtask("solve"), ())]
    checked = [Step(1, subtask("solve"), ()), Step(0, subtask("verify"), (0,))]
    for record in [r for records in sets.values() for r in records]:
        kind = record["tags"][0]
        expected = code if kind in ("use-case:code", "use-case:humaneval") else checked
        assert list(plan(f"rules:{RULES}", record["question"])) == expected, (kind, record["question"][:80])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "no such file"),
        ("[[rule]]\nmatch = 'x'\nsteps = ['solve@a']\n", "the last rule must have no 'match'"),
        ("[[rule]]\nmatch = '('\nsteps = ['solve@a']\n[[rule]]\nsteps = ['solve@a']\n", "rule 1: 'match' is not a"),
        ("[[rule]]\nsteps = ['answer@a']\n", "step 'answer@a' is not ROLE@WORKER"),
        ("[[rule]]\nsteps = []\n", "'steps' must be a non-empty list"),
        ("[[rule]]\nsteps = ['solve@a']\nworker = 'a'\n", "a rule has only 'match' and 'steps'"),
        ("rule = 3\n", "no [[rule]] tables"),
        ("[[rule]\n", "cannot read it"),
    ],
    ids=["missing", "no-default", "bad-regex", "bad-role", "no-steps", "unknown-key", "no-rules", "not-toml"],
)
def test_a_bad_rule_file_is_refused_naming_the_rule(tmp_path: Path, text: str | None, message: str) -> None:
    path = tmp_path / "rules.toml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="rules:") as err:
        named_conductor(f"rules:{path}", POOL)
    assert message in str(err.value)


def test_a_step_on_a_worker_outside_the_pool_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text("[[rule]]\nsteps = ['solve@gpt-9']\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no worker 'gpt-9' in the pool"):
        plan(f"rules:{path}", "What is 2 + 2?")
