"""Fakes for the tests of ``podium loop``: real trace stores written by the real orchestrator
(tests/traffic_support.py), a real pool file whose two workers are podium.testing's scripted
fakes (no model is called), and a model-free encoder for the light conductor.

The fake workers: ``big`` answers the GSM8K questions right and the Danish table questions
wrong, ``small`` the other way round at a tenth of the price — so no single worker is right on
everything, and a light conductor that routes by the question beats the best of them. Asked to
judge (the eval loop's rubric), both say ``Score: 9``, unless the question is in ``doubtful``."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from podium.testing import ScriptedWorker
from podium.traffic.features import HashingEncoder, normalise
from podium.workers.base import Message, Price
from tests.traffic_support import GSM8K, Request, at

POOL = """name = "loop-fakes"
max_steps = 3

[conductor]
worker = "big"
recursion_rounds = 0

[fallback]
worker = "big"

[[workers]]
name = "big"
model = "smollm2-135m-instruct"

[[workers]]
name = "small"
model = "smollm2-135m-instruct"
"""


def gsm8k(start: int, count: int) -> list[tuple[str, str]]:
    """(question, the right final number) of GSM8K test questions ``start`` …"""
    lines = GSM8K.read_text(encoding="utf-8").splitlines()[start : start + count]
    return [
        (rec["question"], rec["answer"].rsplit("####", 1)[1].strip().replace(",", "")) for rec in map(json.loads, lines)
    ]


def tables(start: int, count: int) -> list[tuple[str, str]]:
    """(a Danish support question over a Markdown table, the sum it asks for)."""
    out = []
    for n in range(start, start + count):
        a, b, c = n + 3, 2 * n + 5, 7 * n % 11 + 1
        question = (
            f"Hej, kunden i sag {n} har bestilt følgende:\n\n| vare | antal |\n|---|---|\n| æbler | {a} |\n"
            f"| pærer | {b} |\n| blommer | {c} |\n\nHvor mange varer er der i alt?"
        )
        out.append((question, str(a + b + c)))
    return out


def requests(pairs: Sequence[tuple[str, str]], day: int) -> list[Request]:
    """One math-tagged request per pair on ``day``, a minute apart, podium answering right (so
    the candidate references are right)."""
    return [Request(q, at(day, 9, i), ("task:math",), f"The answer is {a}.") for i, (q, a) in enumerate(pairs)]


class FakePool:
    """The two scripted fake workers of :data:`POOL`, the same objects for every stage (so
    their ``calls`` count everything the loop asked)."""

    def __init__(self, maths: Sequence[tuple[str, str]], danish: Sequence[tuple[str, str]]) -> None:
        self.answers = {normalise(q)[:60]: (a, "math") for q, a in maths}
        self.answers |= {normalise(q)[:60]: (a, "table") for q, a in danish}
        self.doubtful: set[str] = set()
        self.workers = {
            "big": ScriptedWorker("big", reply=lambda m: self.reply("math", m), price=Price(20.0, 20.0)),
            "small": ScriptedWorker("small", reply=lambda m: self.reply("table", m), price=Price(2.0, 2.0)),
        }

    def add(self, maths: Sequence[tuple[str, str]], danish: Sequence[tuple[str, str]]) -> None:
        self.answers |= {normalise(q)[:60]: (a, "math") for q, a in maths}
        self.answers |= {normalise(q)[:60]: (a, "table") for q, a in danish}

    def reply(self, good_at: str, messages: Sequence[Message]) -> str:
        text = normalise("\n".join(m["content"] for m in messages))
        judging = "score n" in text
        for key, (answer, kind) in self.answers.items():
            if key in text:
                if judging:
                    return "The answer is checked.\nScore: " + ("3" if key in self.doubtful else "9")
                return f"The answer is {answer if kind == good_at else int(answer) + 1}."
        return "Score: 9" if judging else "I cannot tell."

    def doubt(self, question: str) -> None:
        """The judges score this question's answers 3 (a fail)."""
        self.doubtful.add(normalise(question)[:60])

    def judge_calls(self) -> int:
        return sum(1 for w in self.workers.values() for call in w.calls if "Score: N" in call[-1]["content"])

    def answer_calls(self) -> int:
        return sum(1 for w in self.workers.values() for call in w.calls if "Score: N" not in call[-1]["content"])

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every pool worker podium builds is one of these fakes. ``podium.builder`` binds
        ``build_pool_workers`` at import, so it is patched there too: a builder first imported
        during a test would otherwise keep the fakes for every later test."""
        fakes = lambda config: [self.workers[w.name] for w in config.workers]  # noqa: E731
        monkeypatch.setattr("podium.builder.build_pool_workers", fakes)
        monkeypatch.setattr("podium.pool_workers.build_pool_workers", fakes)
        monkeypatch.setattr("podium.pool_workers.build_worker", lambda worker: self.workers[worker.name])


def fake_encoder(_choice: str) -> HashingEncoder:
    """A model-free encoder in place of MiniLM for the light conductor (hashed character
    n-grams: it tells Danish tables from English word problems)."""
    return HashingEncoder(dim=64)


def isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry, the request cache and the embeddings in ``tmp_path``; the light conductor
    on the fake encoder."""
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PODIUM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("podium.embed.encoder_choice", fake_encoder)
    monkeypatch.setattr("podium.embed.encoder_for", fake_encoder)
    monkeypatch.setattr("podium.embed.check_installed", lambda _choice: None)  # the fake needs no model


def files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path → bytes), to show that nothing changed."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def fill(path: Path, verdicts: dict[str, tuple[str, str]]) -> None:
    """Set (verdict, reference) of the review rows whose question starts with a key, as a
    spreadsheet saves the file."""
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    q, v, r = (rows[0].index(c) for c in ("question", "verdict", "reference"))
    for row in rows[1:]:
        for start, (verdict, reference) in verdicts.items():
            if row[q].startswith(start):
                row[v], row[r] = verdict, reference
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8-sig")
