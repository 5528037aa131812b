"""``podium train`` and ``podium conductor list | show | export | eval | promote | rollback``.

Exit codes: 0 done, 2 bad options or input, 3 promotion refused (the candidate did not beat the
current conductor's reward on the held-out split, or its quality fell more than the guard allows).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from podium._args import MANY, SEED, WholeNumber
from podium._render import progress_bar
from podium.errors import ConfigError
from podium.registry import Registry, TrainingInfo, Version
from podium.train.reward import workflow_reward

if TYPE_CHECKING:
    from podium.embed import Encoder

__all__ = ["EXIT_REFUSED", "add_parsers", "cmd_conductor", "cmd_train", "run"]

EXIT_REFUSED = 3


def add_parsers(sub: Any) -> None:
    """The ``train`` and ``conductor`` subcommands."""
    t = sub.add_parser(
        "train",
        help="train a conductor offline on recorded outcomes (light conductor: CMA-ES, minutes on CPU)",
        description=(
            "Train a conductor offline. --policy light: a frozen sentence embedding and a linear head "
            "choosing worker and role per step, trained by CMA-ES on an outcome matrix's train split "
            "(replay: no model is called). The result is stored in the conductor registry."
        ),
    )
    t.add_argument(
        "--replay", type=Path, required=True, metavar="MATRIX.csv", help="outcome matrix (or, for plans, a bank folder)"
    )
    t.add_argument(
        "--policy",
        choices=["light", "plans", "lm"],
        default="light",
        help="light (default: CMA-ES, worker and role per step), plans (a composition per question, on a workflow "
        "bank: podium bank record) or lm (GRPO)",
    )
    t.add_argument("--name", default="light", help="registry name (default: light); each run adds a version")
    t.add_argument("--lam", type=float, default=0.0, help="cost penalty λ in the reward, 1/USD (default 0)")
    t.add_argument(
        "--mu",
        type=float,
        default=0.0,
        help="latency penalty μ in the reward, 1/second (default 0; needs a matrix with |latency_s columns)",
    )
    t.add_argument(
        "--generations",
        action=WholeNumber,
        low=0,
        high=MANY,
        default=60,
        help="CMA-ES generations (default 60; 0 stores the untrained policy)",
    )
    t.add_argument(
        "--popsize", action=WholeNumber, low=2, high=100_000, help="candidates per generation (default: CMA-ES's)"
    )
    t.add_argument(
        "--dims",
        action=WholeNumber,
        low=0,
        high=100_000,
        default=16,
        help="PCA dimensions of the question embedding (default 16)",
    )
    t.add_argument(
        "--ensemble",
        action=WholeNumber,
        low=1,
        high=10_000,
        default=5,
        help="plans: heads trained on bootstrap resamples, averaged (default 5)",
    )
    t.add_argument(
        "--embedder",
        default="minilm",
        metavar="MODEL",
        help="light: the frozen encoder: minilm (all-MiniLM-L6-v2, needs the router extra; default) or an "
        "embedded model id whose mean-pooled hidden state llama.cpp computes (e.g. smollm2-135m-instruct: "
        "no torch needed where the conductor runs)",
    )
    t.add_argument(
        "--max-steps", action=WholeNumber, low=1, high=20, default=3, help="workflow length limit (default 3)"
    )
    t.add_argument("--split", default="train", help="matrix split to train on (default: train)")
    t.add_argument("--tag", action="append", default=[], help="train on questions with this tag (repeatable)")
    t.add_argument("--seed", action=WholeNumber, low=SEED[0], high=SEED[1], default=0)
    t.add_argument("--json", action="store_true", help="print the training record as JSON")
    lm = t.add_argument_group("--policy lm (GRPO with TRL, LoRA)")
    lm.add_argument("--model", default="smollm2-135m-instruct", help="embedded base model (podium models list)")
    lm.add_argument("--preset", choices=["cpu", "paper"], default="cpu", help="cpu (default) or the paper's recipe")
    lm.add_argument(
        "--steps",
        action=WholeNumber,
        low=0,
        high=MANY,
        help="GRPO steps (cpu default 20; 0 stores the warm-started or untrained adapter)",
    )
    lm.add_argument(
        "--questions-per-step", action=WholeNumber, low=1, high=MANY, help="questions per step (cpu default 2)"
    )
    lm.add_argument(
        "--num-generations",
        action=WholeNumber,
        low=1,
        high=100_000,
        help="G, workflows sampled per question (cpu default 4)",
    )
    lm.add_argument(
        "--max-completion-tokens",
        action=WholeNumber,
        low=1,
        high=1_000_000,
        help="conductor output limit (cpu default 160)",
    )
    lm.add_argument("--learning-rate", type=float, help="cpu default 2e-5")
    lm.add_argument(
        "--warm-start-epochs",
        action=WholeNumber,
        low=0,
        high=100_000,
        help="epochs of the format warm start before GRPO: teaches the workflow format with random decisions "
        "(cpu default 1, paper 0; 0 turns it off; docs/training.md)",
    )
    lm.add_argument("--no-adaptive-pool", action="store_true", help="always show the whole pool")
    lm.add_argument("--resume", metavar="NAME@vN", help="continue that version from its last checkpoint")

    c = sub.add_parser("conductor", help="the registry of trained conductors").add_subparsers(
        dest="conductor_command", required=True, metavar="SUBCOMMAND"
    )
    c.add_parser("list", help="trained conductors and their versions").add_argument("--json", action="store_true")
    show = c.add_parser("show", help="one version: config, data, learning curve, evals")
    show.add_argument("ref", help="NAME or NAME@vN")
    show.add_argument("--json", action="store_true")
    for name, text in (
        ("eval", "evaluate a version on a held-out split against baselines"),
        ("promote", "promote a version if it beats the current one on a held-out split"),
    ):
        p = c.add_parser(name, help=text, description=text)
        p.add_argument("ref", help="NAME@vN (or NAME: its latest version)")
        p.add_argument("--replay", type=Path, required=True, metavar="MATRIX.csv", help="outcome matrix")
        p.add_argument("--split", default="test", help="held-out split (default: test)")
        p.add_argument("--tag", action="append", default=[], help="evaluate on questions with this tag")
        p.add_argument(
            "--limit",
            action=WholeNumber,
            low=1,
            high=MANY,
            help="only the first N questions (an LM conductor runs a model on each)",
        )
        p.add_argument("--json", action="store_true")
        if name == "promote":
            p.add_argument("--lam", type=float, help="λ of the promotion reward (default: the candidate's training λ)")
            p.add_argument(
                "--max-quality-drop",
                type=float,
                metavar="Q",
                help="most mean quality the candidate may lose against the current promoted version, on the same "
                "questions (absolute; default 0.01; also applied against the best single worker when given)",
            )
            p.add_argument(
                "--allow-quality-drop",
                action="store_true",
                help="promote even if the quality guard fails (the reward must still beat; logged as an override)",
            )
    rb = c.add_parser("rollback", help="undo the latest promotion of NAME")
    rb.add_argument("name")
    ex = c.add_parser(
        "export",
        help="convert an LM conductor's LoRA adapter to GGUF for llama.cpp (done after training)",
        description=(
            "Write <version>/adapter.gguf from <version>/adapter (peft LoRA) for the base model it was trained "
            "on, and record its sha256 in train.json; llama.cpp checks it at load. --check compares the "
            "adapter's effect on the next-token logits in llama.cpp and in transformers (needs the train extra)."
        ),
    )
    ex.add_argument("ref", help="NAME@vN (or NAME: its latest version)")
    ex.add_argument("--check", action="store_true", help="compare llama.cpp with transformers + peft (~30 s)")
    ex.add_argument("--amplify", type=float, default=1.0, help="--check: scale the adapter on both sides (default 1)")
    ex.add_argument("--json", action="store_true")


def cmd_train(args: argparse.Namespace, out: Console, err: Console) -> int:
    from podium.embed import Embedder
    from podium.eval.replay import OutcomeMatrix
    from podium.eval.session import EvalSpec
    from podium.train.light import Generation, LightTrainConfig, train_light

    if args.lam < 0:
        raise ConfigError(f"--lam must be ≥ 0, got {args.lam}")
    if args.mu < 0:
        raise ConfigError(f"--mu must be ≥ 0, got {args.mu}")
    if args.policy == "lm":
        return _train_lm(args, out, err)
    if args.policy == "plans":
        from podium.train.plans_cli import train_plans_command

        return train_plans_command(args, out, err)
    if args.dims < 1:  # the plans policy takes 0 (no embedding); the light policy needs one
        raise ConfigError(f"--dims must be at least 1 for the light policy, got {args.dims}")
    registry = Registry()
    config = LightTrainConfig(
        dims=args.dims,
        max_steps=args.max_steps,
        lam=args.lam,
        mu=args.mu,
        generations=args.generations,
        popsize=args.popsize,
        seed=args.seed,
        split=args.split,
    )
    matrix = OutcomeMatrix.load(args.replay)
    embedder = Embedder(EvalSpec().embeddings, encoder=_encoder(args.embedder))
    progress = progress_bar("train", err)
    with progress:
        bar = progress.add_task("embedding questions", total=config.generations)

        def on_generation(g: Generation) -> None:
            progress.update(
                bar, advance=1, description=f"reward {g.best_reward:.4f} · validation {g.validation_reward:.4f}"
            )

        result = train_light(matrix, embedder, config, tags=args.tag, on_generation=on_generation)
    version = registry.create(args.name)
    result.policy.save(version.policy_path)
    info = TrainingInfo.from_json({"policy": "light", **result.to_json()})
    version.write_training(info)
    record = info.to_json()
    if result.history:
        _curve(version, record)
    if args.json:
        print(json.dumps({"version": version.ref, "path": str(version.path), **record}, indent=1))
        return 0
    out.print(
        f"[green]trained {version.ref}[/] in {sum(g.seconds for g in result.history):.1f} s "
        f"of CMA-ES after embedding the questions ({len(result.history)} generations; kept {result.best_generation})"
    )
    if not result.history:
        out.print(f"stored the untrained policy (zero weights) as {version.ref} in {version.path}")
        return 0
    best = result.history[result.best_generation]
    out.print(
        f"validation ({result.data['validation']} held-out training questions): reward {best.validation_reward:.4f}, "
        f"quality {best.validation_quality:.3f}, cost ${best.validation_cost:.6f}/request, "
        f"{best.validation_steps:.2f} steps"
    )
    out.print(f"stored in {version.path} (policy.npz, train.json, learning-curve.png)")
    out.print(Text(f"next: podium conductor eval {version.ref} --replay {args.replay}", style="dim"))
    return 0


def _encoder(choice: str) -> Encoder:
    """``--embedder``: ``minilm`` or an embedded model id. Raises ConfigError for anything else."""
    from podium.embed import LlamaCppEncoder, MiniLMEncoder
    from podium.local_models import EMBEDDED_MODELS

    if choice == "minilm":
        return MiniLMEncoder()
    if choice in EMBEDDED_MODELS:
        return LlamaCppEncoder(choice)
    raise ConfigError(f"--embedder {choice!r}: use minilm or an embedded model id ({', '.join(EMBEDDED_MODELS)})")


def _train_lm(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``podium train --policy lm``: GRPO on a replay pool (:mod:`podium.train.grpo`)."""
    import os
    import warnings
    from dataclasses import asdict, replace

    # the libraries' own tqdm bars and deprecation notices would interleave with podium's
    # progress bar; TQDM_DISABLE must be set before tqdm is first imported (by transformers)
    os.environ.setdefault("TQDM_DISABLE", "1")
    for library in ("transformers", "trl", "peft", "accelerate"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=library)
        warnings.filterwarnings("ignore", category=UserWarning, module=library)

    from podium.eval.plot import learning_curve_plot
    from podium.eval.replay import OutcomeMatrix
    from podium.local_models import resolve_model
    from podium.train.grpo import GRPOTrainConfig, StepMetrics, train_grpo

    base = GRPOTrainConfig.paper(args.model) if args.preset == "paper" else GRPOTrainConfig(model=args.model)
    overrides = {
        "steps": args.steps,
        "questions_per_step": args.questions_per_step,
        "generations": args.num_generations,
        "max_completion_tokens": args.max_completion_tokens,
        "learning_rate": args.learning_rate,
    }
    for key, value in overrides.items():
        if value is not None and value <= 0 and key != "steps":
            raise ConfigError(f"--{key.replace('_', '-')} must be positive, got {value}")
    config = replace(
        base,
        **{k: v for k, v in overrides.items() if v is not None},
        lam=args.lam,
        mu=args.mu,
        adaptive_pool=not args.no_adaptive_pool,
        split=args.split,
        tags=tuple(args.tag),
        seed=args.seed,
        max_steps_per_workflow=args.max_steps,
    )
    if args.warm_start_epochs is not None:
        config = replace(config, warm_start_epochs=args.warm_start_epochs)
    if config.generations < 2:
        raise ConfigError("--num-generations must be at least 2 (GRPO's advantage is relative to the group)")
    source: Any
    if args.replay.is_dir():  # a workflow bank: multi-step workflows replay exactly, role instructions only
        from podium.eval.bank import read_bank
        from podium.pool import load_pool
        from podium.train.sources import BankSource

        pool = load_pool("local-tools")
        source = BankSource(read_bank(args.replay), {w.name: w.description for w in pool.workers})
        config = replace(config, roles=True)
        data_name = str(args.replay)
    else:
        source = OutcomeMatrix.load(args.replay)
        data_name = source.path.name
    resolve_model(config.model, verify=False)  # an unknown or missing base model fails before a version exists
    registry = Registry()
    version = registry.get(args.resume) if args.resume else registry.create(args.name if args.name != "light" else "lm")
    progress = progress_bar("GRPO", err)
    with progress:
        bar = progress.add_task("loading the base conductor", total=config.steps or None)

        def on_step(m: StepMetrics) -> None:
            progress.update(
                bar,
                total=config.steps,
                completed=m.step,
                description=f"reward {m.reward_mean:.3f} ± {m.reward_std:.3f} · parsed {m.parse_rate:.0%}",
            )

        def on_warm_step(step: int, total: int, loss: float) -> None:
            done = step >= total and config.steps > 0  # then GRPO's own bar takes over
            progress.update(
                bar,
                total=config.steps if done else total,
                completed=0 if done else step,
                description="GRPO: sampling the first workflows" if done else f"format warm start · loss {loss:.3f}",
            )

        try:
            result = train_grpo(
                source, config, version.path, resume=bool(args.resume), on_step=on_step, on_warm_step=on_warm_step
            )
        except ConfigError:
            if not args.resume and not any(version.path.glob("checkpoint-*")):
                shutil.rmtree(version.path, ignore_errors=True)  # nothing worth keeping: no empty version
            raise
    metrics = result.metrics
    adapter = (
        {"adapter_gguf": result.adapter.to_json()}
        if result.adapter is not None
        else {"adapter_gguf_error": result.export_error}
    )
    info = TrainingInfo(
        "lm",
        asdict(config),
        {"matrix": data_name, "split": config.split, "tags": list(config.tags)},
        [asdict(m) for m in metrics],
        {"warm_start_loss": result.warm_start_loss, **adapter},
    )
    version.write_training(info)
    record = info.to_json()
    if metrics:
        learning_curve_plot(
            version.path / "learning-curve.png",
            [m.step for m in metrics],
            {
                "reward (mean of rollouts)": [m.reward_mean for m in metrics],
                "parse rate": [m.parse_rate for m in metrics],
            },
            xlabel="GRPO step",
            title=f"{version.ref}: {config.model}, G = {config.generations}, λ = {config.lam:g}",
        )
    if args.json:
        print(json.dumps({"version": version.ref, "path": str(version.path), **record}, indent=1))
        return 0
    last = metrics[-1] if metrics else None
    if config.steps == 0:
        what = "the format warm start only" if config.warm_start_epochs else "the untrained base (zero adapter)"
        out.print(f"[green]stored {version.ref}[/]: {what} of {config.model}, no GRPO step")
    else:
        out.print(f"[green]trained {version.ref}[/]: {len(metrics)} GRPO steps of {config.model} with LoRA")
    warm = result.warm_start_loss
    if warm:
        out.print(f"format warm start: {len(warm)} steps, loss {warm[0]:.3f} → {warm[-1]:.3f}")
    if last is not None:
        out.print(f"last step: reward {last.reward_mean:.3f} ± {last.reward_std:.3f}, parsed {last.parse_rate:.0%}")
    stored = sorted(f"{p.name}/" if p.is_dir() else p.name for p in version.path.iterdir())
    out.print(f"stored in {version.path} ({', '.join(stored)})")
    if result.adapter is None:
        err.print(Text(f"the GGUF export failed: {result.export_error}", style="yellow"))
    elif result.adapter.identity and config.steps > 0:
        err.print(
            Text(
                "the adapter is still zero (no question's rollouts got different rewards): it changes nothing; "
                "train longer, with more tokens or more generations",
                style="yellow",
            )
        )
    else:
        out.print(Text(f"next: podium eval --replay {args.replay} --methods lm:{version.ref},single", style="dim"))
    return 0


def _curve(version: Version, record: dict[str, Any]) -> None:
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


def cmd_conductor(args: argparse.Namespace, out: Console, err: Console) -> int:
    registry = Registry()
    if args.conductor_command == "list":
        return _list(registry, args.json, out)
    if args.conductor_command == "show":
        version = registry.get(args.ref)
        info = {"ref": version.ref, "path": str(version.path), **version.training().to_json()}
        info["evals"] = sorted(str(p.relative_to(version.path)) for p in version.path.glob("eval/*/eval.json"))
        if args.json:
            print(json.dumps(info, indent=1))
        else:
            cfg = info.get("config", {})
            out.print(f"[bold]{version.ref}[/] · {version.path}")
            out.print(f"  config: {json.dumps(cfg)}")
            out.print(f"  data: {json.dumps(info.get('data', {}))}")
            if info.get("policy") == "lm":
                gguf = info.get("adapter_gguf")
                adapter = (
                    f"{gguf['file']} (sha256 {gguf['sha256'][:12]}…, {gguf['tensors']} weights, r = {gguf['rank']})"
                    if gguf
                    else f"not exported ({info.get('adapter_gguf_error') or 'podium conductor export ' + version.ref})"
                )
                warm = info.get("warm_start_loss") or []
                if warm:
                    out.print(f"  format warm start: {len(warm)} steps, loss {warm[0]:.3f} → {warm[-1]:.3f}")
                out.print(f"  {len(info.get('history', []))} GRPO steps; llama.cpp adapter: {adapter}")
                out.print(f"  evals: {', '.join(info['evals']) or 'none'}")
            else:
                evals = ", ".join(info["evals"]) or "none"
                out.print(f"  kept generation {info.get('best_generation')}; evals: {evals}")
        return 0
    if args.conductor_command == "export":
        return _export(registry, args, out, err)
    if args.conductor_command == "rollback":
        target = registry.rollback(args.name)
        out.print(f"[green]{args.name}: {target.ref} is current again[/]")
        return 0
    candidate = registry.get(args.ref, bare="latest")
    current = registry.promoted(candidate.name)
    methods = [_method(candidate), "single", "random"]
    if current is not None and current.number != candidate.number:
        methods.insert(1, _method(current))
    report = _evaluate(args, methods, err)
    folder = candidate.path / "eval" / f"{Path(args.replay).stem}-{args.split}"
    from podium.eval.report import write_report

    write_report(report, folder, results=False)
    if args.conductor_command == "eval":
        if args.json:
            print(json.dumps({k: v for k, v in report.items() if k != "results"}, indent=1))
        else:
            _summary(report, out)
            out.print(Text(f"report: {folder}", style="dim"))
        return 0
    return _promote(registry, candidate, current, report, args, out)


def _evaluate(args: argparse.Namespace, methods: list[str], err: Console) -> dict[str, Any]:
    from podium.eval.session import EvalSpec, run_eval

    spec = EvalSpec(
        replay=args.replay, split=args.split, tags=tuple(args.tag), methods=tuple(methods), limit=args.limit
    )
    with err.status(f"evaluating on {Path(args.replay).name} ({args.split})"):
        return run_eval(spec)


def _summary(report: dict[str, Any], out: Console) -> None:
    table = Table(title=f"held-out: {report['config'].get('tasks', '')}")
    table.add_column("method", overflow="fold", min_width=16)  # long names wrap instead of being cut
    for col in ("n", "quality", "95 % CI", "$/request", "steps/calls", "PGR"):
        table.add_column(col, justify="right", no_wrap=True)
    for name, m in report["methods"].items():
        s = m["summary"]
        pgr = m.get("pgr")
        table.add_row(
            name, str(s["n"]), f"{s['quality']['mean']:.3f}",
            f"{s['quality']['ci95'][0]:.3f}–{s['quality']['ci95'][1]:.3f}", f"{s['cost_usd']['mean']:.6f}",
            f"{s['worker_calls']:.2f}", "–" if pgr is None else f"{pgr:.2f}",
        )  # fmt: skip
    out.print(table)


def _promote(
    registry: Registry,
    candidate: Version,
    current: Version | None,
    report: dict[str, Any],
    args: argparse.Namespace,
    out: Console,
) -> int:
    """Promote iff the candidate's held-out reward — the training objective, 0.5 + 0.5 · quality
    − λ · cost (USD), at the candidate's λ unless ``--lam`` — beats the current conductor's (for a
    name never promoted: the best single worker's by the same reward), and its quality, on the same
    questions, is not more than ``--max-quality-drop`` (default :data:`~podium.registry.QUALITY_MARGIN`)
    below the current promoted version's, unless ``--allow-quality-drop`` (the rule:
    :func:`~podium.registry.promotion_verdict`). Prints one line saying why."""
    from podium.registry import QUALITY_MARGIN, promotion_verdict

    methods = report["methods"]
    lam = args.lam if args.lam is not None else candidate.training().lam

    def reward(summary: dict[str, Any]) -> float:
        return workflow_reward(float(summary["quality"]["mean"]), float(summary["cost_usd"]["mean"]), lam=lam)

    cand = methods[_method(candidate)]["summary"]
    promoted = current is not None and current.number != candidate.number
    if current is not None and promoted:
        against_name = _method(current)
    else:
        singles = {n: m["summary"] for n, m in methods.items() if n.startswith("single:")}
        against_name = max(singles, key=lambda n: reward(singles[n]))
    against = methods[against_name]["summary"]
    q_new, q_old = cand["quality"]["mean"], against["quality"]["mean"]
    c_new, c_old = cand["cost_usd"]["mean"], against["cost_usd"]["mean"]
    r_new, r_old = reward(cand), reward(against)
    _summary(report, out)
    if current is not None and current.number == candidate.number:
        out.print(f"{candidate.ref} is already the promoted version")
        return 0
    verdict = promotion_verdict(
        candidate=candidate.ref,
        against=current.ref if current is not None and promoted else against_name,
        against_promoted=promoted,
        reward=(r_new, r_old),
        quality=(q_new, q_old),
        questions=int(cand["n"]),
        margin=args.max_quality_drop,
        override=args.allow_quality_drop,
    )
    details = f" · λ = {lam:g}; cost ${c_new:.6f} vs ${c_old:.6f}; {report['config'].get('tasks', '')}"
    if not verdict.promote:
        out.print(Text(verdict.line + details, style="bold red"))
        return EXIT_REFUSED
    margin = args.max_quality_drop if args.max_quality_drop is not None else (QUALITY_MARGIN if promoted else None)
    evidence = {
        "against": against_name,
        "split": args.split,
        "data": report["config"].get("tasks", ""),
        "lam": lam,
        "candidate": {"quality": q_new, "cost_usd": c_new, "reward": r_new},
        "current": {"quality": q_old, "cost_usd": c_old, "reward": r_old},
        "max_quality_drop": margin,
        "quality_guard_overridden": verdict.overridden,
        "reason": verdict.line,
    }
    registry.promote(candidate, evidence=evidence)
    out.print(Text(verdict.line + details, style="bold yellow" if verdict.overridden else "bold green"))
    return 0


def _method(version: Version) -> str:
    """The eval method name of a stored version: ``lm:REF`` (GRPO) or ``light:REF``."""
    return f"{'lm' if version.training().policy == 'lm' else 'light'}:{version.ref}"


def _export(registry: Registry, args: argparse.Namespace, out: Console, err: Console) -> int:
    """``podium conductor export REF``: adapter/ → adapter.gguf, its sha256 into train.json."""
    version = registry.get(args.ref, bare="latest")
    info = version.training()
    if info.policy != "lm":
        raise ConfigError(
            f"{version.ref} is a {info.policy} conductor; only LM conductors (podium train --policy lm) export"
        )
    if args.amplify <= 0:
        raise ConfigError(f"--amplify must be positive, got {args.amplify}")
    try:
        import gguf  # noqa: F401

        from podium.train.export import lora_to_gguf
    except ImportError as exc:
        raise ConfigError(f"the export needs the train extra: pip install -e '.[train]' ({exc})") from exc
    base = str(info.config.get("model", ""))
    with err.status(f"exporting {version.ref} for {base}"):
        exported = lora_to_gguf(version.path / "adapter", base, version.path / "adapter.gguf")
    extra = {k: v for k, v in info.extra.items() if k != "adapter_gguf_error"}
    version.write_training(dataclasses.replace(info, extra={**extra, "adapter_gguf": exported.to_json()}))
    result: dict[str, Any] = {"version": version.ref, "path": str(version.path / exported.file), **exported.to_json()}
    if args.check and exported.identity:
        err.print(
            Text("every lora_B is zero: the adapter changes nothing, so there is nothing to check", style="yellow")
        )
    elif args.check:
        from podium.train.export import logit_agreement

        with err.status("comparing llama.cpp with transformers + peft"):
            agreement = logit_agreement(
                version.path / "adapter", base, version.path / exported.file, _CHECK_TEXT, amplify=args.amplify
            )
        result["check"] = {**asdict(agreement), "amplify": args.amplify, "text": _CHECK_TEXT}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    out.print(
        f"[green]exported {version.ref}[/]: {exported.file} ({exported.tensors} weights, r = {exported.rank}, "
        f"alpha = {exported.alpha:g}, sha256 {exported.sha256[:12]}…) for {base}"
    )
    if "check" in result:
        a = result["check"]
        out.print(
            f"llama.cpp vs transformers, change of the logits over {a['positions']} tokens: cosine {a['cosine']:.4f}, "
            f"norm ratio {a['norm_ratio']:.3f}, signal {a['signal']:.1f}× the runtimes' base disagreement"
        )
        if a["signal"] < 3:
            err.print(Text("the adapter's effect is too small to judge; rerun with a larger --amplify", style="yellow"))
    out.print(Text(f"run it: podium eval --replay MATRIX.csv --methods lm:{version.ref},single", style="dim"))
    return 0


_CHECK_TEXT = (
    "Question: Janet has 3 apples and buys 5 more. How many apples does she have? Decide which model should answer."
)


def _list(registry: Registry, as_json: bool, out: Console) -> int:
    rows: list[dict[str, Any]] = []
    for name in registry.names():
        promoted = registry.promoted(name)
        for v in registry.versions(name):
            info = v.training()
            rows.append(
                {
                    "ref": v.ref,
                    "policy": info.policy,
                    "promoted": promoted is not None and promoted.number == v.number,
                    "lam": info.config.get("lam"),
                    "data": info.data.get("matrix"),
                    "generations": len(info.history),
                    "warm_start_steps": len(info.extra.get("warm_start_loss") or []),
                    "path": str(v.path),
                }
            )
    if as_json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        out.print(f"no trained conductors in {registry.root}; train one: podium train --replay MATRIX.csv")
        return 0
    table = Table(title=f"conductors in {registry.root}")
    for col in ("ref", "policy", "promoted", "λ", "trained on", "generations / steps"):
        table.add_column(col)
    for r in rows:
        lam = "–" if r["lam"] is None else f"{r['lam']:g}"
        steps = str(r["generations"]) + (f" (+ warm start, {r['warm_start_steps']})" if r["warm_start_steps"] else "")
        table.add_row(r["ref"], r["policy"], "★" if r["promoted"] else "", lam, str(r["data"]), steps)
    out.print(table)
    return 0


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium train`` or ``podium conductor``; returns the exit code."""
    return (cmd_train if args.command == "train" else cmd_conductor)(args, out, err)
