"""Stages 4–6 of ``podium loop run``: record the pool's outcomes, train, promote.

* **record** — ``podium eval --tasks set.jsonl --methods single --matrix set.csv
  --matrix-split S --seed N`` through the request cache (only questions new to the cache cost
  calls), skipped when the set and the options are those of the last recorded eval. The matrix
  keeps each question's split (:func:`podium.eval.matrix.write_matrix` ``keep_splits``), and rows
  of dropped tasks go. With ``--bank``, ``podium bank record --ids`` of the set's questions the
  bank lacks (the export → bank step).
* **train** — ``podium train --replay set.csv``, skipped when a version of the name was trained
  on these very matrix bytes with these options (its ``train.json`` says so), and waiting while
  the matrix has fewer training questions than the light conductor needs. With ``--policy
  plans``, ``podium train --policy plans --replay DIR/bank``: the plan conductor on the bank's
  training rows (each bank row carries its question's split in the matrix), skipped alike when
  a version was trained on these bank bytes.
* **promote** — ``podium conductor promote`` of the trained version on the held-out split of
  the matrix (the bank for plans), skipped when it is the promoted version or the gate already
  judged it against the same promoted version.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.errors import ConfigError
from podium.loop.settings import Settings
from podium.loop.stages import Context
from podium.loop.state import Folder, sha256_file

if TYPE_CHECKING:
    from podium.train.grpo import GRPOTrainConfig

__all__ = ["bank_catalogue", "lm_config", "promote_stage", "record_stage", "train_stage"]


def _eval_options(ctx: Context) -> dict[str, Any]:
    """What the recorded outcomes depend on besides the set: a change records them again."""
    from pathlib import Path

    s = ctx.settings
    pool_file = sha256_file(Path(s.pool)) if s.pool and Path(s.pool).is_file() else None
    return {"pool": s.pool, "pool_sha256": pool_file, "judge": s.grader, "seed": s.seed, "matrix_split": s.matrix_split}


def record_stage(ctx: Context) -> dict[str, Any]:
    """Stage 4: the eval through the cache into the matrix, then the bank (module docstring)."""
    result: dict[str, Any] = _eval(ctx)
    if ctx.settings.bank:
        result["bank"] = _bank(ctx)
    return result


def _eval(ctx: Context) -> dict[str, Any]:
    from podium.eval.matrix import split_counts, write_matrix
    from podium.eval.replay import OutcomeMatrix
    from podium.eval.report import write_report
    from podium.eval.runner import TaskResult
    from podium.eval.session import EvalSpec, run_eval
    from podium.eval.tasks import load_tasks

    s, folder = ctx.settings, ctx.folder
    set_sha, options = sha256_file(folder.set), _eval_options(ctx)
    last = ctx.state.get("eval")
    if (
        last is not None
        and last.get("set_sha256") == set_sha
        and last.get("options") == options
        and last.get("matrix_sha256") == sha256_file(folder.matrix)
    ):
        ctx.say(f"record: the set is unchanged since run {last['run']}'s eval; nothing to call")
        return {"status": "skipped", "reason": f"the set is unchanged since run {last['run']}'s eval",
                "questions": last["questions"], "splits": split_counts(folder.matrix)}  # fmt: skip
    out = ctx.run_dir / "eval"
    argv = ["eval", "--tasks", str(folder.set), "--methods", "single", "--matrix", str(folder.matrix)]
    argv += ["--matrix-split", f"{s.matrix_split:g}", "--seed", str(s.seed), "--out", str(out), "--no-plot"]
    argv += ["--pool", s.pool] if s.pool else []
    argv += ["--judge", s.grader] if s.grader else []
    argv += ["--cache", s.cache] if s.cache else []
    argv += ["--concurrency", str(s.concurrency)] if s.concurrency else []
    ctx.ran("record", argv)  # the command an operator would type for the same eval
    spec = EvalSpec(
        tasks=folder.set, methods=("single",), seed=s.seed, pool=s.pool or None, judge=s.grader or None,
        concurrency=s.concurrency or None,
    )  # fmt: skip
    if s.cache:
        spec.cache = s.cache
    known = {t.id for t in OutcomeMatrix.load(folder.matrix).tasks()} if folder.matrix.is_file() else set()
    done: list[int] = [0, 0]

    def on_start(total: int) -> None:
        done[1] = total
        ctx.say(f"record: {total} request(s) (every pool worker alone on each question; cached ones cost nothing)")

    def on_result(_method: str, _result: TaskResult) -> None:
        done[0] += 1
        if done[0] == done[1] or done[0] % 25 == 0:
            ctx.say(f"record: {done[0]}/{done[1]}")

    report = run_eval(spec, on_start=on_start, on_result=on_result, on_stage=ctx.say)
    write_report(report, out, plot=False)
    ids = {t.id for t in load_tasks(folder.set)}
    total, left_out = write_matrix(
        report, folder.matrix, train_share=s.matrix_split, seed=s.seed, keep_splits=True, only=ids
    )
    cache = report["config"].get("cache") or {}
    rows = {t.id for t in OutcomeMatrix.load(folder.matrix).tasks()}
    result = {
        "status": "done",
        "questions": total,
        "new_questions": len(rows - known),
        "removed_questions": len(known - rows),
        "left_out": left_out,
        "cache_hits": cache.get("hits"),
        "calls": cache.get("misses"),
        "splits": split_counts(folder.matrix),
        "report": folder.relative(out),
    }
    ctx.state["eval"] = {"run": ctx.run_id, "set_sha256": set_sha, "options": options,
                         "matrix_sha256": sha256_file(folder.matrix), "questions": total}  # fmt: skip
    ctx.say(
        f"record: {total} question(s) in {folder.relative(folder.matrix)} ({len(rows - known)} new; "
        f"{cache.get('misses', '?')} call(s), {cache.get('hits', '?')} from the cache)"
    )
    return result


def _grading(task: Any) -> str:
    """sha256 of what a task's score depends on besides the answer (type, reference, tests,
    entry point, setup, choices): a review that changes it rescores the task's bank row."""
    fields = [task.task_type, task.reference, task.tests, task.entry_point, task.setup, list(task.choices)]
    return hashlib.sha256(json.dumps(fields).encode("utf-8")).hexdigest()


def _bank(ctx: Context) -> dict[str, Any]:
    """``podium bank record`` of only the set's questions the bank has no row for; open tasks are
    graded by the loop's grader (``--eval-judge``, else ``--judge``, a worker of ``--pool``,
    through the request cache), and left out without one. First the bank follows the reviews:
    the rows of tasks whose grading changed since they were scored are rescored from their
    recorded responses (no model call; an open task's answers go to the judge again, through
    the cache), and the rows of tasks dropped from the set, or retyped open without a judge, go."""
    from podium.eval.bank import local_catalogue, read_rows
    from podium.eval.record import record_local_bank, revise_bank
    from podium.eval.tasks import load_tasks
    from podium.eval.verifiers import verify
    from podium.store.request_cache import RequestCache, default_cache_path

    s, folder = ctx.settings, ctx.folder
    _, rows = read_rows(folder.bank / "matrix.csv")
    tasks = load_tasks(folder.set)
    graded: dict[str, str] = ctx.state.setdefault("bank_grading", {})
    by_id = {t.id: t for t in tasks}
    cache = RequestCache(s.cache or default_cache_path())
    judge = None
    if s.grader:
        from podium.builder import judge_worker

        judge = judge_worker(s.pool, s.grader, cache=cache)
    kept_out = {"open"} if judge is None else set()
    in_bank = [r["sample_id"] for r in rows]
    gone = {i for i in in_bank if i not in by_id or by_id[i].task_type in kept_out}
    changed = [by_id[i] for i in in_bank if i not in gone and graded.get(i) != _grading(by_id[i])]
    revised = (0, 0)
    if gone or changed:
        revised = revise_bank(folder.bank, rescore=changed, drop=gone, score=lambda t, a: verify(t, a, judge=judge))
        ctx.say(f"bank: {revised[0]} row(s) rescored after a review changed their task, {revised[1]} dropped")
    for i in gone:
        graded.pop(i, None)
    graded |= {t.id: _grading(t) for t in changed}
    recorded = {i for i in in_bank if i not in gone}
    todo = [t.id for t in tasks if t.id not in recorded and t.task_type not in kept_out]
    open_left = sum(1 for t in tasks if t.id not in recorded and t.task_type in kept_out)
    summary = {"rescored": revised[0], "dropped": revised[1], "open_left_out": open_left}
    if not todo:
        ctx.say(f"bank: every question of the set is in {folder.relative(folder.bank)} already")
        return {"status": "skipped", "recorded": 0, "in_bank": len(recorded), **summary}
    ids = ctx.run_dir / "bank-ids.txt"
    ids.parent.mkdir(parents=True, exist_ok=True)
    ids.write_text("\n".join(todo) + "\n", encoding="utf-8")
    argv = ["bank", "record", "--tasks", str(folder.set), "--out", str(folder.bank), "--ids", str(ids)]
    catalogue = bank_catalogue(folder, s)
    argv += ["--pool", s.bank_pool, "--catalogue", catalogue, "--step-timeout", f"{s.step_timeout:g}"]
    argv += ["--cache", s.cache] if s.cache else []
    if s.grader:
        argv += ["--judge", s.grader, *(["--judge-pool", s.pool] if s.pool else [])]
    ctx.ran("record", argv)  # the command an operator would type for the same rows
    chosen = set(todo)
    split = _matrix_splits(ctx)  # a bank row keeps its question's split, so the gate holds the same questions out
    record_local_bank(
        [dataclasses.replace(t, split=split.get(t.id, t.split)) for t in tasks if t.id in chosen],
        folder.bank,
        pool=s.bank_pool,
        catalogue=local_catalogue(name=catalogue),
        cache=cache,
        step_timeout_s=s.step_timeout,
        judge=judge,
        on_progress=lambda p: ctx.say(f"bank: [{p.done}/{p.total}] {p.task_id}: {p.seconds:.0f} s"),
    )
    graded |= {i: _grading(by_id[i]) for i in todo}
    _, after = read_rows(folder.bank / "matrix.csv")
    return {"status": "done", "recorded": len(todo), "in_bank": len(after), **summary,
            "ids": folder.relative(ids)}  # fmt: skip


def bank_catalogue(folder: Folder, s: Settings) -> str:
    """The catalogue the folder's bank records: the one its ``workflows.json`` names once it has
    one; else ``--bank-catalogue``; else ``local-checked``. ConfigError when ``--bank-catalogue``
    names another than the bank's (its columns are fixed)."""
    sidecar = folder.bank / "workflows.json"
    if sidecar.is_file():
        try:
            kept = str(json.loads(sidecar.read_text(encoding="utf-8"))["catalogue"])
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"{sidecar} is not a bank's workflows.json; move it away and run again") from None
        if s.bank_catalogue is not None and s.bank_catalogue != kept:
            raise ConfigError(
                f"--bank-catalogue {s.bank_catalogue}: this folder's bank records {kept!r} (its columns are fixed); "
                "drop the option, or start another loop in a new --dir"
            )
        return kept
    return s.bank_catalogue or "local-checked"


def _matrix_splits(ctx: Context) -> dict[str, str]:
    """Each question's split in the folder's matrix (empty before the first eval)."""
    from podium.eval.replay import OutcomeMatrix

    if not ctx.folder.matrix.is_file():
        return {}
    return {row.sample_id: row.split for row in OutcomeMatrix.load(ctx.folder.matrix).rows.values()}


def lm_config(s: Settings) -> GRPOTrainConfig:
    """The GRPO settings of ``--policy lm``: the preset's, with the loop's λ, μ, seed, workflow
    length and, where given, base model and number of steps."""
    from podium.train.grpo import GRPOTrainConfig

    model = s.model or GRPOTrainConfig.model
    base = GRPOTrainConfig.paper(model) if s.preset == "paper" else GRPOTrainConfig(model=model)
    config = dataclasses.replace(base, lam=s.lam, mu=s.mu, seed=s.seed, max_steps_per_workflow=s.max_steps)
    return config if s.steps is None else dataclasses.replace(config, steps=s.steps)


def _train_options(ctx: Context) -> dict[str, Any]:
    s = ctx.settings
    if s.policy == "lm":
        config = lm_config(s)
        keys = ("model", "steps", "lam", "mu", "seed", "max_steps_per_workflow", "generations", "learning_rate")
        return {k: getattr(config, k) for k in keys}
    if s.policy == "plans":
        return {"lam": s.lam, "mu": s.mu, "dims": s.dims, "seed": s.seed, "clusters": s.table_clusters,
                "max_cost_ratio": s.max_cost_ratio}  # fmt: skip
    return {"lam": s.lam, "mu": s.mu, "generations": s.generations, "popsize": s.popsize, "dims": s.dims,
            "max_steps": s.max_steps, "seed": s.seed}  # fmt: skip


def _source(ctx: Context) -> Path:
    """What the policy trains on and the gate replays: the matrix (light), the bank (plans)."""
    return ctx.folder.bank if ctx.settings.policy == "plans" else ctx.folder.matrix


def _source_sha(ctx: Context) -> str | None:
    """The sha256 of the training data's file (the bank's matrix.csv for plans); None if none."""
    path = ctx.folder.bank / "matrix.csv" if ctx.settings.policy == "plans" else ctx.folder.matrix
    return sha256_file(path) if path.is_file() else None


def _trained(ctx: Context, data_sha: str | None) -> Any:
    """The latest version of the name trained on these data bytes (:func:`_source_sha`) with
    these options, or None."""
    from podium.registry import Registry

    wanted, s = _train_options(ctx), ctx.settings
    key = "bank_sha256" if s.policy == "plans" else "matrix_sha256"
    for version in reversed(Registry().versions(s.name)):
        try:
            info = version.training()
        except ConfigError:
            continue
        same = info.policy == s.policy and all(info.config.get(k) == v for k, v in wanted.items())
        embedder = s.policy == "lm" or info.embedder == s.encoder  # an LM conductor reads the text
        if same and info.data.get(key) == data_sha and embedder:
            return version
    return None


def _matrix_to_train(ctx: Context) -> tuple[str | None, dict[str, Any] | None]:
    """The matrix's sha256, and the train stage's result where there is nothing to train (no
    matrix yet; a version of the name trained on these bytes with these options), else None."""
    if not ctx.folder.matrix.is_file():
        return "", {"status": "waiting", "reason": "no outcome matrix yet"}
    matrix_sha = sha256_file(ctx.folder.matrix)
    earlier = _trained(ctx, matrix_sha)
    if earlier is not None:
        ctx.say(f"train: {earlier.ref} was trained on this very matrix with these options; not trained again")
        return matrix_sha, {
            "status": "skipped",
            "version": earlier.ref,
            "reason": f"{earlier.ref} was trained on this matrix",
        }
    return matrix_sha, None


def train_stage(ctx: Context) -> dict[str, Any]:
    """Stage 5 (module docstring)."""
    from podium.eval.matrix import split_counts
    from podium.train.light import MIN_QUESTIONS, Generation, LightTrainConfig, train_light_version

    s, folder = ctx.settings, ctx.folder
    if s.policy == "plans":
        return _train_plans(ctx)
    if s.policy == "lm":
        return _train_lm(ctx)
    matrix_sha, nothing_to_do = _matrix_to_train(ctx)
    if nothing_to_do is not None:
        return nothing_to_do
    n_train = split_counts(folder.matrix).get("train", 0)
    if n_train < MIN_QUESTIONS:
        reason = (
            f"{n_train} training question(s) in {folder.relative(folder.matrix)}; the light conductor needs "
            f"{MIN_QUESTIONS}: the loop trains once more traffic is in"
        )
        ctx.say(f"train: waiting — {reason}")
        return {"status": "waiting", "reason": reason}
    argv = ["train", "--replay", str(folder.matrix), "--name", s.name, "--lam", f"{s.lam:g}", "--mu", f"{s.mu:g}"]
    argv += ["--generations", str(s.generations), "--dims", str(s.dims), "--embedder", s.encoder]
    argv += ["--max-steps", str(s.max_steps), "--seed", str(s.seed)]
    argv += ["--popsize", str(s.popsize)] if s.popsize else []
    ctx.ran("train", argv)
    ctx.say(f"train: {s.generations} CMA-ES generation(s) on {n_train} training question(s)")

    def on_generation(g: Generation) -> None:
        if (g.generation + 1) % 20 == 0:
            ctx.say(f"train: generation {g.generation + 1}, validation reward {g.validation_reward:.4f}")

    config = LightTrainConfig(
        dims=s.dims, max_steps=s.max_steps, lam=s.lam, mu=s.mu, generations=s.generations,
        popsize=s.popsize or None, seed=s.seed,
    )  # fmt: skip
    version, result, _ = train_light_version(
        folder.matrix, s.name, config, embedder=s.encoder, on_generation=on_generation
    )
    best = result.history[result.best_generation] if result.history else None
    summary = {"status": "done", "version": version.ref, "questions": result.data.get("questions")}
    if best is not None:
        summary |= {"validation_reward": best.validation_reward, "validation_quality": best.validation_quality}
    if result.data.get("warning"):
        summary["warning"] = result.data["warning"]
        ctx.say(f"train: warning: {result.data['warning']}")
    ctx.state["train"] = {"run": ctx.run_id, "version": version.ref, "matrix_sha256": matrix_sha}
    ctx.say(f"train: {version.ref}")
    return summary


def _train_lm(ctx: Context) -> dict[str, Any]:
    """Stage 5 for ``--policy lm``: GRPO of an LM conductor on the matrix's training rows."""
    from podium.eval.matrix import split_counts
    from podium.train.grpo import StepMetrics
    from podium.train.lm_version import train_lm_version

    s, folder = ctx.settings, ctx.folder
    matrix_sha, nothing_to_do = _matrix_to_train(ctx)
    if nothing_to_do is not None:
        return nothing_to_do
    config = lm_config(s)
    n_train = split_counts(folder.matrix).get("train", 0)
    if n_train < config.questions_per_step:
        reason = (
            f"{n_train} training question(s) in {folder.relative(folder.matrix)}; a GRPO step samples "
            f"{config.questions_per_step}: the loop trains once more traffic is in"
        )
        ctx.say(f"train: waiting — {reason}")
        return {"status": "waiting", "reason": reason}
    argv = ["train", "--policy", "lm", "--replay", str(folder.matrix), "--name", s.name, "--preset", s.preset]
    argv += ["--model", config.model, "--steps", str(config.steps), "--lam", f"{s.lam:g}", "--mu", f"{s.mu:g}"]
    argv += ["--max-steps", str(s.max_steps), "--seed", str(s.seed)]
    ctx.ran("train", argv)
    ctx.say(f"train: {config.steps} GRPO step(s) of {config.model} on {n_train} training question(s)")

    def on_step(m: StepMetrics) -> None:
        if m.step % 10 == 0 or m.step == config.steps:
            ctx.say(f"train: GRPO step {m.step}, reward {m.reward_mean:.3f}, parsed {m.parse_rate:.0%}")

    version, result, _ = train_lm_version(folder.matrix, s.name, config, on_step=on_step)
    last = result.metrics[-1] if result.metrics else None
    summary: dict[str, Any] = {"status": "done", "version": version.ref, "questions": n_train, "policy": "lm"}
    summary["grpo_steps"] = len(result.metrics)
    if last is not None:
        summary |= {"reward": last.reward_mean, "parse_rate": last.parse_rate}
    ctx.state["train"] = {"run": ctx.run_id, "version": version.ref, "matrix_sha256": matrix_sha}
    ctx.say(f"train: {version.ref}")
    return summary


def _train_plans(ctx: Context) -> dict[str, Any]:
    """Stage 5 for ``--policy plans``: the plan conductor on the bank's training rows."""
    from podium.embed import Embedder, encoder_choice
    from podium.eval.bank import read_rows
    from podium.eval.plans import load_source, plan_outcomes
    from podium.eval.session import EvalSpec
    from podium.train.plans import AUTO, PlanTrainConfig
    from podium.train.plans_version import MIN_QUESTIONS, train_plans_version

    s, folder = ctx.settings, ctx.folder
    if not (folder.bank / "matrix.csv").is_file():
        return {"status": "waiting", "reason": "no workflow bank yet (the record stage's --bank step fills it)"}
    bank_sha = _source_sha(ctx)
    earlier = _trained(ctx, bank_sha)
    if earlier is not None:
        ctx.say(f"train: {earlier.ref} was trained on this very bank with these options; not trained again")
        return {"status": "skipped", "version": earlier.ref, "reason": f"{earlier.ref} was trained on this bank"}
    _, columns, rows, plans = load_source(folder.bank)
    unsplit = [r["sample_id"] for r in rows if not r["split"]]
    if unsplit:  # rows recorded before the bank took the matrix's splits
        split = _matrix_splits(ctx)
        rows = [{**r, "split": r["split"] or split.get(r["sample_id"], "")} for r in rows]
    rows = [r for r in rows if r["split"] == "train"]
    if len(rows) < MIN_QUESTIONS:
        _, every = read_rows(folder.bank / "matrix.csv")
        reason = (
            f"{len(rows)} training question(s) in {folder.relative(folder.bank)} ({len(every)} in all); the plan "
            f"conductor needs {MIN_QUESTIONS}: the loop trains once the bank holds more"
        )
        ctx.say(f"train: waiting — {reason}")
        return {"status": "waiting", "reason": reason}
    argv = ["train", "--policy", "plans", "--replay", str(folder.bank), "--name", s.name, "--lam", f"{s.lam:g}"]
    argv += ["--mu", f"{s.mu:g}", "--dims", str(s.dims), "--embedder", s.encoder, "--seed", str(s.seed)]
    if s.table_clusters:
        argv += ["--clusters", "auto" if s.table_clusters == AUTO else str(s.table_clusters)]
    if s.max_cost_ratio is not None:
        argv += ["--max-cost-ratio", f"{s.max_cost_ratio:g}"]
    ctx.ran("train", argv)
    config = PlanTrainConfig(
        lam=s.lam, mu=s.mu, dims=s.dims, seed=s.seed, clusters=s.table_clusters, max_cost_ratio=s.max_cost_ratio
    )
    outcomes = plan_outcomes(plans, columns, rows)
    embedder = Embedder(EvalSpec().embeddings, encoder=encoder_choice(s.encoder))
    ctx.say(f"train: the plan conductor on {len(rows)} training question(s) of the bank ({len(plans)} plans)")
    vectors = embedder.embed([r["prompt"] for r in rows])
    data = {"bank_sha256": bank_sha, "embedder_choice": s.encoder}
    ref, record = train_plans_version(
        s.name, str(folder.bank), "train", outcomes, vectors, columns, embedder.name, config, data=data
    )
    cv = record["cross_validation"]
    ctx.state["train"] = {"run": ctx.run_id, "version": ref, "bank_sha256": bank_sha}
    ctx.say(f"train: {ref} (cross-validated quality {cv['quality']['mean']:.3f})")
    return {"status": "done", "version": ref, "questions": len(rows), "policy": "plans",
            "validation_quality": cv["quality"]["mean"], "plans_chosen": record["plans_chosen"]}  # fmt: skip


def promote_stage(ctx: Context, trained: dict[str, Any]) -> dict[str, Any]:
    """Stage 6 (module docstring): the gate's verdict on the version stage 5 trained or found."""
    from podium.registry import Registry
    from podium.train.promotion import GateSpec, promote_version

    ref = trained.get("version")
    if not ref:
        return {"status": "skipped", "reason": "no version to promote (nothing trained)"}
    registry = Registry()
    current = registry.promoted(ctx.settings.name)
    if current is not None and current.ref == ref:
        ctx.say(f"promote: {ref} is the promoted version")
        return {"status": "already promoted", "candidate": ref, "current": ref}
    source = _source(ctx)
    gate = {"max_quality_drop": ctx.settings.max_quality_drop, "allow_quality_drop": ctx.once.allow_quality_drop}
    key = {"candidate": ref, "against": current.ref if current else None, "matrix_sha256": _source_sha(ctx), **gate}
    last = ctx.state.get("promote")
    if last is not None and last.get("key") == key:
        ctx.say(f"promote: the gate judged {ref} in run {last['run']} against the same version; {last['status']}")
        return {"status": "skipped", "candidate": ref, "decided_in": last["run"], "decision": last["status"],
                "reason": last["reason"], "current": current.ref if current else None}  # fmt: skip
    argv = ["conductor", "promote", ref, "--replay", str(source)]
    argv += ["--max-quality-drop", f"{gate['max_quality_drop']:g}"] if gate["max_quality_drop"] is not None else []
    argv += ["--allow-quality-drop"] if gate["allow_quality_drop"] else []
    ctx.ran("promote", argv)  # the command an operator would type for the same verdict
    spec = GateSpec(
        source, max_quality_drop=ctx.settings.max_quality_drop, allow_quality_drop=ctx.once.allow_quality_drop
    )
    promotion = promote_version(registry, ref, spec)
    status = "promoted" if promotion.promoted else "refused"
    ctx.state["promote"] = {"run": ctx.run_id, "key": key, "status": status, "reason": promotion.line}
    ctx.say(f"promote: {promotion.line}")
    now = registry.promoted(ctx.settings.name)
    return {
        "status": status,
        "candidate": ref,
        "against": promotion.against,
        "reason": promotion.line,
        "overridden": promotion.overridden,
        "current": now.ref if now else None,
        "report": str(promotion.folder),
    }
