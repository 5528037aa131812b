"""Learning curve of the plan conductor on a workflow bank: held-out quality against the number of
training questions (docs/learned-workflows.md, "Would more training questions help?").

The bank's rows (every split) are cut into ``--folds`` parts; for each part, and each training
size n, a policy is trained on n questions drawn (seeded) from the other parts and scored on the
held-out part — so every question is scored by policies that never saw it, at every n. Per n and
configuration the cross-fitted scores are paired with the strongest one-column plan's scores on
the same questions (mean difference and 95 % interval, :func:`podium.eval.metrics.paired_difference`),
and averaged over ``--seeds`` draws. Three configurations by default (``--configs``): the linear
head (``dims=4``), the constant policy (``dims=0``: the one plan of highest mean training reward),
which shows how much the question's embedding adds, and the cluster table (``clusters=auto``).

    .venv/bin/python bench/plans_learning_curve.py data/banks/local --sizes 30,60,90,120,160 \
        --json docs/eval/heldout/learning-curve.json --png docs/eval/heldout/learning-curve.png
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from podium.embed import Embedder, encoder_choice
from podium.eval.metrics import paired_difference
from podium.eval.plans import load_source, plan_outcomes
from podium.eval.session import EvalSpec
from podium.train.plans import AUTO, PlanTrainConfig, train_plans


def curve(
    bank: Path, sizes: Sequence[int], configs: Sequence[str], seeds: int, folds: int, embedder_name: str
) -> dict[str, Any]:
    """Per configuration and size: the cross-fitted quality and its paired difference with the
    strongest one-column plan (means over seeds, and each seed's)."""
    name, columns, rows, plans = load_source(bank)
    outcomes = plan_outcomes(plans, columns, rows)
    embedder = Embedder(EvalSpec().embeddings, encoder=encoder_choice(embedder_name))
    vectors = embedder.embed([r["prompt"] for r in rows])
    n = len(rows)
    single = [j for j, p in enumerate(plans) if len(p.members) == 1 and not p.is_cascade]
    base = max(single, key=lambda j: (outcomes.score[:, j].mean(), -outcomes.cost[:, j].mean()))
    largest = n - (n + folds - 1) // folds
    sizes = [s for s in sizes if s <= largest]
    result: dict[str, Any] = {
        "bank": name,
        "questions": n,
        "folds": folds,
        "seeds": seeds,
        "against": plans[base].id,
        "against_quality": float(outcomes.score[:, base].mean()),
        "curves": {},
    }
    for spec in configs:
        key, _, value = spec.partition("=")
        setting: dict[str, Any] = (
            {"dims": int(value)} if key == "dims" else {"clusters": AUTO if value == "auto" else int(value)}
        )
        points = []
        for size in sizes:
            per_seed: list[dict[str, Any]] = []
            for seed in range(seeds):
                rng = np.random.default_rng(1000 * seed + size)
                order = rng.permutation(n)
                fitted = np.zeros(n)
                cost = np.zeros(n)
                for k in range(folds):
                    held = order[k::folds]
                    rest = np.setdiff1d(order, held)
                    train = rng.choice(rest, size=size, replace=False)
                    config = PlanTrainConfig(lam=0.0, seed=seed, **setting)
                    policy = train_plans(
                        outcomes.subset(train.tolist()), vectors[train], columns, embedder.name, config
                    )
                    chosen = np.asarray(policy.policy.choose([outcomes.ids[i] for i in held], vectors[held]))
                    fitted[held] = outcomes.score[held, chosen]
                    cost[held] = outcomes.cost[held, chosen]
                diff, low, high = paired_difference(fitted.tolist(), outcomes.score[:, base].tolist())
                per_seed.append({"quality": float(fitted.mean()), "cost_usd": float(cost.mean()),
                                 "diff": diff, "ci95": [low, high]})  # fmt: skip
                print(f"{spec}, {size} training questions, seed {seed}: quality {fitted.mean():.3f}, "
                      f"paired {diff:+.3f} ({low:+.3f} to {high:+.3f})", file=sys.stderr)  # fmt: skip
            q = [p["quality"] for p in per_seed]
            points.append({"train_questions": size, "quality": float(np.mean(q)), "quality_spread": float(np.std(q)),
                           "diff": float(np.mean([p["diff"] for p in per_seed])), "per_seed": per_seed})  # fmt: skip
        result["curves"][spec.replace("=", " ")] = points
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, points in result["curves"].items():
        x = [p["train_questions"] for p in points]
        y = [p["quality"] for p in points]
        err = [p["quality_spread"] for p in points]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=f"plan conductor, {label}")
    ax.axhline(result["against_quality"], color="grey", linestyle="--", label=result["against"])
    ax.set_xlabel("training questions")
    ax.set_ylabel("cross-fitted quality (held-out folds)")
    ax.set_title(f"{result['bank']}: {result['questions']} questions, {result['folds']} folds, {result['seeds']} seeds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bank", type=Path, help="a workflow bank folder (podium bank record)")
    p.add_argument("--sizes", default="30,60,90,120,160", help="training sizes, comma-separated")
    p.add_argument(
        "--configs",
        default="dims=4,dims=0,clusters=auto",
        help="configurations (dims=D or clusters=K|auto), comma-separated",
    )
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--embedder", default="smollm2-135m-instruct")
    p.add_argument("--json", type=Path)
    p.add_argument("--png", type=Path)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if bad := [c for c in configs if c.partition("=")[0] not in ("dims", "clusters") or not c.partition("=")[2]]:
        p.error(f"--configs: {', '.join(bad)} — give dims=D or clusters=K|auto")
    result = curve(args.bank, sizes, configs, args.seeds, args.folds, args.embedder)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.png:
        plot(result, args.png)
    for label, points in result["curves"].items():
        row = ", ".join(f"{p['train_questions']}: {p['quality']:.3f} ({p['diff']:+.3f})" for p in points)
        print(f"{label}: {row}  [quality (paired vs {result['against']})]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
