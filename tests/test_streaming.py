"""Answer streaming: only the answering step's text reaches the caller, and never twice.

The workers here are fakes (podium.testing.ScriptedWorker reports its reply word by word, as a
streaming backend would); the real backends are covered in the server tests.
"""

from __future__ import annotations

import asyncio
import threading

from podium.errors import ServerError
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.streaming import AnswerStream
from podium.testing import ScriptedConductor, ScriptedWorker

PLAN = 'model_id = [0, 1]\nsubtasks = ["Draft.", "Finish."]\naccess_list = [[], "all"]'
REVIEW = 'model_id = [1]\nsubtasks = ["Improve."]\naccess_list = ["all"]'


def run_streamed(orch: Orchestrator) -> tuple[list[str], str, str | None]:
    async def go() -> tuple[list[str], str, str | None]:
        deltas: list[str] = []
        stream = AnswerStream(deltas.append)
        record = await orch.run("Q?", stream=stream)
        await asyncio.sleep(0)  # deliver anything a worker thread scheduled
        return deltas, record.answer, stream.close(record.answer)

    return asyncio.run(go())


def test_only_the_last_step_streams_word_by_word() -> None:
    orch = Orchestrator(
        [ScriptedWorker("w0", reply="secret draft text"), ScriptedWorker("w1", reply="the final answer is 42")],
        ScriptedConductor([PLAN]),
        Fallback(0, "Answer."),
        config=OrchestratorConfig(recursion_rounds=0),
    )
    deltas, answer, rest = run_streamed(orch)
    assert "".join(deltas) == answer == "the final answer is 42"
    assert len(deltas) == 5  # one per word: it streamed, not one block at the end
    assert not any("secret" in d for d in deltas)
    assert rest == ""  # nothing left to send


def test_with_review_rounds_nothing_streams_live_and_close_sends_the_answer() -> None:
    orch = Orchestrator(
        [ScriptedWorker("w0", reply="draft"), ScriptedWorker("w1", reply="better answer")],
        ScriptedConductor([PLAN], reviews=[REVIEW]),
        Fallback(0, "Answer."),
        config=OrchestratorConfig(recursion_rounds=1),
    )
    deltas, answer, rest = run_streamed(orch)
    assert deltas == [] and rest == answer == "better answer"


def test_a_conductor_that_keeps_its_answer_streams_live_despite_review_rounds() -> None:
    """The default serve model (a plan conductor, one review round for its cascades) sent every
    answer whole at the end, a first user found: a conductor that keeps the answer of the
    workflow it wrote (a single worker; a plan that is no cascade) now streams it live."""
    from podium.conductor.baselines import SingleWorker

    orch = Orchestrator(
        [ScriptedWorker("w0", reply="the final answer is 42")],
        SingleWorker(0),
        Fallback(0, "Answer."),
        config=OrchestratorConfig(recursion_rounds=1),
    )
    deltas, answer, rest = run_streamed(orch)
    assert "".join(deltas) == answer == "the final answer is 42" and len(deltas) == 5 and rest == ""


def test_the_fallback_streams_when_the_workflow_failed_before_streaming() -> None:
    orch = Orchestrator(
        [
            ScriptedWorker("w0", reply="fallback answer here"),
            ScriptedWorker("w1", error=ServerError("down", worker="w1")),
        ],
        ScriptedConductor(['model_id = [1]\nsubtasks = ["Solve."]\naccess_list = [[]]']),
        Fallback(0, "Answer."),
        config=OrchestratorConfig(recursion_rounds=0),
    )
    deltas, answer, rest = run_streamed(orch)
    assert answer == "fallback answer here" and "".join(deltas) == answer and rest == ""


def test_a_stream_never_sends_a_text_that_does_not_extend_what_it_sent() -> None:
    async def go() -> None:
        deltas: list[str] = []
        stream = AnswerStream(deltas.append)
        stream.update("The answer")
        stream.update("The answer")  # a retry regenerating the same text sends nothing twice
        stream.update("The answer is")
        stream.update("A different")  # a retry that wrote something else: stop sending
        stream.update("A different text")
        assert deltas == ["The answer", " is"] and stream.diverged
        assert stream.close("A different text") is None  # the caller must be told
        assert stream.close("The answer is 7") == " 7"

    asyncio.run(go())


def test_updates_from_a_worker_thread_arrive_on_the_loop_in_order() -> None:
    async def go() -> list[tuple[str, bool]]:
        got: list[tuple[str, bool]] = []
        loop_thread = threading.current_thread()
        stream = AnswerStream(lambda d: got.append((d, threading.current_thread() is loop_thread)))

        def generate() -> None:
            for k in range(1, 6):
                stream.update("x" * k)

        await asyncio.to_thread(generate)
        await asyncio.sleep(0.01)
        return got

    got = asyncio.run(go())
    assert [d for d, _ in got] == ["x"] * 5 and all(on_loop for _, on_loop in got)


def test_what_is_sent_is_always_a_prefix_of_the_stripped_answer() -> None:
    """Backends stream raw text; the answer is the step's text stripped. Leading whitespace is
    never sent and trailing whitespace waits for the text after it, so the stream always ends
    cleanly (close returns the rest, never None) whatever whitespace the chunks carry."""
    patterns = [
        ["The", " answer", " is", " 42.", "\n"],
        [" The", " answer", " is", " 42."],
        ["\n\n", "  The", " answer\n", "\n", "is 42.", " ", "\t\n "],
        ["The ", "answer ", "is ", "42. "],  # serve/fake_upstream.py's word + " "
        ["  ", " \u3000", "\u00a0"],  # nothing but (Unicode) whitespace: the answer is empty
        ["a\u2003", "\u2003b\u00a0", "\u00a0"],
    ]

    async def go(chunks: list[str]) -> tuple[str, str | None, str]:
        deltas: list[str] = []
        stream = AnswerStream(deltas.append)
        so_far = ""
        for chunk in chunks:
            so_far += chunk
            stream.update(so_far)
            assert so_far.strip().startswith("".join(deltas))
        answer = so_far.strip()  # what the executor makes of the step's text
        return "".join(deltas), stream.close(answer), answer

    for chunks in patterns:
        sent, rest, answer = asyncio.run(go(chunks))
        assert rest is not None, chunks
        assert sent + rest == answer, chunks
        assert not sent[:1].isspace() and not sent[-1:].isspace(), chunks


def test_a_streamed_answer_with_surrounding_whitespace_ends_cleanly() -> None:
    orch = Orchestrator(
        [ScriptedWorker("w0", reply="draft"), ScriptedWorker("w1", reply="  the final answer is 42 \n")],
        ScriptedConductor([PLAN]),
        Fallback(0, "Answer."),
        config=OrchestratorConfig(recursion_rounds=0),
    )
    deltas, answer, rest = run_streamed(orch)
    assert answer == "the final answer is 42" and rest == "" and "".join(deltas) == answer
