"""The regression gate (`podium eval --baseline`) on replay reports of small synthetic outcome
matrices whose figures are computed by hand: flips, different question sets, summary-only reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podium.cli import cli
from podium.errors import ConfigError
from podium.eval.gate import GateMargins, gate, task_set
from tests.test_eval_replay import SCORES, write_matrix


def _report(tmp_path: Path, name: str, scores: dict[str, tuple[int, ...]], *extra: str) -> Path:
    """A replay report of single:big/mid/tiny on the matrix's test rows (the q* ids)."""
    matrix = write_matrix(tmp_path / f"{name}.csv", scores=scores)
    out = tmp_path / name
    assert cli(["eval", "--replay", str(matrix), "--methods", "single", "--out", str(out), "--no-plot", *extra]) == 0
    return out / "eval.json"


def _gate_json(new: Path, old: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    capsys.readouterr()
    code = cli(["eval", "--from", str(new), "--baseline", str(old), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)["gate"]


def test_report_records_its_question_set(tmp_path: Path) -> None:
    report = json.loads(_report(tmp_path, "a", SCORES).read_text())
    assert report["task_set"] == task_set(["q1", "q2", "q3", "q4"])
    assert report["task_set"]["n"] == 4


def test_flips_list_the_questions_that_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _report(tmp_path, "old", SCORES)
    # big: q2 1 -> 0 and q3 0 -> 1, so its quality stays 3/4 and the gate passes; the flips show both
    swapped = dict(SCORES, q2=(0, 0, 0), q3=(1, 0, 1))
    new = _report(tmp_path, "new", swapped)
    code, result = _gate_json(new, old, capsys)
    assert code == 0 and result["regressions"] == 0 and result["compared_on"] == 4
    assert result["flips"]["single:big"] == {"newly_failing": ["q2"], "newly_passing": ["q3"]}
    assert result["flips"]["single:tiny"] == {"newly_failing": [], "newly_passing": []}
    # the terminal form names them too
    assert cli(["eval", "--from", str(new), "--baseline", str(old)]) == 0
    assert "single:big: 1 newly failing (q2), 1 newly passing (q3)" in capsys.readouterr().out


def test_different_questions_are_compared_on_the_shared_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # baseline on q1..q5 (q5 right for every model): big 4/5 = 0.8; today on q1..q4: big 3/4 = 0.75.
    # Taken as they stand that is a 5-point drop (a regression at the 2-point margin); on the four
    # shared questions both are 0.75, so nothing regressed.
    old = _report(tmp_path, "old", dict(SCORES, q5=(1, 1, 1)))
    new = _report(tmp_path, "new", SCORES)
    assert json.loads(old.read_text())["methods"]["single:big"]["summary"]["quality"]["mean"] == pytest.approx(0.8)
    code, result = _gate_json(new, old, capsys)
    assert code == 0
    assert (result["compared_on"], result["only_new"], result["only_baseline"]) == (4, 0, 1)
    big = {c["metric"]: c for c in result["checks"] if c["method"] == "single:big"}
    assert big["quality"]["baseline"] == pytest.approx(0.75) and big["quality"]["new"] == pytest.approx(0.75)
    # mid on the shared questions: baseline q1, q4 right (0.5); make today's mid lose q4 -> 0.25: regression
    worse = _report(tmp_path, "worse", dict(SCORES, q4=(1, 0, 1)))
    code, result = _gate_json(worse, old, capsys)
    assert code == 3
    assert [c["method"] for c in result["checks"] if not c["ok"]] == ["single:mid"]


def test_summary_only_reports_on_different_questions_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _report(tmp_path, "old", dict(SCORES, q5=(1, 1, 1)), "--summary-only")
    new = _report(tmp_path, "new", SCORES, "--summary-only")
    capsys.readouterr()
    assert cli(["eval", "--from", str(new), "--baseline", str(old)]) == 2
    assert "ran on different questions" in capsys.readouterr().err
    # on the same questions a summary-only baseline gates as before, without flips
    same = _report(tmp_path, "same", SCORES, "--summary-only")
    code, result = _gate_json(new, same, capsys)
    assert code == 0 and result["flips"] == {} and result["compared_on"] == 4


def test_gate_refuses_reports_without_a_shared_question() -> None:
    def report(ids: list[str]) -> dict:  # type: ignore[type-arg]
        rows = [{"task_id": t, "score": 1.0, "correct": True, "cost_usd": 0.001, "latency_s": 1.0} for t in ids]
        summary = {"n": len(ids), "quality": {"mean": 1.0}, "cost_usd": {"mean": 0.001}, "latency_s": None}
        return {"methods": {"single:a": {"summary": summary}}, "results": {"single:a": rows}}

    with pytest.raises(ConfigError, match="shares no question"):
        gate(report(["x1"]), report(["y1"]), GateMargins())
    # the cost margin is relative: +10 % passes at 0.10, fails at 0.05
    cheap, dear = report(["x1"]), report(["x1"])
    dear["methods"]["single:a"]["summary"]["cost_usd"]["mean"] = 0.0011
    assert gate(dear, cheap, GateMargins(cost_rise=0.10)).regressions == 0
    assert gate(dear, cheap, GateMargins(cost_rise=0.05)).regressions == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no eval report at"),
        ('{"id": "a", "question": "q"}\n{"id": "b"}\n', "is not a podium eval report"),
        ("# podium eval: a Markdown report\n", "is not a podium eval report"),
        ('{"foo": 1}', "is not a podium eval report"),
    ],
)
def test_a_baseline_that_is_not_a_report_is_named_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    new = _report(tmp_path, "new", SCORES)
    baseline = tmp_path / "baseline.json"
    if content is not None:
        baseline.write_text(content)
    capsys.readouterr()
    assert cli(["eval", "--from", str(new), "--baseline", str(baseline)]) == 2
    err = capsys.readouterr().err
    assert message in err and "eval.json" in err and "Traceback" not in err


def test_a_negative_margin_is_refused_with_from_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--from … --max-quality-drop -1` gated identical reports as a regression (a first user's
    report): the margins are checked whatever the report's source."""
    new = _report(tmp_path, "new", SCORES, "--summary-only")
    capsys.readouterr()
    assert cli(["eval", "--from", str(new), "--baseline", str(new), "--max-quality-drop", "-1"]) == 2
    assert "--max-quality-drop must be ≥ 0, got -1.0" in capsys.readouterr().err
