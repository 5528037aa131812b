"""The plan conductor: a light learned policy that chooses a composition per question.

After Sakana AI's TRINITY (a frozen small model's representation feeding a tiny learned head),
but choosing whole **plans** (:class:`~podium.conductor.compose.Plan`: a role step, a vote over
samples or programs, a cheap-first cascade) instead of one (worker, role) per turn, so every
workflow it writes is a composition a workflow bank records and replays exactly — no steps that
nothing reads, and the same choice in replay as live.

Per question: the question's embedding (:mod:`podium.embed`) is projected to ``d`` dimensions
(PCA on the training questions, standardised for the linear head), a linear head per plan scores it —
``score_p = W_p · [x, 1]``, averaged over an ensemble of heads trained on bootstrap resamples
(:mod:`podium.train.plans`) — and the best plan the pool can run wins. A **value head**
instead predicts each plan's P(correct) by a logistic regression (the learned router's form,
RouterBench/RouteLLM) and scores ``0.5 · σ(W_p · [x, 1]) + offset_p``, the plan's expected reward
(``offset_p`` = its reward without the score: 0.5 − λ · mean cost − μ · mean latency). A **cluster policy**
replaces the projection by the nearest of ``k`` centroids of the training questions' embeddings
(k-means), one-hot, so the head is a table: one plan per group of similar questions (after the
cluster features of Jitkrittum et al. 2025, "Universal Model Routing for Efficient LLM
Inference") — far fewer free choices than a linear head, for small training sets. Ties (an untrained, all-zero
head) go to the plan with the smallest hash of (question, plan id), so even the untrained policy
does not depend on the order of the plans or the pool's workers.

A cascade's first round ends with a vote; in the recursion round the conductor reads that round's
step outputs, and escalates when the vote's agreement is below the plan's threshold (and its
answers are not free text: :meth:`~podium.conductor.compose.Plan.escalates`) — a fresh
workflow of the escalation column, or, for a cascade that adds answers, the added columns and a
vote with access ``all`` over both rounds' answers — else keeps the answer (an empty workflow). Every other plan keeps
its answer in a recursion round. Parameters are plain arrays in a ``.npz`` with a JSON header
(the plans and the bank columns they use).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from podium.answers import Tally, tally
from podium.conductor.base import PreviousRound
from podium.conductor.compose import (
    Column,
    NotReplayable,
    Plan,
    keep_workflow,
    layout,
    plan_workflow,
    second_round_workflow,
)
from podium.embed import Embedder
from podium.errors import ConfigError
from podium.records import PlanAttempt
from podium.workers.base import NO_CONTEXT, CallContext, Worker
from podium.workers.offload import offload
from podium.workers.wrapper import preload_in_background
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
        support: the training questions' embeddings, unit length, shape (n, e); empty: every
            question counts as like them (files before the gate).
        radius: the largest cosine distance of a training question to its nearest other
            training question; a question farther than this from every training question is
            **unlike the training questions** (:meth:`outside`).
        fallback: index of the plan such questions get (the one-step plain answer that scored
            best on the training questions: the outcomes say nothing about a question unlike
            them), or −1 for none.
        head: ``"policy"`` (the weights are scores: a softmax policy's logits or a table) or
            ``"value"`` (the weights are logits of each plan's P(correct); module docstring).
        offset: a value head's per-plan reward without the score, shape (plans,); empty otherwise.
    """

    plans: tuple[Plan, ...]
    columns: dict[str, Column]
    mean: _Array
    components: _Array
    scale: _Array
    weights: _Array
    embedder: str
    centroids: _Array = field(default_factory=lambda: np.zeros(0))
    support: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    radius: float = np.inf
    fallback: int = -1
    head: str = "policy"
    offset: _Array = field(default_factory=lambda: np.zeros(0))

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

    def outside(self, vectors: npt.NDArray[np.floating]) -> npt.NDArray[np.bool_]:
        """Whether each question (embedding, shape (n, e)) is unlike the training questions:
        its cosine distance to the nearest of them exceeds ``radius``; shape (n,), all False
        without a support set."""
        v = np.asarray(vectors, dtype=np.float64)
        if not len(self.support):
            return np.zeros(len(v), dtype=bool)
        unit = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        nearest = 1.0 - (unit @ self.support.T.astype(np.float64)).max(axis=1)
        return np.asarray(nearest > self.radius)

    def scores(self, features: _Array) -> _Array:
        """Ensemble-mean score of every plan, shape (n, plans): for a value head the expected
        reward, 0.5 × the mean predicted P(correct) + ``offset``."""
        logits = np.einsum("nf,bpf->bnp", features, self.weights)
        if self.head == "value":
            probability = (0.5 * (1.0 + np.tanh(logits / 2))).mean(axis=0)  # σ, without overflow
            return np.asarray(0.5 * probability + self.offset, dtype=np.float64)
        return np.asarray(logits.mean(axis=0), dtype=np.float64)

    def choose(
        self,
        questions: Sequence[str],
        vectors: npt.NDArray[np.floating] | None,
        allowed: Sequence[bool] | None = None,
    ) -> list[int]:
        """The chosen plan's index per question: ``fallback`` for a question unlike the
        training questions (:meth:`outside`), else the highest score (ties by hash, see the
        module docstring). ``vectors``: the questions' embeddings, shape (n, e), or None for a
        policy that does not read the question; ``allowed`` masks plans the pool cannot run."""
        if vectors is None:
            if self.reads_question:
                raise ValueError("this plan policy reads the question: give its embeddings")
            features, outside = np.ones((len(questions), 1)), np.zeros(len(questions), dtype=bool)
        else:
            features, outside = self.features(vectors), self.outside(vectors)
        mask = np.ones(len(self.plans), dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
        scores = np.where(mask[None, :], self.scores(features), -np.inf)
        chosen = []
        for q, row, away in zip(questions, scores, outside, strict=True):
            if away and self.fallback >= 0 and mask[self.fallback]:
                chosen.append(self.fallback)
                continue
            best = np.flatnonzero(row >= row.max() - 1e-12)
            chosen.append(int(min(best, key=lambda p: _tie(q, self.plans[p].id))))
        return chosen

    def reachable(self, allowed: Sequence[bool]) -> list[int]:
        """The indices of the plans :meth:`choose` can return for some question, given the
        ``allowed`` mask: a cluster policy's best plans per cluster (ties included) and its
        ``fallback``; a constant policy's best; every allowed plan for a linear head."""
        mask = np.asarray(allowed, dtype=bool)
        if len(self.components) and not len(self.centroids):
            return [int(i) for i in np.flatnonzero(mask)]
        k = len(self.centroids)
        features = np.hstack([np.eye(k), np.ones((k, 1))]) if k else np.ones((1, 1))
        scores = np.where(mask[None, :], self.scores(features), -np.inf)
        found = {int(i) for row in scores for i in np.flatnonzero(row >= row.max() - 1e-12)}
        if self.fallback >= 0 and mask[self.fallback] and len(self.support):
            found.add(self.fallback)
        return sorted(found)

    def save(self, path: str | Path) -> None:
        """Write ``path`` (.npz): the arrays and a JSON header (format, plans, columns, embedder)."""
        header = {
            "format": FORMAT,
            "embedder": self.embedder,
            "plans": [p.to_json() for p in self.plans],
            "columns": {cid: c.to_json() for cid, c in self.columns.items()},
            "head": self.head,
        }
        np.savez(
            Path(path),
            mean=self.mean,
            components=self.components,
            scale=self.scale,
            weights=self.weights,
            centroids=self.centroids,
            support=self.support.astype(np.float32),
            radius=np.array(self.radius),
            fallback=np.array(self.fallback),
            offset=self.offset,
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
                    **(  # files before the gate have no support set
                        {"support": data["support"], "radius": float(data["radius"]), "fallback": int(data["fallback"])}
                        if "support" in data.files
                        else {}
                    ),
                    head=header.get("head", "policy"),  # files before the value head
                    offset=data["offset"] if "offset" in data.files else np.zeros(0),
                )
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"cannot load plan conductor {path}: not a plan policy written by podium train ({exc})"
            ) from None
        features = len(policy.centroids) or len(policy.components)
        if policy.weights.ndim != 3 or policy.weights.shape[1:] != (len(policy.plans), features + 1):
            raise ConfigError(f"{path}: weights of shape {policy.weights.shape} do not fit its plans and projection")
        if policy.head not in ("policy", "value") or (policy.head == "value") != (
            policy.offset.shape == (len(policy.plans),)
        ):
            raise ConfigError(f"{path}: head {policy.head!r} with offsets of shape {policy.offset.shape} does not fit")
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


def _quietly(load: Callable[[], object]) -> Callable[[], None]:
    """``load`` for a background thread: a failure is left to the request that needs it."""

    def run() -> None:
        with contextlib.suppress(Exception):
            load()

    return run


def _called_by_all(workflows: Sequence[Workflow | None], pool: Sequence[Worker]) -> list[Worker]:
    """The workers that every runnable workflow of ``workflows`` calls."""
    common: set[int] | None = None
    for workflow in workflows:
        if workflow is not None:
            used = {step.worker for step in workflow.steps}
            common = used if common is None else common & used
    return [pool[i] for i in sorted(common or ())]


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
        plan, workflow, _ = self._choose(question, pool, max_steps)
        return plan, workflow

    def warm(self, pool: Sequence[Worker], max_steps: int) -> None:
        """Start loading, in background threads, the models its requests over ``pool`` will
        need whatever the question: the embedding model and every model that each plan it can
        choose calls (:meth:`PlanPolicy.reachable`). ``podium run`` and ``podium serve`` call
        it as they start, so these loads overlap their start-up and each other. Failures,
        and a pool that can run none of its plans, are left to the requests to report."""
        try:
            workflows = self._workflows(pool, max_steps)
        except ConfigError:
            return
        if self.embedder is not None and self.policy.reads_question:
            threading.Thread(target=_quietly(self.embedder.preload), name="podium-preload", daemon=True).start()
        self._preload(workflows, pool)

    def _workflows(self, pool: Sequence[Worker], max_steps: int) -> list[Workflow | None]:
        """Each plan's first-round workflow over ``pool``, None where the pool cannot run it.
        Raises ConfigError when it can run none."""
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
        if not any(w is not None for w in workflows):
            workers = sorted({c.worker for c in self.policy.columns.values()})
            raise ConfigError(
                f"plan conductor {self.name} can run none of its plans on the pool {names} "
                f"(its plans use {workers}, a vote tool for votes, and at most {max_steps} steps)"
            )
        return workflows

    def _preload(self, workflows: Sequence[Workflow | None], pool: Sequence[Worker]) -> None:
        """Load, in the background, the models every plan it can choose calls."""
        reachable = self.policy.reachable([w is not None for w in workflows])
        preload_in_background(_called_by_all([workflows[i] for i in reachable], pool))

    def _choose(self, question: str, pool: Sequence[Worker], max_steps: int) -> tuple[Plan, Workflow, bool]:
        """:meth:`choose`, and whether the question was unlike the training questions."""
        workflows = self._workflows(pool, max_steps)
        allowed = [w is not None for w in workflows]
        if self.embedder is None or not self.policy.reads_question:  # a constant policy needs no embedding
            vectors = None
        else:  # the models every plan it can choose calls load while the question is embedded
            self._preload(workflows, pool)
            vectors = np.asarray(self.embedder.embed([question]), dtype=np.float64)
        index = self.policy.choose([question], vectors, allowed)[0]
        workflow = workflows[index]
        assert workflow is not None  # allowed[index]
        unlike = vectors is not None and bool(self.policy.outside(vectors)[0]) and index == self.policy.fallback
        return self.policy.plans[index], workflow, unlike

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
        chosen, workflow, unlike = await offload(self._choose, question, pool, max_steps, otherwise="inline")
        note = f"Plan: {chosen.id}" + (
            " (the question is unlike every training question: the plain answer)" if unlike else ""
        )
        if previous is not None:  # a recursion round: escalate a cascade whose vote disagreed
            workflow, note = Workflow(()), f"Plan: {chosen.id}; keep the answer"
            if chosen.is_cascade and previous.round == 0:
                round_one, outputs = self._round_one(chosen, previous)
                agreement = round_one.agreement
                vote = next((w.info.name for w in pool if w.info.backend == "vote"), None)
                if chosen.escalates(round_one, outputs):
                    names = [w.info.name for w in pool]
                    workflow = second_round_workflow(chosen, self.policy.columns, names, vote_worker=vote)
                    why = {
                        "whole-number": "round 1's answer is not a whole number",
                        "tests-pass": "the code's tests did not pass",
                    }.get(chosen.gate, f"round 1 agreed {agreement:.0%} < {chosen.threshold:.0%}")
                    note = f"Plan: {chosen.id}; {why}: escalate"
                elif chosen.gate == "tests-pass":
                    workflow = keep_workflow(chosen, [w.info.name for w in pool], vote_worker=vote)
                    note = f"Plan: {chosen.id}; the code's tests passed: keep the tested code"
                elif chosen.gate == "whole-number":
                    note = f"Plan: {chosen.id}; round 1's answer is a whole number: keep it"
                elif round_one.kind == "text":
                    note = f"Plan: {chosen.id}; round 1's answers are free text (no vote can compare them): keep it"
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

    def keeps_answer(self, workflow: Workflow, pool: Sequence[Worker], max_steps: int) -> bool:
        """True unless ``workflow`` is the first round of a cascade (whose second round
        escalates when the first disagrees)."""
        try:
            workflows = self._workflows(pool, max_steps)
        except ConfigError:
            return False
        return all(w != workflow for w, plan in zip(workflows, self.policy.plans, strict=True) if plan.is_cascade)

    def _round_one(self, plan: Plan, previous: PreviousRound) -> tuple[Tally, list[str]]:
        """Round 1's vote, recounted from its members' outputs, and those outputs."""
        order = layout(plan.members, self.policy.columns)
        outputs = [previous.outputs[i] if (i := order.index(m)) < len(previous.outputs) else "" for m in plan.members]
        return tally(outputs), outputs
