"""``podium pool show`` and ``podium pool check`` as a new user meets them: the limits a request
runs under, and a check that catches a wrong model name (against real HTTP servers on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from podium.cli import cli

LIMITED = """
name = "limited"
[conductor]
worker = "py"
recursion_rounds = 2
[fallback]
worker = "py"
[limits]
deadline_s = 60
step_timeout_s = 20.5
cost_cap_usd = 0.002
daily_budget_usd = 5
[[workers]]
name = "py"
backend = "python"
"""


def test_pool_show_prints_the_effective_limits_and_recursion_rounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = tmp_path / "limited.toml"
    pool.write_text(LIMITED, encoding="utf-8")
    assert cli(["pool", "show", "--pool", str(pool)]) == 0
    out = capsys.readouterr().out
    assert "recursion_rounds 2" in out
    assert "deadline 60 s (25% kept for the fallback)" in out  # fallback_reserve's default
    assert "step timeout 20.5 s" in out and "cost cap $0.002" in out and "daily budget $5" in out
    # the embedded pool sets no limits: each is said to be unlimited, not left out
    assert cli(["pool", "show"]) == 0
    out = capsys.readouterr().out
    assert "recursion_rounds 0" in out
    for limit in ("deadline", "step timeout", "cost cap", "daily budget"):
        assert f"{limit} unlimited" in out
