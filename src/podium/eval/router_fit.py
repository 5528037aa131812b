"""The learned-router baseline of an evaluation, fitted on data the evaluation does not score:
a live pool's on a report of ``podium eval --methods single`` over other questions
(``--router-data``), a replay's on the matrix's other split; one method per λ, the λ values
calibrated over the router's predictions (RouteLLM's quantile thresholds)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from podium.errors import ConfigError
from podium.eval.runner import Method
from podium.eval.tasks import Task
from podium.named_conductors import shared_embedder

__all__ = ["SWEEP_POINTS", "OnStage", "RouterSpec", "calibrated_lambdas", "fit_router", "live_router_methods"]

OnStage = Callable[[str], None]
"""Receives one line of progress (as :mod:`podium.eval.session`'s ``on_stage``)."""


class RouterSpec(Protocol):
    """What fitting the router reads of an evaluation's settings
    (:class:`~podium.eval.session.EvalSpec` has these attributes).

    Attributes:
        router_data: a live pool's training data, an earlier ``eval.json`` (None: none).
        embeddings: the embedding cache file (None: in memory).
        lambdas: the λ sweep, 1/USD (None: calibrated, :func:`calibrated_lambdas`).
    """

    @property
    def router_data(self) -> Path | None: ...

    @property
    def embeddings(self) -> Path | None: ...

    @property
    def lambdas(self) -> Sequence[float] | None: ...


SWEEP_POINTS = 21
"""Operating points of a calibrated λ sweep."""


def live_router_methods(
    spec: RouterSpec, workers: Sequence[str], tasks: Sequence[Task], on_stage: OnStage | None = None
) -> list[Method]:
    """Router methods for a live pool, fitted on ``spec.router_data``
    (:class:`~podium.eval.session.EvalSpec`). Raises ConfigError without usable training data."""
    from podium.eval.report import load_report

    if spec.router_data is None:
        raise ConfigError(
            "the live router needs training data: --router-data EVAL.json, a report of "
            "'--methods single' on other questions (e.g. the train split)"
        )
    report = load_report(spec.router_data)
    rows: dict[str, dict[str, Any]] = {}
    for worker in workers:
        results = report.get("results", {}).get(f"single:{worker}")
        if not results:
            raise ConfigError(
                f"{spec.router_data} has no per-request results of single:{worker}; run "
                "'podium eval --methods single' on training questions (without --summary-only)"
            )
        for r in results:
            rows.setdefault(r["task_id"], {"question": r.get("question", "")})[worker] = (r["score"], r["cost_usd"])
    evaluated = {t.id for t in tasks}
    usable = [
        (tid, row) for tid, row in rows.items() if tid not in evaluated and row["question"] and len(row) > len(workers)
    ]
    if len(usable) < 10:
        raise ConfigError(
            f"{spec.router_data}: {len(usable)} usable training questions (need ≥ 10 answered by every worker, "
            "none of them among the evaluated tasks)"
        )
    scores = np.array([[row[w][0] for w in workers] for _, row in usable])
    costs = np.array([[row[w][1] for w in workers] for _, row in usable])
    questions = [row["question"] for _, row in usable]
    return fit_router(spec, workers, questions, scores, costs, tasks, on_stage=on_stage)


def _embedding_lines(on_stage: OnStage | None) -> Callable[[int, int], None] | None:
    """Progress lines of the router's embedding step (what a first run spends most time on):
    one when it starts, then after each chunk, with the time left."""
    if on_stage is None:
        return None
    started = time.monotonic()

    def progress(done: int, todo: int) -> None:
        if done == 0:
            on_stage(f"router: embedding {todo:,} questions not yet cached (cached by text: once per machine)")
            return
        elapsed = time.monotonic() - started
        left = elapsed / done * (todo - done)
        on_stage(f"router: embedded {done:,}/{todo:,} · {elapsed:.0f} s elapsed, about {left:.0f} s left")

    return progress


def fit_router(
    spec: RouterSpec,
    workers: Sequence[str],
    questions: Sequence[str],
    scores: Any,
    costs: Any,
    tasks: Sequence[Task],
    *,
    on_stage: OnStage | None = None,
) -> list[Method]:
    """Fit the learned router on (questions, scores, costs) and make one method per λ."""
    from podium.eval.router import RouterConductor, RouterModel

    embedder = shared_embedder(spec.embeddings)
    # the training questions and the requests' in one batch: cache hits per request later
    everything = embedder.embed([*questions, *(t.question for t in tasks)], on_progress=_embedding_lines(on_stage))
    vectors = everything[: len(questions)]
    lengths = [len(q) for q in questions]
    model = RouterModel.fit(workers, vectors, lengths, scores, costs, embedder=embedder.name)
    lambdas = spec.lambdas
    if lambdas is None:
        quality, cost = model.predict(vectors, lengths)
        lambdas = calibrated_lambdas(quality, cost)
    return [
        Method(f"router(λ={lam:g})", RouterConductor(model, embedder, lam), group="router", param=lam)
        for lam in lambdas
    ]


def calibrated_lambdas(quality: Any, cost: Any, points: int = SWEEP_POINTS) -> tuple[float, ...]:
    """λ values (1/USD) spreading the router's operating points evenly over the calibration
    questions, like RouteLLM's thresholds calibrated by quantile: for each question the λ at
    which the router stops choosing its best-predicted worker for the cheapest one is
    ``0.5·(q_best − q_cheap) / (c_best − c_cheap)`` (the reward weighs quality by 0.5); the
    sweep is 0, the 0 %, 5 %, … 100 % quantiles
    of those break-even values (``points`` = 21), and ten times the largest (always the cheapest).
    ``quality`` and ``cost`` are the router's predictions, shape (n, m)."""
    q, c = np.asarray(quality), np.asarray(cost)
    rows = np.arange(len(q))
    best, cheap = q.argmax(axis=1), c.argmin(axis=1)
    dq, dc = q[rows, best] - q[rows, cheap], c[rows, best] - c[rows, cheap]
    usable = (dq > 0) & (dc > 0)
    if not usable.any():
        return (0.0,)
    breaks = 0.5 * dq[usable] / dc[usable]
    inner = np.quantile(breaks, np.linspace(0.0, 1.0, points))
    return (0.0, *sorted({float(x) for x in inner}), float(breaks.max() * 10))
