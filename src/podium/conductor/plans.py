"""The plan conductor: a light learned policy that chooses a composition per question.

After Sakana AI's TRINITY (a frozen small model's representation feeding a tiny learned head),
but choosing whole **plans** (:class:`~podium.conductor.compose.Plan`: a role step, a vote over
samples or programs, a cheap-first cascade) instead of one (worker, role) per turn, so every
workflow it writes is a composition a workflow bank records and replays exactly — no steps that
nothing reads, and the same choice in replay as live.

Per question: the question's embedding (:mod:`podium.embed`) is projected to ``d`` dimensions
(PCA on the training questions, standardised), a linear head per plan scores it —
``score_p = W_p · [x, 1]``, averaged over an ensemble of heads trained on bootstrap resamples
(:mod:`podium.train.plans`) — and the best plan the pool can run wins. A **cluster policy**
replaces the projection by the nearest of ``k`` centroids of the training questions' embeddings
(k-means), one-hot, so the head is a table: one plan per group of similar questions (after the
cluster features of Jitkrittum et al. 2025, "Universal Model Routing for Efficient LLM
Inference") — far fewer free choices than a linear head, for small training sets. Ties (an untrained, all-zero
head) go to the plan with the smallest hash of (question, plan id), so even the untrained policy
does not depend on the order of the plans or the pool's workers.

A cascade's first round ends with a vote; in the recursion round the conductor reads that round's
step outputs, and escalates when the vote's agreement is below the plan's threshold — a fresh
workflow of the escalation column, or, for a cascade that adds answers, the added columns and a
vote with access ``all`` over both rounds' answers — else keeps the answer (an empty workflow). Every other plan keeps
its answer in a recursion round. Parameters are plain arrays in a ``.npz`` with a JSON header
(the plans and the bank columns they use).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from podium.answers import tally
from podium.conductor.base import PreviousRound
from podium.conductor.compose import Column, NotReplayable, Plan, layout, plan_workflow, second_round_workflow
from podium.embed import Embedder
from podium.errors import ConfigError
from podium.records import PlanAttempt
from podium.workers.base import NO_CONTEXT, CallContext, Worker
from podium.workers.offload import offload
from podium.workflow import Workflow

__all__ = ["FORMAT", "PlanConductor", "PlanPolicy", "cascade_rounds", "fixed_plan", "is_plan_policy"]

_Array = npt.NDArray[np.float64]

FORMAT = "podium plan policy 1"


@dataclass(frozen=True)
class PlanPolicy:
    """A plan conductor's parameters.

    Attributes:
        plans: the compositions it chooses among.
        columns: the bank columns the plans use (worker names, roles, what each step sees).
        mean, components, scale: the projection ``((v − mean) @ components.T) / scale``;
            shapes (e,), (d, e), (d,) for embeddings of size e (d may be 0: no features).
        weights: shape (ensemble, plans, f + 1), f = d (or k for a cluster policy); the last
            feature is the constant 1.
        embedder: the embedding model's id.
        centroids: a cluster policy's k centroids in embedding space, shape (k, e); empty
            (shape (0, e) or (0,)) for the linear head.
    """

    plans: tuple[Plan, ...]
    columns: dict[str, Column]
    mean: _Array
    components: _Array
    scale: _Array
    weights: _Array
    embedder: str
    centroids: _Array = field(default_factory=lambda: np.zeros(0))

    @property
    def reads_question(self) -> bool:
        """Whether the policy's choice depends on the question's embedding (not a constant)."""
        return bool(len(self.components) or len(self.centroids))

    def features(self, vectors: npt.NDArray[np.floating]) -> _Array:
        """[projection, 1] of embeddings, shape (n, d + 1); for a cluster policy [one-hot of
        the nearest centroid, 1], shape (n, k + 1)."""
        v = np.asarray(vectors, dtype=np.float64)
        if len(self.centroids):
            nearest = ((v[:, None, :] - self.centroids[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
            projected = np.eye(len(self.centroids))[nearest]
        elif len(self.components):
            projected = ((v - self.mean) @ self.components.T) / self.scale
        else:
            projected = np.zeros((len(v), 0))
        return np.hstack([projected, np.ones((len(v), 1))])

    def scores(self, features: _Array) -> _Array:
        """Ensemble-mean score of every plan, shape (n, plans)."""
        return np.asarray(np.einsum("nf,bpf->np", features, self.weights) / len(self.weights), dtype=np.float64)

    def choose(self, questions: Sequence[str], features: _Array, allowed: Sequence[bool] | None = None) -> list[int]:
        """The chosen plan's index per question (highest score; ties by hash, see the module
        docstring); ``allowed`` masks plans the pool cannot run."""
        scores = self.scores(features)
        if allowed is not None:
            scores = np.where(np.asarray(allowed)[None, :], scores, -np.inf)
        chosen = []
        for q, row in zip(questions, scores, strict=True):
            best = np.flatnonzero(row >= row.max() - 1e-12)
            chosen.append(int(min(best, key=lambda p: _tie(q, self.plans[p].id))))
        return chosen

    def save(self, path: str | Path) -> None:
        """Write ``path`` (.npz): the arrays and a JSON header (format, plans, columns, embedder)."""
        header = {
            "format": FORMAT,
            "embedder": self.embedder,
            "plans": [p.to_json() for p in self.plans],
            "columns": {cid: c.to_json() for cid, c in self.columns.items()},
        }
        np.savez(
            Path(path),
            mean=self.mean,
            components=self.components,
            scale=self.scale,
            weights=self.weights,
            centroids=self.centroids,
            header=np.array(json.dumps(header, ensure_ascii=False)),
        )

    @classmethod
    def load(cls, path: str | Path) -> PlanPolicy:
        """Read a policy written by :meth:`save`; ConfigError when missing or malformed."""
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                if header.get("format") != FORMAT:
                    raise ValueError(f"format {header.get('format')!r}, expected {FORMAT!r}")
                columns = {
                    cid: Column(cid, c["worker"], c["role"], tuple(c.get("sees", ())), tuple(c.get("after", ())))
                    for cid, c in header["columns"].items()
                }
                policy = cls(
                    tuple(Plan.from_json(p) for p in header["plans"]),
                    columns,
                    data["mean"],
                    data["components"],
                    data["scale"],
                    data["weights"],
                    header["embedder"],
                    data["centroids"] if "centroids" in data.files else np.zeros(0),  # files before clusters
                )
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"cannot load plan conductor {path}: not a plan policy written by podium train ({exc})"
            ) from None
        features = len(policy.centroids) or len(policy.components)
        if policy.weights.ndim != 3 or policy.weights.shape[1:] != (len(policy.plans), features + 1):
            raise ConfigError(f"{path}: weights of shape {policy.weights.shape} do not fit its plans and projection")
        return policy


def _tie(question: str, plan_id: str) -> bytes:
    return hashlib.sha256(f"{question}\0{plan_id}".encode()).digest()


def fixed_plan(plan: Plan, columns: dict[str, Column], name: str | None = None) -> PlanConductor:
    """A conductor that always writes ``plan`` (a baseline: self-consistency of 5, program-aided
    reasoning, a cascade…), named ``plan:ID`` in reports."""
    policy = PlanPolicy((plan,), columns, np.zeros(0), np.zeros((0, 0)), np.ones(0), np.zeros((1, 1, 1)), "none")
    return PlanConductor(policy, None, name=name or f"plan:{plan.id}")


def cascade_rounds(conductor: object) -> int:
    """The recursion rounds ``conductor`` needs to mean what it chose: 1 for a plan conductor
    that may choose a cascade (its escalation is a second round), else 0."""
    return int(isinstance(conductor, PlanConductor) and any(p.is_cascade for p in conductor.policy.plans))


def is_plan_policy(path: str | Path) -> bool:
    """Whether ``path`` is a plan policy file (as opposed to another light-conductor file)."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            return bool(json.loads(str(data["header"])).get("format") == FORMAT)
    except (OSError, KeyError, ValueError):
        return False


class PlanConductor:
    """A :class:`PlanPolicy` as a conductor (one embedding and a matrix product per question).

    Args:
        policy: the trained parameters.
        embedder: the embedding model (its id must match ``policy.embedder``).
        name: shown in traces (default ``plans``).

    Raises ConfigError when the embedder does not match the policy.
    """

    def __init__(self, policy: PlanPolicy, embedder: Embedder | None, name: str | None = None) -> None:
        if embedder is None and policy.reads_question:
            raise ConfigError("a plan conductor with a projection needs its embedder")
        if embedder is not None and embedder.name != policy.embedder:
            raise ConfigError(f"plan conductor was trained on {policy.embedder} vectors, not {embedder.name}")
        self.policy = policy
        self.embedder = embedder
        self.name = name or "plans"

    def choose(self, question: str, pool: Sequence[Worker], max_steps: int) -> tuple[Plan, Workflow]:
        """The plan for ``question`` and its first-round workflow over ``pool``.

        Raises ConfigError when the pool can run none of the policy's plans."""
        names = [w.info.name for w in pool]
        vote = next((w.info.name for w in pool if w.info.backend == "vote"), None)
        workflows: list[Workflow | None] = []
        for plan in self.policy.plans:
            try:
                wf = plan_workflow(plan.members, self.policy.columns, names, vote_worker=vote)
                if plan.is_cascade:  # its second round must be runnable too
                    second = second_round_workflow(plan, self.policy.columns, names, vote_worker=vote)
                    if len(second) > max_steps:
                        raise NotReplayable(f"the second round of {plan.id!r} has more than {max_steps} steps")
                workflows.append(wf if len(wf) <= max_steps else None)
            except ConfigError:
                workflows.append(None)
        allowed = [w is not None for w in workflows]
        if not any(allowed):
            workers = sorted({c.worker for c in self.policy.columns.values()})
            raise ConfigError(
                f"plan conductor {self.name} can run none of its plans on the pool {names} "
                f"(its plans use {workers}, a vote tool for votes, and at most {max_steps} steps)"
            )
        if self.embedder is None or not self.policy.reads_question:  # a constant policy needs no embedding
            features = np.ones((1, 1))
        else:
            features = self.policy.features(self.embedder.embed([question]))
        index = self.policy.choose([question], features, allowed)[0]
        workflow = workflows[index]
        assert workflow is not None  # allowed[index]
        return self.policy.plans[index], workflow

    async def plan(
        self,
        question: str,
        pool: Sequence[Worker],
        *,
        max_steps: int,
        attempt: int = 0,
        previous: PreviousRound | None = None,
        context: CallContext = NO_CONTEXT,
    ) -> PlanAttempt:
        started = time.perf_counter()
        chosen, workflow = await offload(self.choose, question, pool, max_steps, otherwise="inline")
        note = f"Plan: {chosen.id}"
        if previous is not None:  # a recursion round: escalate a cascade whose vote disagreed
            workflow, note = Workflow(()), f"Plan: {chosen.id}; keep the answer"
            if chosen.is_cascade and previous.round == 0:
                agreement = self._agreement(chosen, previous)
                if agreement < chosen.threshold:
                    names = [w.info.name for w in pool]
                    vote = next((w.info.name for w in pool if w.info.backend == "vote"), None)
                    workflow = second_round_workflow(chosen, self.policy.columns, names, vote_worker=vote)
                    note = f"Plan: {chosen.id}; round 1 agreed {agreement:.0%} < {chosen.threshold:.0%}: escalate"
                else:
                    note = f"Plan: {chosen.id}; round 1 agreed {agreement:.0%}: keep the answer"
        return PlanAttempt(
            attempt=attempt,
            messages=(),
            raw_output=f"Reasoning: {note}\n{workflow.lists_text()}",
            workflow=workflow,
            round=0 if previous is None else previous.round + 1,
            latency_s=time.perf_counter() - started,
        )

    def _agreement(self, plan: Plan, previous: PreviousRound) -> float:
        """The agreement of round 1's vote, from its members' outputs."""
        order = layout(plan.members, self.policy.columns)
        outputs = [previous.outputs[i] if (i := order.index(m)) < len(previous.outputs) else "" for m in plan.members]
        return tally(outputs).agreement if outputs else 0.0
