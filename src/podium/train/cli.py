"""``podium train`` and ``podium conductor list | show | export | eval | promote | rollback``.

Exit codes: 0 done, 2 bad options or input, 3 promotion refused (the candidate did not beat the
current conductor's reward on the held-out split, or its quality fell more than the guard allows).

Here: the parsers, and ``podium train`` for the light policy (CMA-ES). The LM policy (GRPO) runs
in :mod:`podium.train.lm_cli`, the plans policy in :mod:`podium.train.plans_cli`, both loaded
only when asked for; ``podium conductor`` is :mod:`podium.train.conductor_cli`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from podium._args import MANY, SEED, BoundedNumber, ClusterCount, PositiveNumber, WholeNumber
from podium._render import progress_bar
from podium.errors import ConfigError
from podium.train.conductor_cli import EXIT_REFUSED, cmd_conductor

if TYPE_CHECKING:
    from podium.train.light import LightTrainConfig

__all__ = ["EXIT_REFUSED", "add_parsers", "cmd_conductor", "cmd_train", "run"]


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
    t.add_argument("--lam", action=BoundedNumber, default=0.0, help="cost penalty λ in the reward, 1/USD (default 0)")
    t.add_argument(
        "--mu",
        action=BoundedNumber,
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
        "--head",
        choices=["policy", "value"],
        default="policy",
        help="plans: policy (a softmax policy trained on the expected reward; default) or value (per plan a "
        "logistic regression of P(correct), the learned router's form; picks the best predicted reward)",
    )
    t.add_argument(
        "--l2",
        action=PositiveNumber,
        metavar="ALPHA",
        help="plans: the head's L2 penalty (default 1e-3; for --head value, scikit-learn's C = 1/(2·ALPHA·questions))",
    )
    t.add_argument(
        "--clusters",
        action=ClusterCount,
        default=0,
        metavar="K|auto",
        help="plans: a cluster table instead of the linear head — one plan per k-means cluster of the training "
        "questions' embeddings; auto picks K by silhouette (default 0: the linear head)",
    )
    t.add_argument(
        "--max-cost-ratio",
        action=PositiveNumber,
        metavar="R",
        help="plans, with --clusters: the table of highest training reward whose mean training cost is at most R × "
        "the best single worker's (an operating point set by budget instead of λ; reaches plans no λ picks)",
    )
    t.add_argument(
        "--sweep",
        action="store_true",
        help="plans: train one version per λ of a sweep over the plans' cost range (23 values; --lam is ignored) "
        "and report the cross-validated curve; podium eval … --methods light:NAME@vA..vB evaluates them as one curve",
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
    t.add_argument(
        "--split",
        default="train",
        help="matrix split to train on (default: train); plans: 'all' cross-validates over every row (a learning-"
        "curve check; a version trained so has seen the test rows)",
    )
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
    lm.add_argument(
        "--rollouts",
        choices=["transformers", "llama.cpp"],
        default="transformers",
        help="who samples the workflows: transformers (TRL's generation, default) or llama.cpp (the current "
        "adapter under the run-time grammar: every complete sample parses; docs/training.md)",
    )
    lm.add_argument("--resume", metavar="NAME@vN", help="continue that version from its last checkpoint")
    lm.add_argument(
        "--save-steps", action=WholeNumber, low=1, high=MANY, help="checkpoint every N GRPO steps (default 10)"
    )

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
            p.add_argument(
                "--lam", action=BoundedNumber, help="λ of the promotion reward (default: the candidate's training λ)"
            )
            p.add_argument(
                "--max-quality-drop",
                action=BoundedNumber,
                high=1.0,
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


def _light_config(args: argparse.Namespace) -> LightTrainConfig:
    """``podium train --policy light``'s options as the trainer's config."""
    from podium.train.light import LightTrainConfig

    return LightTrainConfig(
        dims=args.dims,
        max_steps=args.max_steps,
        lam=args.lam,
        mu=args.mu,
        generations=args.generations,
        popsize=args.popsize,
        seed=args.seed,
        split=args.split,
    )


def cmd_train(args: argparse.Namespace, out: Console, err: Console) -> int:
    from podium.train.light import Generation, require_cma, train_light_version

    if args.policy != "plans" and (args.head != "policy" or args.l2 is not None):
        raise ConfigError("--head and --l2 are options of the plan conductor: use them with --policy plans")
    if args.max_cost_ratio is not None and (args.policy != "plans" or not args.clusters):
        raise ConfigError(
            "--max-cost-ratio caps a plan conductor's cluster table: use it with --policy plans --clusters"
        )
    if args.max_cost_ratio is not None and args.sweep:
        raise ConfigError("--max-cost-ratio sets one operating point and --sweep many: give one of them")
    if args.sweep and args.policy != "plans":
        raise ConfigError("--sweep trains the plan conductor over λ: use it with --policy plans")
    if args.clusters and args.policy != "plans":
        raise ConfigError("--clusters makes the plan conductor a cluster table: use it with --policy plans")
    if args.policy == "lm":
        from podium.train.lm_cli import train_lm_command

        return train_lm_command(args, out, err)
    if args.policy == "plans":
        from podium.train.plans_cli import train_plans_command

        return train_plans_command(args, out, err)
    require_cma()
    progress = progress_bar("train", err)
    with progress:
        bar = progress.add_task(
            f"embedding the questions, then {args.generations} CMA-ES generations", total=args.generations
        )

        def on_generation(g: Generation) -> None:
            progress.update(
                bar, advance=1, description=f"reward {g.best_reward:.4f} · validation {g.validation_reward:.4f}"
            )

        version, result, record = train_light_version(
            args.replay, args.name, _light_config(args), embedder=args.embedder, tags=args.tag,
            on_generation=on_generation,
        )  # fmt: skip
    if result.data.get("warning"):
        err.print(Text(f"warning: {result.data['warning']}", style="yellow"))
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


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium train`` or ``podium conductor``; returns the exit code."""
    return (cmd_train if args.command == "train" else cmd_conductor)(args, out, err)
