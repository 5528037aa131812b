"""One ``podium eval`` run, from its options to a report: tasks, pool, methods, cache, scoring.

Two modes:

* **live** — ``tasks`` is a task set (JSONL); the pool file's workers answer for real, every
  call through the request cache (:mod:`podium.workers.cache`), scored by the verifiers.
* **replay** — ``replay`` is an outcome matrix; the pool is its models as
  :class:`~podium.eval.replay.ReplayWorker` s, scored by the recorded outcomes. Calibration
  (which worker is cheapest and strongest, and the learned router's training data) comes
  from the matrix's other split — never the one evaluated.

Method names (``--methods``, comma-separated): ``conductor`` (the pool file's conductor; live),
``conductor:POOL`` (another pool file's, over the same workers; live), ``single`` (every worker
alone) or ``single:NAME``, ``cheapest``, ``strongest``, ``random``,
``pipeline`` (plan → solve → verify on the strongest worker), ``moa`` (every model worker
proposes, the strongest aggregates), ``router`` (the learned router, one method per λ; replay),
``oracle`` (replay's cheapest correct worker; an upper bound), ``light:REF`` (a trained light
conductor: a registry ref ``NAME`` / ``NAME@vN`` or a ``policy.npz`` path), ``lm:REF`` (a
GRPO-trained LM conductor from the registry, run in llama.cpp with its LoRA adapter).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from podium.conductor.baselines import SingleWorker, strongest
from podium.conductor.plans import PlanConductor, cascade_rounds
from podium.errors import ConfigError
from podium.eval.bank import is_bank, read_bank
from podium.eval.bank_replay import BANK_MAX_STEPS, replay_on_bank
from podium.eval.replay import OracleRouter, OutcomeMatrix, oracle_choice
from podium.eval.report import build_report
from podium.eval.router_fit import fit_router, live_router_methods
from podium.eval.runner import Method, ReplayScorer, Scorer, TaskResult, VerifierScorer, evaluate
from podium.eval.tasks import Task, has_tag, load_tasks, select
from podium.local_models import cache_dir
from podium.named_conductors import MethodName, light_conductor, named_conductor
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.pool import PoolConfig, load_pool
from podium.store.request_cache import default_cache_path
from podium.trace.store import TraceStore
from podium.workers.base import Worker

__all__ = [
    "KNOWN",
    "LIVE_METHODS",
    "REPLAY_METHODS",
    "EvalSpec",
    "OnResult",
    "OnStage",
    "OnStart",
    "run_eval",
    "unconfirmed",
]

"""Router operating points of the default (calibrated) λ sweep, besides λ = 0 and λ = ∞."""

LIVE_METHODS = ("conductor", "single", "pipeline", "moa")
REPLAY_METHODS = ("single", "random", "router", "oracle")
KNOWN = (
    "conductor", "single", "cheapest", "strongest", "random", "pipeline", "moa", "router", "oracle", "light", "lm",
    "plan", "plans", "rules",
)  # fmt: skip


@dataclass
class EvalSpec:
    """What to evaluate (the ``podium eval`` options).

    Attributes:
        tasks: a task set (live); replay: an outcome matrix (replay). Exactly one is set.
        more_tasks: further task sets evaluated with ``tasks`` as one set (live).
        ids: keep only the task ids this file lists (one per line, ``#`` comments), in its order.
        split: keep this split (replay default: ``test``).
        limit, sample, seed: take the first ``limit`` tasks or a seeded ``sample``.
        tags: keep tasks carrying any of these tags (empty: all).
        confirmed_only: leave out tasks whose reference is an unconfirmed candidate
            (``reference_source: candidate:…``, from ``podium tasks export``).
        pool: pool file or preset (live).
        methods: method names (see the module docstring); empty: the mode's defaults.
        lambdas: the router's λ sweep (1/USD); None: calibrated (:func:`podium.eval.router_fit.calibrated_lambdas`).
        cache: the request cache: a file, or a database URL (shared); None disables it (live).
        traces: store every request's trace here (None: results only).
        judge: pool worker that grades ``open`` tasks (live).
        concurrency: requests in flight (default 1 live, 32 replay).
        embeddings: the embedding cache (router).
        against: the method every other one is compared with, paired per question (None: the
            single worker of highest quality on the evaluated questions).
        router_data: live mode's router training data: an earlier report (``eval.json`` with
            per-request results) holding ``single:NAME`` results for every pool worker, on
            questions other than the ones evaluated.
        pool_order: the order in which conductors that write workflows see a workflow bank's
            workers: ``given`` (the bank's) or ``reversed`` — a permutation test of an LM
            conductor (it should read the descriptions, not the positions).
    """

    tasks: Path | None = None
    replay: Path | None = None
    more_tasks: tuple[Path, ...] = ()
    ids: Path | None = None
    split: str | None = None
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    tags: Sequence[str] = ()
    confirmed_only: bool = False
    pool: str | None = None
    methods: Sequence[str] = ()
    lambdas: Sequence[float] | None = None
    cache: str | Path | None = field(default_factory=default_cache_path)
    traces: Path | None = None
    judge: str | None = None
    concurrency: int | None = None
    embeddings: Path | None = field(default_factory=lambda: cache_dir() / "eval" / "embeddings.sqlite3")
    router_data: Path | None = None
    against: str | None = None
    pool_order: Literal["given", "reversed"] = "given"

    def config(self) -> dict[str, Any]:
        """The spec as plain JSON for the report."""

        def plain(v: Any) -> Any:
            return _shown(v) if isinstance(v, Path) else [plain(x) for x in v] if isinstance(v, tuple | list) else v

        return {k: plain(v) for k, v in dataclasses.asdict(self).items()}


def _shown(path: str | Path) -> str:
    """A path as reports show it: under the home folder as ``~/…`` (reports get committed)."""
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home) :] if text == home or text.startswith(home + "/") else text


OnResult = Callable[[str, TaskResult], None]
OnStart = Callable[[int], None]
OnStage = Callable[[str], None]


def run_eval(
    spec: EvalSpec,
    *,
    on_start: OnStart | None = None,
    on_result: OnResult | None = None,
    on_stage: OnStage | None = None,
) -> dict[str, Any]:
    """Run ``spec``; the report document (:func:`podium.eval.report.build_report`).

    Args:
        on_start: called once with the number of requests to run (progress bars).
        on_result: called after each request.
        on_stage: called with a line saying what long preparation runs now (e.g. embedding the
            questions for the router), before the requests start.

    Raises:
        ConfigError: bad options (both or neither of tasks/replay, unknown method, a method the
            mode cannot run, no task left), a bad task set, matrix or pool file.
    """
    if (spec.tasks is None) == (spec.replay is None):
        raise ConfigError("give exactly one of --tasks (a task set, live) or --replay (an outcome matrix)")
    if spec.pool_order != "given" and not (spec.replay is not None and is_bank(spec.replay)):
        raise ConfigError("--pool-order reversed applies to a replay on a workflow bank (--replay BANK_DIR)")
    if spec.replay is not None:
        if spec.ids is not None or spec.more_tasks:
            raise ConfigError("--ids and a second --tasks apply to task sets (live), not to --replay")
        return _replay(spec, on_start, on_result, on_stage)
    return _live(spec, on_start, on_result, on_stage)


_NEEDS_ARG = {
    "light": "method 'light' needs a trained conductor: light:NAME, light:NAME@vN, light:NAME@vA..vB "
    "(versions A to B: one curve) or light:PATH.npz",
    "lm": "method 'lm' needs a GRPO-trained conductor: lm:NAME or lm:NAME@vN",
    "rules": "method 'rules' needs a rule file: rules:FILE.toml (podium.conductor.rules)",
    "plan": "method 'plan' needs a plan id: plan:ID (or 'plans' for every plan of the local catalogue)",
}
"""The methods that are only ever ``KIND:ARG``, and the error for a bare ``KIND``."""


def _chosen(spec: EvalSpec, default: Sequence[str], allowed: Sequence[str]) -> list[MethodName]:
    names = [MethodName.parse(n) for n in (list(spec.methods) or list(default))]
    for name in names:
        if name.kind not in KNOWN:
            raise ConfigError(
                f"unknown method {name.text!r}; known: {', '.join(k for k in KNOWN if k not in ('light', 'lm'))}, "
                "single:NAME, light:NAME[@vN | @vA..vB], lm:NAME[@vN], rules:FILE.toml, conductor:POOL"
            )
        if name.kind in _NEEDS_ARG and name.arg is None:
            raise ConfigError(_NEEDS_ARG[name.kind])
        if name.arg is not None and name.kind not in (*_NEEDS_ARG, "single", "conductor"):
            raise ConfigError(f"method {name.text!r}: {name.kind!r} takes nothing after a colon; write {name.kind}")
        if name.kind not in allowed:
            mode = "replay" if spec.replay else "live"
            raise ConfigError(f"method {name.kind!r} does not run in {mode} mode (it runs in: {_modes(name.kind)})")
    return names


def _same_workers(other: PoolConfig, config: PoolConfig, method: str) -> PoolConfig:
    """``other`` when it has ``config``'s workers (names, in order); ConfigError otherwise."""
    mine, theirs = [w.name for w in config.workers], [w.name for w in other.workers]
    if mine != theirs:
        raise ConfigError(
            f"method {method!r}: pool {other.name!r} has workers {theirs}, not this pool's {mine}; "
            "conductor:POOL compares conductors over the same workers"
        )
    return other


_LIVE_ONLY = ("conductor", "plan", "plans")
"""Methods that need a live pool, except ``plan``/``plans``, which also replay on a workflow bank."""


def _modes(base: str) -> str:
    if base in ("plan", "plans"):
        return "live, and replay on a workflow bank (--replay BANK_DIR)"
    live = base != "oracle"
    replay = base not in _LIVE_ONLY
    return " and ".join(m for m, ok in (("live", live), ("replay", replay)) if ok)


def _check_against(spec: EvalSpec, methods: Sequence[Method]) -> None:
    """ConfigError, before any work, when ``--against`` names no method of this run."""
    names = [m.name for m in methods]
    if spec.against is not None and spec.against not in names:
        raise ConfigError(f"--against {spec.against!r} is not a method of this run; methods: {', '.join(names)}")


def _writes_workflows(method: Method) -> bool:
    """Whether a replay on a workflow bank scores ``method`` by its workflow
    (:mod:`podium.eval.bank_replay`) instead of by the column that answered: plan conductors,
    LM conductors and rule pipelines."""
    return isinstance(method.conductor, PlanConductor) or MethodName.parse(method.name).kind in ("lm", "rules")


def _by_ids(tasks: list[Task], path: Path) -> list[Task]:
    """The tasks ``path`` lists (one id per line; ``#`` lines are comments), in its order.

    Raises ConfigError for an unreadable file, no id, or an id no task set has."""
    try:
        wanted = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read --ids {path}: {exc}") from None
    wanted = [w for w in wanted if w and not w.startswith("#")]
    if not wanted:
        raise ConfigError(f"--ids {path} lists no task id (one per line)")
    by_id = {t.id: t for t in tasks}
    missing = [w for w in wanted if w not in by_id]
    if missing:
        raise ConfigError(f"--ids {path}: {len(missing)} id(s) are in none of the task sets, e.g. {missing[0]!r}")
    return [by_id[w] for w in wanted]


def unconfirmed(task: Task) -> bool:
    """Whether ``task``'s reference is a candidate nobody confirmed (``candidate:upstream`` or
    ``candidate:podium`` from ``podium tasks export``): scoring against it measures agreement
    with that answer, not quality."""
    return str(task.reference_source or "").startswith("candidate:")


def _filter(tasks: list[Task], spec: EvalSpec) -> list[Task]:
    if spec.tags:
        tagged = [t for t in tasks if has_tag(t, spec.tags)]
        if not tagged:
            known = ", ".join(sorted({tag for t in tasks for tag in t.tags})) or "none"
            raise ConfigError(f"no task has tag(s) {', '.join(spec.tags)}; their tags: {known}")
        tasks = tagged
    if spec.confirmed_only:
        tasks = [t for t in tasks if not unconfirmed(t)]
    chosen = select(tasks, limit=spec.limit, sample=spec.sample, seed=spec.seed)
    if not chosen:
        raise ConfigError("no task left after --tag/--confirmed-only/--limit/--sample")
    return chosen


def _baselines(
    names: Sequence[MethodName],
    pool: Sequence[Worker],
    quality: Sequence[float] | None,
    cost: Sequence[float] | None,
    embeddings: Path | None = None,
) -> list[Method]:
    """Methods for the fixed baselines among ``names`` (conductor/router/oracle excluded);
    ``single`` stands for every model worker alone (no tool: ``single:NAME`` still names one)."""
    methods: list[Method] = []
    for name in names:
        if name.kind == "single" and name.arg is None:
            models = [(i, w.info.name) for i, w in enumerate(pool) if not w.info.is_tool]
            methods += [Method(f"single:{n}", SingleWorker(i, f"single:{n}")) for i, n in models]
        elif name.kind in ("plan", "plans"):
            methods += _plan_methods(name)
        elif name.kind == "light" and ".." in (name.arg or ""):
            methods += _version_sweep(name, embeddings)
        else:
            conductor = named_conductor(name.text, pool, quality=quality, cost=cost, embeddings=embeddings)
            methods.append(Method(name.text, conductor, rounds=cascade_rounds(conductor)))
    return methods


def _version_sweep(method: MethodName, embeddings: Path | None) -> list[Method]:
    """``light:NAME@vA..vB``: the registry versions A to B of NAME (e.g. one per λ of
    ``podium train --policy plans --sweep``) as the points of one cost–quality curve, each
    with its training λ as the parameter. Raises ConfigError for a malformed range or a
    version that does not exist."""
    from podium.registry import Registry, parse_ref

    name = method.text
    ref, _, last = (method.arg or "").partition("..")
    base, first = parse_ref(ref)
    end = parse_ref(f"{base}@{last}")[1] if last else None
    if first is None or end is None or end < first:
        raise ConfigError(f"{name}: write light:NAME@vA..vB (versions A to B of NAME, A ≤ B)")
    registry = Registry()
    versions = [v for v in registry.versions(base) if first <= v.number <= end]
    if len(versions) != end - first + 1:
        have = ", ".join(v.ref for v in registry.versions(base)) or "none"
        raise ConfigError(f"{name}: {base} lacks some of v{first}..v{end} (it has {have})")
    conductors = [light_conductor(v.ref, embeddings) for v in versions]
    return [
        Method(
            f"light:{v.ref}",
            conductor,
            group=f"light:{base}@v{first}..v{end}",
            param=v.training().lam,
            rounds=cascade_rounds(conductor),
        )
        for v, conductor in zip(versions, conductors, strict=True)
    ]


def _plan_methods(method: MethodName) -> list[Method]:
    """``plan:ID`` or ``plans`` (every plan of the local catalogue); cascades get their
    recursion round."""
    from podium.conductor.plans import fixed_plan
    from podium.eval.bank import local_catalogue
    from podium.eval.plans import local_plans

    columns = local_catalogue(name="local-checked").columns  # every plan, those with checks too
    plans = local_plans(columns)
    if method.kind == "plan":
        plans = [p for p in plans if p.id == method.arg]
        if not plans:
            raise ConfigError(f"{method.text}: no such plan; known: {', '.join(p.id for p in local_plans(columns))}")
    return [Method(f"plan:{p.id}", fixed_plan(p, columns), rounds=int(p.is_cascade)) for p in plans]


# ---------------------------------------------------------------------------------------- live


def _live(
    spec: EvalSpec, on_start: OnStart | None, on_result: OnResult | None, on_stage: OnStage | None = None
) -> dict[str, Any]:
    from podium.builder import build_orchestrator, judge_stack
    from podium.pool_workers import build_pool_workers, judge_index
    from podium.store.request_cache import RequestCache
    from podium.workers.stack import stack

    assert spec.tasks is not None
    config = load_pool(spec.pool)
    loaded = [t for path in (spec.tasks, *spec.more_tasks) for t in load_tasks(path, split=spec.split)]
    if spec.ids is not None:
        loaded = _by_ids(loaded, spec.ids)
    tasks = _filter(loaded, spec)
    candidates = sum(1 for t in tasks if unconfirmed(t))
    if candidates and on_stage is not None:
        on_stage(
            f"warning: {candidates} of {len(tasks)} tasks have an unconfirmed candidate reference (reference_source "
            "candidate:…): their scores measure agreement with that answer, not quality. Confirm them (podium tasks "
            "import / label) or pass --confirmed-only to leave them out"
        )
    names = _chosen(spec, LIVE_METHODS, [k for k in KNOWN if k != "oracle"])
    raw = build_pool_workers(config)
    cache = RequestCache(spec.cache) if spec.cache is not None else None
    workers: list[Worker] = [stack(w, cache=cache) for w in raw]  # the wrappers' order: podium.workers.stack
    traces = TraceStore(spec.traces) if spec.traces is not None else None
    judge: Worker | None = None
    if spec.judge is not None:  # under its data policy: it reads the questions and answers
        index = judge_index(config, spec.judge)
        judge = judge_stack(config, index, raw[index], cache)
    if any(t.task_type == "open" for t in tasks) and judge is None:
        raise ConfigError("the task set has open-ended tasks: name a judge worker with --judge NAME")
    methods: list[Method] = []
    for name in names:  # the pool file's own conductor, or another pool file's, over the cached workers
        if name.kind == "conductor":
            other = config if name.arg is None else _same_workers(load_pool(name.arg), config, name.text)
            own = build_orchestrator(other, workers=workers)  # its rounds: a plan conductor's cascade's included
            methods.append(Method(name.text, own.conductor, rounds=own.config.recursion_rounds))
    kinds = {n.kind for n in names}
    methods += _baselines(
        [n for n in names if n.kind not in ("router", "conductor")], workers, None, None, spec.embeddings
    )
    if "router" in kinds:
        methods += live_router_methods(spec, [w.info.name for w in workers], tasks, on_stage)

    def orchestrator_for(method: Method) -> Orchestrator:
        orchestrator = build_orchestrator(config, traces=traces, conductor=method.conductor, workers=workers)
        return dataclasses.replace(orchestrator, config=orchestrator.config.updated(recursion_rounds=method.rounds))

    scorer: Scorer = VerifierScorer(judge)
    _check_against(spec, methods)
    if on_start:
        on_start(len(tasks) * len(methods))
    import asyncio

    results = asyncio.run(
        evaluate(methods, tasks, orchestrator_for, scorer, concurrency=spec.concurrency or 1, on_result=on_result)
    )
    config_json = {**spec.config(), "n": len(tasks), "pool": config.name, "mode": "live"}
    if cache is not None:
        config_json["cache"] = {"path": _shown(cache.path), "hits": cache.hits, "misses": cache.misses}
    config_json["tasks"] = " + ".join(str(p) for p in (spec.tasks, *spec.more_tasks))
    config_json["unconfirmed_references"] = candidates
    return build_report(methods, results, replay=False, config=config_json)


# -------------------------------------------------------------------------------------- replay


_CALIBRATED = frozenset({"router", "cheapest", "strongest", "pipeline", "moa"})
"""Replay methods chosen by the other split's outcomes (the strongest worker by its mean score…).
Without such rows (a bank of held-out questions only) the fallback is the dearest worker by list
price (:func:`~podium.conductor.baselines.strongest`): a replay worker has none, so the first."""


def _replay(
    spec: EvalSpec, on_start: OnStart | None, on_result: OnResult | None, on_stage: OnStage | None = None
) -> dict[str, Any]:
    import asyncio

    assert spec.replay is not None
    source = spec.replay / "matrix.csv" if spec.replay.is_dir() else spec.replay
    matrix = OutcomeMatrix.load(source)
    bank = read_bank(source) if is_bank(spec.replay) else None
    split = spec.split or "test"
    tasks = _filter(matrix.tasks(split), spec)
    calibration = [t for t in matrix.tasks() if t.split != split]
    if spec.tags:
        calibration = [t for t in calibration if has_tag(t, spec.tags)]
    pool: list[Worker] = list(matrix.workers())
    names = _chosen(spec, REPLAY_METHODS, [k for k in KNOWN if k not in ("conductor",) if bank or k not in _LIVE_ONLY])
    kinds = {n.kind for n in names}
    calibrated = kinds & _CALIBRATED
    if not calibration and calibrated:
        raise ConfigError(
            f"{matrix.path}: no rows outside split {split!r} to calibrate {', '.join(sorted(calibrated))}; replay "
            "a matrix with training rows, or name only trained, fixed and single-worker methods"
        )
    scores = np.array([[matrix.outcome(t.id, m).score for m in matrix.models] for t in calibration])
    costs = np.array([[matrix.outcome(t.id, m).cost_usd for m in matrix.models] for t in calibration])
    quality, mean_cost = (list(scores.mean(axis=0)), list(costs.mean(axis=0))) if calibration else (None, None)
    baselines = [n for n in names if n.kind not in ("router", "oracle")]
    methods = _baselines(baselines, pool, quality, mean_cost, spec.embeddings)
    if "router" in kinds:
        methods += fit_router(
            spec, matrix.models, [t.question for t in calibration], scores, costs, tasks, on_stage=on_stage
        )
    if "oracle" in kinds:

        def choose(task_id: str) -> int:
            return matrix.models.index(oracle_choice(matrix, task_id, matrix.models))

        methods.append(Method("oracle", OracleRouter(choose)))
    fallback = Fallback(strongest(pool, quality), "Answer the question.")

    def orchestrator_for(method: Method) -> Orchestrator:
        config = OrchestratorConfig(pool_name=matrix.path.stem, recursion_rounds=0, resamples=0)
        return Orchestrator(pool, method.conductor, fallback, config)

    _check_against(spec, methods)
    if on_start:
        on_start(len(tasks) * len(methods))
    scorer: Scorer = ReplayScorer(matrix)
    composed = [m for m in methods if _writes_workflows(m)] if bank else []
    routed = [m for m in methods if m not in composed]
    concurrency = spec.concurrency or 32
    results = asyncio.run(
        evaluate(routed, tasks, orchestrator_for, scorer, replay=True, concurrency=concurrency, on_result=on_result)
    )
    if bank is not None and composed:
        steps = load_pool(spec.pool).max_steps if spec.pool else BANK_MAX_STEPS
        results |= asyncio.run(
            replay_on_bank(
                composed, tasks, bank, max_steps=steps, on_result=on_result, reverse_pool=spec.pool_order == "reversed"
            )
        )
    config_json = {
        **spec.config(),
        "n": len(tasks),
        "split": split,
        "mode": "replay",
        "bank": bank is not None,
        "calibration_rows": len(calibration),
        "tasks": f"{spec.replay if bank is not None else matrix.path.name} ({split})",  # a bank: its folder
    }
    return build_report(methods, results, replay=True, config=config_json, replay_latency=matrix.has_latency)
