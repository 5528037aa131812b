"""The CLI on bad input (no model needed): clear message, exit code 2, no traceback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from podium.cli import cli
from podium.orchestrator import Fallback, Orchestrator
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.base import Call, Completion
from tests.conftest import SHARED_DATA, read_jsonl

ADVERSARIAL = {c["id"]: c for c in read_jsonl(SHARED_DATA / "adversarial" / "cases.jsonl")}


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.mark.parametrize("case", ["empty-question", "very-long-question"])
def test_adversarial_questions_are_refused_with_exit_2(
    case: str, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    code, _, err = run_cli(["run", ADVERSARIAL[case]["question"]], capsys)
    assert code == 2
    assert "question" in err
    assert not (isolated_home / "traces.sqlite3").exists()  # nothing ran, nothing was sent


def test_unknown_pool_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(["run", "2+2?", "--pool", str(tmp_path / "missing.toml")], capsys)
    assert code == 2 and "not found" in err


def test_a_pool_whose_api_keys_are_not_set_names_every_missing_variable(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked before any work: nothing is called, no trace is written."""
    monkeypatch.delenv("PODIUM_TEST_KEY_A", raising=False)
    monkeypatch.delenv("PODIUM_TEST_KEY_B", raising=False)
    monkeypatch.setenv("PODIUM_TEST_KEY_SET", "sk-test")
    workers = "".join(
        f'[[workers]]\nname = "{n}"\nbackend = "openai"\nmodel = "gpt-5"\napi_key_env = "{key}"\n'
        f'base_url = "http://127.0.0.1:9/v1"\n\n'
        for n, key in (("a", "PODIUM_TEST_KEY_B"), ("b", "PODIUM_TEST_KEY_A"), ("c", "PODIUM_TEST_KEY_SET"))
    )
    pool = tmp_path / "keys.toml"
    pool.write_text(
        f'name = "keys"\n[conductor]\nworker = "a"\n[fallback]\nworker = "a"\n\n{workers}', encoding="utf-8"
    )
    traces = tmp_path / "t.sqlite3"
    code, _, err = run_cli(["run", "2+2?", "--pool", str(pool), "--traces", str(traces)], capsys)
    assert code == 2 and "set PODIUM_TEST_KEY_A, PODIUM_TEST_KEY_B " in err and "PODIUM_TEST_KEY_SET" not in err
    assert not traces.exists()


def test_a_mistyped_preset_name_gets_the_close_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(["plan", "2+2?", "--pool", "local-lmm"], capsys)
    assert code == 2 and "Did you mean the preset 'local-lm'?" in err


@pytest.mark.parametrize(
    ("argv", "usage", "hint"),
    [
        (["run", "2+2?", "--jsn"], "podium run", "did you mean --json?"),
        (["trace", "list", "--limt", "3"], "podium trace list", "did you mean --limit?"),
        (["plan", "2+2?", "--zzz"], "podium plan", ""),
        # loop run takes no abbreviation (its options are remembered): the hint names what it
        # abbreviates, not the closest spelling (--emb got "did you mean --mu?")
        (["loop", "run", "--dir", "d", "--emb", "x"], "podium loop run", "did you mean --embedder?"),
    ],
)
def test_an_unknown_option_is_refused_by_its_own_command(
    argv: list[str], usage: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's own error, not the top-level usage (a trial user saw ``usage: podium [-h]
    ...`` for ``run --jsn``), and one line with a pointer to its --help, not its usage block
    (a later trial: the block around the hint was noise)."""
    with pytest.raises(SystemExit) as exit_:
        cli(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(f"{usage}: error: unrecognized arguments") and hint in err
    assert "usage:" not in err and err.endswith(f"(`{usage} --help` lists the options)\n")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["trac", "list"], "podium: error: unknown command 'trac'. Did you mean 'trace'?"),
        (["shadow", "reprot"], "podium shadow: error: unknown command 'reprot'. Did you mean 'report'?"),
        (["loop", "zzz"], "podium loop: error: unknown command 'zzz'."),
    ],
)
def test_a_mistyped_command_gets_the_close_one(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.splitlines() == [said, f"(`{said.split(':')[0]} --help` lists the commands)"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["loop", "run", "--dir", "d", "--preset", "gpu"], "argument --preset: invalid choice: 'gpu'"),
        (["trace", "list", "--limit"], "argument --limit: expected one argument"),
    ],
)
def test_a_wrong_option_value_is_one_line_without_the_usage_block(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial user's ``--preset gpu`` drew ``podium loop run``'s twenty-line usage block."""
    with pytest.raises(SystemExit) as exit_:
        cli(argv)
    err = capsys.readouterr().err
    command = "podium " + " ".join(argv[:2])
    assert exit_.value.code == 2 and "usage:" not in err
    assert err == f"{command}: error: {said}" + err.split(said, 1)[1]  # the error first, nothing before it
    assert f"`{command} --help` lists the options" in err and len(err.splitlines()) == 2


def test_the_answer_is_shown_once_and_earlier_steps_in_full(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The last step's output is the answer: its step panel points to the Answer panel instead of
    printing the same text twice (a trial user's complaint); the other steps show their outputs."""
    db = tmp_path / "t.sqlite3"
    plan = 'model_id = [0, 1]\nsubtasks = ["Draft.", "Check."]\naccess_list = [[], [0]]'
    orch = Orchestrator(
        [ScriptedWorker("w0", reply="draft-text-7"), ScriptedWorker("w1", reply="final-answer-42")],
        ScriptedConductor([plan]),
        Fallback(0, "Answer."),
        traces=TraceStore(db),
    )
    record = asyncio.run(orch.run("Q?"))
    code, out, _ = run_cli(["trace", "show", record.id, "--traces", str(db)], capsys)
    assert code == 0 and out.count("final-answer-42") == 1 and out.count("draft-text-7") == 1
    assert "(the answer, shown below)" in out


class _CutOff(ScriptedWorker):
    """A scripted worker whose every reply stopped at max_tokens (finish_reason "length")."""

    async def complete(self, call: Call) -> Completion:
        return dataclasses.replace(await super().complete(call), finish_reason="length")


@pytest.mark.parametrize("cut", [True, False])
def test_an_answer_cut_off_at_max_tokens_says_so_next_to_it(
    cut: bool, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A trial user's poem looped until the worker's max_tokens; the run looked like a clean
    answer (status ok), with "hit max_tokens" only inside the step panel."""
    db = tmp_path / "t.sqlite3"
    plan = 'model_id = [0]\nsubtasks = ["Write it."]\naccess_list = [[]]'
    worker = (_CutOff if cut else ScriptedWorker)("poet", reply="a place of wonder and awe, a place of")
    orch = Orchestrator([worker], ScriptedConductor([plan]), Fallback(0, "A."), traces=TraceStore(db))
    record = asyncio.run(orch.run("Write a poem."))
    code, out, _ = run_cli(["trace", "show", record.id, "--traces", str(db)], capsys)
    assert code == 0 and record.status == "ok"
    assert ("Answer (cut off at the worker's max_tokens)" in out) is cut
    assert ("The answer may be incomplete: poet stopped at its limit of" in out) is cut


@pytest.mark.parametrize("mode", ["run", "plan"])
def test_a_request_without_a_stored_trace_does_not_offer_a_trace_id(mode: str) -> None:
    """`podium run --no-trace` printed "trace ID" — an id that `podium trace show` cannot find."""
    from rich.console import Console

    from podium._render import print_record

    plan = 'model_id = [0]\nsubtasks = ["Solve."]\naccess_list = [[]]'
    record = asyncio.run(
        Orchestrator([ScriptedWorker("w0")], ScriptedConductor([plan]), Fallback(0, "A.")).run("Q?", mode=mode)
    )
    for stored, said in [(True, f"trace {record.id}"), (False, f"request {record.id} (no trace stored: --no-trace)")]:
        console = Console(record=True, width=200)
        print_record(record, False, console, stored=stored)
        text = console.export_text()
        assert said in text and (f"trace {record.id}" in text) is stored


def test_trace_list_shows_a_plan_only_status_whole(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite3"
    plan = 'model_id = [0]\nsubtasks = ["Solve."]\naccess_list = [[]]'
    orch = Orchestrator([ScriptedWorker("w0")], ScriptedConductor([plan]), Fallback(0, "A."), traces=TraceStore(db))
    asyncio.run(orch.run("Q?", mode="plan"))
    code, out, _ = run_cli(["trace", "list", "--traces", str(db)], capsys)
    assert code == 0 and "ok (plan)" in out  # was cut to "ok (pla…" in an 8-wide column


def test_invalid_pool_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[conductor]\nworker = 3\n")
    code, _, err = run_cli(["plan", "2+2?", "--pool", str(bad)], capsys)
    assert code == 2 and "invalid" in err and "conductor.worker" in err


def test_bad_flag_values(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["run", "2+2?", "--max-steps", "0"], capsys)
    assert code == 2 and "--max-steps" in err


def test_trace_commands_without_a_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, isolated_home: Path
) -> None:
    code, _, err = run_cli(["trace", "list", "--traces", str(tmp_path / "none.sqlite3")], capsys)
    assert code == 2 and "no trace database" in err  # a path given and wrong: an error
    assert not (tmp_path / "none.sqlite3").exists()
    # nothing run yet (an empty PODIUM_HOME): an empty history, not an error, and nothing created
    code, out, _ = run_cli(["trace", "list"], capsys)
    assert code == 0 and "no traces yet" in out
    code, out, _ = run_cli(["trace", "search", "apples", "--json"], capsys)
    assert code == 0 and json.loads(out) == []
    code, _, err = run_cli(["trace", "show", "abc"], capsys)
    assert code == 2 and "no trace database" in err  # a request asked for by id cannot be there
    assert not list(isolated_home.rglob("*.sqlite3"))


def test_trace_list_and_show(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite3"
    plan = 'model_id = [0]\nsubtasks = ["Say hi [politely]."]\naccess_list = [[]]'
    orch = Orchestrator(
        [ScriptedWorker("w0", reply="hi [there]")],
        ScriptedConductor([plan]),
        Fallback(0, "Answer."),
        traces=TraceStore(db),
    )
    record = asyncio.run(orch.run("Greet me"))
    code, out, _ = run_cli(["trace", "list", "--traces", str(db), "--json"], capsys)
    assert code == 0 and json.loads(out)[0]["id"] == record.id
    code, out, _ = run_cli(["trace", "show", record.id[:8], "--traces", str(db), "--json"], capsys)
    assert code == 0
    shown = json.loads(out)
    assert shown == record.to_json()
    code, out, _ = run_cli(["trace", "show", record.id[:8], "--traces", str(db)], capsys)
    assert code == 0 and "hi [there]" in out and "Say hi [politely]." in out  # markup-like text shown verbatim
    code, _, err = run_cli(["trace", "show", "zzz", "--traces", str(db)], capsys)
    assert code == 2 and "not a request id" in err


def test_pool_show_names_the_plan_conductor_and_its_cascade_round(capsys: pytest.CaptureFixture[str]) -> None:
    """A first user read "trained light conductor" and "recursion_rounds 0", then saw every run
    of the default pool show a conductor round 1 (the cascade's escalation)."""
    code, out, _ = run_cli(["pool", "show"], capsys)
    assert code == 0 and "light:local (trained plan conductor)" in out
    assert "recursion_rounds 0 (extra review rounds; a cascade the plan conductor chooses gets 1 more)" in out
    code, out, _ = run_cli(["pool", "show", "--pool", "local-light"], capsys)
    assert code == 0 and "(trained light conductor)" in out and "cascade" not in out


def test_pool_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["pool", "show", "--json"], capsys)
    assert code == 0 and json.loads(out)["name"] == "local"


def test_models_install_rejects_unknown_ids(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["models", "install", "gpt-17"], capsys)
    assert code == 2 and "unknown model" in err


@pytest.mark.parametrize(("flag", "value"), [("--deadline", "-1"), ("--cost-cap", "0"), ("--deadline", "nan")])
def test_bad_limits_are_refused(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["run", "2+2?", flag, value, "--no-trace"], capsys)
    assert code == 2 and f"{flag} must be a number above 0" in err  # the flag the user typed, not a field name


def test_pool_check_reports_each_worker(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A pool of a Python tool, the vote tool and an unreachable HTTP worker: two ok, one clear
    error. The vote tool is given two answers to vote on (it used to get a prompt with none and
    was "ok" with an error text as its reply)."""
    pool = tmp_path / "check.toml"
    port = 9  # discard port on loopback: nothing listens there
    pool.write_text(
        "[conductor]\nworker = 'py'\n[fallback]\nworker = 'py'\n"
        "[[workers]]\nname = 'py'\nbackend = 'python'\n"
        "[[workers]]\nname = 'vote'\nbackend = 'vote'\n"
        f"[[workers]]\nname = 'http'\nbackend = 'openai'\nmodel = 'm'\nbase_url = 'http://127.0.0.1:{port}/v1'\n"
        "price = { input = 1.0, output = 2.0 }\n"
    )
    code, out, _ = run_cli(["pool", "check", "--pool", str(pool), "--json"], capsys)
    rows = {r["worker"]: r for r in json.loads(out)}
    assert code == 1
    assert rows["py"]["ok"] and "OK" in rows["py"]["reply"]
    assert rows["vote"]["ok"] and rows["vote"]["reply"] == "OK"
    assert not rows["http"]["ok"] and rows["http"]["error"].startswith("TransportError")


def test_a_run_is_tagged_for_the_loop_and_drift(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--tag`` and ``--use-case`` reach the trace, so 'trace list --tag', 'tasks export
    --use-case' and 'drift --use-case' find command-line traffic (a first user's runs carried
    no tags, and slicing by use case found nothing). Each tag is stored once."""
    pool = tmp_path / "py.toml"
    pool.write_text(
        "[conductor]\nworker = 'py'\n[fallback]\nworker = 'py'\n[[workers]]\nname = 'py'\nbackend = 'python'\n"
    )
    traces = tmp_path / "t.sqlite3"
    argv = ["run", "print(6*7)", "--pool", str(pool), "--traces", str(traces)]
    code, _, _ = run_cli([*argv, "--tag", "team:billing", "--use-case", "support", "--tag", "team:billing"], capsys)
    assert code in (0, 1)  # the answer is not the point here
    code, out, _ = run_cli(["trace", "list", "--traces", str(traces), "--tag", "use-case:support", "--json"], capsys)
    assert code == 0 and json.loads(out)[0]["tags"] == ["team:billing", "use-case:support"]
    for bad in (["--tag", " "], ["--use-case", ""], ["--tag", "a\nb"]):
        code, _, err = run_cli([*argv, *bad], capsys)
        assert code == 2 and "a tag is a non-empty line of text" in err
    assert len(json.loads(run_cli(["trace", "list", "--traces", str(traces), "--json"], capsys)[1])) == 1


@pytest.mark.parametrize("command", ["serve", "shadow", "ui"])
def test_a_server_on_a_taken_port_says_so_before_it_starts(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`podium serve --port N` with N in use announced "podium serving … on N", then failed in
    uvicorn with exit 3 (a first user's report); a bad --host did the same."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        extra = ["--upstream", "http://127.0.0.1:9"] if command == "shadow" else []
        code, out, err = run_cli([command, "--port", str(port), *extra], capsys)
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}: Address already in use; pick another --port" in err
    assert "podium serving" not in out and "on http://" not in out
    code, _, err = run_cli([command, "--host", "999.1.1.1", "--port", "8000", *extra], capsys)
    assert code == 2 and "--host 999.1.1.1: not an address this machine can listen on" in err


def test_db_check_on_the_embedded_default_lists_every_store_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first user read only the key file's tables (a 'shadow 0 rows' beside a shadow.sqlite3
    of 3 records) and nothing about traces: with no database URL each store is its own file."""
    monkeypatch.delenv("PODIUM_DATABASE_URL", raising=False)
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))
    assert run_cli(["db", "upgrade"], capsys)[0] == 0
    (tmp_path / "home" / "traces.sqlite3").write_bytes(b"\0" * 2_000_000)
    code, out, _ = run_cli(["db", "check"], capsys)
    lines = " ".join(out.split())
    assert code == 0 and "with no --database-url each store is a SQLite file of its own" in lines
    assert f"traces: {tmp_path / 'home' / 'traces.sqlite3'} (2.0 MB)" in lines
    assert f"shadow: {tmp_path / 'home' / 'shadow.sqlite3'} (not created yet)" in lines
    assert "0 rows" in lines and "1 rows" not in lines


def test_shadow_help_lists_its_report_subcommand_once(capsys: pytest.CaptureFixture[str]) -> None:
    """``podium shadow --help`` printed "report" twice under "positional arguments" (the
    subparsers' metavar, then the entry), a first user found; it now reads as the other commands'
    SUBCOMMAND listings, marked optional since ``podium shadow`` alone runs the proxy."""
    with pytest.raises(SystemExit) as done:
        cli(["shadow", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "[SUBCOMMAND] ..." in out
    assert [line.split()[0] for line in out.splitlines() if line.strip().startswith("report")] == ["report"]
