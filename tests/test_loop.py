"""``podium loop run``: the weekly procedure as one command, over a real trace store written by
the real orchestrator, a real pool file and the real eval, training and gate — with scripted
fake workers and a model-free encoder in place of models (tests/loop_support.py).

A first run goes through every stage and promotes; a second run with no new traffic does
nothing new (the same set and matrix, no worker called, no version trained); a run after new
traffic adds only the new tasks and calls the workers only about them."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from podium.cli import cli
from podium.eval.matrix import assign_splits
from podium.eval.replay import OutcomeMatrix
from podium.registry import Registry
from tests.conftest import read_jsonl
from tests.loop_support import POOL, FakePool, files, fill, gsm8k, isolate, requests, tables
from tests.traffic_support import Request, at, run_requests

# found, not imported: importing cma (1.8 s) at collection would cost every test worker
pytestmark = pytest.mark.skipif(importlib.util.find_spec("cma") is None, reason="needs podium[train]")

WEEK1 = gsm8k(0, 20), tables(0, 12)
WEEK2 = gsm8k(20, 5), tables(12, 4)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, FakePool, list[str]]:
    """(traces, the fake pool, the loop's base arguments) with week 1's 32 requests stored."""
    isolate(tmp_path, monkeypatch)
    traces = tmp_path / "traces.sqlite3"
    run_requests(traces, [*requests(WEEK1[0], 2), *requests(WEEK1[1], 3)])
    fakes = FakePool(*WEEK1)
    fakes.install(monkeypatch)
    (tmp_path / "pool.toml").write_text(POOL, encoding="utf-8")
    (tmp_path / "loop").mkdir()
    base = ["loop", "run", "--dir", str(tmp_path / "loop"), "--json"]
    first = ["--traces", str(traces), "--pool", str(tmp_path / "pool.toml"), "--judge", "big", "--allow-pii"]
    first += ["--generations", "30", "--lam", "10", "--dims", "8"]
    return traces, fakes, [*base, *first]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = cli(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_week_one_is_stored_under_the_same_ids_every_time_and_holds_out_both_kinds_of_question(
    tmp_path: Path,
) -> None:
    """The first loop run promotes only if the held-out split has GSM8K and Danish table questions
    alike: on a split of one kind, routing every question right is the best single worker's
    reward exactly, which the gate refuses. The split is a seeded shuffle of the task ids
    (``traffic/<trace id>``), so the ids must not be fresh uuid4s but the same on every run."""
    week1 = [*requests(WEEK1[0], 2), *requests(WEEK1[1], 3)]
    ids = [r.id for r in run_requests(tmp_path / "a.sqlite3", week1)]
    assert [r.id for r in run_requests(tmp_path / "b.sqlite3", week1)] == ids
    kinds = {f"traffic/{i}": "math" if n < len(WEEK1[0]) else "table" for n, i in enumerate(ids)}
    splits = assign_splits(kinds, 0.8, seed=0)  # the loop's --matrix-split and --seed defaults
    assert {kinds[i] for i, split in splits.items() if split == "test"} == {"math", "table"}


@pytest.mark.slow
def test_first_run_goes_through_every_stage_then_reruns_do_only_what_is_new(
    world: tuple[Path, FakePool, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces, fakes, argv = world
    loop = tmp_path / "loop"
    week1 = ["--since", "2026-11-01", "--until", "2026-11-07"]
    code, report = run([*argv, *week1], capsys)
    stages = report["stages"]
    assert code == 0 and report["status"] == "done", report
    assert stages["drift"]["exit_code"] == 2 and stages["drift"]["status"] == "not compared"  # no week before
    assert (stages["export"]["added"], stages["export"]["in_set"], stages["export"]["review"]) == (
        32, 32, "review/review-0001.csv",
    )  # fmt: skip
    assert stages["labels"]["judge"]["confirmed"] == 32 and stages["labels"]["candidates_left"] == 0
    assert fakes.judge_calls() == 32
    assert stages["record"]["questions"] == 32 and stages["record"]["calls"] == 64  # 32 questions × 2 workers
    assert stages["record"]["splits"] == {"test": 6, "train": 26}
    assert stages["train"]["version"] == "light@v1"
    assert stages["promote"]["status"] == "promoted" and report["promoted"] == "light@v1"
    assert stages["promote"]["reason"].startswith("promoted: light@v1's reward")
    assert Registry().promoted("light").ref == "light@v1"
    assert {r["reference_source"] for r in read_jsonl(loop / "set.jsonl")} == {"judge:big"}
    assert (loop / "runs/0001/report.md").read_text().startswith("# podium loop · run 0001 · done (exit 0)")
    assert "podium train --replay" in (loop / "runs/0001/report.md").read_text()

    # the same week again: nothing new is exported, called, trained or decided
    before, calls = files(loop), len(fakes.workers["big"].calls) + len(fakes.workers["small"].calls)
    code, report = run([*argv[:5], *week1], capsys)  # only --dir: the folder remembers the rest
    stages = report["stages"]
    assert code == 0, report
    assert (
        stages["export"]["added"] == 0 and stages["export"]["already_in_set"] == 32 and not stages["export"]["review"]
    )
    assert stages["record"]["status"] == "skipped" and stages["train"]["status"] == "skipped"
    assert stages["promote"]["status"] == "already promoted"
    assert len(fakes.workers["big"].calls) + len(fakes.workers["small"].calls) == calls
    after = files(loop)
    for name in ("set.jsonl", "set.csv", "review/review-0001.csv"):
        assert after[name] == before[name], name
    assert [v.ref for v in Registry().versions("light")] == ["light@v1"]

    # a second week: only its new questions are exported, judged and recorded
    old = {t.id: t.split for t in OutcomeMatrix.load(loop / "set.csv").tasks()}
    run_requests(
        traces, [*requests(WEEK2[0], 9), *requests(WEEK2[1], 10), Request(WEEK1[0][0][0], at(11), ("task:math",))]
    )
    fakes.add(*WEEK2)
    judged, answered = fakes.judge_calls(), fakes.answer_calls()
    code, report = run([*argv[:5], "--since", "2026-11-08", "--until", "2026-11-14"], capsys)
    stages = report["stages"]
    assert code in (0, 3), report
    assert stages["drift"]["status"] == "done", stages["drift"]  # week 1 is the reference
    assert "all" in stages["drift"]["compared"]  # 32 and 10 requests: enough to compare
    assert (loop / stages["drift"]["plot"]).stat().st_size > 10_000  # a PNG of the panels
    assert (stages["export"]["added"], stages["export"]["duplicates"], stages["export"]["in_set"]) == (9, 1, 41)
    assert stages["export"]["review"] == "review/review-0003.csv" and stages["export"]["review_rows"] == 9
    # the drift report's judge grades both windows' answers (32 + 10: week 1's judge-confirmed
    # references are no labels for drift, being only the answers the judge passed), the labels
    # stage the 9 new candidates (their final answers alone: other prompts, so no cache hits)
    assert stages["drift"]["judge"] == {"worker": "big", "per_slice": 30, "judged": 42, "unscored": 0}
    drift = json.loads((loop / "runs/0003/drift.json").read_text())["slices"]["all"]["outcome"]
    assert (drift["reference"]["judged"], drift["recent"]["judged"]) == (32, 10)
    assert fakes.judge_calls() - judged == 42 + 9 and stages["labels"]["judge"]["confirmed"] == 9
    assert fakes.answer_calls() - answered == 18 and stages["record"]["calls"] == 18
    assert stages["record"]["new_questions"] == 9 and stages["record"]["questions"] == 41
    now = {t.id: t.split for t in OutcomeMatrix.load(loop / "set.csv").tasks()}
    assert all(now[i] == split for i, split in old.items())  # no question moved between train and test
    assert stages["train"]["version"] == "light@v2"
    assert stages["promote"]["status"] in ("promoted", "refused")  # v1 and v2 both route every test question right
    assert stages["promote"]["reason"].startswith(("promoted: light@v2", "not promoted: light@v2"))
    assert (code == 3) == (stages["promote"]["status"] == "refused")
    current = Registry().promoted("light").ref

    # other training options on the same matrix: an untrained policy (always the first worker) is refused
    code, report = run([*argv[:5], "--since", "2026-11-08", "--until", "2026-11-14", "--generations", "0"], capsys)
    stages = report["stages"]
    assert code == 3 and report["status"] == "refused" and stages["record"]["status"] == "skipped"
    assert stages["train"]["version"] == "light@v3" and stages["promote"]["status"] == "refused"
    assert (
        stages["promote"]["reason"].startswith("not promoted: light@v3's reward")
        and current in stages["promote"]["reason"]
    )
    assert Registry().promoted("light").ref == current
    # and asked again, the gate's verdict stands without a new evaluation
    code, report = run([*argv[:5], "--since", "2026-11-08", "--until", "2026-11-14"], capsys)
    assert code == 0 and report["stages"]["train"]["status"] == "skipped"
    assert report["stages"]["promote"]["status"] == "skipped" and report["stages"]["promote"]["decision"] == "refused"


@pytest.mark.slow
def test_the_bank_step_records_only_the_new_questions_of_the_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--bank``: each run records into DIR/bank only the set's questions the bank has no row
    for (``podium bank record --ids``), on the local-tools catalogue — its model workers scripted
    fakes, the Python tool real."""
    import podium.pool_workers
    from podium.eval.bank import read_bank
    from podium.testing import ScriptedWorker

    isolate(tmp_path, monkeypatch)
    maths = gsm8k(60, 3)
    traces = tmp_path / "traces.sqlite3"
    run_requests(traces, requests(maths[:2], 2))
    fakes = FakePool(maths, [])
    real = podium.pool_workers.build_worker
    fakes.install(monkeypatch)

    def pools(config: Any) -> list[Any]:
        if config.name != "local-tools":
            return [fakes.workers[w.name] for w in config.workers]
        return [  # the tools real; the models scripted fakes
            ScriptedWorker(w.name, reply="The final answer is 42.")
            if w.backend == "llama_cpp"
            else real(config.merged(w))
            for w in config.workers
        ]

    monkeypatch.setattr("podium.pool_workers.build_pool_workers", pools)
    (tmp_path / "pool.toml").write_text(POOL, encoding="utf-8")
    (tmp_path / "loop").mkdir()
    argv = [
        "loop",
        "run",
        "--dir",
        str(tmp_path / "loop"),
        "--traces",
        str(traces),
        "--pool",
        str(tmp_path / "pool.toml"),
    ]
    argv += ["--allow-pii", "--allow-unconfirmed", "--bank", "--step-timeout", "60", "--json"]
    assert cli([*argv, "--since", "2026-11-01", "--until", "2026-11-07"]) == 0
    first = json.loads(capsys.readouterr().out)["stages"]["record"]["bank"]
    assert (first["recorded"], first["in_bank"]) == (2, 2)
    run_requests(traces, requests(maths[2:], 9))
    assert cli([*argv[:4], "--allow-unconfirmed", "--since", "2026-11-01", "--until", "2026-11-14", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)["stages"]["record"]["bank"]
    assert (second["recorded"], second["in_bank"]) == (1, 3)
    assert (tmp_path / "loop" / second["ids"]).read_text().count("\n") == 1
    assert len(read_bank(tmp_path / "loop" / "bank").rows) == 3
    assert cli([*argv[:4], "--allow-unconfirmed", "--since", "2026-11-01", "--until", "2026-11-14", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stages"]["record"]["bank"]["status"] == "skipped"
    # a review fixes one recorded question's reference to what the fakes answer, and drops another:
    # the first row is scored again from its recorded responses (no call), the second goes
    rows = {r["sample_id"]: r for r in read_bank(tmp_path / "loop" / "bank").rows}
    fixed, dropped = (next(i for i, r in rows.items() if r["prompt"].startswith(q[:40])) for q, _ in maths[:2])
    assert float(rows[fixed]["solve@1.5b"]) == 0.0  # "42" is not GSM8K's answer
    fill(
        tmp_path / "loop" / "review" / "review-0001.csv",
        {maths[0][0][:40]: ("fix", "42"), maths[1][0][:40]: ("drop", "")},
    )
    calls = sum(len(w.calls) for w in fakes.workers.values())
    assert cli([*argv[:4], "--allow-unconfirmed", "--since", "2026-11-01", "--until", "2026-11-14", "--json"]) == 0
    third = json.loads(capsys.readouterr().out)["stages"]["record"]["bank"]
    assert (third["rescored"], third["dropped"], third["in_bank"]) == (1, 1, 2)
    rows = {r["sample_id"]: r for r in read_bank(tmp_path / "loop" / "bank").rows}
    assert dropped not in rows and float(rows[fixed]["solve@1.5b"]) == 1.0
    assert float(rows[fixed]["run(program@1.5b)"]) == 0.0  # no program was written: nothing to score
    assert sum(len(w.calls) for w in fakes.workers.values()) == calls


@pytest.mark.slow
def test_open_tasks_enter_the_bank_graded_by_the_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Traffic without a task type is exported as ``open`` tasks; with a judge the bank step
    records them too (``podium bank record --judge``), every column's answer graded by the judge
    through the request cache: the fake judge scores every answer 9 but those of a question it
    doubts (3). Without a judge they would be left out (``open_left_out``)."""
    import podium.pool_workers
    from podium.eval.bank import local_catalogue, read_bank
    from podium.testing import ScriptedWorker

    isolate(tmp_path, monkeypatch)
    maths = gsm8k(70, 2)
    traces = tmp_path / "traces.sqlite3"
    run_requests(traces, [Request(q, at(2, 9, i), (), f"The answer is {a}.") for i, (q, a) in enumerate(maths)])
    fakes = FakePool(maths, [])
    fakes.doubt(maths[1][0])
    real = podium.pool_workers.build_worker
    fakes.install(monkeypatch)

    def pools(config: Any) -> list[Any]:
        if config.name != "local-tools":
            return [fakes.workers[w.name] for w in config.workers]
        return [
            ScriptedWorker(w.name, reply="The final answer is 42.")
            if w.backend == "llama_cpp"
            else real(config.merged(w))
            for w in config.workers
        ]

    monkeypatch.setattr("podium.pool_workers.build_pool_workers", pools)
    (tmp_path / "pool.toml").write_text(POOL, encoding="utf-8")
    loop = tmp_path / "loop"
    loop.mkdir()
    argv = ["loop", "run", "--dir", str(loop), "--traces", str(traces), "--pool", str(tmp_path / "pool.toml")]
    argv += ["--allow-pii", "--allow-unconfirmed", "--bank", "--judge", "big", "--step-timeout", "60", "--json"]
    judged = fakes.judge_calls()
    assert cli([*argv, "--since", "2026-11-01", "--until", "2026-11-07"]) in (0, 3)
    report = json.loads(capsys.readouterr().out)
    bank = report["stages"]["record"]["bank"]
    assert (bank["recorded"], bank["in_bank"], bank["open_left_out"]) == (2, 2, 0)
    assert "--judge big --judge-pool" in report["commands"]["record"][-1]
    rows = {r["prompt"][:40]: r for r in read_bank(loop / "bank").rows}
    trusted, doubted = rows[maths[0][0][:40]], rows[maths[1][0][:40]]
    # an open task's score is the judge's 1-10 score over 10, as podium eval scores it
    assert float(trusted["solve@1.5b"]) == 0.9 and float(doubted["solve@1.5b"]) == 0.3
    columns = [c for c in local_catalogue().columns if trusted[f"{c}|model_response"]]
    assert {float(trusted[c]) for c in columns} == {0.9}  # every answer graded
    answers = {(r["prompt"], r[f"{c}|model_response"]) for r in (trusted, doubted) for c in columns}
    assert fakes.judge_calls() - judged >= len(answers)  # each distinct answer went to the judge once


@pytest.mark.slow
@pytest.mark.parametrize("recipe", [("--clusters", "0", "--dims", "8"), ("--max-cost-ratio", "1")])
def test_the_plan_conductor_is_trained_on_the_bank_and_gated_on_its_held_out_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], recipe: tuple[str, ...]
) -> None:
    """``--policy plans --bank``: the bank's rows carry their question's split in set.csv, the
    plan conductor trains on the bank's training rows, and the gate replays its held-out rows.
    The bank's 1.5B fake is right on GSM8K and wrong on the Danish tables, its 0.5B fake the
    other way round, so the plan that answers best depends on the question, which the model-free
    encoder tells apart: the trained version must beat every single column on the held-out rows
    (it is promoted, against the best single worker). A second run changes nothing. Both the
    linear head (``--clusters 0``) and a cluster table (the default for plans, the shipped recipe)
    capped at the best single worker's cost do so: the best table answers math with the 1.5B and
    tables with the cheaper 0.5B, within the cap."""
    import podium.pool_workers
    from podium.eval.bank import read_bank
    from podium.testing import ScriptedWorker

    isolate(tmp_path, monkeypatch)
    maths, danish = gsm8k(60, 12), tables(40, 10)
    traces = tmp_path / "traces.sqlite3"
    run_requests(traces, [*requests(maths, 2), *requests(danish, 3)])
    fakes = FakePool(maths, danish)
    real = podium.pool_workers.build_worker
    fakes.install(monkeypatch)
    good_at = {"qwen2.5-coder-1.5b": "math", "qwen2.5-coder-0.5b": "table"}

    def fake(name: str) -> ScriptedWorker:
        kind = good_at.get(name, "none")
        return ScriptedWorker(name, reply=lambda m: fakes.reply(kind, m))

    def pools(config: Any) -> list[Any]:
        if config.name != "local-tools":
            return [fakes.workers[w.name] for w in config.workers]
        return [  # the tools real; the models scripted fakes
            fake(w.name) if w.backend == "llama_cpp" else real(config.merged(w)) for w in config.workers
        ]

    monkeypatch.setattr("podium.pool_workers.build_pool_workers", pools)
    (tmp_path / "pool.toml").write_text(POOL, encoding="utf-8")
    loop = tmp_path / "loop"
    loop.mkdir()
    argv = ["loop", "run", "--dir", str(loop), "--traces", str(traces), "--pool", str(tmp_path / "pool.toml")]
    argv += ["--allow-pii", "--allow-unconfirmed", "--bank", "--policy", "plans", "--name", "plans", *recipe]
    window = ["--since", "2026-11-01", "--until", "2026-11-07", "--json"]
    assert cli([*argv, *window]) == 0
    report = json.loads(capsys.readouterr().out)
    stages = report["stages"]
    assert stages["record"]["bank"]["in_bank"] == 22
    assert read_bank(loop / "bank").catalogue.name == "local-checked"  # the default: the shipped code plan's checks
    splits = {row.sample_id: row.split for row in OutcomeMatrix.load(loop / "set.csv").rows.values()}
    assert {r["sample_id"]: r["split"] for r in read_bank(loop / "bank").rows} == splits
    train = stages["train"]
    n_train = list(splits.values()).count("train")
    assert (train["status"], train["policy"], train["questions"]) == ("done", "plans", n_train)
    info = Registry().get(train["version"]).training()
    assert info.policy == "plans" and info.data["bank_sha256"]
    capped = "--max-cost-ratio" in recipe
    assert (info.config["clusters"], info.config["max_cost_ratio"]) == ((-1, 1.0) if capped else (0, None))
    assert ("--clusters auto --max-cost-ratio 1" in report["commands"]["train"][0]) == capped
    assert "--embedder qwen2.5-coder-0.5b-instruct" in report["commands"]["train"][0]  # the shipped tables' encoder
    assert stages["promote"]["status"] == "promoted", stages["promote"]["reason"]
    assert f"--replay {loop / 'bank'}" in report["commands"]["promote"][0]
    assert cli([*argv[:4], "--allow-unconfirmed", *window]) == 0  # nothing new: nothing trained again
    again = json.loads(capsys.readouterr().out)["stages"]
    assert again["train"]["status"] == "skipped" and again["train"]["version"] == train["version"]
    assert again["promote"]["status"] == "already promoted"
    assert cli([*argv[:4], "--bank-catalogue", "local", *window]) == 2  # the bank's columns are fixed
    assert "this folder's bank records 'local-checked'" in capsys.readouterr().err


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(2400)  # a hang guard: CPU training, slower on a loaded machine
def test_an_lm_conductor_is_trained_by_grpo_on_the_matrix_and_gated_on_its_held_out_rows(
    world: tuple[Path, FakePool, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--policy lm``: stage 5 trains an LM conductor (SmolLM2-135M, the CPU preset's format warm
    start, no GRPO step: a smoke run, nothing is learned) on set.csv's training rows and stores it
    with the matrix's sha256; the gate runs it for real through llama.cpp on the held-out rows and
    decides. The same run again trains nothing."""
    _traces, _fakes, argv = world
    week1 = ["--since", "2026-11-01", "--until", "2026-11-07"]
    code, report = run([*argv, *week1, "--policy", "lm", "--name", "lmc", "--steps", "0"], capsys)
    stages = report["stages"]
    assert code in (0, 3), report
    train = stages["train"]
    assert (train["status"], train["policy"], train["version"], train["grpo_steps"]) == ("done", "lm", "lmc@v1", 0)
    assert train["questions"] == stages["record"]["splits"]["train"]
    info = Registry().get("lmc@v1").training()
    assert info.policy == "lm" and info.config["model"] == "smollm2-135m-instruct" and info.config["steps"] == 0
    assert info.data["matrix_sha256"] == hashlib.sha256((Path(argv[3]) / "set.csv").read_bytes()).hexdigest()
    assert report["commands"]["train"][0].startswith("podium train --policy lm --replay ")
    assert stages["promote"]["status"] in ("promoted", "refused") and "lmc@v1" in stages["promote"]["reason"]
    assert (code == 3) == (stages["promote"]["status"] == "refused")
    code, report = run([*argv[:5], *week1], capsys)  # the folder remembers --policy lm
    assert report["stages"]["train"]["status"] == "skipped" and report["stages"]["train"]["version"] == "lmc@v1"


@pytest.mark.slow  # runs a whole light loop (~8 s)
def test_plans_without_the_bank_and_another_policy_later_are_refused(
    world: tuple[Path, FakePool, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """The plan conductor trains on the bank: ``--policy plans`` without ``--bank`` is bad input,
    and nothing is written; a folder keeps the policy it started with."""
    _traces, _fakes, argv = world
    loop = Path(argv[3])
    assert cli([*argv, "--policy", "plans", "--since", "2026-11-01", "--until", "2026-11-07"]) == 2
    assert "add --bank" in capsys.readouterr().err
    assert cli([*argv, "--model", "smollm2-135m-instruct", "--steps", "5"]) == 2  # the light policy takes neither
    assert "--model, --steps: options of the LM conductor's training" in capsys.readouterr().err
    assert cli([*argv, "--clusters", "auto"]) == 2  # the light policy has no table
    assert "use them with --policy plans" in capsys.readouterr().err
    assert cli([*argv, "--policy", "plans", "--bank", "--clusters", "0", "--max-cost-ratio", "1.1"]) == 2
    assert "--clusters 0 asks for the linear head" in " ".join(capsys.readouterr().err.split())
    assert cli([*argv, "--policy", "plans", "--bank", "--clusters", "auto", "--max-cost-ratio", "0"]) == 2
    assert "--max-cost-ratio must be a number above 0" in capsys.readouterr().err
    assert files(loop) == {}
    assert cli([*argv, "--since", "2026-11-01", "--until", "2026-11-07"]) == 0
    capsys.readouterr()
    assert cli([*argv[:4], "--policy", "plans", "--bank", "--since", "2026-11-01", "--until", "2026-11-07"]) == 2
    assert "--policy plans: this loop folder uses 'light'" in capsys.readouterr().err
