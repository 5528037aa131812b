"""The light learned conductor: a frozen sentence embedding feeding a tiny linear policy.

After Sakana AI's TRINITY (a frozen small model's hidden state feeding a small head that picks
worker and role per turn, trained by an evolution strategy): the question's all-MiniLM-L6-v2
vector is projected to ``d`` dimensions (PCA fitted on the training questions) and, step by
step, a linear head scores every (worker, role) pair and STOP from

    features_t = [projection(question), 1, one-hot(previous worker), one-hot(previous role), one-hot(t)]

Greedy decoding writes a workflow of at most ``max_steps`` steps in the ordinary format, so the
executor, traces and eval loop treat it exactly like the LM conductor. Roles map to subtask
templates:

* ``solve`` — answer the question independently (access: none), with the single-worker
  baseline's subtask, so a one-step light workflow sends exactly the request an outcome matrix
  recorded for that worker (``podium eval --matrix``) and replay and live runs agree;
* ``verify`` — check the previous step's answer and fix it (access: the previous step);
* ``aggregate`` — combine every earlier answer into one (access: all).

The first step is always ``solve``; STOP is allowed from the second step on. Parameters are
plain arrays (``.npz``); trained by CMA-ES (:mod:`podium.train.light`).
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
from podium.workers.base import Worker
from podium.workflow import ALL, Access, Step

__all__ = [
    "ROLES",
    "SUBTASKS",
    "LightConductor",
    "LightPolicy",
    "feature_count",
    "plan_steps",
    "rollout",
]

_Array = npt.NDArray[np.float64]

ROLES = ("solve", "verify", "aggregate")
SUBTASKS = {
    "solve": ANSWER,  # the single-worker baseline's subtask: a one-step plan is that baseline's request
    "verify": "Check the previous answer step by step. If it is wrong, correct it. End with the final answer.",
    "aggregate": "Combine the answers above into the single best answer. End with the final answer.",
}


@dataclass(frozen=True)
class LightPolicy:
    """A light conductor's parameters.

    Attributes:
        workers: worker names the head chooses among (matched by name in any pool).
        mean, components: the PCA projection: ``(v − mean) @ components.T``; shapes (384,),
            (d, 384).
        weights: shape (actions, features), actions = workers × roles + STOP (last).
        max_steps: workflow length limit.
        embedder: the embedding model's id.
    """

    workers: tuple[str, ...]
    mean: _Array
    components: _Array
    weights: _Array
    max_steps: int
    embedder: str

    @property
    def n_features(self) -> int:
        return feature_count(len(self.components), len(self.workers), self.max_steps)

    @property
    def n_actions(self) -> int:
        return len(self.workers) * len(ROLES) + 1

    def project(self, vectors: npt.NDArray[np.floating]) -> _Array:
        """PCA projection of embeddings, shape (n, d)."""
        return np.asarray((np.asarray(vectors, dtype=np.float64) - self.mean) @ self.components.T, dtype=np.float64)

    def decode(self, projected: _Array, allowed: Sequence[int] | None = None) -> list[list[tuple[int, int]]]:
        """Greedy workflows for a batch: per question a list of (worker column, role index).

        ``allowed``: the worker columns present in the pool (others are never chosen)."""
        workers, roles = rollout(self.weights, projected, len(self.workers), self.max_steps, allowed)
        pairs = zip(workers, roles, strict=True)
        return [[(int(w), int(r)) for w, r in zip(ws, rs, strict=True) if w >= 0] for ws, rs in pairs]

    def save(self, path: str | Path) -> None:
        """Write ``path`` (.npz): the arrays and a JSON header."""
        header = json.dumps({"workers": list(self.workers), "max_steps": self.max_steps, "embedder": self.embedder})
        np.savez(Path(path), mean=self.mean, components=self.components, weights=self.weights, header=np.array(header))

    @classmethod
    def load(cls, path: str | Path) -> LightPolicy:
        """Read a policy written by :meth:`save`; ConfigError if missing or malformed."""
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                policy = cls(
                    tuple(header["workers"]),
                    data["mean"],
                    data["components"],
                    data["weights"],
                    int(header["max_steps"]),
                    header["embedder"],
                )
        except (OSError, KeyError, ValueError) as exc:
            raise ConfigError(
                f"cannot load light conductor {path}: not a policy file written by podium train ({exc})"
            ) from exc
        if policy.weights.shape != (policy.n_actions, policy.n_features):
            raise ConfigError(f"{path}: weights of shape {policy.weights.shape} do not fit the header")
        return policy


def feature_count(dims: int, workers: int, max_steps: int) -> int:
    """Length of a step's feature vector (see the module docstring)."""
    return dims + 1 + workers + len(ROLES) + max_steps


def rollout(
    weights: _Array, projected: _Array, n_workers: int, max_steps: int, allowed: Sequence[int] | None = None
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Vectorised greedy decoding of a batch: (workers, roles), each shape (n, max_steps), with
    −1 after a plan's STOP. Steps of a plan are contiguous from column 0."""
    n, dims = projected.shape
    n_roles = len(ROLES)
    stop = n_workers * n_roles
    base_mask = np.zeros(stop + 1, dtype=bool)  # True = forbidden
    if allowed is not None:
        for w in range(n_workers):
            if w not in allowed:
                base_mask[w * n_roles : (w + 1) * n_roles] = True
    workers = np.full((n, max_steps), -1, dtype=np.intp)
    roles = np.full((n, max_steps), -1, dtype=np.intp)
    active = np.ones(n, dtype=bool)
    rows = np.arange(n)
    feats = np.zeros((n, feature_count(dims, n_workers, max_steps)))
    feats[:, :dims] = projected
    feats[:, dims] = 1.0
    for t in range(max_steps):
        if t > 0:  # previous worker and role, and the step index
            feats[:, dims + 1 :] = 0.0
            feats[rows, dims + 1 + workers[:, t - 1].clip(0)] = 1.0
            feats[rows, dims + 1 + n_workers + roles[:, t - 1].clip(0)] = 1.0
        feats[:, dims + 1 + n_workers + n_roles + t] = 1.0
        logits = feats @ weights.T
        mask = base_mask.copy()
        if t == 0:  # the first step solves; no STOP before it
            mask[stop] = True
            for r in range(1, n_roles):
                mask[r:stop:n_roles] = True
        logits[:, mask] = -np.inf
        choice = logits.argmax(axis=1)
        active &= choice != stop
        workers[active, t] = choice[active] // n_roles
        roles[active, t] = choice[active] % n_roles
        if not active.any():
            break
    return workers, roles


def plan_steps(plan: Sequence[tuple[int, int]], pool_index: Sequence[int]) -> tuple[Step, ...]:
    """A decoded plan as workflow steps; ``pool_index[column]`` is the worker's pool index."""
    steps: list[Step] = []
    for t, (column, role) in enumerate(plan):
        name = ROLES[role]
        access: Access = () if name == "solve" else ALL if name == "aggregate" else (t - 1,)
        steps.append(Step(pool_index[column], SUBTASKS[name], access))
    return tuple(steps)


class LightConductor(DirectConductor):
    """A :class:`LightPolicy` as a conductor (one embedding + a few small matrix products).

    Args:
        policy: the trained parameters.
        embedder: the embedding model (its id must match ``policy.embedder``).
        name: shown in traces (default ``light``).
    """

    def __init__(self, policy: LightPolicy, embedder: Embedder, name: str | None = None) -> None:
        if embedder.name != policy.embedder:
            raise ConfigError(f"light conductor was trained on {policy.embedder} vectors, not {embedder.name}")
        super().__init__(name or "light")
        self.policy = policy
        self.embedder = embedder

    def steps(self, question: str, pool: Sequence[Worker], max_steps: int) -> Sequence[Step]:
        names = [w.info.name for w in pool]
        allowed = [i for i, w in enumerate(self.policy.workers) if w in names]
        if not allowed:
            raise ConfigError(
                f"light conductor {self.name} knows none of the pool's workers {names}; it was trained on "
                f"{list(self.policy.workers)} (workers are matched by name)"
            )
        plan = self.policy.decode(self.policy.project(self.embedder.embed([question])), allowed)[0]
        index = [names.index(w) if w in names else -1 for w in self.policy.workers]
        return plan_steps(plan[:max_steps], index)
