"""``podium eval --tasks A --tasks B --ids FILE``: several task sets evaluated as one, kept to the
listed ids in their order (the held-out proof lists its 150 questions this way)."""

from __future__ import annotations

from pathlib import Path

import pytest

from podium.errors import ConfigError
from podium.eval.session import EvalSpec, _by_ids, run_eval
from podium.eval.tasks import load_tasks
from tests.conftest import SHARED_DATA

BENCH = SHARED_DATA / "benchmarks"


def test_ids_keep_the_listed_tasks_of_several_sets_in_file_order(tmp_path: Path) -> None:
    tasks = load_tasks(BENCH / "gsm8k" / "test.jsonl") + load_tasks(BENCH / "mbpp" / "mbpp.jsonl")
    ids = tmp_path / "ids.txt"
    ids.write_text("# held out\nmbpp/12\ngsm8k/test/3\n\nmbpp/11\n")
    assert [t.id for t in _by_ids(tasks, ids)] == ["mbpp/12", "gsm8k/test/3", "mbpp/11"]


def test_unknown_or_no_ids_are_named(tmp_path: Path) -> None:
    tasks = load_tasks(BENCH / "mbpp" / "mbpp.jsonl")
    ids = tmp_path / "ids.txt"
    ids.write_text("mbpp/11\ngsm8k/test/3\n")
    with pytest.raises(ConfigError, match=r"gsm8k/test/3"):
        _by_ids(tasks, ids)
    ids.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="no task id"):
        _by_ids(tasks, ids)


def test_ids_do_not_apply_to_replay(tmp_path: Path) -> None:
    spec = EvalSpec(replay=SHARED_DATA / "outcomes" / "routellm-gpt4-mixtral.csv", ids=tmp_path / "x.txt")
    with pytest.raises(ConfigError, match="not to --replay"):
        run_eval(spec)
