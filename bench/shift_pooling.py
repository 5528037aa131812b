"""Retraining after a shift: train the plan conductor on the new rows alone, or on the new rows
and the earlier ones? Cross-fitted on the new bank's training rows only (docs/loop.md, "The proof
with plan conductors").

The new bank's training rows are cut into ``--folds`` parts. For each part, three policies choose
a plan for its questions:

* ``new only``: the cluster table trained on the other parts;
* ``new + earlier``: trained on the other parts and every training row of ``--earlier`` (a bank
  recorded with the same catalogue, e.g. the local bank the shipped table was trained on);
* ``old``: the policy file ``--old`` as it is (no retraining);
* with ``--value-l2 A`` (repeatable): ``new + earlier, value A``, the same rows with the value head
  (per-plan logistic regressions of P(correct) on ``--dims`` projected dimensions, L2 penalty A)
  instead of the cluster table — a per-question choice instead of one plan per cluster.

Each question is scored by policies that never saw it, and each method is paired with the 1.5B
worker's direct answer on the same questions. The held-out split of either bank is not read.

    .venv/bin/python bench/shift_pooling.py docs/eval/shift/bank --earlier data/banks/local \
        --old src/podium/pools/local-plans.npz --json docs/eval/shift/pooling.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from podium.conductor.plans import PlanPolicy
from podium.embed import Embedder, encoder_choice
from podium.eval.metrics import paired_difference
from podium.eval.plans import load_source, plan_outcomes
from podium.eval.session import EvalSpec
from podium.train.plans import AUTO, PlanTrainConfig, train_plans

BASE = "solve@1.5b"


def _train_rows(bank: Path) -> tuple[Any, list[dict[str, str]], list[Any]]:
    """(columns, training rows, the catalogue's plans) of a bank."""
    _, columns, rows, plans = load_source(bank)
    return columns, [r for r in rows if r.get("split") == "train"], list(plans)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bank", type=Path, help="the new bank (its training rows are cross-fitted)")
    p.add_argument("--earlier", type=Path, required=True, help="a bank of earlier training rows, same catalogue")
    p.add_argument("--old", type=Path, required=True, help="the policy file in service before the shift")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--embedder", default="qwen2.5-coder-0.5b-instruct")
    p.add_argument("--value-l2", type=float, action="append", default=[], metavar="A", help="add a value head")
    p.add_argument("--dims", type=int, default=16, help="the value heads' projected dimensions (16)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    columns, new, plans = _train_rows(args.bank)
    earlier_columns, earlier, _ = _train_rows(args.earlier)
    if set(earlier_columns) != set(columns):
        print(f"{args.earlier} and {args.bank} were recorded with different catalogues", file=sys.stderr)
        return 2
    old = PlanPolicy.load(args.old)
    out_new, out_earlier = plan_outcomes(plans, columns, new), plan_outcomes(plans, columns, earlier)
    embedder = Embedder(EvalSpec().embeddings, encoder=encoder_choice(args.embedder))
    v_new = embedder.embed([r["prompt"] for r in new])
    v_earlier = embedder.embed([r["prompt"] for r in earlier])
    base = [q.id for q in plans].index(BASE)
    n = len(new)
    old_index = [[q.id for q in plans].index(o.id) for o in old.plans]  # its plans are in the catalogue
    old_choice = np.asarray(old_index)[old.choose([r["prompt"] for r in new], v_new)]
    methods: dict[str, list[np.ndarray]] = {"new only": [], "new + earlier": []}
    methods |= {f"new + earlier, value {a:g}": [] for a in args.value_l2}
    for seed in range(args.seeds):
        order = np.random.default_rng(seed).permutation(n)
        fitted = {m: np.zeros(n) for m in methods}
        for k in range(args.folds):
            held = order[k :: args.folds]
            rest = np.setdiff1d(order, held)
            table = PlanTrainConfig(lam=0.0, seed=seed, clusters=AUTO, dims=16)
            for method in methods:
                outcomes, vectors = out_new.subset(rest.tolist()), v_new[rest]
                if method.startswith("new + earlier"):
                    outcomes = _stack(outcomes, out_earlier)
                    vectors = np.vstack([vectors, v_earlier])
                config = table
                if ", value " in method:
                    l2 = float(method.rsplit(" ", 1)[1])
                    config = PlanTrainConfig(lam=0.0, seed=seed, head="value", dims=args.dims, ensemble=1, l2=l2)
                policy = train_plans(outcomes, vectors, columns, embedder.name, config).policy
                chosen = policy.choose([new[i]["prompt"] for i in held], v_new[held])
                fitted[method][held] = out_new.score[held, chosen]
        for method in methods:
            methods[method].append(fitted[method])
    baseline = out_new.score[:, base]
    result: dict[str, Any] = {
        "bank": str(args.bank), "earlier": str(args.earlier), "old": str(args.old), "train_rows": n,
        "earlier_rows": len(earlier), "folds": args.folds, "seeds": args.seeds, "against": BASE,
        "against_quality": float(baseline.mean()), "methods": {},
    }  # fmt: skip
    scored = {m: np.mean(v, axis=0) for m, v in methods.items()} | {"old": out_new.score[np.arange(n), old_choice]}
    for method, scores in scored.items():
        diff, low, high = paired_difference(scores.tolist(), baseline.tolist())
        spread = float(np.std([s.mean() for s in methods[method]])) if method in methods else 0.0
        result["methods"][method] = {"quality": float(scores.mean()), "quality_spread_over_seeds": spread,
                                     "diff": diff, "ci95": [low, high]}  # fmt: skip
        paired = f"{diff:+.3f} ({low:+.3f} to {high:+.3f})"
        print(f"{method:14} quality {scores.mean():.3f} (seeds ±{spread:.3f}), vs {BASE} {paired}")
    print(f"{BASE:14} quality {baseline.mean():.3f} on {n} training rows of {args.bank}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def _stack(a: Any, b: Any) -> Any:
    from podium.eval.plans import PlanOutcomes

    return PlanOutcomes(
        a.ids + b.ids, a.plans, np.vstack([a.score, b.score]), np.vstack([a.cost, b.cost]),
        np.vstack([a.latency, b.latency]), np.vstack([a.escalated, b.escalated]),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
