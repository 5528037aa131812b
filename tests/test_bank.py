"""The workflow outcome bank: recording (resumable), its files, and reading it back.

The model workers are fakes (ScriptedWorker); the Python tool and the verifiers are real."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from podium.errors import ConfigError
from podium.eval.bank import local_catalogue, read_bank
from podium.eval.record import record_bank
from podium.eval.tasks import Task
from podium.eval.verifiers import verify
from podium.testing import ScriptedWorker
from podium.workers.base import Message, Worker
from podium.workers.python_tool import PythonToolWorker

TASKS = [
    Task(id="t/1", question="What is 6 * 7?", task_type="math", reference="42", split="train", source="toy"),
    Task(id="t/2", question="What is 5 + 5?", task_type="math", reference="10", split="train", source="toy"),
]


def _reply(messages: Sequence[Message]) -> str:
    text = messages[-1]["content"]
    subtask = text.rsplit("<your_subtask>", 1)[1]
    if "Python program" in subtask or "assert statements" in subtask:
        return "```python\nprint(6 * 7)\n```"  # right for t/1 only
    if "program above was run" in subtask:
        return "The program printed 42. The final answer is 42."
    return "The final answer is 42."


def _pool() -> list[Worker]:
    names = ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "smollm2-135m"]
    return [*(ScriptedWorker(n, reply=_reply) for n in names), PythonToolWorker("python")]


@pytest.mark.slow
def test_record_writes_one_row_per_question_and_resumes(tmp_path: Path) -> None:
    catalogue = local_catalogue()
    pool = _pool()
    total = record_bank(catalogue, TASKS[:1], pool, tmp_path, score=verify)
    assert total == 1
    calls_after_first = sum(len(w.calls) for w in pool if isinstance(w, ScriptedWorker))
    # every model column's own step calls a model once; dependencies re-run (no cache here)
    assert calls_after_first >= 18
    total = record_bank(catalogue, TASKS, pool, tmp_path, score=verify)  # t/1 is skipped
    assert total == 2
    bank = read_bank(tmp_path)
    assert [r["sample_id"] for r in bank.rows] == ["t/1", "t/2"]
    row1, row2 = bank.rows
    assert float(row1["solve@1.5b"]) == 1.0 and float(row2["solve@1.5b"]) == 0.0  # "42" is wrong for 5 + 5
    # the sandbox really ran the program: its printed output is the run column's response
    assert "stdout:\n42" in row1["run(program@1.5b)|model_response"]
    assert float(row1["run(program@1.5b)"]) == 1.0
    # a sub-workflow's total cost covers its dependencies; the step cost only itself
    state = "state@0.5b(program@1.5b)"
    assert float(row1[f"{state}|total_cost"]) > float(row1[f"{state}|step_cost"]) > 0
    sidecar = json.loads((tmp_path / "workflows.json").read_text())
    assert [s["column"] for s in sidecar["columns"][state]["workflow"]] == [
        "program@1.5b",
        "run(program@1.5b)",
        state,
    ]
    assert sidecar["columns"][state]["workflow"][2]["access"] == [0, 1]


def test_a_failing_step_is_recorded_with_its_error(tmp_path: Path) -> None:
    pool = _pool()
    pool[2] = ScriptedWorker("smollm2-135m", error=RuntimeError("boom"))
    with pytest.raises(RuntimeError):  # not a podium error: a bug, surfaced, not recorded as data
        record_bank(local_catalogue(), TASKS[:1], pool, tmp_path, score=verify)
    from podium.errors import WorkerTimeout

    pool[2] = ScriptedWorker("smollm2-135m", error=WorkerTimeout("slow", worker="smollm2-135m"))
    record_bank(local_catalogue(), TASKS[:1], pool, tmp_path / "b", score=verify)
    row = read_bank(tmp_path / "b").rows[0]
    assert row["solve@135m"] == "0.0" and "WorkerTimeout" in row["solve@135m|error"]
    assert row["solve@1.5b|error"] == ""


def test_a_matrix_replaced_while_recording_still_gets_every_row(tmp_path: Path) -> None:
    import os
    import shutil

    def replace_the_file(progress: object) -> None:  # what a git stash / checkout does to it
        matrix = tmp_path / "matrix.csv"
        shutil.copy(matrix, tmp_path / "copy.csv")
        os.replace(tmp_path / "copy.csv", matrix)  # a new file (inode) at the same path

    record_bank(local_catalogue(), TASKS, _pool(), tmp_path, score=verify, on_progress=replace_the_file)
    assert [r["sample_id"] for r in read_bank(tmp_path).rows] == ["t/1", "t/2"]


def test_a_bank_of_other_columns_is_refused(tmp_path: Path) -> None:
    record_bank(local_catalogue(), TASKS[:1], _pool(), tmp_path, score=verify)
    with pytest.raises(ConfigError, match="other columns"):
        record_bank(local_catalogue(samples=(3, 3)), TASKS, _pool(), tmp_path, score=verify)


def test_a_pool_without_the_catalogue_workers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="python"):
        record_bank(local_catalogue(), TASKS, _pool()[:3], tmp_path, score=verify)


def test_read_bank_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no workflows\.json"):
        read_bank(tmp_path)
    record_bank(local_catalogue(), TASKS[:1], _pool(), tmp_path, score=verify)
    matrix = tmp_path / "matrix.csv"
    rows = list(csv.reader(matrix.open()))
    rows[0][4] = "renamed"
    with matrix.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    with pytest.raises(ConfigError, match="do not match"):
        read_bank(tmp_path)


SHIPPED = Path(__file__).resolve().parents[1] / "data" / "banks" / "local"


def test_bank_show_counts_the_splits_and_shows_one_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    from podium.cli import cli

    assert cli(["bank", "show", str(SHIPPED), "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert sum(whole["splits"].values()) == whole["questions"] and set(whole["splits"]) == {"train", "test"}
    assert cli(["bank", "show", str(SHIPPED), "--split", "train", "--json"]) == 0
    train = json.loads(capsys.readouterr().out)
    assert train["questions"] == whole["splits"]["train"] and train["split"] == "train"
    assert cli(["bank", "show", str(SHIPPED), "--split", "dev"]) == 2
    assert "no question in split 'dev'; its splits: test (" in capsys.readouterr().err


def test_output_into_a_reader_that_stops_early_ends_quietly() -> None:
    import subprocess
    import sys

    # what writing to `| head -1` after head has exited raises, made certain (a real pipe would
    # need more output than its buffer holds)
    code = "import podium.cli as c\ndef cli():\n    raise BrokenPipeError(32, 'Broken pipe')\nc.cli = cli\nc.main()\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert done.returncode == 141  # 128 + SIGPIPE, as a shell reports it
    assert b"Traceback" not in done.stderr


def test_open_tasks_without_a_judge_are_refused_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An open task's answers need a judge: without ``--judge`` the recording stops before any
    worker is built or called, and nothing is written; ``--judge-pool`` alone is refused too."""
    from podium.cli import cli

    built: list[object] = []
    monkeypatch.setattr("podium.pool_workers.build_pool_workers", lambda config: built.append(config) or _pool())
    tasks = tmp_path / "set.jsonl"
    rows = [{"id": "o/1", "question": "Write a haiku about rain.", "task_type": "open"}, {**vars_of(TASKS[0])}]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "bank"
    cache = ["--cache", str(tmp_path / "cache.sqlite3")]
    assert cli(["bank", "record", "--tasks", str(tasks), "--out", str(out), *cache]) == 2
    err = capsys.readouterr().err
    assert "1 open task(s), e.g. 'o/1'" in err and "--judge WORKER" in err
    assert built == [] and not out.exists()
    assert cli(["bank", "record", "--tasks", str(tasks), "--out", str(out), "--judge-pool", "local", *cache]) == 2
    assert "give --judge WORKER too" in capsys.readouterr().err
    # a tool cannot write a grade: every open answer would score 0 after all its calls
    assert cli(["bank", "record", "--tasks", str(tasks), "--out", str(out), "--judge", "python", *cache]) == 2
    err = capsys.readouterr().err
    assert "--judge 'python' is a python worker, which cannot write a grade" in err and "qwen2.5-coder-1.5b" in err
    assert built == [] and not out.exists() and not (tmp_path / "cache.sqlite3").exists()
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe{}")
    assert cli(["bank", "record", "--tasks", str(binary), "--out", str(out), *cache]) == 2
    assert "is not UTF-8 text (byte 0); pass a JSONL file" in capsys.readouterr().err


def vars_of(task: Task) -> dict[str, object]:
    return {"id": task.id, "question": task.question, "task_type": task.task_type, "reference": task.reference}


def test_a_rich_table_into_a_closed_pipe_ends_with_141_too() -> None:
    """rich's console handles a broken pipe itself by exiting 1, a failure with no word, as a
    first user saw from 'podium trace show ID | head'; piped, podium's console hands it on."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "podium", "pool", "show"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before podium writes
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141 and b"Traceback" not in err


def _piece(folder: Path, rows: Sequence[dict[str, str]]) -> Path:
    """A bank at ``folder`` holding ``rows`` of the shipped bank (same catalogue)."""
    bank = read_bank(SHIPPED)
    folder.mkdir()
    (folder / "workflows.json").write_text((SHIPPED / "workflows.json").read_text())
    with (folder / "matrix.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=bank.catalogue.header())
        writer.writeheader()
        writer.writerows(rows)
    return folder


def test_merge_keeps_each_question_once_with_its_split_and_leaves_out_listed_ids(tmp_path: Path) -> None:
    from podium.eval.bank import merge_banks

    rows = read_bank(SHIPPED).rows
    train = [r for r in rows if r["split"] == "train"][:3]
    test = [r for r in rows if r["split"] == "test"][:3]
    # the second bank names its questions as a regression set does: a prefix before the benchmark's id
    renamed = [{**r, "sample_id": f"shift/kind/{r['sample_id']}", "prompt": r["prompt"] + " "} for r in test]
    a, b = _piece(tmp_path / "a", train + test[:1]), _piece(tmp_path / "b", [*renamed, train[0]])
    result = merge_banks([a, b], tmp_path / "out", exclude={test[1]["sample_id"]})
    merged = read_bank(tmp_path / "out")
    # a's 4 rows; of b's: test[1] listed (by its suffix), train[0] already kept (same text)
    assert [r["sample_id"] for r in merged.rows] == [
        *(r["sample_id"] for r in train + test[:1]),
        renamed[0]["sample_id"],
        renamed[2]["sample_id"],
    ]
    assert result.rows == 6 and result.left_out == {"split": 0, "excluded": 1, "duplicate": 1}
    assert [r["split"] for r in merged.rows] == ["train"] * 3 + ["test"] * 3
    assert merged.rows[0] == train[0]  # every field as recorded
    only = merge_banks([a, b], tmp_path / "train", split="train")
    assert only.rows == 3 and only.left_out["split"] == 4 and only.left_out["duplicate"] == 1


def test_merge_refuses_other_catalogues_an_existing_bank_and_an_empty_result(tmp_path: Path) -> None:
    from podium.eval.bank import merge_banks

    rows = read_bank(SHIPPED).rows[:2]
    a = _piece(tmp_path / "a", rows)
    with pytest.raises(ConfigError, match="exists: merge into a new folder"):
        merge_banks([a], a)
    other = _piece(tmp_path / "other", rows)
    sidecar = json.loads((other / "workflows.json").read_text())
    sidecar["columns"]["solve@135m"]["worker"] = "another-model"  # same matrix columns, another step
    (other / "workflows.json").write_text(json.dumps(sidecar))
    with pytest.raises(ConfigError, match="has other columns than"):
        merge_banks([a, other], tmp_path / "out")
    with pytest.raises(ConfigError, match=r"no row left to merge \(2 split"):
        merge_banks([a], tmp_path / "none", split="dev")
    assert not (tmp_path / "out").exists() and not (tmp_path / "none").exists()


def test_bank_merge_command_reads_exclusion_lists_and_names_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from podium.cli import cli

    rows = read_bank(SHIPPED).rows[:3]
    a = _piece(tmp_path / "a", rows)
    ids = tmp_path / "held-out.txt"
    ids.write_text(f"# a held-out set\n{rows[1]['sample_id']}\n")
    assert cli(["bank", "merge", str(a), "--exclude", str(ids), "--out", str(tmp_path / "out")]) == 0
    assert "2 question(s) (left out: 1 excluded)" in capsys.readouterr().err
    assert [r["sample_id"] for r in read_bank(tmp_path / "out").rows] == [rows[0]["sample_id"], rows[2]["sample_id"]]
    assert cli(["bank", "merge", str(a), "--exclude", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "x")]) == 2
    assert "cannot read --exclude" in capsys.readouterr().err


def test_bank_record_estimates_the_time_left_only_after_three_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A resumed recording's first question came from the cache in 20 s and the line read "ETA
    38m57s" for about 4 hours of work. The progress lines come from the real command; the
    recording itself is replaced by one that reports four questions (a fake, this test only)."""
    import podium.eval.record as record
    from podium.cli import cli

    def fake(tasks, out, *, on_start, on_progress, **_):  # type: ignore[no-untyped-def]
        on_start(len(tasks), 0)
        for n, task in enumerate(tasks, 1):
            on_progress(record.RecordProgress(task.id, 20.0, 24, n, len(tasks)))
        return len(tasks)

    monkeypatch.setattr(record, "record_local_bank", fake)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(vars_of(t) | {"id": f"t/{i}"}) + "\n" for i, t in enumerate(TASKS * 2)))
    assert cli(["bank", "record", "--tasks", str(tasks), "--out", str(tmp_path / "bank")]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    assert [line.split(" ")[0] for line in lines] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert all(line.endswith("ETA after 3 questions") for line in lines[:2])
    assert "ETA after" not in lines[2] and "ETA 0m" in lines[2]
