"""bench/select_by_cv.py: per λ the sweep of highest cross-validated reward, a tie to the sweep
named first, and sweeps over different λ refused."""

from __future__ import annotations

import pytest
from bench.select_by_cv import choose


def sweep(*points: tuple[float, float]) -> dict[str, object]:
    return {"versions": [{"config": {"lam": lam}, "cross_validation": {"reward": {"mean": r}}} for lam, r in points]}


def test_per_lambda_the_highest_reward_and_a_tie_to_the_sweep_named_first() -> None:
    chosen = choose({"16": sweep((0.0, 0.91), (5.0, 0.85)), "384": sweep((0.0, 0.90), (5.0, 0.85))})
    assert [(c["lam"], c["choice"]) for c in chosen] == [(0.0, "16"), (5.0, "16")]
    chosen = choose({"384": sweep((0.0, 0.90), (5.0, 0.85)), "16": sweep((0.0, 0.91), (5.0, 0.85))})
    assert [c["choice"] for c in chosen] == ["16", "384"]  # the tie at λ = 5 goes to 384, named first
    chosen = choose({"16": sweep((0.0, 0.90)), "value": sweep((0.0, 0.95))})
    assert chosen[0]["choice"] == "value" and chosen[0]["rewards"] == {"16": 0.90, "value": 0.95}


def test_sweeps_over_different_lambdas_are_refused() -> None:
    with pytest.raises(ValueError, match="different λ"):
        choose({"16": sweep((0.0, 0.9)), "64": sweep((1.0, 0.9))})
