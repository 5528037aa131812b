"""The request cache: the same exact request is answered once, across processes; anything that
changes the request (messages, seed, grammar) is a miss; errors are never stored.
ScriptedWorker is a fake (unit test)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from podium.errors import ServerError
from podium.orchestrator import OrchestratorConfig
from podium.store.request_cache import RequestCache
from podium.testing import ScriptedWorker
from podium.workers.base import Call, Message, Price, WorkerSettings
from podium.workers.cache import CachedWorker

ASK: list[Message] = [{"role": "user", "content": "What is 2 + 2?"}]


def test_hit_replays_the_stored_completion_without_calling(tmp_path: Path) -> None:
    inner = ScriptedWorker("w", reply="4")
    worker = CachedWorker(inner, RequestCache(tmp_path / "c.sqlite3"))
    first = asyncio.run(worker.complete(Call(ASK)))
    second = asyncio.run(worker.complete(Call(ASK)))
    assert len(inner.calls) == 1  # the second call never reached the worker
    assert second.cached and not first.cached
    assert dataclasses.replace(second, cached=False) == first  # text, usage, cost and recorded latency
    # a new process (a new RequestCache on the same file) still hits
    again = CachedWorker(ScriptedWorker("w", reply="changed"), RequestCache(tmp_path / "c.sqlite3"))
    assert asyncio.run(again.complete(Call(ASK))).text == "4"


def test_a_hit_is_priced_at_the_workers_current_prices(tmp_path: Path) -> None:
    """A pool file's new prices apply to cached calls too: the recorded usage, priced again."""
    path = tmp_path / "c.sqlite3"
    first = asyncio.run(
        CachedWorker(ScriptedWorker("w", reply="4", price=Price(1.0, 2.0)), RequestCache(path)).complete(Call(ASK))
    )
    dearer = ScriptedWorker("w", reply="4", price=Price(10.0, 20.0))
    hit = asyncio.run(CachedWorker(dearer, RequestCache(path)).complete(Call(ASK)))
    assert hit.cached and not dearer.calls and hit.usage == first.usage and first.cost_usd > 0
    assert hit.cost_usd == pytest.approx(10 * first.cost_usd) == Price(10.0, 20.0).cost(first.usage)


def test_anything_that_changes_the_request_misses(tmp_path: Path) -> None:
    inner = ScriptedWorker("w", reply=lambda msgs: msgs[-1]["content"][::-1])
    cache = RequestCache(tmp_path / "c.sqlite3")
    worker = CachedWorker(inner, cache)
    asyncio.run(worker.complete(Call(ASK)))
    asyncio.run(worker.complete(Call([{"role": "user", "content": "What is 2 + 3?"}])))
    asyncio.run(worker.complete(Call(ASK, dataclasses.replace(WorkerSettings(), seed=1))))
    asyncio.run(worker.complete(Call(ASK, dataclasses.replace(WorkerSettings(), temperature=0.9))))
    assert len(inner.calls) == 4 and cache.misses == 4 and cache.hits == 0
    # another worker name with the same request is another worker: a miss
    other = CachedWorker(ScriptedWorker("v", reply="x"), cache)
    assert asyncio.run(other.complete(Call(ASK))).text == "x"
    assert len(cache) == 5


def test_errors_are_not_cached(tmp_path: Path) -> None:
    failing = ScriptedWorker("w", error=ServerError("boom", worker="w"))
    cache = RequestCache(tmp_path / "c.sqlite3")
    with pytest.raises(ServerError):
        asyncio.run(CachedWorker(failing, cache).complete(Call(ASK)))
    assert len(cache) == 0
    assert asyncio.run(CachedWorker(ScriptedWorker("w", reply="ok"), cache).complete(Call(ASK))).text == "ok"


def test_unopenable_cache_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "not-a-db.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    from podium.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot open the request cache"):
        RequestCache(path)


def test_cached_rerun_reports_the_original_latency(tmp_path: Path) -> None:
    from podium.orchestrator import Fallback, Orchestrator
    from podium.testing import ScriptedConductor

    cache = RequestCache(tmp_path / "c.sqlite3")
    slow = CachedWorker(ScriptedWorker("w", reply="4", delay_s=0.3), cache)
    plan = 'model_id = [0]\nsubtasks = ["Add."]\naccess_list = [[]]'

    def run() -> float:
        orchestrator = Orchestrator(
            [slow], ScriptedConductor([plan]), Fallback(0, "Answer."), config=OrchestratorConfig(recursion_rounds=0)
        )
        record = asyncio.run(orchestrator.run("What is 2 + 2?"))
        return record.steps[0].latency_s

    first = run()
    second = run()
    assert cache.hits == 1 and first >= 0.3
    # the rerun took ~0 s, yet records the latency the live call had (within the executor's overhead)
    assert first - 0.05 <= second <= first


def test_reruns_from_a_warm_cache_give_the_same_critical_path_to_the_last_digit(tmp_path: Path) -> None:
    """The loop records an outcome matrix again from the cache and must get the same bytes (it
    trains and gates only on a changed matrix). A single-worker conductor's in-process choice
    took measured microseconds, which made every rerun's ``|latency_s`` differ."""
    from podium.conductor.baselines import SingleWorker
    from podium.eval.runner import critical_path_s
    from podium.orchestrator import Fallback, Orchestrator

    cache = RequestCache(tmp_path / "c.sqlite3")
    worker = CachedWorker(ScriptedWorker("w", reply="4", delay_s=0.01), cache)

    def run() -> float:
        orchestrator = Orchestrator(
            [worker], SingleWorker(0), Fallback(0, "Answer."), config=OrchestratorConfig(recursion_rounds=0)
        )
        return critical_path_s(asyncio.run(orchestrator.run("What is 2 + 2?")))

    run()  # live: the executor's own measurement
    warm = [run() for _ in range(3)]
    assert cache.hits == 3 and warm[0] > 0 and warm == [warm[0]] * 3
