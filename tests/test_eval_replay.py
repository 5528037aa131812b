"""Replay pools and `podium eval` in replay mode, on a small synthetic outcome matrix whose
figures are computed by hand below, and on the shipped RouteLLM matrix."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import pytest

from podium.cli import cli
from podium.eval.replay import OutcomeMatrix, ReplayWorker, oracle_choice
from podium.eval.session import EvalSpec, run_eval
from podium.eval.tasks import TaskSetError
from podium.workers.base import Call, CallContext
from tests.conftest import SHARED_DATA

MODELS = ("big", "mid", "tiny")
COST = {"big": 0.01, "mid": 0.002, "tiny": 0.0005}
SCORES = {  # per question: big, mid, tiny
    "q1": (1, 1, 0),
    "q2": (1, 0, 0),
    "q3": (0, 0, 1),
    "q4": (1, 1, 1),
    "t1": (1, 0, 0),
    "t2": (1, 1, 0),
    "t3": (1, 0, 0),
    "t4": (0, 0, 0),
}


def write_matrix(path: Path, *, models: tuple[str, ...] = MODELS, scores: dict[str, tuple[int, ...]] = SCORES) -> Path:
    header = ["sample_id", "eval_name", "split", "prompt"]
    header += list(models) + [f"{m}|model_response" for m in models] + [f"{m}|total_cost" for m in models]
    with path.open("w", encoding="utf-8", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(header)
        for sid, row in scores.items():
            split = "test" if sid.startswith("q") else "train"
            out.writerow(
                [sid, "gsm8k" if sid in ("q1", "q2") else "mmlu-law", split, f"question {sid}?"]
                + list(row)
                + [f"{m} answers {sid}" for m in models]
                + [COST[m] for m in models]
            )
    return path


@pytest.fixture
def matrix_path(tmp_path: Path) -> Path:
    return write_matrix(tmp_path / "m.csv")


def test_shipped_routellm_matrix_loads() -> None:
    matrix = OutcomeMatrix.load(SHARED_DATA / "outcomes" / "routellm-gpt4-mixtral.csv")
    assert matrix.models == ("gpt-4-1106-preview", "mixtral-8x7b-instruct-v0.1")
    assert len(matrix.rows) == 15521 and len(matrix.tasks("test")) == 4707
    gsm = matrix.rows["gsm8k.0"]
    assert gsm.split == "test" and gsm.outcomes["gpt-4-1106-preview"].cost_usd == pytest.approx(0.011665)
    assert {t.task_type for t in matrix.tasks("test")} == {"math", "choice", "open"}


def test_any_number_of_models_and_bad_matrices(tmp_path: Path) -> None:
    five = tuple(f"m{i}" for i in range(5))
    COST.update({m: 0.001 for m in five})
    matrix = OutcomeMatrix.load(write_matrix(tmp_path / "five.csv", models=five, scores={"q1": (1, 0, 1, 0, 1)}))
    assert matrix.models == five and matrix.outcome("q1", "m2").score == 1.0
    bad = tmp_path / "bad.csv"
    bad.write_text("sample_id,eval_name,split,prompt,a\nx,e,test,p,1\n", encoding="utf-8")
    with pytest.raises(TaskSetError, match=r"'a\|total_cost'"):
        OutcomeMatrix.load(bad)
    bad.write_text("sample_id,eval_name,split,prompt,a,a|total_cost\nx,e,test,p,1.5,0\n", encoding="utf-8")
    with pytest.raises(TaskSetError, match=r"bad.csv:2: .*outside \[0, 1\]"):
        OutcomeMatrix.load(bad)
    bad.write_text("sample_id,split,prompt\n", encoding="utf-8")
    with pytest.raises(TaskSetError, match="missing column"):
        OutcomeMatrix.load(bad)


def test_replay_worker_answers_with_the_record(matrix_path: Path) -> None:
    matrix = OutcomeMatrix.load(matrix_path)
    worker = ReplayWorker("mid", matrix)

    async def call() -> tuple[str, float]:
        done = await worker.complete(Call([{"role": "user", "content": "anything"}], context=CallContext(task_id="q2")))
        return done.text, done.cost_usd

    assert asyncio.run(call()) == ("mid answers q2", 0.002)
    with pytest.raises(KeyError, match="without a task id"):
        asyncio.run(worker.complete(Call([{"role": "user", "content": "x"}])))
    # the oracle: cheapest among the best scores (q1: big and mid score 1, mid is cheaper)
    assert [oracle_choice(matrix, q, MODELS) for q in ("q1", "q2", "q3", "q4")] == ["mid", "big", "tiny", "tiny"]


def test_replay_eval_figures_match_hand_computation(matrix_path: Path) -> None:
    spec = EvalSpec(replay=matrix_path, methods=("single", "strongest", "pipeline", "moa", "oracle"), cache=None)
    report = run_eval(spec)
    s = {name: m["summary"] for name, m in report["methods"].items()}
    # singles on q1..q4: big 1,1,0,1; mid 1,0,0,1; tiny 0,0,1,1
    assert s["single:big"]["quality"]["mean"] == pytest.approx(0.75)
    assert s["single:mid"]["quality"]["mean"] == pytest.approx(0.5)
    assert s["single:tiny"]["cost_usd"]["mean"] == pytest.approx(0.0005)
    # strongest is calibrated on the train split (big: 3/4, mid 1/4, tiny 0)
    assert report["methods"]["strongest"]["conductor"] == "strongest:big"
    # pipeline = three calls to big, scored as big's final answer
    assert s["pipeline"]["quality"]["mean"] == pytest.approx(0.75)
    assert s["pipeline"]["cost_usd"]["mean"] == pytest.approx(0.03)
    # MoA = big + mid + tiny propose, big aggregates: every call charged, final answer big's
    assert s["moa"]["cost_usd"]["mean"] == pytest.approx(0.01 + 0.002 + 0.0005 + 0.01)
    assert s["moa"]["worker_calls"] == 4
    # oracle: mid, big, tiny, tiny -> all correct at (0.002 + 0.01 + 0.0005 + 0.0005) / 4
    assert s["oracle"]["quality"]["mean"] == 1.0
    assert s["oracle"]["cost_usd"]["mean"] == pytest.approx(0.00325)
    assert s["oracle"]["latency_s"] is None  # replay records no latency
    # slices per tag: q1, q2 are gsm8k
    gsm8k_mid = report["slices"]["gsm8k"]["single:mid"]
    assert (gsm8k_mid["n"], gsm8k_mid["quality"]) == (2, 0.5)
    assert gsm8k_mid["cost_usd"] == pytest.approx(0.002)
    # reference points: weak = cheapest single (tiny), strong = best single (big)
    assert report["reference"]["weak"] == "single:tiny" and report["reference"]["strong"] == "single:big"
    assert report["methods"]["oracle"]["pgr"] == pytest.approx((1.0 - 0.5) / (0.75 - 0.5))


@pytest.mark.slow
def test_cli_replay_report_files_and_regression_gate(
    matrix_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run1"
    code = cli(["eval", "--replay", str(matrix_path), "--methods", "single,random", "--out", str(out), "--json"])
    assert code == 0
    assert (out / "eval.json").is_file() and (out / "eval.md").is_file()
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = json.loads(capsys.readouterr().out)
    assert "results" not in printed and printed["methods"]["single:big"]["summary"]["n"] == 4
    # the same run against itself passes the gate
    assert cli(["eval", "--from", str(out / "eval.json"), "--baseline", str(out / "eval.json")]) == 0
    # a baseline that was better (quality 0.75 -> 1.0 for single:big) makes the gate fail with exit 3
    better = json.loads((out / "eval.json").read_text())
    better["methods"]["single:big"]["summary"]["quality"]["mean"] = 1.0
    (tmp_path / "better.json").write_text(json.dumps(better))
    assert cli(["eval", "--from", str(out / "eval.json"), "--baseline", str(tmp_path / "better.json")]) == 3
    printed = capsys.readouterr().out
    assert "REGRESSION" in printed and "gate: 1 regression(s) over 4 method(s)" in printed
    # and a looser margin lets it through
    args = ["eval", "--from", str(out / "eval.json"), "--baseline", str(tmp_path / "better.json")]
    assert cli([*args, "--max-quality-drop", "0.3"]) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "exactly one of --tasks"),
        (["--methods", "bogus"], "unknown method 'bogus'"),
        (["--methods", "light"], "needs a trained conductor: light:NAME"),
        (["--baseline", "/nonexistent/eval.json"], "no eval report at /nonexistent/eval.json"),
        (["--methods", "conductor"], "does not run in replay mode"),
        (["--methods", "single:nobody"], "no worker 'nobody'"),
        (["--methods", "router:fast"], "'router' takes nothing after a colon; write router"),
        (["--methods", "single,plan"], "needs a plan id: plan:ID"),
        (["--methods", "bogus:x"], "unknown method 'bogus:x'"),
        (["--lambdas", "1,x", "--methods", "router"], "--lambdas must be"),
        (["--limit", "0"], "--limit must be at least 1"),
    ],
)
def test_cli_bad_options_exit_2(
    matrix_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    base = [] if not args else ["--replay", str(matrix_path)]
    assert cli(["eval", *base, *args, "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


def test_cli_conductor_of_another_pool_needs_the_same_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`conductor:POOL` compares another pool file's conductor over this pool's workers, so the
    workers must be the same; checked before any worker is called."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t1", "question": "1+1?", "reference": "2", "task_type": "math"}) + "\n")
    args = ["eval", "--tasks", str(tasks), "--methods", "conductor:frontier", "--out", str(tmp_path / "o")]
    assert cli(args) == 2
    err = capsys.readouterr().err
    assert "pool 'frontier' has workers" in err and "conductor:POOL compares conductors over the same workers" in err


def test_a_method_whose_requests_all_failed_is_named_with_the_first_error(
    matrix_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan conductor replayed on a matrix of other workers scored 0.000 with no word in the
    terminal (its error rate was only in eval.json), a first user found."""
    plans = Path(__file__).resolve().parent.parent / "src" / "podium" / "pools" / "local-plans.npz"
    method = f"light:{plans}"
    args = ["eval", "--replay", str(matrix_path), "--methods", f"single,{method}", "--out", str(tmp_path / "o")]
    assert cli([*args, "--no-plot"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"{method}: 4 of 4 request(s) ended in error: ConfigError: plan conductor" in printed
    assert "single:big:" not in printed  # a method that answered gets no such line


def test_an_unknown_split_lists_the_splits_there_are(matrix_path: Path) -> None:
    """`--split nosplit` said only that nothing was in it (a first user's report)."""
    with pytest.raises(TaskSetError, match=r"no row in split 'nosplit'; its splits: test \(4\), train \(4\)"):
        OutcomeMatrix.load(matrix_path).tasks(split="nosplit")


def test_a_matrix_of_held_out_rows_only_replays_what_needs_no_calibration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bank of held-out questions has no training rows: single workers and trained conductors
    replay on it; methods chosen by the other split's outcomes are refused by name."""
    held_out = write_matrix(tmp_path / "m.csv", scores={k: v for k, v in SCORES.items() if k.startswith("q")})
    report = run_eval(EvalSpec(replay=held_out, methods=("single",), cache=None))
    assert report["methods"]["single:big"]["summary"]["quality"]["mean"] == pytest.approx(0.75)  # q1, q2, q4
    assert report["config"]["calibration_rows"] == 0
    assert cli(["eval", "--replay", str(held_out), "--methods", "single,strongest,router"]) == 2
    assert "no rows outside split 'test' to calibrate router, strongest; replay a matrix" in " ".join(
        capsys.readouterr().err.split()
    )


def test_an_unknown_tag_names_the_tags_there_are(matrix_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["eval", "--replay", str(matrix_path), "--methods", "single", "--tag", "nosuch"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no task has tag(s) nosuch; their tags: gsm8k, mmlu, mmlu-law" in err, err  # eval_name and its prefix
