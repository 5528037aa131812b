"""``podium train --policy plans``: the plan conductor on a workflow bank or an outcome matrix.

The source is a bank folder (``podium bank record``; its catalogue's plans,
:func:`podium.eval.plans.local_plans`) or a RouterBench-convention CSV (each model alone, and a
vote of all models when there are three or more). Training uses the ``--split`` rows only
(default ``train``); a k-fold cross-validation on those rows reports how the policy does on
training questions it did not see (mean ± spread over folds), the figure to select λ, ``--dims``
and ``--ensemble`` by — never the test split.

``--sweep`` trains one version per λ of :func:`podium.train.plans.lambda_sweep` (23 values, as
many as the learned router's sweep) and reports the cross-validated curve's AIQ and APGR
(:func:`podium.train.plans_cv.cv_curve`); ``podium eval --replay M --methods light:NAME@vA..vB`` evaluates the versions
as one cost–quality curve beside the router's.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from rich.console import Console
from rich.text import Text

from podium._render import progress_bar
from podium.errors import ConfigError
from podium.eval.plans import load_source, plan_outcomes
from podium.train.plans import strongest_single
from podium.train.plans_cv import cv_curve
from podium.train.plans_version import MIN_QUESTIONS, train_plans_version

__all__ = ["SWEEP_POINTS", "train_plans_command"]


SWEEP_POINTS = 23
"""Versions a ``--sweep`` trains: λ = 0, 21 values over the plans' cost range, one past the cheapest
(as many operating points as the learned router's calibrated sweep)."""


def train_plans_command(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium train --policy plans`` (see the module docstring): one version at ``--lam``,
    or with ``--sweep`` one per λ of :func:`podium.train.plans.lambda_sweep`."""
    from podium.embed import Embedder, encoder_choice
    from podium.eval.session import EvalSpec
    from podium.train.plans import PlanTrainConfig, lambda_sweep

    name, columns, rows, plans = load_source(args.replay)
    rows = [r for r in rows if args.split == "all" or r["split"] == args.split]
    if args.tag:
        rows = [r for r in rows if r["eval_name"] in args.tag or r["eval_name"].split("-", 1)[0] in args.tag]
    if len(rows) < MIN_QUESTIONS:
        splits = Counter(r["split"] for r in load_source(args.replay)[2])
        raise ConfigError(
            f"{name}: {len(rows)} question(s) in split {args.split!r}{' with those tags' if args.tag else ''}; the "
            f"plan conductor needs at least {MIN_QUESTIONS} (the source has {dict(splits)}; pick one with --split)"
        )
    outcomes = plan_outcomes(plans, columns, rows)
    if args.mu > 0 and not outcomes.latency.any():
        raise ConfigError(f"{name} records no latencies: μ > 0 needs them (a bank, or |latency_s columns)")
    sweep = args.sweep
    lambdas = lambda_sweep(outcomes, SWEEP_POINTS, fill=True) if sweep else (args.lam,)
    configs = [
        PlanTrainConfig(
            lam=lam,
            mu=args.mu,
            dims=args.dims,
            ensemble=args.ensemble,
            steps=args.steps or 400,
            seed=args.seed,
            clusters=args.clusters,
            max_cost_ratio=args.max_cost_ratio,
            head=args.head,
            **({"l2": args.l2} if args.l2 is not None else {}),
        )
        for lam in lambdas
    ]
    embedder = Embedder(EvalSpec().embeddings, encoder=encoder_choice(args.embedder))
    progress = progress_bar("train", err)
    with progress:
        task = progress.add_task(f"embedding {len(rows)} questions ({embedder.name})", total=None)

        def embedded(done: int, todo: int) -> None:  # the texts not yet in the embedding cache
            progress.update(task, total=todo, completed=done)

        vectors = embedder.embed([r["prompt"] for r in rows], on_progress=embedded)
    trained = []
    for config in configs:
        trained.append(
            train_plans_version(
                args.name, str(args.replay), args.split, outcomes, vectors, columns, embedder.name, config
            )
        )
        if sweep and not args.json:
            ref, record = trained[-1]
            q, c = record["cross_validation"]["quality"], record["cross_validation"]["cost_usd"]
            out.print(
                f"{ref}: λ = {config.lam:g}, cross-validated quality {q['mean']:.3f} ± {q['std']:.3f}, "
                f"cost ${c['mean']:.6f} per request"
            )
    if sweep:
        cv = [(r["cross_validation"]["cost_usd"]["mean"], r["cross_validation"]["quality"]["mean"]) for _, r in trained]
        curve = cv_curve(outcomes, cv)
        first, last = trained[0][0], trained[-1][0]
        span = f"{first}..v{last.rsplit('@v', 1)[1]}"
        if args.json:
            versions = [{"version": ref, **record} for ref, record in trained]
            print(json.dumps({"versions": versions, "cross_validated_curve": curve, "span": span}, indent=1))
            return 0
        if curve is not None:
            out.print(
                f"cross-validated curve of the {len(trained)} versions: "
                f"AIQ {curve['aiq']:.4f}, APGR {curve['apgr']:.3f}"
            )
        out.print(
            f"[green]trained {len(trained)} versions, {span}[/] on {len(rows)} questions of {name} ({len(plans)} plans)"
        )
        out.print(Text(f"evaluate the curve: podium eval --replay {args.replay} --methods single,router,light:{span}"))
        return 0
    ref, record = trained[0]
    if args.json:
        print(json.dumps({"version": ref, **record}, indent=1))
        return 0
    cv1 = record["cross_validation"]
    q, c = cv1["quality"], cv1["cost_usd"]
    cap = f", cost ≤ {args.max_cost_ratio:g}× the best single worker's" if args.max_cost_ratio is not None else ""
    out.print(f"[green]trained {ref}[/] on {len(rows)} questions of {name} ({len(plans)} plans, λ = {args.lam:g}{cap})")
    if record["clusters"]:
        how = "picked by silhouette" if args.clusters < 0 else "as given"
        out.print(f"cluster table: {record['clusters']} clusters of the training questions ({how})")
    if args.max_cost_ratio is not None:
        base = strongest_single(outcomes)
        ratio = record["train"]["cost_usd"] / max(float(outcomes.cost[:, base].mean()), 1e-300)
        out.print(
            f"training questions: quality {record['train']['quality']:.3f} at {ratio:.2f}× the cost of "
            f"{outcomes.plans[base].id} (quality {outcomes.score[:, base].mean():.3f})"
        )
    out.print(
        f"cross-validated ({cv1['folds']} folds): quality {q['mean']:.3f} ± {q['std']:.3f}, "
        f"cost ${c['mean']:.6f} ± {c['std']:.6f} per request"
    )
    if cv1.get("paired"):
        pr = cv1["paired"]
        out.print(
            f"cross-fitted, paired against {pr['against']}: {pr['diff']:+.3f} "
            f"(95 % CI {pr['ci95'][0]:+.3f} to {pr['ci95'][1]:+.3f}; higher on {pr['higher']}, lower on {pr['lower']})"
        )
    usage = record["plans_chosen"]
    out.print("plans chosen on the training questions: " + ", ".join(f"{p} ×{k}" for p, k in list(usage.items())[:6]))
    out.print(f"stored in {record['path']} (policy.npz, train.json)")
    out.print(Text(f"use it: [conductor] light = {str(record['policy_path'])!r} in a pool file", style="dim"))
    return 0
