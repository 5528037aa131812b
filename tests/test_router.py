"""The learned router on real all-MiniLM-L6-v2 embeddings (the pinned package, offline): it
learns which worker answers which kind of question, trades quality for cost with λ, and
round-trips through its file."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from podium.embed import EMBEDDING_DIM, Embedder
from podium.eval.router import RouterConductor, RouterModel
from podium.testing import ScriptedWorker

MATH = [f"What is {a} plus {b}? Give the sum." for a, b in [(3, 4), (12, 9), (7, 30), (45, 12), (8, 8), (19, 23)]]
MATH += [f"Compute {a} times {b}." for a, b in [(6, 7), (11, 12), (3, 15), (9, 9), (14, 2), (25, 4)]]
HISTORY = [
    "Who was the first emperor of Rome?",
    "Why did the Western Roman Empire fall?",
    "When did the French Revolution begin?",
    "Who signed the Magna Carta and why?",
    "What caused the First World War?",
    "Which dynasty built most of the Great Wall of China?",
    "Who was Queen Victoria's husband?",
    "What was the Hanseatic League?",
    "Who led the Vikings that raided Lindisfarne?",
    "When was the Berlin Wall built?",
    "What was the Treaty of Westphalia?",
    "Who was Charlemagne?",
]
WORKERS = ("calc", "historian")
COST = np.array([0.001, 0.004])  # USD per question: calc is cheaper


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return Embedder(tmp_path_factory.mktemp("emb") / "vectors.sqlite3")


@pytest.fixture(scope="module")
def router(embedder: Embedder) -> RouterModel:
    questions = MATH[:10] + HISTORY[:10]
    # calc is right on arithmetic only, the historian on history only
    scores = np.array([[1.0, 0.0]] * 10 + [[0.0, 1.0]] * 10)
    costs = np.tile(COST, (20, 1))
    return RouterModel.fit(
        WORKERS, embedder.embed(questions), [len(q) for q in questions], scores, costs, embedder=embedder.name
    )


@pytest.mark.slow
def test_embeddings_are_unit_vectors_and_cached(embedder: Embedder) -> None:
    vectors = embedder.embed(["What is 3 plus 4?", "Who was Charlemagne?"])
    assert vectors.shape == (2, EMBEDDING_DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(embedder.embed(["Who was Charlemagne?"])[0], vectors[1])  # served from the cache


@pytest.mark.slow  # the embedder loads MiniLM through torch: seconds
def test_router_sends_held_out_questions_to_the_right_worker(router: RouterModel, embedder: Embedder) -> None:
    held_out = MATH[10:] + HISTORY[10:]  # never seen in fitting
    quality, cost = router.predict(embedder.embed(held_out), [len(q) for q in held_out])
    assert router.choose(quality, cost, lam=0.0).tolist() == [0, 0, 1, 1]
    # cost predictions recover each worker's constant cost
    assert np.allclose(cost, np.tile(COST, (4, 1)), atol=1e-9)
    # with a huge λ (cost dominates) everything goes to the cheaper worker
    assert router.choose(quality, cost, lam=1e6).tolist() == [0, 0, 0, 0]


@pytest.mark.slow  # the router fixture embeds with MiniLM
def test_router_file_round_trip_and_conductor(router: RouterModel, embedder: Embedder, tmp_path: Path) -> None:
    router.save(tmp_path / "router.npz")
    loaded = RouterModel.load(tmp_path / "router.npz")
    assert loaded.workers == WORKERS and np.array_equal(loaded.weights, router.weights)
    # workers are matched by name: a pool in another order still routes history to the historian
    pool = [ScriptedWorker("historian"), ScriptedWorker("somebody-else"), ScriptedWorker("calc")]
    conductor = RouterConductor(loaded, embedder, lam=0.0)
    attempt = asyncio.run(conductor.plan(HISTORY[11], pool, max_steps=5))
    assert attempt.workflow is not None and attempt.workflow.model_id == [0]
    attempt = asyncio.run(conductor.plan(MATH[11], pool, max_steps=5))
    assert attempt.workflow is not None and attempt.workflow.model_id == [2]


def test_a_first_embedding_run_reports_progress_per_chunk(tmp_path: Path) -> None:
    """The replay eval's first run embedded 15,521 questions in silence for 33 minutes; the
    embedder now reports after the cache lookup and after each stored chunk, and nothing once
    everything is cached."""
    import numpy as np

    from podium.embed import _CHUNK, Embedder

    class CountingEncoder:
        """A fake encoder (unit test): a one-hot of each text's length modulo its dimension."""

        name, dim = "fake-encoder", 8

        def encode(self, texts: Sequence[str]) -> np.ndarray:
            return np.eye(self.dim, dtype=np.float32)[[len(t) % self.dim for t in texts]]

    embedder = Embedder(tmp_path / "v.sqlite3", encoder=CountingEncoder())
    texts = [f"question {i}" for i in range(2 * _CHUNK + 76)] + ["question 0"]  # one repeat
    calls: list[tuple[int, int]] = []
    vectors = embedder.embed(texts, on_progress=lambda done, todo: calls.append((done, todo)))
    distinct = 2 * _CHUNK + 76
    assert calls == [(0, distinct), (_CHUNK, distinct), (2 * _CHUNK, distinct), (distinct, distinct)]
    assert vectors.shape == (len(texts), 8) and (vectors[0] == vectors[-1]).all()
    again: list[tuple[int, int]] = []
    Embedder(tmp_path / "v.sqlite3", encoder=CountingEncoder()).embed(
        texts, on_progress=lambda d, t: again.append((d, t))
    )
    assert again == []  # all cached on disk


def test_the_router_trades_quality_for_cost_as_the_training_reward_does() -> None:
    """One rule for λ: the router picks the worker of highest expected training reward
    (0.5 + 0.5·q − λ·c), so the strong worker (q 0.9 at $0.010) loses to the cheap one (q 0.5 at
    $0.001) above λ = 0.5 · 0.4 / 0.009 = 22.2 per USD, the calibrated sweep's break-even point."""
    from podium.eval.router_fit import calibrated_lambdas
    from podium.train.reward import workflow_reward

    model = RouterModel(("strong", "cheap"), np.zeros((2, 1)), np.zeros(2), np.zeros((2, 2)), embedder="none")
    quality, cost = np.array([[0.9, 0.5]]), np.array([[0.010, 0.001]])
    lambdas = calibrated_lambdas(quality, cost)
    break_even = 0.5 * 0.4 / 0.009
    assert lambdas[1] == pytest.approx(break_even)
    assert model.choose(quality, cost, lam=break_even * 0.99).tolist() == [0]
    assert model.choose(quality, cost, lam=break_even * 1.01).tolist() == [1]
    reward = workflow_reward(quality[0], cost[0], lam=break_even)
    assert reward[0] == pytest.approx(reward[1])
