"""The labelling round trip: ``podium tasks export --review FILE.csv`` then ``podium tasks import``.

The set and its review file come from a real trace file (the orchestrator with podium.testing's
scripted fakes, tests/traffic_support.py); the reviewer's edits are made with Python's csv
module, as a spreadsheet would save them. Every malformed file must be refused with the row and
the fix, and leave the set byte for byte as it was.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from podium.cli import cli
from podium.eval.tasks import load_tasks
from tests.conftest import read_jsonl
from tests.traffic_support import Request, at, gsm8k_questions, run_requests

JANET, ROBE, HOUSE, SPRINTS = gsm8k_questions(0, 4)


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, Path]:
    """(set, review file) of five requests: four math questions with podium's final answers
    (two of them wrong) and an open one."""
    traces = tmp_path / "traces.sqlite3"
    run_requests(
        traces,
        [
            Request(JANET, at(1, 9), ("task:math",), "The answer is 18."),
            Request(ROBE, at(1, 10), ("task:math",), "The answer is 2."),  # wrong: 3
            Request(HOUSE, at(1, 11), ("task:math",), "The answer is 70000."),
            Request(SPRINTS, at(1, 12), ("task:math",), "The answer is 540."),
            Request("Summarise our refund policy for a customer.", at(1, 13), (), "Refunds within 30 days."),
        ],
    )
    out, review = tmp_path / "set.jsonl", tmp_path / "review.csv"
    args = ["tasks", "export", "--traces", str(traces), "--out", str(out), "--review", str(review), "--allow-pii"]
    assert cli(args) == 0
    return out, review


def read_review(path: Path) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    return rows[0], rows[1:]


def write_review(path: Path, header: list[str], rows: list[list[str]], *, delimiter: str = ",") -> None:
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator="\r\n").writerows([header, *rows])
    path.write_text(buffer.getvalue(), encoding="utf-8-sig")


def fill(rows: list[list[str]], header: list[str], verdicts: dict[str, tuple[str, str]]) -> list[list[str]]:
    """Set (verdict, reference) of the rows whose question starts with a key of ``verdicts``."""
    q, v, r = header.index("question"), header.index("verdict"), header.index("reference")
    for row in rows:
        for start, (verdict, reference) in verdicts.items():
            if row[q].startswith(start):
                row[v], row[r] = verdict, reference
    return rows


def test_the_review_file_lists_each_task_with_its_candidate_and_empty_columns(exported: tuple[Path, Path]) -> None:
    out, review = exported
    assert review.read_bytes().startswith(b"\xef\xbb\xbf")  # UTF-8 BOM: spreadsheets show æ ø å
    header, rows = read_review(review)
    assert header == [
        "id",
        "task_type",
        "tags",
        "question",
        "candidate",
        "candidate_source",
        "verdict",
        "reference",
        "note",
    ]
    set_records = read_jsonl(out)
    assert [row[0] for row in rows] == [r["id"] for r in set_records]
    assert [row[4] for row in rows] == ["18", "2", "70000", "540", "Refunds within 30 days."]
    assert {row[5] for row in rows} == {"candidate:podium"}
    assert all(row[6] == row[7] == "" for row in rows)


def test_verdicts_come_back_as_human_references_and_a_second_import_changes_nothing(
    exported: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out, review = exported
    header, rows = read_review(review)
    rows = fill(
        rows, header, {"Janet": ("accept", ""), "A robe": ("fix", "3"), "Josh": ("drop", ""), "James": ("", "540")}
    )
    write_review(review, header, rows)
    assert cli(["tasks", "import", str(review), "--set", str(out), "--json"]) == 0
    assert '"accepted": 1' in capsys.readouterr().out
    records = {r["question"][:5]: r for r in read_jsonl(out)}
    assert set(records) == {"Janet", "A rob", "James", "Summa"}  # Josh's house was dropped
    assert (records["Janet"]["reference"], records["Janet"]["reference_source"]) == ("18", "human")
    assert (records["A rob"]["reference"], records["A rob"]["reference_source"]) == ("3", "human")
    assert records["James"]["reference_source"] == "human"  # a reference without a verdict is a fix
    assert records["Summa"]["reference_source"] == "candidate:podium"  # no verdict: unchanged
    assert len(load_tasks(out)) == 4
    before = out.read_bytes()
    # the same file again (as a reviewer who filled more rows would): Josh's row, dropped by the
    # first import, changes nothing; a first user got "no task with this id … another set?"
    assert cli(["tasks", "import", str(review), "--set", str(out), "--json"]) == 0
    again = capsys.readouterr().out
    assert '"already_dropped": 1' in again and '"accepted": 0' in again and '"fixed": 0' in again
    assert out.read_bytes() == before
    rows = fill(rows, header, {"Josh": ("fix", "70000")})  # but a verdict for a task no longer there
    write_review(review, header, rows)
    assert cli(["tasks", "import", str(review), "--set", str(out)]) == 2
    assert "no task with this id" in capsys.readouterr().err
    assert out.read_bytes() == before


def test_a_semicolon_file_from_a_danish_spreadsheet_and_a_changed_task_type_import(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    out, review = exported
    header, rows = read_review(review)
    t = header.index("task_type")
    rows = fill(rows, header, {"Summarise": ("fix", "Refusioner inden for 30 dage; æøå")})
    for row in rows:
        if row[3].startswith("Summarise"):
            row[t] = "exact"
    write_review(review, header, rows, delimiter=";")
    result = tmp_path / "labelled.jsonl"
    assert cli(["tasks", "import", str(review), "--set", str(out), "--out", str(result)]) == 0
    summary = read_jsonl(result)[-1]
    assert (summary["task_type"], summary["reference"]) == ("exact", "Refusioner inden for 30 dage; æøå")
    assert read_jsonl(out)[-1]["task_type"] == "open"  # --out leaves the set as it was


def test_a_code_task_is_labelled_with_its_tests_in_the_reference_column(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    """Code traffic is exported open (a trace has no tests); a reviewer makes it a code task by
    writing its tests, which podium eval then runs against each answer."""
    out, review = exported
    header, rows = read_review(review)
    tests = "assert refund_days() == 30\nassert refund_days() > 0"
    rows = fill(rows, header, {"Summarise": ("fix", tests)})
    rows[-1][header.index("task_type")] = "code"
    write_review(review, header, rows)
    assert cli(["tasks", "import", str(review), "--set", str(out)]) == 0
    summary = read_jsonl(out)[-1]
    assert (summary["task_type"], summary["tests"], summary["reference_source"]) == ("code", tests, "human")
    assert "reference" not in summary  # podium's answer was the candidate, not the tests
    task = next(t for t in load_tasks(out) if t.task_type == "code")
    assert task.tests == tests


@pytest.mark.parametrize(
    ("verdict", "reference", "message"),
    [
        ("accept", "", "a code task is graded by its tests: write fix and the tests"),
        ("", "", "a code task is graded by its tests: write fix and the tests"),
        ("fix", "def refund_days(:", "the tests in the reference column are not Python"),
        ("fix", "Refunds within 30 days.", "the tests in the reference column are not Python"),
        ("fix", "refund_days()", "the tests in the reference column assert nothing"),
    ],
    ids=["accept", "no-tests", "syntax", "prose", "no-assert"],
)
def test_a_code_task_without_runnable_tests_is_refused(
    exported: tuple[Path, Path], capsys: pytest.CaptureFixture[str], verdict: str, reference: str, message: str
) -> None:
    out, review = exported
    header, rows = read_review(review)
    rows[-1][header.index("task_type")] = "code"
    rows[-1][header.index("verdict")], rows[-1][header.index("reference")] = verdict, reference
    write_review(review, header, rows)
    before = out.read_bytes()
    assert cli(["tasks", "import", str(review), "--set", str(out)]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert out.read_bytes() == before


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda h, rows: ([*h[:6], "reference", "note"], [r[:6] + r[7:] for r in rows]), "missing column(s) verdict"),
        (lambda h, rows: (h, [*rows, [*rows[0][:8]]]), "row 7: 8 cells, the header has 9"),
        (lambda h, rows: (h, [["traffic/nope", *rows[0][1:]]]), "row 2 (id traffic/nope): no task with this id"),
        (lambda h, rows: (h, [[*rows[0][:6], "yes", "", ""]]), "verdict 'yes' is unknown; write accept, fix, drop"),
        (lambda h, rows: (h, [[*rows[0][:6], "fix", "", ""]]), "verdict fix needs the right answer"),
        (lambda h, rows: (h, [[*rows[0][:6], "fix", "three bolts", ""]]), "'three bolts' has none; write the answer"),
        (lambda h, rows: (h, [[*rows[0][:6], "accept", "17", ""]]), "the reference column differs from the candidate"),
        (lambda h, rows: (h, [rows[0], rows[1], rows[0]]), "row 4 (id traffic/"),
        (lambda h, rows: (h, [[rows[0][0], "poem", *rows[0][2:]]]), "task_type 'poem' is unknown"),
        (lambda h, rows: (h, [["", *rows[0][1:]]]), "row 2: the id is empty"),
    ],
    ids=[
        "missing-column",
        "short-row",
        "unknown-id",
        "bad-verdict",
        "fix-without-reference",
        "math-fix-without-a-number",
        "accept-mismatch",
        "duplicate-id",
        "bad-task-type",
        "empty-id",
    ],
)
def test_a_malformed_review_file_is_refused_with_the_row_and_nothing_is_changed(
    exported: tuple[Path, Path], capsys: pytest.CaptureFixture[str], edit: object, message: str
) -> None:
    out, review = exported
    header, rows = read_review(review)
    rows[0][6] = "accept"  # a good row first: it must not be imported either
    new_header, new_rows = edit(header, rows)  # type: ignore[operator]
    write_review(review, new_header, new_rows)
    before = out.read_bytes()
    assert cli(["tasks", "import", str(review), "--set", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()), err
    assert out.read_bytes() == before


def test_every_bad_row_is_listed_at_once(exported: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out, review = exported
    header, rows = read_review(review)
    rows[0][6], rows[1][6], rows[2][6] = "maybe", "fix", "accept"
    write_review(review, header, rows)
    assert cli(["tasks", "import", str(review), "--set", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "2 row(s) cannot be imported; nothing was changed" in err
    assert "row 2 (id" in err and "row 3 (id" in err and "row 4" not in err


def test_files_that_are_not_review_files(
    exported: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = exported
    cases = {
        "empty.csv": b"",
        "latin1.csv": "id,verdict,reference\nx,fix,r\xf8d\n".encode("latin-1"),
        "quote.csv": b'id,verdict,reference\n"traffic/x,fix,3\n',
    }
    messages = {"empty.csv": "is empty", "latin1.csv": "is not UTF-8", "quote.csv": "not valid CSV"}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        assert cli(["tasks", "import", str(tmp_path / name), "--set", str(out)]) == 2
        assert messages[name] in capsys.readouterr().err
    assert cli(["tasks", "import", str(tmp_path / "absent.csv"), "--set", str(out)]) == 2
    assert "no review file" in capsys.readouterr().err
    assert cli(["tasks", "import", str(tmp_path / "empty.csv"), "--set", str(tmp_path / "none.jsonl")]) == 2
    assert "no regression set" in capsys.readouterr().err


def test_the_review_file_of_a_pseudonymized_export_holds_no_personal_data(tmp_path: Path) -> None:
    traces = tmp_path / "traces.sqlite3"
    question = "Ring til Søren Østergaard på +45 31 42 58 67 angående faktura 88213. Hvad skylder han?"
    run_requests(traces, [Request(question, at(1), answer="Søren Østergaard skylder 120 kr.")])
    out, review = tmp_path / "set.jsonl", tmp_path / "review.csv"
    assert cli(["tasks", "export", "--traces", str(traces), "--out", str(out), "--review", str(review)]) == 0
    text = review.read_text(encoding="utf-8-sig")
    assert "Søren" not in text and "31 42 58 67" not in text
    assert "<PERSON_1>" in text and "<PHONE_NUMBER_1>" in text


def test_a_file_applied_again_with_its_dropped_tasks_named_gone_changes_nothing(exported: tuple[Path, Path]) -> None:
    """podium loop applies every review file it wrote on each run: the rows of tasks an earlier
    import dropped are named ``gone`` and are no-ops while they still say drop; changing such a
    verdict afterwards is an error naming the row."""
    from podium.traffic.review import import_review

    out, review = exported
    header, rows = read_review(review)
    write_review(review, header, fill(rows, header, {"Janet": ("accept", ""), "Josh": ("drop", "")}))
    records = read_jsonl(out)
    first = import_review(review, records)
    ids = {str(r["id"]) for r in records}
    gone = ids - {str(r["id"]) for r in first.records}
    assert (first.accepted, first.dropped, len(gone)) == (1, 1, 1)
    again = import_review(review, first.records, gone=gone)
    assert again.records == first.records and (again.gone, again.dropped, again.accepted) == (1, 0, 0)  # no change
    header, rows = read_review(review)
    write_review(review, header, fill(rows, header, {"Josh": ("accept", "")}))
    with pytest.raises(Exception, match=r"row 4 .*an earlier import of this file dropped the task"):
        import_review(review, first.records, gone=gone)


def test_an_export_never_overwrites_a_filled_review_file_unless_forced(
    exported: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out, review = exported
    header, rows = read_review(review)
    write_review(review, header, fill(rows, header, {"Janet": ("accept", "")}))  # a person's work
    labelled = review.read_bytes()
    traces = out.parent / "traces.sqlite3"
    again = [
        "tasks",
        "export",
        "--traces",
        str(traces),
        "--out",
        str(out.parent / "new.jsonl"),
        "--review",
        str(review),
    ]
    assert cli([*again, "--allow-pii"]) == 2
    assert "may hold a person's labels" in " ".join(capsys.readouterr().err.split())
    assert review.read_bytes() == labelled and not (out.parent / "new.jsonl").exists()
    assert cli([*again, "--allow-pii", "--force"]) == 0 and review.read_bytes() != labelled
