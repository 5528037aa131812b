"""``podium pool show`` and ``podium pool check`` as a new user meets them: the limits a request
runs under, and a check that catches a wrong model name (against real HTTP servers on 127.0.0.1)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from podium.cli import cli
from tests.conftest import ThreadedUvicorn
from tests.fake_openai import fake_openai_app

LIMITED = """
name = "limited"
[conductor]
worker = "py"
recursion_rounds = 2
[fallback]
worker = "py"
[limits]
deadline_s = 60
step_timeout_s = 20.5
cost_cap_usd = 0.002
daily_budget_usd = 5
[[workers]]
name = "py"
backend = "python"
"""


def test_pool_show_prints_the_effective_limits_and_recursion_rounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = tmp_path / "limited.toml"
    pool.write_text(LIMITED, encoding="utf-8")
    assert cli(["pool", "show", "--pool", str(pool)]) == 0
    out = capsys.readouterr().out
    assert "recursion_rounds 2" in out
    assert "deadline 60 s (25% kept for the fallback)" in out  # fallback_reserve's default
    assert "step timeout 20.5 s" in out and "cost cap $0.002" in out and "daily budget $5" in out
    # decoding settings the pool leaves unset are shown as sent (podium's defaults), not "None"
    assert "max_tokens 512 · temperature 0.2" in out and "None" not in out
    # the embedded pool sets no limits: each is said to be unlimited, not left out
    assert cli(["pool", "show"]) == 0
    out = capsys.readouterr().out
    assert "recursion_rounds 0" in out
    for limit in ("deadline", "step timeout", "cost cap", "daily budget"):
        assert f"{limit} unlimited" in out


@pytest.fixture
def server() -> Iterator[Callable[..., str]]:
    """Start fake OpenAI-compatible servers (tests/fake_openai.py) on 127.0.0.1; their /v1 URLs."""
    started: list[ThreadedUvicorn] = []

    def start(**behaviour: Any) -> str:
        started.append(ThreadedUvicorn(fake_openai_app(**behaviour)))
        return started[-1].url + "/v1"

    yield start
    for s in started:
        s.stop()


def http_pool(path: Path, base_url: str, model: str, conductor: str = 'worker = "http"') -> Path:
    path.write_text(
        f'name = "http"\n[conductor]\n{conductor}\n[fallback]\nworker = "http"\n'
        f'[[workers]]\nname = "http"\nbackend = "openai"\nmodel = "{model}"\nbase_url = "{base_url}"\n'
        "price = { input = 0.1, output = 0.2 }\n",
        encoding="utf-8",
    )
    return path


def check(pool: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, dict[str, Any]], str]:
    code = cli(["pool", "check", "--pool", str(pool), "--json"])
    rows = {r["worker"]: r for r in json.loads(capsys.readouterr().out)}
    assert cli(["pool", "check", "--pool", str(pool)]) == code
    return code, rows, capsys.readouterr().out


def test_a_model_the_server_does_not_serve_fails_the_check(
    server: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trial: model = "qwen-7b" on a server that serves smollm2 and, like llama_cpp.server,
    answers any name with its own model and echoes the name back — the plain call succeeds."""
    url = server(listed=("smollm2",), answers_as=None)
    code, rows, text = check(http_pool(tmp_path / "p.toml", url, "qwen-7b"), capsys)
    assert code == 1
    row = rows["http"]
    assert not row["ok"] and row["reply"]  # it did answer: only the model check catches it
    assert row["listed_models"] == ["smollm2"] and row["served_model"] == "qwen-7b"
    assert "model 'qwen-7b' is not served there; the server lists: smollm2" in row["problems"][0]
    assert "MISMATCH" in text and "the server lists: smollm2" in text and "check failed for http" in text
    assert not rows["[conductor]"]["ok"]  # the conductor runs on that worker
    # the right name passes
    code, rows, _ = check(http_pool(tmp_path / "p.toml", url, "smollm2"), capsys)
    assert code == 0 and rows["http"]["ok"] and rows["http"]["problems"] == []


def test_a_reply_from_another_model_fails_the_check(
    server: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server without /v1/models that answers as its own model: the reply's model field tells."""
    url = server(listed=None, answers_as="mistral-7b-instruct")
    code, rows, _ = check(http_pool(tmp_path / "p.toml", url, "qwen-7b"), capsys)
    assert code == 1
    assert "answered as model 'mistral-7b-instruct', not 'qwen-7b'" in rows["http"]["problems"][0]
    assert rows["http"]["notes"] and "lists no models" in rows["http"]["notes"][0]
    # an alias the server resolves to a dated or tagged name is the same model
    url = server(listed=("gpt-4o-mini-2024-07-18",), answers_as="gpt-4o-mini-2024-07-18")
    code, rows, _ = check(http_pool(tmp_path / "p.toml", url, "gpt-4o-mini"), capsys)
    assert code == 0, rows


def test_the_conductor_model_is_checked(
    server: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    url = server(listed=("smollm2",))
    missing = tmp_path / "no-such-conductor.gguf"
    code, rows, text = check(http_pool(tmp_path / "p.toml", url, "smollm2", f'model = "{missing}"'), capsys)
    assert code == 1 and rows["http"]["ok"]
    assert f"model file '{missing}' does not exist" in rows["[conductor]"]["problems"][0]
    assert "[conductor]" in text and "does not exist" in text
    code, rows, _ = check(http_pool(tmp_path / "p.toml", url, "smollm2", 'version = "lm@v7"'), capsys)
    assert code == 1 and "no conductor named 'lm'" in rows["[conductor]"]["problems"][0]
