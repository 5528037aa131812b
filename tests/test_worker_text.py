"""Text a worker returns that is no valid Unicode (a lone surrogate, which a provider's valid JSON
``"\\ud800"`` decodes to) never breaks a request: it becomes U+FFFD where it enters podium, byte
counts never raise on it, and every request still leaves one finished trace."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from podium.budget import Limits, prompt_token_bound
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.records import RunRecord, Totals
from podium.streaming import AnswerStream
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from podium.unicode import stream_safe, utf8_length, valid_text
from podium.workers.base import Completion

ONE_STEP = 'model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]'
TWO_STEPS = 'model_id = [0, 1]\nsubtasks = ["Answer.", "Check."]\naccess_list = [[], [0]]'


def test_valid_text_replaces_lone_surrogates_and_joins_split_pairs() -> None:
    assert valid_text("bad \ud800 text") == "bad \ufffd text"
    assert valid_text("\udc00x\ud800") == "\ufffdx\ufffd"
    assert valid_text("\ud83d\ude00") == "\U0001f600"  # a pair held as two code points
    plain = "plain ø text"
    assert valid_text(plain) is plain
    assert stream_safe("smile \ud83d") == "smile "  # its pair may follow in the next chunk
    assert utf8_length("a\ud800") == 4 and prompt_token_bound([{"role": "user", "content": "\ud800"}]) > 0


def test_a_completion_holds_valid_text_whatever_the_worker_gave() -> None:
    assert Completion("bad \ud800 text").text == "bad \ufffd text"


@pytest.mark.parametrize("plan", [ONE_STEP, TWO_STEPS])
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("capped", [False, True])
def test_a_worker_replying_with_a_lone_surrogate_gives_an_answer_and_a_finished_trace(
    tmp_path: Path, plan: str, streamed: bool, capped: bool
) -> None:
    traces = TraceStore(tmp_path / "traces.sqlite3")
    first = ScriptedWorker("a", "bad \ud800 text")
    second = ScriptedWorker("b", lambda m: "it said bad \ufffd text" if "bad \ufffd text" in m[-1]["content"] else "?")
    orchestrator = Orchestrator(
        [first, second],
        ScriptedConductor([plan]),
        Fallback(1, "Answer."),
        traces=traces,
        config=OrchestratorConfig(limits=Limits(cost_cap_usd=1.0) if capped else None),
    )

    async def go() -> tuple[RunRecord, str]:
        deltas: list[str] = []
        stream = AnswerStream(deltas.append) if streamed else None
        record = await orchestrator.run("What is 2+2?", stream=stream)
        await asyncio.sleep(0)
        if stream is not None:
            rest = stream.close(record.answer)
            assert rest is not None  # the stream ends cleanly
            return record, "".join(deltas) + rest
        return record, record.answer

    record, received = asyncio.run(go())
    assert record.status == "ok", record.error
    assert "\ufffd" in record.answer and received == record.answer
    assert record.steps[0].output == "bad \ufffd text"
    if plan == TWO_STEPS:  # the second step saw the replaced text, and its budget counted it
        assert "bad \ufffd text" in second.calls[0][-1]["content"]
    traces.flush()
    stored = traces.get(record.id)
    assert stored is not None and stored.status == "ok" and stored.answer == record.answer
    assert (
        stored.totals.total_cost_usd == pytest.approx(record.totals.total_cost_usd) and stored.totals.total_cost_usd > 0
    )
    traces.close()


def test_the_trace_store_writes_a_record_holding_a_lone_surrogate(tmp_path: Path) -> None:
    """The last line of defence: a record built elsewhere (a conductor of one's own, an error
    message quoting a reply) is stored with U+FFFD, not lost."""
    traces = TraceStore(tmp_path / "traces.sqlite3")
    traces.begin("a" * 32, "question \ud800", started_at="2026-01-01T00:00:00.000Z", pool="p", conductor="c",
                 mode="run", tags=("tag\udc80",), subject="who\ud800")  # fmt: skip
    traces.flush()
    running = traces.list()
    assert [s.status for s in running] == ["running"] and running[0].question == "question \ufffd"
    record = RunRecord(
        id="a" * 32, question="question \ud800", pool="p", workers=("w",), conductor="c", mode="run",
        started_at="2026-01-01T00:00:00.000Z", finished_at="2026-01-01T00:00:01.000Z", status="error",
        answer="", attempts=(), workflows=(), steps=(), totals=Totals.of((), (), 1.0),
        error="ServerError: the reply \ud800 was refused", tags=("tag\udc80",), subject="who\ud800",
    )  # fmt: skip
    traces.write(record)
    traces.flush()
    stored = traces.get("a" * 32)
    assert stored is not None and stored.status == "error"
    assert stored.error == "ServerError: the reply \ufffd was refused" and stored.tags == ("tag\ufffd",)
    assert stored.subject == "who\ufffd" and traces.stats().lost == 0
    assert [h.trace.id for h in traces.search("refused")] == ["a" * 32]
    traces.close()


def test_a_shadowed_upstream_answer_is_read_as_valid_text() -> None:
    from podium.serve.shadow import upstream_answer

    reply = {"choices": [{"message": {"content": "bad \ud800 text"}}], "usage": {"prompt_tokens": 3}}
    assert upstream_answer(json.dumps(reply).encode())[0] == "bad \ufffd text"
    chunks = [{"choices": [{"delta": {"content": piece}}]} for piece in ("a \ud83d", "\ude00 b \udc00")]
    stream = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    assert upstream_answer(stream.encode())[0] == "a \U0001f600 b \ufffd"
