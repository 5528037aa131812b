"""``podium loop run`` stops while candidate references are unconfirmed, says what to fill and
how to resume, and resumes; bad input is exit 2 with nothing written; an interrupted run is
picked up by the next. Real trace stores and pool files, scripted fake workers
(tests/loop_support.py); too few questions to train, so no model or encoder is needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podium.cli import cli
from podium.traffic.review import read_review
from tests.conftest import read_jsonl
from tests.loop_support import POOL, FakePool, files, fill, gsm8k, isolate, requests, tables
from tests.traffic_support import Request, at, run_requests

MATHS, DANISH = gsm8k(40, 4), tables(40, 2)
WEEK = ["--since", "2026-11-01", "--until", "2026-11-07"]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakePool, list[str]]:
    """(the fake pool, ``loop run`` with the folder's first options) over six stored requests."""
    isolate(tmp_path, monkeypatch)
    run_requests(tmp_path / "traces.sqlite3", [*requests(MATHS, 2), *requests(DANISH, 3)])
    fakes = FakePool(MATHS, DANISH)
    fakes.install(monkeypatch)
    (tmp_path / "pool.toml").write_text(POOL, encoding="utf-8")
    (tmp_path / "loop").mkdir()
    argv = ["loop", "run", "--dir", str(tmp_path / "loop"), "--traces", str(tmp_path / "traces.sqlite3")]
    return fakes, [*argv, "--pool", str(tmp_path / "pool.toml"), "--allow-pii"]


def loop_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = cli([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code != 2 else {}, captured.err


@pytest.mark.slow
def test_the_loop_stops_for_labels_and_resumes_as_they_come(
    world: tuple[FakePool, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes, argv = world
    loop, resume = tmp_path / "loop", ["loop", "run", "--dir", str(tmp_path / "loop")]
    code, report, err = loop_run([*argv, *WEEK], capsys)
    assert code == 5 and report["status"] == "stopped for labels"
    review = loop / "review" / "review-0001.csv"
    assert f"{review}: 6 row(s) to confirm" in err and f"resume with: podium loop run --dir {loop}" in err
    assert "--judge WORKER" in err and "--allow-unconfirmed" in err
    assert "record" not in report["stages"] and not (loop / "set.csv").exists() and fakes.answer_calls() == 0
    assert cli(["loop", "status", "--dir", str(loop), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["reviews"] == [
        {"file": "review/review-0001.csv", "run": "0001", "rows": 6, "filled": 0, "unconfirmed": 6, "exists": True}
    ]
    assert status["runs"][0]["status"] == "stopped for labels" and status["set"] == {"tasks": 6, "unconfirmed": 6}

    # half filled in: still stopped, with what is left; the run resumes run 0001's window
    (q1, _), (q2, _), (q3, _), (q4, _) = MATHS
    fill(review, {q1[:30]: ("accept", ""), q2[:30]: ("fix", "7"), q3[:30]: ("drop", "")})
    code, report, err = loop_run(resume, capsys)
    assert code == 5 and report["resumes"] == "0001" and report["window"]["since"] == "2026-11-01T00:00:00.000Z"
    (applied,) = report["stages"]["labels"]["reviews"]
    assert (applied["changed"], applied["accepted"], applied["fixed"], applied["dropped"]) == (2, 1, 1, 1)
    assert f"{review}: 3 row(s) to confirm" in err
    records = {r["question"]: r for r in read_jsonl(loop / "set.jsonl")}
    assert records[q1]["reference_source"] == "human" and records[q2]["reference"] == "7" and q3 not in records

    # a judge confirms what it can (one it doubts stays a candidate); asked only about the three left
    fakes.doubt(q4)
    code, report, err = loop_run([*resume, "--judge", "big"], capsys)
    judge = report["stages"]["labels"]["judge"]
    assert code == 5 and (judge["confirmed"], judge["rejected"], judge["calls"]) == (2, 1, 3)
    assert fakes.judge_calls() == 3 and "1 row(s) to confirm" in err
    assert "--judge WORKER" not in err and "--allow-unconfirmed" in err  # the judge has had its say
    checks = judge["spot_check"]  # the two it confirmed, for a person to look at (a judge agrees too easily)
    assert len(checks) == 2 and {c["id"] for c in checks} <= {r["id"] for r in read_jsonl(loop / "set.jsonl")}
    assert all(c["question"] and c["reference"] for c in checks)
    shown = (loop / "runs" / report["id"] / "report.md").read_text(encoding="utf-8")
    assert "## Spot-check the judge: 2 of its 2 confirmation(s) this run" in shown and checks[0]["id"] in shown

    # on with it unconfirmed: eval, matrix, and training waits for more questions
    code, report, err = loop_run([*resume, "--allow-unconfirmed"], capsys)
    stages = report["stages"]
    assert code == 0 and stages["labels"]["status"] == "unconfirmed allowed"
    assert stages["labels"]["judge"]["calls"] == 0 and fakes.judge_calls() == 3  # asked again: the cache answers
    assert stages["record"]["questions"] == 5 and stages["record"]["calls"] == 10
    assert stages["train"]["status"] == "waiting" and "needs 20" in stages["train"]["reason"]
    assert stages["promote"]["status"] == "skipped"

    # the last one confirmed by a person: its new reference rescores the cached answers, no call
    (_, a4) = MATHS[3]
    fill(review, {q4[:30]: ("fix", a4)})
    code, report, err = loop_run([*resume, *WEEK], capsys)
    stages = report["stages"]
    assert code == 0 and stages["labels"]["status"] == "done" and stages["labels"]["candidates_left"] == 0
    assert stages["record"]["status"] == "done" and stages["record"]["calls"] == 0 and fakes.answer_calls() == 10
    assert stages["export"]["dropped_before"] == 1  # the dropped request never comes back

    # nothing new: nothing recorded; a malformed edit is refused with nothing written
    code, report, _ = loop_run([*resume, *WEEK], capsys)
    assert code == 0 and report["stages"]["record"]["status"] == "skipped"
    before = files(loop)
    fill(review, {q3[:30]: ("accept", ""), q4[:30]: ("maybe", "")})
    code, _, err = loop_run([*resume, *WEEK], capsys)
    assert code == 2 and "2 row(s) cannot be imported" in err
    assert "an earlier import of this file dropped the task" in err and "verdict 'maybe' is unknown" in err
    assert files(loop) == {**before, "review/review-0001.csv": review.read_bytes()}


def test_bad_input_is_exit_2_with_nothing_written(
    world: tuple[FakePool, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, argv = world
    loop = tmp_path / "loop"
    missing = [*argv[:3], str(tmp_path / "nowhere"), *argv[4:]]
    cases = [
        (missing, "does not exist; the loop keeps its set, review files and state in a folder: create it"),
        ([*argv, *WEEK, "--tag", "nope"], "no stored request carries tag(s) 'nope'; tags in the store: task:math"),
        ([*argv, "--since", "2025-01-01", "--until", "2025-01-07"], "no stored request passes the filters"),
        ([*argv, *WEEK, "--judge", "nobody"], "--judge 'nobody' is not a worker of pool 'loop-fakes' (big, small)"),
        ([*argv, *WEEK, "--lam", "-1"], "--lam must be a finite number 0 or more, got '-1'"),
        ([*argv, *WEEK, "--lam", "nan"], "--lam must be a number 0 or more in plain decimal notation"),
        ([*argv, *WEEK, "--name", "bad name"], "conductor name 'bad name': use letters, digits"),  # remembered
        ([*argv, *WEEK, "--days", "0"], "--days must be positive, got 0"),  # remembered: checked with a window too
        ([*argv, *WEEK, "--matrix-split", "1.5"], "between 0 and 1"),
        ([*argv, *WEEK, "--reference-until", "2026-11-03"], "the reference must end by 2026-11-01T00:00:00.000Z"),
        (  # the reference starts after where it ends: the run's window's start, since no end is given
            [*argv, *WEEK, "--reference-since", "2026-11-05"],
            "--reference-since must be before the recent window's start (no --reference-until given)",
        ),
        ([*argv, *WEEK, "--reference-since", "last week"], "--reference-since"),
        ([*argv, *WEEK, "--reference-until", "2026-11-03"], "or --reference-since none --reference-until none"),
    ]
    for args, message in cases:
        assert cli(args) == 2, message
        err = " ".join(capsys.readouterr().err.split())
        assert message in err, (message, err)
        assert files(loop) == {} and not (tmp_path / "nowhere").exists()
    with pytest.raises(SystemExit) as exited:  # an abbreviation is refused: the option would be remembered
        cli([*argv, *WEEK, "--judg", "big"])
    assert exited.value.code == 2 and "unrecognized arguments: --judg big (did you mean --judge?)" in (
        capsys.readouterr().err
    )
    assert cli(["loop", "status", "--dir", str(tmp_path / "nowhere")]) == 2  # a status starts no loop: no mkdir
    assert "does not exist; the loop keeps its set, review files and state in a folder: name an existing" in (
        capsys.readouterr().err
    )
    assert cli([*argv[:3], str(tmp_path / "pool.toml"), *WEEK]) == 2
    assert "is a file, not a folder; name the loop's folder" in capsys.readouterr().err
    untagged = Request("Write a friendly greeting for our newsletter.", at(3), (), "Hello, dear readers!")
    run_requests(tmp_path / "traces.sqlite3", [untagged])  # an open task: the eval needs a judge to grade it
    assert cli([*argv, *WEEK]) == 2
    assert (
        "1 task(s) of the set are open (graded by a judge worker in the eval): give --judge" in capsys.readouterr().err
    )
    assert files(loop) == {}
    assert cli([*argv, *WEEK, "--judge", "big"]) == 0  # a good run: now the folder has settings to keep
    capsys.readouterr()
    before = files(loop)
    assert cli([*argv[:4], *WEEK, "--seed", "3"]) == 2
    assert "--seed 3: this loop folder uses 0 (the matrix's train/test split" in capsys.readouterr().err
    assert cli([*argv[:4], *WEEK, "--pool", "local"]) == 2
    assert "start another loop in a new --dir" in capsys.readouterr().err
    (loop / "loop.json").write_text("{not json", encoding="utf-8")
    assert cli([*argv[:4], *WEEK]) == 2
    assert "loop.json is not readable JSON" in capsys.readouterr().err
    assert files(loop) == {**before, "loop.json": b"{not json"}


def test_math_answers_cut_off_at_their_token_limit_are_named_as_the_open_tasks_they_became(
    world: tuple[FakePool, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A first user's requests were tagged task:math, yet the loop asked for a judge and told them
    to tag requests task:math: their answers had stopped at max_tokens, so no final number could
    be the candidate and the tasks became open. The message now says so."""
    _, argv = world
    cut = Request(
        "A farm has 17 rows of 23 trees. How many trees?", at(3), ("task:math",), "17 * 23 = 3", finish_reason="length"
    )
    run_requests(tmp_path / "traces.sqlite3", [cut])
    assert cli([*argv, *WEEK]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "1 task(s) of the set are open" in err and "1 of them were sent as task:math" in err
    assert "cut off at the worker's max_tokens" in err and "tag requests task:math" not in err
    assert files(tmp_path / "loop") == {}


def test_an_interrupted_run_is_picked_up_by_the_next(
    world: tuple[FakePool, list[str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed during the eval (after the set and its review file were written), then the review
    file lost too: the next run marks the run interrupted, resumes its window, rewrites the lost
    file from the state, and goes on as if nothing had happened."""
    fakes, argv = world
    loop = tmp_path / "loop"

    def killed(*_: object) -> dict:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr("podium.loop.outcomes.record_stage", killed)
        assert cli([*argv, *WEEK, "--allow-unconfirmed"]) == 130
    capsys.readouterr()
    state = json.loads((loop / "loop.json").read_text())
    assert state["runs"][0]["status"] == "running" and list(state["runs"][0]["stages"]) == ["drift", "export", "labels"]
    assert not (loop / ".loop.lock").exists()
    (loop / "review" / "review-0001.csv").unlink()
    code, report, err = loop_run([*argv[:4], "--allow-unconfirmed"], capsys)
    assert code == 0 and report["resumes"] == "0001" and "run(s) 0001 ended without finishing" in err
    assert report["stages"]["export"]["added"] == 0
    assert report["stages"]["export"]["rewritten_reviews"] == ["review/review-0001.csv"]
    assert len(read_review(loop / "review" / "review-0001.csv")) == 6
    assert report["stages"]["record"]["questions"] == 6 and fakes.answer_calls() == 12
    assert json.loads((loop / "loop.json").read_text())["runs"][0]["status"] == "interrupted"
    assert cli(["loop", "status", "--dir", str(loop)]) == 0
    shown = capsys.readouterr().out
    assert "| 0001 |" in shown and "interrupted" in shown and "| review/review-0001.csv | 6 | 0 | 6 |" in shown
    # the window it covered, and drift's word: nothing stored before the first week to compare with
    assert "| 0001 | 2026-11-01 00:00 → 2026-11-08 00:00 | interrupted | " in shown
    assert shown.count("| not compared |") == 2, shown  # the interrupted run and the one that resumed it


def test_an_unknown_encoder_is_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "loop").mkdir()
    assert cli(["loop", "run", "--dir", str(tmp_path / "loop"), "--embedder", "word2vec"]) == 2
    assert "--embedder 'word2vec': use minilm or an embedded model id" in capsys.readouterr().err
    assert list((tmp_path / "loop").iterdir()) == []


def test_a_missing_sentence_encoder_is_refused_before_anything_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first user's loop recorded 82 calls for 3.5 minutes, then could not train: the default
    encoder (MiniLM, the router extra) was not installed. It is checked with the other input."""
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        "importlib.util.find_spec", lambda name, *a: None if name == "sentence_transformers" else found(name, *a)
    )
    monkeypatch.setattr("podium.embed._model_dir", lambda: tmp_path)  # the model package is there, the library not
    (tmp_path / "loop").mkdir()
    assert cli(["loop", "run", "--dir", str(tmp_path / "loop")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--embedder minilm: sentence-transformers is not installed; run: pip install -e '.[router]'" in err
    assert "e.g. --embedder qwen2.5-coder-0.5b-instruct" in err
    assert list((tmp_path / "loop").iterdir()) == []


def test_a_second_run_while_one_works_is_refused_and_a_dead_runs_lock_is_taken_over(
    world: tuple[FakePool, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    _, argv = world
    lock = tmp_path / "loop" / ".loop.lock"
    lock.write_text(f"{os.getppid()}\n")  # a live process holds it
    assert cli([*argv, *WEEK]) == 2
    assert f"another podium loop run (process {os.getppid()}) is working in" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "loop").iterdir()] == [".loop.lock"]
    lock.write_text("999999999\n")  # no such process: a run that was killed
    assert cli([*argv, *WEEK]) == 5
    assert not lock.exists()


def test_a_new_folder_does_not_take_over_a_registry_name_in_use(
    world: tuple[FakePool, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two loop folders left at the default name would promote over each other's versions."""
    from podium.registry import Registry

    _, argv = world
    Registry().create("light")  # another folder's (or a hand-trained) version
    assert cli([*argv, *WEEK]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the registry already has a conductor 'light' (light@v1..light@v1)" in err and "--name NEW" in err
    assert files(tmp_path / "loop") == {}  # nothing written
    code, _, err = loop_run([*argv, *WEEK, "--name", "light"], capsys)  # named on purpose: shared
    assert code == 5 and "registry already has" not in err  # it goes on, and stops for labels
