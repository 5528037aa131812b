"""The loop's stages call the drift and export code with typed options, and record the command
line an operator would type for the same work. The two must never say different things: here
the recorded line, parsed by podium's own parser, gives exactly the options the stage used."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from pathlib import Path

import pytest

from podium.loop.settings import RunOptions, Settings
from podium.loop.stages import Context, drift_argv, drift_request, export_argv, export_request
from podium.loop.state import Folder
from podium.traffic import cli as traffic_cli
from podium.traffic.drift_cli import drift_query
from podium.traffic.tasks_cli import export_options_of, export_selection

SETTINGS = [
    Settings(traces="/data/traces.sqlite3"),
    Settings(
        traces="/data/t.sqlite3",
        tag=["use-case:support", "lang:da"],
        use_case="billing",
        status="ok",
        task_type="math",
        candidate="podium",
        similar=0.93,
        similar_embedder="minilm",
        limit=40,
        allow_pii=True,
        threshold=["p=0.01", "mean_cosine=off"],
    ),
    Settings(source="shadow", store="postgresql://db/podium", tag=["use-case:docs"], candidate="upstream"),
    Settings(source="shadow", store="/data/shadow.sqlite3"),
    Settings(traces="/data/t.sqlite3", judge="big", pool="/data/pool.toml", cache="/data/cache.sqlite3"),
    Settings(traces="/data/t.sqlite3", judge="big", eval_judge="grader", drift_judge_sample=7),
    Settings(traces="/data/t.sqlite3", judge="big", drift_judge_sample=0),
    Settings(reference_since="2026-10-01", reference_until="2026-10-08T12:00:00Z"),
    Settings(reference_since="2026-10-01"),
]
IDS = [
    "defaults", "every-filter", "shadow-url", "shadow-file", "judge", "eval-judge", "no-drift-judge",
    "fixed-reference", "reference-start",
]  # fmt: skip


def parsed(argv: list[str]) -> argparse.Namespace:
    """``argv`` as ``podium`` parses it (the traffic commands' own parsers)."""
    parser = argparse.ArgumentParser(prog="podium")
    traffic_cli.add_parsers(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def context(tmp_path: Path, settings: Settings, *, with_set: bool) -> Context:
    folder = Folder(tmp_path / "loop")
    folder.root.mkdir()
    if with_set:
        folder.set.write_text("", encoding="utf-8")
    window = ("2026-11-08T00:00:00.000Z", "2026-11-15T00:00:00.000Z")
    return Context(folder, settings, RunOptions(), "0002", window, {}, print, lambda: None)


@pytest.mark.parametrize("with_set", [False, True])
@pytest.mark.parametrize(
    "settings",
    SETTINGS,
    ids=IDS,
)
def test_the_recorded_command_lines_parse_to_the_options_the_stages_used(
    settings: Settings, with_set: bool, tmp_path: Path
) -> None:
    ctx = context(tmp_path, settings, with_set=with_set)
    drift_line = drift_argv(ctx)
    assert drift_query(parsed(drift_line)) == drift_request(ctx), shlex.join(drift_line)
    export_line = export_argv(ctx)
    args = parsed(export_line)
    assert (export_selection(args), export_options_of(args)) == export_request(ctx), shlex.join(export_line)


def test_a_window_of_fractional_days_still_parses_to_the_same_query(tmp_path: Path) -> None:
    ctx = dataclasses.replace(
        context(tmp_path, SETTINGS[0], with_set=False), window=("2026-11-08T00:00:00.000Z", "2026-11-10T06:00:00.000Z")
    )
    assert drift_request(ctx).days == 2.25
    assert drift_query(parsed(drift_argv(ctx))) == drift_request(ctx)


def test_a_fixed_setting_given_anew_names_what_the_folder_keeps() -> None:
    """A folder started on the default pool keeps pool None; ``--pool local-light`` later must name
    the default pool, not ``None`` (a first user's report)."""
    import argparse

    from podium.errors import ConfigError
    from podium.loop.settings import resolve_settings

    with pytest.raises(ConfigError) as caught:
        resolve_settings({"pool": None}, argparse.Namespace(pool="local-light"))
    assert "--pool local-light: this loop folder uses the embedded local pool (the default)" in str(caught.value)
    with pytest.raises(ConfigError, match="this loop folder uses 0 "):
        resolve_settings({"seed": 0}, argparse.Namespace(seed=3))


def test_a_remembered_reference_window_is_compared_every_run_until_none_clears_it(tmp_path: Path) -> None:
    """A team compares each week with a fixed week (the one the conductor was trained on), not
    only the week before: ``--reference-since/--reference-until`` are remembered like the other
    drift settings, and ``none`` goes back to the rolling default."""
    from podium.loop.settings import resolve_settings

    def reference(settings: Settings) -> tuple[str, str]:
        where = tmp_path / str(len(list(tmp_path.iterdir())))
        where.mkdir()
        return drift_request(context(where, settings, with_set=False)).windows()["reference"]

    fixed = resolve_settings({}, argparse.Namespace(reference_since="2026-10-01", reference_until="2026-10-07"))
    assert reference(fixed) == ("2026-10-01T00:00:00.000Z", "2026-10-08T00:00:00.000Z")  # the date includes its day
    again = resolve_settings(fixed.to_json(), argparse.Namespace())  # a later run gives only --dir
    assert (again.reference_since, again.reference_until) == ("2026-10-01", "2026-10-07")
    cleared = resolve_settings(again.to_json(), argparse.Namespace(reference_since="none", reference_until="None"))
    assert reference(cleared) == ("2026-11-01T00:00:00.000Z", "2026-11-08T00:00:00.000Z")  # the 7 days before


def test_the_status_table_says_in_a_word_what_each_runs_drift_found() -> None:
    from podium.loop.report import status_markdown

    def run(n: int, drift: dict[str, object]) -> dict[str, object]:
        window = {"since": f"2026-11-0{n}T00:00:00.000Z", "until": f"2026-11-0{n + 1}T12:30:00.000Z"}
        return {"id": f"000{n}", "status": "done", "exit_code": 0, "window": window, "stages": {"drift": drift}}

    status = {
        "dir": "loop",
        "settings": {"reference_since": "2026-10-01"},
        "set": {"tasks": 3, "unconfirmed": 0},
        "matrix": {},
        "promoted": None,
        "reviews": [],
        "runs": [
            run(1, {"status": "not compared", "exit_code": 2}),
            run(2, {"status": "done", "exit_code": 0, "kinds": []}),
            run(3, {"status": "done", "exit_code": 4, "kinds": ["input", "outcome"]}),
            run(4, {"status": "done", "exit_code": 0, "kinds": [], "compared": []}),
        ],
    }
    shown = status_markdown(status)
    assert "reference_since 2026-10-01" in shown
    assert "| 0001 | 2026-11-01 00:00 → 2026-11-02 12:30 | done | 0 | not compared |" in shown
    assert "| 0002 | 2026-11-02 00:00 → 2026-11-03 12:30 | done | 0 | quiet |" in shown
    assert "| 0003 | 2026-11-03 00:00 → 2026-11-04 12:30 | done | 0 | input + outcome shift |" in shown
    assert "| 0004 | 2026-11-04 00:00 → 2026-11-05 12:30 | done | 0 | too few requests |" in shown


def test_plans_default_to_the_shipped_recipe_and_a_folder_keeps_what_it_stored() -> None:
    """``--policy plans`` alone trains what the shipped plan tables are (Qwen2.5-Coder-0.5B
    vectors, a cluster table of K by silhouette); light keeps MiniLM and no table. A folder that
    stored the old defaults (MiniLM, clusters 0) keeps them: its versions stay comparable."""
    from podium._args import AUTO_CLUSTERS
    from podium.loop.settings import resolve_settings

    plans = resolve_settings({}, argparse.Namespace(policy="plans", bank=True))
    assert (plans.encoder, plans.table_clusters) == ("qwen2.5-coder-0.5b-instruct", AUTO_CLUSTERS)
    light = resolve_settings({}, argparse.Namespace())
    assert (light.encoder, light.table_clusters) == ("minilm", 0)
    old = resolve_settings({"policy": "plans", "bank": True, "embedder": "minilm", "clusters": 0}, argparse.Namespace())
    assert (old.encoder, old.table_clusters) == ("minilm", 0)
    linear = resolve_settings({}, argparse.Namespace(policy="plans", bank=True, clusters=0))
    assert linear.table_clusters == 0
    linear.check()


def test_the_run_report_carries_the_trainings_warning() -> None:
    from podium.loop.report import stage_lines

    train = {"status": "done", "version": "light@v2", "questions": 26, "warning": "every cost … weighs nothing"}
    lines = dict(stage_lines({"stages": {"train": train}}))
    assert lines["5. train"] == "light@v2 on 26 training question(s) · warning: every cost … weighs nothing"
