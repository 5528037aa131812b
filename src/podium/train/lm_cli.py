"""``podium train --policy lm``: GRPO training of an LM conductor (:mod:`podium.train.grpo`) on a
replay pool — an outcome matrix or a workflow bank folder — stored as a new (or resumed) version
in the conductor registry, with its learning curve and, when the export works, its adapter in
GGUF for llama.cpp.

Raises ConfigError for bad options (nothing is stored then; a new version that holds no
checkpoint yet is removed when training fails).
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.text import Text

from podium._render import progress_bar
from podium.errors import ConfigError

__all__ = ["train_lm_command"]


def train_lm_command(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``podium train --policy lm``: GRPO on a replay pool (:mod:`podium.train.grpo`)."""
    from dataclasses import replace

    from podium.train.grpo import GRPOTrainConfig, StepMetrics
    from podium.train.lm_version import train_lm_version

    base = GRPOTrainConfig.paper(args.model) if args.preset == "paper" else GRPOTrainConfig(model=args.model)
    overrides = {
        "steps": args.steps,
        "questions_per_step": args.questions_per_step,
        "generations": args.num_generations,
        "max_completion_tokens": args.max_completion_tokens,
        "learning_rate": args.learning_rate,
        "save_steps": args.save_steps,
    }
    if args.warm_start_epochs is not None and args.warm_start_epochs < 0:
        raise ConfigError(f"--warm-start-epochs must be 0 or more, got {args.warm_start_epochs}")
    if args.steps is not None and args.steps < 0:
        raise ConfigError(f"--steps must be 0 or more, got {args.steps}")
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
        rollouts=args.rollouts,
    )
    if args.warm_start_epochs is not None:
        config = replace(config, warm_start_epochs=args.warm_start_epochs)
    if config.generations < 2:
        raise ConfigError("--num-generations must be at least 2 (GRPO's advantage is relative to the group)")
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

        name = args.name if args.name != "light" else "lm"
        version, result, info = train_lm_version(
            args.replay, name, config, resume=args.resume, on_step=on_step, on_warm_step=on_warm_step
        )
    metrics = result.metrics
    record = info.to_json()
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
