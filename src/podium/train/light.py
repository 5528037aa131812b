"""Training the light conductor (:mod:`podium.conductor.light`) with CMA-ES on a replay pool.

Offline only: the training signal is an outcome matrix (recorded results of real models; a
team's own matrix can come from ``podium eval --methods single`` on its task set). A rollout is
the policy's greedy workflow for a question, scored as replay scores it (:mod:`podium.eval.
replay`): the final step's worker's recorded score, every step's recorded cost. The reward is the
paper's (Nielsen et al. 2026 §3.1) — 0.5 for a parsed workflow plus 0.5 × score (the light
policy always writes a valid workflow) — minus λ × cost (USD):

    reward = 0.5 + 0.5 · score − λ · cost − μ · latency

where latency (seconds) is the workflow's critical path over the recorded request latencies
(solve steps start at once, verify waits for the step before it, aggregate for all before it),
and needs a matrix with ``|latency_s`` columns when μ > 0.

CMA-ES (Hansen's ``cma`` package) maximises the mean reward over the training questions; a
held-out part of the training split (``validation_fraction``) picks the generation kept, so the
result is not fitted to the questions it is judged on.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from podium.conductor.light import ROLES, LightPolicy, feature_count, rollout
from podium.embed import Embedder
from podium.errors import ConfigError
from podium.eval.replay import OutcomeMatrix
from podium.eval.tasks import has_tag
from podium.train.reward import workflow_reward

if TYPE_CHECKING:
    from podium.registry import Version

__all__ = [
    "MIN_QUESTIONS",
    "Generation",
    "LightTrainConfig",
    "OnGeneration",
    "TrainResult",
    "critical_path",
    "replay_reward",
    "require_cma",
    "train_light",
    "train_light_version",
]

MIN_QUESTIONS = 20
"""The fewest training questions :func:`train_light` accepts (a fifth of them validate)."""

_Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LightTrainConfig:
    """Hyperparameters of a light-conductor run.

    Attributes:
        dims: PCA dimensions of the question embedding.
        max_steps: workflow length limit.
        lam: λ, the cost penalty (1/USD).
        mu: μ, the latency penalty (1/second).
        generations: CMA-ES generations.
        popsize: candidates per generation (None: CMA-ES's default, 4 + 3 ln n).
        sigma0: initial step size.
        validation_fraction: share of the training split held out to pick the generation kept.
        seed: shuffling and CMA-ES seed.
        split: the matrix split trained on.
    """

    dims: int = 16
    max_steps: int = 3
    lam: float = 0.0
    mu: float = 0.0
    generations: int = 60
    popsize: int | None = None
    sigma0: float = 0.5
    validation_fraction: float = 0.2
    seed: int = 0
    split: str = "train"


@dataclass(frozen=True)
class Generation:
    """One generation's figures: rewards are means over questions; quality in [0, 1];
    cost USD per request; steps per workflow."""

    generation: int
    best_reward: float
    mean_reward: float
    validation_reward: float
    validation_quality: float
    validation_cost: float
    validation_steps: float
    seconds: float


@dataclass
class TrainResult:
    """The trained policy, its history, and what it was trained on."""

    policy: LightPolicy
    history: list[Generation]
    best_generation: int
    config: LightTrainConfig
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "best_generation": self.best_generation,
            "history": [asdict(g) for g in self.history],
            "data": self.data,
        }


def replay_reward(
    workers: npt.NDArray[np.intp],
    scores: _Array,
    costs: _Array,
    lam: float,
    *,
    roles: npt.NDArray[np.intp] | None = None,
    latencies: _Array | None = None,
    mu: float = 0.0,
) -> tuple[float, float, float, float]:
    """Mean (reward, quality, cost USD, steps) of decoded workflows (``workers`` (n, T), −1 after
    STOP) on recorded ``scores`` and ``costs`` (n, m); see the module docstring. With μ > 0,
    ``roles`` (n, T) and recorded ``latencies`` (n, m, seconds) give each workflow's critical
    path, and the reward pays μ per second of it."""
    rows = np.arange(len(workers))
    taken = workers >= 0
    steps = taken.sum(axis=1)
    final = workers[rows, steps - 1]
    quality = scores[rows, final]
    cost = np.where(taken, costs[rows[:, None], workers.clip(0)], 0.0).sum(axis=1)
    reward = workflow_reward(quality, cost, lam=lam)
    if mu:
        if roles is None or latencies is None:
            raise ValueError("a latency penalty needs the plans' roles and the recorded latencies")
        reward = reward - mu * critical_path(workers, roles, latencies)
    return float(reward.mean()), float(quality.mean()), float(cost.mean()), float(steps.mean())


def critical_path(workers: npt.NDArray[np.intp], roles: npt.NDArray[np.intp], latencies: _Array) -> _Array:
    """Seconds, per workflow: when its last-finishing step finishes (the executor waits for every
    step, as :func:`podium.eval.runner.critical_path_s` reports) if every step starts as soon as the
    steps it reads have finished (a solve step reads none, verify the step before it, aggregate
    all before it), each taking its worker's recorded latency. Shapes (n, T), (n, T), (n, m) → (n,)."""
    n, horizon = workers.shape
    rows = np.arange(n)
    finish = np.zeros((n, horizon))
    for t in range(horizon):
        taken = workers[:, t] >= 0
        role = roles[:, t]
        before = finish[:, :t]
        start = np.zeros(n)
        if t:
            start = np.where(role == ROLES.index("verify"), finish[:, t - 1], start)
            start = np.where(role == ROLES.index("aggregate"), before.max(axis=1), start)
        finish[:, t] = np.where(taken, start + latencies[rows, workers[:, t].clip(0)], 0.0)
    end: _Array = finish.max(axis=1)  # the executor waits for every step, not only the answering one
    return end


OnGeneration = Callable[[Generation], None]


def require_cma() -> None:
    """Raises ConfigError with the install command when CMA-ES (``cma``, the train extra) is
    missing: checked before any work starts."""
    import importlib.util

    if importlib.util.find_spec("cma") is None:
        from podium.extras import install_command

        raise ConfigError(f"training a light conductor needs cma: {install_command('train')} (or cma==4.5.0)")


def train_light(
    matrix: OutcomeMatrix,
    embedder: Embedder,
    config: LightTrainConfig,
    *,
    tags: Sequence[str] = (),
    on_generation: OnGeneration | None = None,
) -> TrainResult:
    """Train a light conductor on ``matrix``'s ``config.split`` (see the module docstring).

    Raises ConfigError for too few questions (< :data:`MIN_QUESTIONS`), a split with none, or a
    bad configuration; each message names the fix."""
    require_cma()
    import cma

    if config.mu:
        matrix.require_latency("a latency penalty (μ > 0)")
    if not 0.0 < config.validation_fraction < 1.0:
        raise ConfigError("validation_fraction must be between 0 and 1")
    splits = Counter(row.split for row in matrix.rows.values())
    if not splits.get(config.split):
        have = ", ".join(f"{n} in {split!r}" for split, n in sorted(splits.items()))
        raise ConfigError(
            f"{matrix.path}: no question in split {config.split!r} to train on (it has {have}). Split the matrix "
            "when you record it: podium eval ... --matrix FILE --matrix-split 0.8 --seed 0 (or from the stored "
            "report: podium eval --from DIR/eval.json --matrix FILE --matrix-split 0.8), or train on a split it "
            "has with --split"
        )
    tasks = [t for t in matrix.tasks(config.split) if not tags or has_tag(t, tags)]
    tasks.sort(key=lambda t: t.id)  # the fit/validation split and the result do not depend on row order
    if len(tasks) < MIN_QUESTIONS:
        where = f"split {config.split!r}" + (f" with tag(s) {', '.join(tags)}" if tags else "")
        raise ConfigError(
            f"{len(tasks)} training questions in {where} of {matrix.path}; the light conductor needs at least "
            f"{MIN_QUESTIONS}. Record more: podium eval --tasks MORE.jsonl --methods single --matrix FILE adds "
            "them to the file; or give training a larger share: --matrix-split 0.9 (docs/training.md, "
            "'How many questions')"
        )
    order = np.random.default_rng(config.seed).permutation(len(tasks))
    n_val = max(1, int(len(tasks) * config.validation_fraction))
    val_idx, fit_idx = order[:n_val], order[n_val:]
    vectors = np.asarray(embedder.embed([t.question for t in tasks]), dtype=np.float64)
    scores = np.array([[matrix.outcome(t.id, m).score for m in matrix.models] for t in tasks])
    costs = np.array([[matrix.outcome(t.id, m).cost_usd for m in matrix.models] for t in tasks])
    latencies = np.array([[matrix.outcome(t.id, m).latency_s for m in matrix.models] for t in tasks])
    mean = vectors[fit_idx].mean(axis=0)
    dims = min(config.dims, len(fit_idx) - 1, vectors.shape[1])
    components = np.linalg.svd(vectors[fit_idx] - mean, full_matrices=False)[2][:dims]
    projected = (vectors - mean) @ components.T
    projected /= projected[fit_idx].std(axis=0) + 1e-12  # unit scale: one σ0 suits every feature
    components = components / (((vectors[fit_idx] - mean) @ components.T).std(axis=0)[:, None] + 1e-12)
    m = len(matrix.models)
    shape = (m * len(ROLES) + 1, feature_count(dims, m, config.max_steps))

    def evaluate(flat: _Array, idx: npt.NDArray[np.intp]) -> tuple[float, float, float, float]:
        workers, roles = rollout(flat.reshape(shape), projected[idx], m, config.max_steps)
        return replay_reward(
            workers, scores[idx], costs[idx], config.lam, roles=roles, latencies=latencies[idx], mu=config.mu
        )

    options: dict[str, Any] = {"seed": config.seed + 1, "verbose": -9, "maxiter": config.generations}
    if config.popsize:
        options["popsize"] = config.popsize
    es = cma.CMAEvolutionStrategy(np.zeros(shape[0] * shape[1]), config.sigma0, options)
    history: list[Generation] = []
    best = (-np.inf, np.zeros(shape[0] * shape[1]), 0)
    for generation in range(config.generations):
        started = time.perf_counter()
        candidates = es.ask()
        rewards = [evaluate(np.asarray(c), fit_idx)[0] for c in candidates]
        es.tell(candidates, [-r for r in rewards])
        centre = np.asarray(es.mean)
        v_reward, v_quality, v_cost, v_steps = evaluate(centre, val_idx)
        if v_reward > best[0]:
            best = (v_reward, centre.copy(), generation)
        record = Generation(
            generation, max(rewards), float(np.mean(rewards)), v_reward, v_quality, v_cost, v_steps,
            time.perf_counter() - started,
        )  # fmt: skip
        history.append(record)
        if on_generation is not None:
            on_generation(record)
    policy = LightPolicy(matrix.models, mean, components, best[1].reshape(shape), config.max_steps, embedder.name)
    data = {
        "matrix": matrix.path.name,
        "split": config.split,
        "tags": list(tags),
        "questions": len(tasks),
        "fit": len(fit_idx),
        "validation": len(val_idx),
    }
    if config.lam > 0 and not np.any(costs[fit_idx]):
        data["warning"] = (
            f"every cost in the training rows is $0 (the workers have no price in the pool file), so --lam "
            f"{config.lam:g} weighs nothing: give each worker a price (docs/pool-file.md) and record again"
        )
    return TrainResult(policy, history, best[2], config, data)


def train_light_version(
    replay: Path,
    name: str,
    config: LightTrainConfig,
    *,
    embedder: str,
    tags: Sequence[str] = (),
    on_generation: OnGeneration | None = None,
) -> tuple[Version, TrainResult, dict[str, Any]]:
    """Train a light conductor on the outcome matrix ``replay`` (``podium train --policy light``)
    and store it as a new version of ``name`` in the registry, with its learning curve.

    Args:
        replay: the outcome matrix (CSV).
        name: the registry name; each call adds a version.
        config: the training settings (``dims`` at least 1).
        embedder: the question encoder (:func:`podium.embed.encoder_choice`: ``minilm`` or an
            embedded model id), recorded in ``train.json``.
        tags: train only on questions with one of these tags (empty: all).
        on_generation: called after each CMA-ES generation.

    Returns (the version, the result, its ``train.json`` record, whose ``data`` names the matrix
    file's bytes it was trained on, ``matrix_sha256``, and the ``embedder``). Raises ConfigError
    for bad settings or too few questions, before any version is created."""
    import hashlib

    from podium.embed import encoder_choice
    from podium.eval.session import EvalSpec
    from podium.registry import Registry, TrainingInfo

    if config.dims < 1:  # the plans policy takes 0 (no embedding); the light policy needs one
        raise ConfigError(f"--dims must be at least 1 for the light policy, got {config.dims}")
    matrix = OutcomeMatrix.load(replay)
    questions = Embedder(EvalSpec().embeddings, encoder=encoder_choice(embedder))
    result = train_light(matrix, questions, config, tags=tags, on_generation=on_generation)
    result.data["matrix_sha256"] = hashlib.sha256(Path(replay).read_bytes()).hexdigest()
    result.data["embedder"] = embedder
    version = Registry().create(name)
    result.policy.save(version.policy_path)
    info = TrainingInfo.from_json({"policy": "light", **result.to_json()})
    version.write_training(info)
    record = info.to_json()
    if result.history:
        _curve(version, record)
    return version, result, record


def _curve(version: Version, record: dict[str, Any]) -> None:
    """The version's learning curve, ``learning-curve.png``: fit and validation reward per generation."""
    from podium.eval.plot import learning_curve_plot

    history = record["history"]
    learning_curve_plot(
        version.path / "learning-curve.png",
        [g["generation"] for g in history],
        {
            "best candidate (fit)": [g["best_reward"] for g in history],
            "population mean (fit)": [g["mean_reward"] for g in history],
            "distribution mean (validation)": [g["validation_reward"] for g in history],
        },
        xlabel="CMA-ES generation",
        title=f"{version.ref}: λ = {record['config']['lam']:g}",
    )
