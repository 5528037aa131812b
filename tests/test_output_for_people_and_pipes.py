"""Output for people and pipes: tables stay readable when piped, ``trace export`` names its file
itself, empty results say so, and the Pareto plot's point labels stay clear of its legend."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from podium.cli import cli
from podium.orchestrator import Fallback, Orchestrator
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore

QUESTION = "How many eggs does the farmer sell at the market on a rainy Saturday in November?"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.sqlite3"
    orch = Orchestrator(
        [ScriptedWorker("w0", reply="12 eggs")],
        ScriptedConductor(['model_id = [0]\nsubtasks = ["Count."]\naccess_list = [[]]']),
        Fallback(0, "Answer."),
        traces=TraceStore(path),
    )
    asyncio.run(orch.run(QUESTION))
    return path


def test_a_piped_trace_list_keeps_the_question_readable(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped (as here: capsys is no terminal) at the default 80 columns, the question column was
    squeezed to 11 characters; piped output is now 120 columns wide."""
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli(["trace", "list", "--traces", str(db)]) == 0
    out = capsys.readouterr().out
    assert QUESTION[:50] in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_piped_plain_lines_are_not_hard_wrapped(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A long path in a plain line stays whole (it used to be broken at column 80, mid-word)."""
    folder = tmp_path / ("a-rather-long-folder-name-" * 4)
    folder.mkdir()
    pool = folder / "pool.toml"
    pool.write_text(
        "[conductor]\nworker = 'py'\n[fallback]\nworker = 'py'\n[[workers]]\nname = 'py'\nbackend = 'python'\n"
        f"description = 'runs code in {folder}'\n",
        encoding="utf-8",
    )
    assert cli(["pool", "show", "--pool", str(pool)]) == 0
    assert f"the conductor reads: runs code in {folder}\n" in capsys.readouterr().out


def test_trace_export_defaults_to_the_trace_id(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    request_id = TraceStore(db).list()[0].id
    assert cli(["trace", "export", request_id[:8], "--traces", str(db)]) == 0
    page = tmp_path / f"{request_id}.html"
    assert page.is_file() and "<svg" in page.read_text(encoding="utf-8")
    assert f"wrote {request_id}.html" in capsys.readouterr().out
    os.remove(page)
    assert cli(["trace", "export", request_id[:8], "--html", "--traces", str(db)]) == 0  # --html alone: the same
    assert page.is_file()
    assert cli(["trace", "export", request_id[:8], "--html", "mine.html", "--traces", str(db)]) == 0
    assert (tmp_path / "mine.html").is_file()


def test_empty_results_say_nothing_matched(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["trace", "search", "volcanoes", "--traces", str(db)]) == 0
    assert "nothing matched 'volcanoes'" in capsys.readouterr().out
    assert cli(["trace", "list", "--tag", "nope", "--traces", str(db)]) == 0
    out = capsys.readouterr().out
    assert "no stored request passes these filters" in out and "┏" not in out  # a line, not an empty table
    assert cli(["trace", "search", "--tag", "nope", "--traces", str(db)]) == 0
    assert "no stored request passes these filters" in capsys.readouterr().out


def test_a_merged_pareto_label_stays_clear_of_the_legend() -> None:
    """Live MBPP: the conductor sent everything to the 1.5B worker, so both share the right-most
    point and one long 'a = b' label, which ran out of the axes into the legend beside them."""
    pytest.importorskip("matplotlib")
    from podium.eval.plot import MethodPoint, _pareto_figure

    methods = [
        MethodPoint("single:smollm2-135m", 0.00002, 0.10, 0.05, 0.15),
        MethodPoint("single:qwen2.5-coder-0.5b", 0.0001, 0.30, 0.2, 0.4),
        MethodPoint("pipeline", 0.0003, 0.40, 0.3, 0.5),
        MethodPoint("conductor", 0.0004, 0.467, 0.3, 0.6),
        MethodPoint("single:qwen2.5-coder-1.5b", 0.0004, 0.467, 0.3, 0.6),
    ]
    fig = _pareto_figure(methods, curves={}, title="", log_cost=True, front=None)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    axes = ax.get_window_extent(renderer)
    labels = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert "conductor = single:qwen2.5-coder-1.5b" in labels
    for text, box in labels.items():
        assert not box.overlaps(legend), f"{text!r} runs into the legend"
        assert axes.x0 <= box.x0 and box.x1 <= axes.x1, f"{text!r} leaves the axes"


def test_progress_on_a_pipe_is_plain_lines_at_each_tenth() -> None:
    """Piped into a CI log, rich's bar printed nothing until the end (an eval of 400 requests ran
    for an hour in silence); a console that is no terminal gets a line when the task starts, at
    each tenth done and at the end, with done/total and the time left."""
    from io import StringIO

    from rich.console import Console

    from podium._render import PlainProgress, progress_bar

    buffer = StringIO()
    console = Console(file=buffer, force_terminal=False, width=200)
    progress = progress_bar("eval", console, remaining=True)
    assert isinstance(progress, PlainProgress)
    with progress:
        task = progress.add_task("starting", total=20)
        for i in range(20):
            progress.update(task, advance=1, description=f"solve: {i + 1} done")
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "eval: starting (0/20)"
    # 10 tenths (every 2 requests); the final one repeats at stop only if not yet printed
    assert [line.split(" ", 2)[1] for line in lines[1:]] == [f"{n}/20" for n in range(2, 21, 2)]
    # the time left once 3 units after the first have finished: not at 2/20, from 4/20 on
    assert "left" not in lines[1] and all("left" in line for line in lines[2:-1])
    assert "20/20 solve: 20 done" in lines[-1]
    assert progress_bar("eval", Console(file=StringIO(), force_terminal=True)).__class__.__name__ == "Progress"
    # worker names are not rich markup or emoji codes (a worker "b" showed as "single🅱")
    buffer = StringIO()
    plain = PlainProgress("eval", Console(file=buffer, force_terminal=False, width=200))
    task = plain.add_task("", total=1)
    plain.update(task, advance=1, description="single:b: 1.000 over 1 [bold]x[/]")
    assert buffer.getvalue().splitlines() == [
        "eval: starting (0/1)",
        "eval: 1/1 single:b: 1.000 over 1 [bold]x[/] · 0m00s elapsed",  # one unit: no rate yet,
    ]


def test_a_piped_answer_keeps_every_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Piped, the Answer panel (and each step's) cut a long line at the box's edge and dropped
    the rest without a marker ('…muffins for her friends ever'); panels now wrap inside their box
    on a pipe too."""
    path = tmp_path / "t.sqlite3"
    answer = " ".join(f"word{i}" for i in range(60)) + " THE-END"
    orch = Orchestrator(
        [ScriptedWorker("w0", reply=answer)],
        ScriptedConductor(['model_id = [0]\nsubtasks = ["Count."]\naccess_list = [[]]']),
        Fallback(0, "Answer."),
        traces=TraceStore(path),
    )
    record = asyncio.run(orch.run(QUESTION))
    assert cli(["trace", "show", record.id, "--traces", str(path)]) == 0
    out = capsys.readouterr().out
    words = " ".join(line.strip("│ ") for line in out.splitlines())
    answer_box = words[words.index("Answer") :]
    assert all(f"word{i} " in answer_box for i in range(60)) and "THE-END" in answer_box


def test_the_time_left_is_measured_from_the_first_finished_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Training's first estimate read 'about 39m00s left' for a run that took 43 s: the set-up
    before the first generation (embedding the questions) was counted as work per unit."""
    from io import StringIO

    from rich.console import Console

    import podium._render as render

    clock = [0.0]
    monkeypatch.setattr(render.time, "monotonic", lambda: clock[0])
    buffer = StringIO()
    progress = render.PlainProgress("train", Console(file=buffer, force_terminal=False, width=200))
    task = progress.add_task("embedding questions", total=20)
    clock[0] = 100.0  # 100 s of set-up, then one unit per second
    for _ in range(10):
        progress.update(task, advance=1, description="generation")
        clock[0] += 1.0
    last = buffer.getvalue().splitlines()[-1]
    assert last.startswith("train: 10/20 generation") and "about 0m10s left" in last  # 1 s a unit, 10 to go
