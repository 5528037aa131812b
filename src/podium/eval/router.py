"""The learned router baseline: a question embedding → per-worker correctness and cost → one worker.

RouterBench/RouteLLM-style (Hu et al. 2024; Ong et al. 2024): for each worker *i* a logistic
regression on the question's all-MiniLM-L6-v2 embedding predicts ``q_i`` = P(score = 1), and a
least-squares line in the question's length predicts its cost ``c_i`` (USD). The router sends the
question to the worker of highest expected training reward, ``argmax_i 0.5 + 0.5·q_i − λ·c_i``
(:func:`podium.train.reward.workflow_reward`, ties: the cheaper worker), so λ (1/USD) trades
quality for cost exactly as it does for a trained conductor: λ = 0 always picks the most likely
correct worker; a sweep of λ traces the router's cost–quality curve. Fractional scores (e.g.
MT-Bench's judge score / 10) are soft labels: each question counts as a positive with weight *s*
and a negative with weight 1 − *s*.

Fitting needs scikit-learn (the ``router`` extra); a fitted router is plain arrays (``.npz`` +
JSON header), so loading and routing need only numpy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from podium.conductor.base import DirectConductor
from podium.conductor.baselines import ANSWER
from podium.embed import Embedder
from podium.errors import ConfigError
from podium.train.reward import workflow_reward
from podium.workers.base import Worker
from podium.workflow import Step

__all__ = ["RouterConductor", "RouterModel", "soft_logistic"]

_Array = npt.NDArray[np.float64]


def soft_logistic(x: npt.NDArray[np.floating], scores: npt.NDArray[np.floating], c: float) -> tuple[_Array, float]:
    """An L2-regularised logistic regression of P(score = 1) on ``x`` (n, d), with fractional
    ``scores`` (n,) in [0, 1] as soft labels: each row a positive of weight s and a negative of
    weight 1 − s (scikit-learn, inverse strength ``c``). Returns (weights (d,), intercept); a
    column of one class only gives a constant predictor (weights 0, intercept ±30)."""
    from sklearn.linear_model import LogisticRegression

    s = np.clip(np.asarray(scores, dtype=np.float64), 0.0, 1.0)
    mean = float(s.mean())
    if mean in (0.0, 1.0):
        return np.zeros(x.shape[1]), (30.0 if mean == 1.0 else -30.0)
    n = len(s)
    model = LogisticRegression(C=c, max_iter=2000)
    model.fit(np.vstack([x, x]), np.concatenate([np.ones(n), np.zeros(n)]), sample_weight=np.concatenate([s, 1.0 - s]))
    return np.asarray(model.coef_[0], dtype=np.float64), float(model.intercept_[0])


@dataclass(frozen=True)
class RouterModel:
    """A fitted router.

    Attributes:
        workers: worker names, column order of everything below.
        weights: shape (m, d): logistic-regression coefficients per worker.
        bias: shape (m,): intercepts.
        cost_line: shape (m, 2): predicted cost (USD) = a + b × question characters.
        embedder: the embedding model's id (a router only fits vectors of that model).
    """

    workers: tuple[str, ...]
    weights: _Array
    bias: _Array
    cost_line: _Array
    embedder: str

    @classmethod
    def fit(
        cls,
        workers: Sequence[str],
        vectors: npt.NDArray[np.floating],
        lengths: Sequence[int],
        scores: _Array,
        costs: _Array,
        *,
        embedder: str,
        c: float = 1.0,
    ) -> RouterModel:
        """Fit on n questions: ``vectors`` (n, d), ``lengths`` (n,) characters, ``scores`` (n, m)
        in [0, 1], ``costs`` (n, m) USD. ``c`` is the inverse L2 strength (scikit-learn's C).

        Raises ConfigError when shapes disagree or n = 0."""
        x = np.asarray(vectors, dtype=np.float64)
        n, m = scores.shape
        if n == 0 or x.shape[0] != n or costs.shape != (n, m) or len(workers) != m or len(lengths) != n:
            raise ConfigError(f"router fit: inconsistent shapes x{x.shape} scores{scores.shape} costs{costs.shape}")
        weights = np.zeros((m, x.shape[1]))
        bias = np.zeros(m)
        for i in range(m):
            weights[i], bias[i] = soft_logistic(x, scores[:, i], c)
        design = np.column_stack([np.ones(n), np.asarray(lengths, dtype=np.float64)])
        cost_line = np.asarray(np.linalg.lstsq(design, costs, rcond=None)[0].T, dtype=np.float64)  # (m, 2)
        return cls(tuple(workers), weights, bias, cost_line, embedder)

    def predict(self, vectors: npt.NDArray[np.floating], lengths: Sequence[int]) -> tuple[_Array, _Array]:
        """(quality, cost), each shape (n, m): P(correct) and predicted USD per worker."""
        x = np.asarray(vectors, dtype=np.float64)
        quality = 1.0 / (1.0 + np.exp(-(x @ self.weights.T + self.bias)))
        design = np.column_stack([np.ones(len(lengths)), np.asarray(lengths, dtype=np.float64)])
        cost = np.maximum(design @ self.cost_line.T, 0.0)
        return quality, cost

    def choose(self, quality: _Array, cost: _Array, lam: float) -> npt.NDArray[np.intp]:
        """Column index per row of the highest expected reward, ``argmax 0.5 + 0.5·q − λ·c``
        (ties: lower predicted cost)."""
        utility = workflow_reward(quality, cost, lam=lam)
        best = utility.max(axis=1, keepdims=True)
        tied = np.isclose(utility, best, rtol=0.0, atol=1e-12)
        return np.asarray(np.where(tied, cost, np.inf).argmin(axis=1), dtype=np.intp)

    def save(self, path: str | Path) -> None:
        """Write ``path`` (.npz) with the arrays and a JSON header."""
        header = json.dumps({"workers": list(self.workers), "embedder": self.embedder})
        np.savez(Path(path), weights=self.weights, bias=self.bias, cost_line=self.cost_line, header=np.array(header))

    @classmethod
    def load(cls, path: str | Path) -> RouterModel:
        """Read a router written by :meth:`save`; ConfigError if missing or malformed."""
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                return cls(
                    tuple(header["workers"]), data["weights"], data["bias"], data["cost_line"], header["embedder"]
                )
        except (OSError, KeyError, ValueError) as exc:
            raise ConfigError(f"cannot load router {path}: {exc}") from exc


class RouterConductor(DirectConductor):
    """A :class:`RouterModel` as a conductor: a one-step workflow on the chosen worker.

    Workers are matched by name, so the pool may differ from the one it was fitted on (workers
    it does not know are never chosen; raises ConfigError when it knows none of them).

    Args:
        model: the fitted router.
        embedder: the embedding model (its id must match ``model.embedder``).
        lam: λ, 1/USD (see the module docstring).
    """

    def __init__(self, model: RouterModel, embedder: Embedder, lam: float, name: str | None = None) -> None:
        if embedder.name != model.embedder:
            raise ConfigError(f"router was fitted on {model.embedder} vectors, not {embedder.name}")
        super().__init__(name or f"router(λ={lam:g})")
        self.model = model
        self.embedder = embedder
        self.lam = lam

    def steps(self, question: str, pool: Sequence[Worker], max_steps: int) -> Sequence[Step]:
        names = [w.info.name for w in pool]
        known = [i for i, w in enumerate(self.model.workers) if w in names]
        if not known:
            raise ConfigError(f"router knows none of the pool's workers {names}")
        quality, cost = self.model.predict(self.embedder.embed([question]), [len(question)])
        column = known[int(self.model.choose(quality[:, known], cost[:, known], self.lam)[0])]
        return (Step(names.index(self.model.workers[column]), ANSWER, ()),)
