"""The −μ·latency term of the training reward (podium.train.grpo / podium.train.light): recorded
latencies in an outcome matrix's optional ``|latency_s`` columns, the workflow's critical path,
and the clear refusal when a matrix has none."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from podium.cli import cli
from podium.eval.replay import OutcomeMatrix
from podium.eval.tasks import TaskSetError
from podium.train.light import critical_path, replay_reward
from podium.train.sources import conductor_reward

# per model: score, cost (USD), latency (s) on the one question
RECORD = {"fast": (0.0, 0.001, 2.0), "slow": (1.0, 0.004, 10.0), "mid": (1.0, 0.002, 5.0)}


def _matrix(path: Path, *, latency: bool = True) -> OutcomeMatrix:
    header = ["sample_id", "eval_name", "split", "prompt"]
    row = ["q0", "gsm8k", "train", "What is 6 × 7?"]
    for model, (score, cost, seconds) in RECORD.items():
        header += [model, f"{model}|total_cost"] + ([f"{model}|latency_s"] if latency else [])
        row += [str(score), str(cost)] + ([str(seconds)] if latency else [])
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, row])
    return OutcomeMatrix.load(path)


def _workflow(ids: list[int], access: str) -> str:
    subtasks = ", ".join(f'"step {i}"' for i in range(len(ids)))
    return f"model_id = {ids}\nsubtasks = [{subtasks}]\naccess_list = {access}"


def test_grpo_reward_pays_the_critical_path(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path / "m.csv")
    pool = ["fast", "slow", "mid"]
    # fast then slow, the second reading the first: 2 + 10 s in sequence
    reward, parts = conductor_reward(
        _workflow([0, 1], '[[], "all"]'), pool, matrix, "q0", lam=100.0, mu=0.01, max_steps=3
    )
    assert parts["latency"] == pytest.approx(12.0)
    assert reward == pytest.approx(0.5 + 0.5 * 1.0 - 100.0 * 0.005 - 0.01 * 12.0)
    # slow and mid in parallel, then fast reads both: max(10, 5) + 2 s; the answer is fast's (0)
    reward, parts = conductor_reward(
        _workflow([1, 2, 0], "[[], [], [0, 1]]"), pool, matrix, "q0", lam=0.0, mu=0.01, max_steps=3
    )
    assert parts["latency"] == pytest.approx(12.0) and parts["score"] == 0.0
    assert reward == pytest.approx(0.5 - 0.12)
    # slow and fast in parallel, nobody reads slow: the request still waits for it (10 s, not 2 s),
    # as the executor gathers every step and eval's critical_path_s reports
    _, parts = conductor_reward(_workflow([1, 0], "[[], []]"), pool, matrix, "q0", lam=0.0, mu=0.01, max_steps=3)
    assert parts["latency"] == pytest.approx(10.0)
    # μ = 0 leaves the paper's reward untouched
    reward, _ = conductor_reward(_workflow([2], "[[]]"), pool, matrix, "q0", lam=0.0, max_steps=3)
    assert reward == 1.0


def test_light_critical_path_by_hand() -> None:
    """Plans: solve(0) → verify(1); solve(0), solve(1) → aggregate(2); solve(2) alone."""
    latencies = np.array([[2.0, 10.0, 5.0]] * 3)
    workers = np.array([[0, 1, -1], [0, 1, 2], [2, -1, -1]])
    solve, verify, aggregate = 0, 1, 2
    roles = np.array([[solve, verify, 0], [solve, solve, aggregate], [solve, 0, 0]])
    assert critical_path(workers, roles, latencies).tolist() == [12.0, 15.0, 5.0]
    # solve(1) then solve(0), the answer the fast one's: the request still waits 10 s for the slow one
    two_solves = critical_path(np.array([[1, 0, -1]]), np.array([[solve, solve, 0]]), latencies[:1])
    assert two_solves.tolist() == [10.0]
    scores, costs = np.ones((3, 3)), np.zeros((3, 3))
    reward, *_ = replay_reward(workers, scores, costs, 0.0, roles=roles, latencies=latencies, mu=0.01)
    assert reward == pytest.approx(1.0 - 0.01 * (12 + 15 + 5) / 3)


def test_matrix_latency_columns_are_optional_and_checked(tmp_path: Path) -> None:
    assert _matrix(tmp_path / "with.csv").has_latency
    without = _matrix(tmp_path / "without.csv", latency=False)
    assert not without.has_latency and without.outcome("q0", "slow").latency_s == 0.0
    with pytest.raises(TaskSetError, match=r"latency penalty.*no '<model>\|latency_s' columns.*--matrix"):
        without.require_latency("a latency penalty")
    bad = (tmp_path / "with.csv").read_text().replace(",10.0", ",-1")
    (tmp_path / "bad.csv").write_text(bad)
    with pytest.raises(TaskSetError, match=r"latency_s -1\.0 must be ≥ 0"):
        OutcomeMatrix.load(tmp_path / "bad.csv")


@pytest.mark.slow
def test_train_refuses_mu_without_latencies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _matrix(tmp_path / "m.csv", latency=False)
    for policy in ("light", "lm"):
        assert cli(["train", "--policy", policy, "--replay", str(tmp_path / "m.csv"), "--mu", "0.01"]) == 2
        assert "has no '<model>|latency_s' columns" in capsys.readouterr().err
    assert cli(["train", "--replay", str(tmp_path / "m.csv"), "--mu", "-1"]) == 2
    assert "--mu must be a finite number 0 or more" in capsys.readouterr().err


def test_replay_reports_recorded_latency_when_the_matrix_has_it(tmp_path: Path) -> None:
    """A one-step request on a replayed worker takes that worker's recorded seconds, so each
    single worker's p50 is its recorded latency; without the columns replay reports none."""
    from podium.eval.session import EvalSpec, run_eval

    for latency in (True, False):
        path = tmp_path / f"m{latency}.csv"
        _matrix(path, latency=latency)
        rows = path.read_text().splitlines()
        path.write_text("\n".join([rows[0], rows[1], rows[1].replace("q0,gsm8k,train", "q1,gsm8k,test")]) + "\n")
        report = run_eval(EvalSpec(replay=path, split="test", methods=("single",)))
        for model, (_, _, seconds) in RECORD.items():
            summary = report["methods"][f"single:{model}"]["summary"]
            if not latency:
                assert summary["latency_s"] is None
                continue
            # plus the fixed conductor's own planning time, measured: microseconds
            assert summary["latency_s"]["p50"] == pytest.approx(seconds, abs=0.05)
            assert summary["latency_s"]["p95"] == pytest.approx(seconds, abs=0.05)
