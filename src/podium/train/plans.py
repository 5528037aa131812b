"""Training the plan conductor (:mod:`podium.conductor.plans`) on a workflow bank.

The bank records, for every training question, what every plan scores, costs and takes
(:func:`podium.eval.plans.plan_outcomes`), so the policy is trained with *full information*: the
objective is the exact expected reward of the softmax policy over plans,

    J(W) = mean_q Σ_p π_W(p | q) · r(q, p) − α ‖W‖²,   π_W(· | q) = softmax([x_q, 1] Wᵀ / τ),
    r(q, p) = 0.5 + 0.5 · score − λ · cost − μ · latency   (:mod:`podium.train.reward`, the reward
                                                           every conductor is trained on; USD, s)

maximised by gradient ascent (Adam) from W = 0 — a policy gradient with the expectation computed
exactly instead of sampled, so training is deterministic given its data. An **ensemble** of heads
is trained on bootstrap resamples of the questions and their scores averaged (bagging), which
makes the chosen plans far less sensitive to which questions happened to be in the training set;
``seed`` picks the resamples. With ``dims = 0`` the head has only the constant feature: the best
single plan for every question.

With ``head = "value"`` the head is instead the learned router's form (RouterBench/RouteLLM): per
plan an L2-regularised logistic regression of P(correct) on the projection
(:func:`podium.eval.router.soft_logistic`, scikit-learn, soft labels for fractional scores), and
the policy picks the plan of highest **predicted reward**, 0.5 · P + 0.5 − λ · mean cost − μ · mean
latency (the plan's training means). Its projection is not standardised, so the penalty acts as
on the embedding itself, as the router's does; ``l2`` = α gives scikit-learn's C = 1 / (2 α n)
(the router's C = 1 is α = 1 / (2n)). It is fitted once, whatever λ: λ only moves the offsets.

With ``clusters = k`` the policy is a **cluster table** instead: k-means (scikit-learn, seeded)
groups the training questions' embeddings into k clusters, and each cluster gets the plan of
highest mean training reward among its questions (ties: the cheaper on those questions) — the
exact maximiser of J over tables, with no gradient, no projection and no ensemble. ``clusters =
AUTO`` picks k in 2..8 by the silhouette of the clustering (Rousseeuw 1987), from the training
questions' embeddings alone, before any outcome is looked at: the number of natural groups of
questions, not the number that fits the outcomes best.

A cluster table may instead be trained to a **cost cap** (``max_cost_ratio = R``): the table of
highest total training reward whose mean training cost is at most R × the strongest one-column
plan's (the best single worker's) — an operating point set by budget rather than by λ. λ only
reaches the tables on the upper convex hull of cost vs quality; a cap reaches every table on the
Pareto front, e.g. a cheaper code plan that no λ picks because a dearer one buys more per dollar.
The choice is exact: a multiple-choice knapsack over clusters, solved by merging the clusters'
Pareto fronts of (cost, reward) one cluster at a time (:func:`capped_choice`).

Every policy that reads the question also keeps the training questions' embeddings and a
**radius**: the largest cosine distance of a training question to its nearest other one. A live
question farther than that from all of them is unlike anything the outcomes were recorded on,
so the policy gives it the **fallback**, the one-step plain answer (``solve``) that scored best
on the training questions, instead of extrapolating a cluster's or a head's choice — the vote of a
math cascade over a poem's lines, say.

:func:`lambda_sweep` spreads λ over the plans' cost range: the break-even λ between neighbouring
plans on the upper hull of mean cost vs mean score, so every operating point of the sweep is a
different trade-off rather than the same cheapest plan.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from podium._args import AUTO_CLUSTERS
from podium.conductor.compose import Column
from podium.conductor.plans import PlanPolicy
from podium.errors import ConfigError
from podium.eval.plans import PlanOutcomes
from podium.train.reward import workflow_reward

__all__ = [
    "AUTO",
    "HEADS",
    "PlanTrainConfig",
    "PlanTrainResult",
    "capped_choice",
    "cluster_count",
    "lambda_sweep",
    "reward",
    "single_plans",
    "strongest_single",
    "train_plans",
]

_Array = npt.NDArray[np.float64]

AUTO = AUTO_CLUSTERS
"""``PlanTrainConfig.clusters`` value: pick the number of clusters by silhouette."""

HEADS = ("policy", "value")
"""``PlanTrainConfig.head`` values."""


@dataclass(frozen=True)
class PlanTrainConfig:
    """How to train.

    Attributes:
        lam: cost penalty λ, 1/USD. mu: latency penalty μ, 1/second.
        dims: PCA dimensions of the question embedding (0: a constant policy).
        ensemble: heads trained on bootstrap resamples (1: one head on all questions).
        steps: gradient steps per head. learning_rate: Adam's step size.
        l2: α, the weight penalty. temperature: τ of the training softmax.
        seed: picks the bootstrap resamples (and the k-means start).
        clusters: 0 for the linear head; k ≥ 1 for a cluster table of k clusters (``dims``,
            ``ensemble``, ``steps``, ``learning_rate``, ``l2``, ``temperature`` then unused);
            :data:`AUTO` (−1) to pick k by silhouette.
        max_cost_ratio: None, or for a cluster table the cost cap R > 0: the table of highest
            training reward whose mean training cost is ≤ R × the strongest one-column plan's
            (module docstring).
        head: ``"policy"`` (the softmax policy, default) or ``"value"`` (per-plan logistic
            regressions of P(correct), module docstring; ``steps``, ``learning_rate`` and
            ``temperature`` then unused; needs ``dims`` ≥ 1 and ``l2`` > 0).
    """

    lam: float = 0.0
    mu: float = 0.0
    dims: int = 8
    ensemble: int = 5
    steps: int = 400
    learning_rate: float = 0.05
    l2: float = 1e-3
    temperature: float = 0.05
    seed: int = 0
    clusters: int = 0
    max_cost_ratio: float | None = None
    head: str = "policy"

    def __post_init__(self) -> None:
        for name in ("lam", "mu", "l2"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{name} must be ≥ 0, got {getattr(self, name)!r}")
        if self.clusters < AUTO:
            raise ConfigError(f"clusters must be ≥ 0 (or AUTO), got {self.clusters}")
        if self.dims < 0 or self.ensemble < 1 or self.steps < 0 or not self.temperature > 0:
            raise ConfigError("dims ≥ 0, ensemble ≥ 1, steps ≥ 0 and temperature > 0 are required")
        if self.head not in HEADS:
            raise ConfigError(f"head must be one of {', '.join(HEADS)}, got {self.head!r}")
        if self.head == "value" and (self.clusters or not self.dims or not self.l2 > 0):
            raise ConfigError("the value head reads the projection (dims ≥ 1, no clusters) with an L2 penalty > 0")
        if self.max_cost_ratio is not None:
            if not self.max_cost_ratio > 0:
                raise ConfigError(f"the cost cap must be a ratio > 0, got {self.max_cost_ratio!r}")
            if not self.clusters:
                raise ConfigError("a cost cap trains a cluster table: give clusters (a number, or AUTO) too")


@dataclass(frozen=True)
class PlanTrainResult:
    """The trained policy and its learning curve (mean training reward of the greedy ensemble
    policy after each tenth of the steps, per head)."""

    policy: PlanPolicy
    curve: list[tuple[int, float]] = field(default_factory=list)


def reward(outcomes: PlanOutcomes, lam: float, mu: float) -> _Array:
    """r(q, p), shape (questions, plans): :func:`podium.train.reward.workflow_reward` of each
    plan's recorded score, cost and latency (every plan is a valid workflow)."""
    score, cost, latency = (np.asarray(a, dtype=np.float64) for a in (outcomes.score, outcomes.cost, outcomes.latency))
    return workflow_reward(score, cost, latency, lam=lam, mu=mu)


def train_plans(
    outcomes: PlanOutcomes,
    vectors: npt.NDArray[np.floating],
    columns: dict[str, Column],
    embedder: str,
    config: PlanTrainConfig,
    on_step: Callable[[int, float], None] | None = None,
) -> PlanTrainResult:
    """Train a plan policy on ``outcomes`` (training questions only) and their embeddings.

    Args:
        outcomes: per question and plan, from :func:`podium.eval.plans.plan_outcomes`.
        vectors: the questions' embeddings, shape (questions, e), in ``outcomes.ids`` order.
        columns: the bank columns the plans use (stored in the policy).
        embedder: the embedding model's id (stored; checked at load).
        config: see :class:`PlanTrainConfig`.
        on_step: called with (step, mean training reward) as training goes.

    Raises ConfigError for fewer than 2 questions or mismatched shapes.
    """
    v = np.asarray(vectors, dtype=np.float64)
    n = len(outcomes.ids)
    if n < 2 or v.shape[0] != n:
        raise ConfigError(f"training needs at least 2 questions with an embedding each (got {n}, {v.shape[0]})")
    r = reward(outcomes, config.lam, config.mu)
    if config.clusters:
        return _cluster_table(outcomes, v, r, columns, embedder, config)
    mean = v.mean(axis=0)
    dims = min(config.dims, n - 1, v.shape[1])
    if dims > 0:
        centred = v - mean  # principal axes: eigenvectors of the e × e scatter matrix, largest first
        _, axes = np.linalg.eigh(centred.T @ centred)  # (the SVD's axes, many times faster for n ≫ e)
        components = axes[:, ::-1][:, :dims].T
        projected = (v - mean) @ components.T
        # the value head keeps the embedding's scale: its L2 penalty then acts as the router's does
        scale = np.ones(dims) if config.head == "value" else projected.std(axis=0) + 1e-9
    else:
        components, scale = np.zeros((0, v.shape[1])), np.zeros(0)
    features = np.hstack([(v - mean) @ components.T / scale if dims else np.zeros((n, 0)), np.ones((n, 1))])
    rng = np.random.default_rng(config.seed)
    if config.head == "value":
        return _value_head(outcomes, v, r, features, (mean, components, scale), columns, embedder, config, rng)
    heads = []
    curve: list[tuple[int, float]] = []
    for b in range(config.ensemble):
        rows = np.arange(n) if config.ensemble == 1 else rng.integers(0, n, n)
        w, head_curve = _ascend(features[rows], r[rows], config, features, r)
        heads.append(w)
        if b == 0:
            curve = head_curve
            if on_step:
                for step, value in head_curve:
                    on_step(step, value)
    policy = PlanPolicy(
        outcomes.plans,
        dict(columns),
        mean,
        components,
        scale if dims else np.ones(0),
        np.stack(heads),
        embedder,
        **(_gate(outcomes, v, r, columns) if dims else {}),
    )
    return PlanTrainResult(policy, curve)


def _value_head(
    outcomes: PlanOutcomes,
    v: _Array,
    r: _Array,
    features: _Array,
    projection: tuple[_Array, _Array, _Array],
    columns: dict[str, Column],
    embedder: str,
    config: PlanTrainConfig,
    rng: np.random.Generator,
) -> PlanTrainResult:
    """The value head (module docstring): per ensemble member and plan, a logistic regression of
    the plan's score on ``features`` (the projection and the constant 1, shape (n, d + 1)) of a
    bootstrap resample; the offsets from the plans' mean training cost and latency."""
    from podium.eval.router import soft_logistic

    n, plans = len(v), len(outcomes.plans)
    score = np.asarray(outcomes.score, dtype=np.float64)
    c = 1.0 / (2.0 * config.l2 * n)
    heads = np.zeros((config.ensemble, plans, features.shape[1]))
    for b in range(config.ensemble):
        rows = np.arange(n) if config.ensemble == 1 else rng.integers(0, n, n)
        for p in range(plans):
            w, bias = soft_logistic(features[rows, :-1], score[rows, p], c)
            heads[b, p] = np.append(w, bias)
    mean_cost, mean_latency = outcomes.cost.mean(axis=0), outcomes.latency.mean(axis=0)
    offset = workflow_reward(np.zeros(plans), mean_cost, mean_latency, lam=config.lam, mu=config.mu)
    mean, components, scale = projection
    policy = PlanPolicy(
        outcomes.plans,
        dict(columns),
        mean,
        components,
        scale,
        heads,
        embedder,
        **_gate(outcomes, v, r, columns),
        head="value",
        offset=np.asarray(offset, dtype=np.float64),
    )
    greedy = policy.scores(features).argmax(axis=1)
    return PlanTrainResult(policy, [(0, float(r[np.arange(n), greedy].mean()))])


def _gate(outcomes: PlanOutcomes, v: _Array, r: _Array, columns: dict[str, Column]) -> dict[str, Any]:
    """:class:`PlanPolicy`'s ``support``, ``radius`` and ``fallback`` for a policy that reads
    the question: the training questions' unit embeddings, the largest distance of one of them
    to its nearest other (leave-one-out, so the training questions are all inside), and the
    one-step ``solve`` plan of highest mean training reward (ties: the cheaper)."""
    unit = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    radius = float((1.0 - similarity.max(axis=1)).max())
    plain = [
        j
        for j, plan in enumerate(outcomes.plans)
        if len(plan.members) == 1 and not plan.is_cascade and columns[plan.members[0]].role == "solve"
    ]
    cost = outcomes.cost.mean(axis=0)
    fallback = max(plain, key=lambda j: (r[:, j].mean(), -cost[j]), default=-1)
    return {"support": unit.astype(np.float32), "radius": radius, "fallback": fallback}


def cluster_count(vectors: npt.NDArray[np.floating], seed: int = 0, largest: int = 8) -> int:
    """The k in 2..``largest`` (at most questions − 1) whose k-means clustering of ``vectors``
    has the highest silhouette (Rousseeuw 1987); 1 for fewer than 3 questions."""
    from sklearn.metrics import silhouette_score

    v = np.asarray(vectors, dtype=np.float64)
    candidates = range(2, min(largest, len(v) - 1) + 1)
    best, best_k = -2.0, 1
    with _one_thread():
        for k in candidates:
            labels = _kmeans(k, v, seed).labels_
            if len(set(labels)) < 2:
                continue
            value = float(silhouette_score(v, labels))
            if value > best:
                best, best_k = value, k
    return best_k


def _kmeans(k: int, v: _Array, seed: int) -> Any:
    """scikit-learn's k-means of ``v`` (best of 10 starts); callers run it in :func:`_one_thread`."""
    from sklearn.cluster import KMeans

    return KMeans(k, n_init=10, random_state=seed).fit(v)


def _one_thread() -> Any:
    """A context in which scikit-learn's OpenMP and BLAS run one thread each. Choosing k
    (:func:`cluster_count`) on one thread was 8–16× faster than with the default thread teams on
    this project's 2 cores while another llama.cpp process ran beside it (40×6: 1.1 s → 0.08 s;
    120×576: 1.5 s → 0.15 s; 2,000×576: 27–29 s → 2.9–3.4 s; the same k each time): spin-waiting
    threads wait for cores the other process holds. On the quiet machine the largest case was
    still about 2× faster (5.2–8.2 s → 2.7–3.5 s, measured with one context per k-means call,
    since merged into one), and the small ones within 0.1 s: a bank's few hundred to few
    thousand questions are too little work to gain from a second core.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1)


def _cluster_table(
    outcomes: PlanOutcomes, v: _Array, r: _Array, columns: dict[str, Column], embedder: str, config: PlanTrainConfig
) -> PlanTrainResult:
    """The cluster policy (module docstring): k-means centroids and one plan per cluster."""
    k = cluster_count(v, config.seed) if config.clusters == AUTO else min(config.clusters, len(v))
    with _one_thread():
        fitted = _kmeans(k, v, config.seed)
    centroids = np.asarray(fitted.cluster_centers_, dtype=np.float64)
    table = np.zeros((1, len(outcomes.plans), k + 1))
    for c in range(k):
        members = fitted.labels_ == c
        if not members.any():
            continue
        mean, cost = r[members].mean(axis=0), outcomes.cost[members].mean(axis=0)
        # the cluster's mean rewards (a plan the pool cannot run gives way to the next best);
        # equal rewards go to the cheaper plan — rewards differ by at least 1/(2·questions) ≫ 1e-6
        table[0, :, c] = mean - 1e-6 * cost / (cost.max() + 1e-300)
    if config.max_cost_ratio is not None:
        _cap(table, fitted.labels_, outcomes, r, config.max_cost_ratio)
    e = v.shape[1]
    policy = PlanPolicy(
        outcomes.plans,
        dict(columns),
        np.zeros(e),
        np.zeros((0, e)),
        np.ones(0),
        table,
        embedder,
        centroids,
        **_gate(outcomes, v, r, columns),
    )
    chosen = table[0, :, :k].argmax(axis=0)[fitted.labels_]
    return PlanTrainResult(policy, [(0, float(r[np.arange(len(v)), chosen].mean()))])


def _cap(table: _Array, labels: npt.NDArray[np.integer], outcomes: PlanOutcomes, r: _Array, ratio: float) -> None:
    """Put each cluster's capped choice (:func:`capped_choice`) at the top of its column of
    ``table``, in place; the other plans keep their uncapped order below it, for a pool that
    cannot run the choice."""
    k = table.shape[2] - 1
    single = strongest_single(outcomes)
    budget = ratio * float(outcomes.cost[:, single].sum())
    members = [labels == c for c in range(k)]
    rewards = np.array([r[m].sum(axis=0) for m in members])
    costs = np.array([outcomes.cost[m].sum(axis=0) for m in members])
    chosen = capped_choice(rewards, costs, budget)
    for c, p in enumerate(chosen):
        table[0, p, c] = table[0, :, c].max() + 1.0


def single_plans(outcomes: PlanOutcomes) -> list[int]:
    """The indices of the one-column plans (a single worker's answer)."""
    return [j for j, p in enumerate(outcomes.plans) if len(p.members) == 1 and not p.is_cascade]


def strongest_single(outcomes: PlanOutcomes) -> int:
    """The index of the one-column plan of highest mean score (ties: the cheaper): the best single worker.
    Raises ConfigError when the plans hold none."""
    single = single_plans(outcomes)
    if not single:
        raise ConfigError("a cost cap is a ratio to the best single worker's cost: the plans hold no one-column plan")
    return max(single, key=lambda j: (outcomes.score[:, j].mean(), -outcomes.cost[:, j].mean()))


def capped_choice(rewards: _Array, costs: _Array, budget: float) -> list[int]:
    """One plan per group maximising the total reward with total cost ≤ ``budget``.

    Args:
        rewards, costs: shape (groups, plans): each group's summed reward and cost (USD) per plan.
        budget: the most the chosen plans may cost together, USD.

    Returns the plan index per group; of equal totals, the cheaper. When even the cheapest
    plan of every group exceeds the budget, those cheapest plans (the closest to it). Exact: the
    groups' Pareto fronts of (cost, reward) are merged one group at a time, each merge keeping
    only the undominated partial choices (a multiple-choice knapsack; Kellerer et al. 2004, ch. 11).
    """
    rewards, costs = np.asarray(rewards, dtype=np.float64), np.asarray(costs, dtype=np.float64)
    front: list[tuple[float, float, tuple[int, ...]]] = [(0.0, 0.0, ())]  # (cost, reward, choice)
    for g in range(rewards.shape[0]):
        merged = [
            (c + costs[g, p], v + rewards[g, p], (*choice, p))
            for c, v, choice in front
            for p in range(rewards.shape[1])
        ]
        merged.sort(key=lambda t: (t[0], -t[1]))
        front = []
        for item in merged:  # cheapest first: keep each that rewards more than every cheaper one
            if not front or item[1] > front[-1][1]:
                front.append(item)
    within = [item for item in front if item[0] <= budget * (1 + 1e-12)]
    best = max(within, key=lambda t: (t[1], -t[0])) if within else front[0]
    return list(best[2])


def _ascend(
    x: _Array, r: _Array, config: PlanTrainConfig, x_all: _Array, r_all: _Array
) -> tuple[_Array, list[tuple[int, float]]]:
    """Adam ascent of the exact expected reward (module docstring) from zero weights."""
    n, f = x.shape
    m = r.shape[1]
    w = np.zeros((m, f))
    first, second = np.zeros_like(w), np.zeros_like(w)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    curve = []
    # plans × questions, contiguous per plan: the reductions over plans are then elementwise over
    # long rows (over a short last axis numpy is many times slower on thousands of questions)
    xt, rt = np.ascontiguousarray(x.T), np.ascontiguousarray(r.T)
    for t in range(1, config.steps + 1):
        logits = w @ xt / config.temperature
        logits -= logits.max(axis=0)
        pi = np.exp(logits)
        pi /= pi.sum(axis=0)
        expected = (pi * rt).sum(axis=0)
        grad_logits = pi * (rt - expected) / config.temperature  # d E[r] / d logits
        grad = grad_logits @ x / n - 2 * config.l2 * w
        first = beta1 * first + (1 - beta1) * grad
        second = beta2 * second + (1 - beta2) * grad**2
        w += config.learning_rate * (first / (1 - beta1**t)) / (np.sqrt(second / (1 - beta2**t)) + eps)
        if config.steps >= 10 and t % (config.steps // 10) == 0:
            greedy = (x_all @ w.T).argmax(axis=1)
            curve.append((t, float(r_all[np.arange(len(r_all)), greedy].mean())))
    return w, curve


def lambda_sweep(outcomes: PlanOutcomes, points: int = 12, *, fill: bool = False) -> tuple[float, ...]:
    """λ values (1/USD) from 0 to past the cheapest plan, at the break-even points of the upper
    hull of (mean cost, mean score) over plans — each λ makes a different plan the best constant
    choice — thinned to at most ``points`` values (module docstring).

    With ``fill``, a hull with fewer break-evens than ``points`` − 2 (two plans have one) gets
    the rest spread geometrically from an eighth of its smallest break-even to 8× its largest:
    a policy that reads the question switches plans question by question, each at its own λ
    (half its predicted score gain over its cost difference), on either side of the break-even
    of the means — a cost–quality curve needs operating points there too."""
    cost, score = outcomes.cost.mean(axis=0), outcomes.score.mean(axis=0)
    front: list[int] = []  # Pareto front: each plan scores more than every cheaper one
    for p in np.argsort(cost, kind="stable"):
        if not front or score[p] > score[front[-1]]:
            front.append(int(p))
    hull: list[int] = []  # its upper concave hull: the plans that are best for some λ
    for p in front:
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (cost[b] - cost[a]) * (score[p] - score[a]) - (score[b] - score[a]) * (cost[p] - cost[a])
            if cross >= 0:  # b lies on or below the chord a–p
                hull.pop()
            else:
                break
        hull.append(p)
    breaks = []
    for a, b in itertools.pairwise(hull):  # a cheaper, b dearer and better
        dc, ds = cost[b] - cost[a], score[b] - score[a]
        if dc > 0 and ds > 0:  # where 0.5·score − λ·cost ties (the reward's score weight)
            breaks.append(float(0.5 * ds / dc))
    values = sorted(set(breaks))
    if fill and values and len(values) < points - 2:
        spread = np.geomspace(min(values) / 8, max(values) * 8, points - 2 - len(values))
        values = sorted({*values, *(float(x) for x in spread)})
    if len(values) > points - 2:
        picks = np.linspace(0, len(values) - 1, points - 2).round().astype(int)
        values = [values[i] for i in sorted(set(picks))]
    top = (max(values) * 3) if values else 1.0
    return (0.0, *values, top)
