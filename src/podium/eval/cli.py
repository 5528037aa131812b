"""``podium eval``: options → :func:`~podium.eval.session.run_eval` → report files → gate.

Exit codes: 0 done (and no regression), 2 bad options or input, 3 the regression gate failed.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from podium._args import MANY, SEED, WholeNumber
from podium._render import progress_bar
from podium.errors import ConfigError
from podium.eval.gate import GateMargins, GateResult, gate
from podium.eval.report import load_report, write_report
from podium.eval.runner import TaskResult
from podium.eval.session import EvalSpec, run_eval
from podium.store.engine import store_location

__all__ = [
    "EXIT_REGRESSION",
    "add_parsers",
    "cmd_eval",
    "eval_spec",
    "run",
]

EXIT_REGRESSION = 3


def _lambdas(text: str | None) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"--lambdas must be comma-separated numbers (1/USD), got {text!r}") from None
    if not values or any(v < 0 or math.isnan(v) for v in values):
        raise ConfigError("--lambdas needs at least one number ≥ 0")
    return values


def _check_margins(args: argparse.Namespace) -> None:
    """ConfigError for a negative gate margin (identical reports would regress)."""
    for flag, value in (("--max-quality-drop", args.max_quality_drop), ("--max-cost-rise", args.max_cost_rise),
                        ("--max-p95-rise", args.max_p95_rise)):  # fmt: skip
        if value < 0:
            raise ConfigError(f"{flag} must be ≥ 0, got {value}")


def eval_spec(args: argparse.Namespace) -> EvalSpec:
    """The :class:`EvalSpec` of ``podium eval``'s options; ConfigError for a negative gate margin."""
    _check_margins(args)
    spec = EvalSpec(
        tasks=args.tasks[0] if args.tasks else None,
        more_tasks=tuple(args.tasks[1:]) if args.tasks else (),
        ids=args.ids,
        replay=args.replay,
        split=args.split,
        limit=args.limit,
        sample=args.sample,
        seed=args.seed,
        tags=tuple(args.tag),
        confirmed_only=args.confirmed_only,
        pool=args.pool,
        methods=_method_list(args.methods) if args.methods else (),
        lambdas=_lambdas(args.lambdas),
        traces=args.traces,
        judge=args.judge,
        concurrency=args.concurrency,
        router_data=args.router_data,
        against=args.against,
        pool_order=args.pool_order,
    )
    if args.no_cache:
        spec.cache = None
    elif args.cache is not None:
        spec.cache = args.cache
    return spec


def _method_list(text: str) -> tuple[str, ...]:
    """``--methods``' names: split at commas outside parentheses, so plan ids such as
    ``plan:vote(solve@1.5b,sample×4@1.5b)`` stay whole."""
    names, depth, start = [], 0, 0
    for i, char in enumerate(text + ","):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth <= 0:
            names.append(text[start:i].strip())
            start, depth = i + 1, 0
    return tuple(n for n in names if n)


def cmd_eval(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run (or load) a report, write it, print the summary, apply the gate."""
    if args.matrix_split is not None:
        if args.matrix is None:
            raise ConfigError("--matrix-split splits the outcome matrix: give --matrix OUT.csv too")
        from podium.eval.matrix import assign_splits

        assign_splits((), args.matrix_split)  # a bad share fails before any work
    baseline = load_report(args.baseline) if args.baseline is not None else None  # fail before hours of work
    _check_margins(args)  # with --from too
    if args.from_report is not None:
        if args.tasks or args.replay:
            raise ConfigError("--from re-renders a stored report; drop --tasks/--replay")
        report = load_report(args.from_report)
    else:
        spec = eval_spec(args)
        report = _run_with_progress(spec, err)
    if args.from_report is None or args.out != Path("podium-eval"):
        paths = write_report(report, args.out, plot=not args.no_plot, results=not args.summary_only)
        err.print(Text(f"wrote {', '.join(str(p) for p in paths)}", style="dim"))
    if args.matrix is not None:
        from podium.eval.matrix import split_counts, write_matrix

        total, left_out = write_matrix(report, args.matrix, train_share=args.matrix_split, seed=args.seed)
        skipped = f"; {left_out} question(s) left out (a worker had no result)" if left_out else ""
        splits = ", ".join(f"{n} {split}" for split, n in split_counts(args.matrix).items())
        how = f", split by --matrix-split {args.matrix_split:g} --seed {args.seed}" if args.matrix_split else ""
        err.print(Text(f"outcome matrix {args.matrix}: {total} question(s) ({splits}{how}){skipped}", style="dim"))
        if "train" not in split_counts(args.matrix):
            err.print(
                Text(
                    f"no question of {args.matrix} is in split 'train', which podium train uses by default: "
                    "add --matrix-split 0.8 (with --seed S) to split it, or train with --split test",
                    style="yellow",
                )
            )
    result = None
    if baseline is not None:
        result = gate(report, baseline, GateMargins(args.max_quality_drop, args.max_cost_rise, args.max_p95_rise))
    if args.json:
        shown = {k: v for k, v in report.items() if k != "results"}
        if result is not None:
            shown["gate"] = {"baseline": str(args.baseline), **result.to_json()}
        print(json.dumps(shown, indent=1, ensure_ascii=False))
    else:
        _print_summary(report, out)
        if result is not None:
            _print_gate(result, args.baseline, out)
    if result is None:
        return 0
    return EXIT_REGRESSION if result.regressions else 0


def _run_with_progress(spec: EvalSpec, err: Console) -> dict[str, Any]:
    progress = progress_bar("eval", err, remaining=True)
    bar: list[Any] = []
    done: dict[str, list[float]] = {}

    def on_start(total: int) -> None:  # the bar appears once the inputs are valid: an error is one clean line
        progress.start()
        bar.append(progress.add_task("", total=total))

    def on_result(method: str, result: TaskResult) -> None:
        scores = done.setdefault(method, [])
        scores.append(result.score)
        progress.update(bar[0], advance=1, description=f"{method}: {sum(scores) / len(scores):.3f} over {len(scores)}")

    def on_stage(line: str) -> None:
        err.print(Text(line, style="dim"), highlight=False)

    try:
        return run_eval(spec, on_start=on_start, on_result=on_result, on_stage=on_stage)
    finally:
        if bar:
            progress.stop()


def _print_summary(report: dict[str, Any], out: Console) -> None:
    mode = "replay" if report["replay"] else "live"
    table = Table(title=f"podium eval · {report['config'].get('tasks', '')} · {mode}")
    table.add_column("method", overflow="fold", min_width=16)
    paired = report.get("paired") or {"against": None, "methods": {}}
    for col in ("n", "quality", "95 % CI", "$/request", "calls", "p50/p95 s", "parse ✗", "fallback", "paired Δ"):
        table.add_column(col, justify="right", no_wrap=True)
    if paired["against"]:
        table.caption = f"paired Δ: per-question quality difference against {paired['against']}, ± its 95 % interval"
    curves = report.get("curves", {})
    for name, method in report["methods"].items():
        if method["group"] in curves:  # sweep points: summarised by their curve below (all rows in eval.md)
            continue
        s = method["summary"]
        lat = s["latency_s"]
        table.add_row(
            name,
            str(s["n"]),
            f"{s['quality']['mean']:.3f}",
            f"{s['quality']['ci95'][0]:.3f}–{s['quality']['ci95'][1]:.3f}",
            f"{s['cost_usd']['mean']:.6f}",
            f"{s['worker_calls']:.2f}",
            "–" if lat is None else f"{lat['p50']:.1f}/{lat['p95']:.1f}",
            f"{s['parse_failure_rate']:.0%}",
            f"{s['fallback_rate']:.0%}",
            _delta(paired["methods"].get(name), name == paired["against"]),
        )
    out = _wide(out)
    out.print(table)
    for name, method in report["methods"].items():  # a method whose requests failed scores 0: say why
        failed = [r for r in (report.get("results") or {}).get(name, []) if r.get("status") == "error"]
        if failed:
            first = str(failed[0].get("error") or "")[:200]
            out.print(
                Text(f"{name}: {len(failed)} of {method['summary']['n']} request(s) ended in error: {first}"),
                style="yellow",
            )
    groups = {m["group"] for m in report["methods"].values() if m["group"]}
    if len(curves) > len(groups):  # one line per sweep; single methods' curve figures are in eval.md
        out.print(f"AIQ / APGR / CPT of the {len(curves) - len(groups)} single-point method(s): see eval.md")
    for group, curve in curves.items():
        if group not in groups:
            continue
        out.print(
            f"{group}: AIQ {curve['aiq']:.4f} · APGR {curve['apgr']:.3f} · CPT(50 %) {_pct(curve['cpt50'])} · "
            f"CPT(80 %) {_pct(curve['cpt80'])} ({len(curve['points'])} point(s) with weak and strong)"
        )


def _delta(pair: dict[str, Any] | None, baseline: bool) -> str:
    if baseline:
        return "baseline"
    if pair is None:
        return "–"
    return f"{pair['diff']:+.3f} ±{(pair['ci95'][1] - pair['ci95'][0]) / 2:.3f}"


def _wide(out: Console) -> Console:
    """``out``, or when piped (CI logs) a 120-column console: a readable table beats a squeezed
    80-column one."""
    return out if out.is_terminal else Console(width=max(out.width, 120))


def _pct(x: float | None) -> str:
    return "not reached" if x is None else f"{x:.1%}"


_FLIPS_SHOWN = 10
"""Task ids listed per method and direction in the terminal (``--json`` has them all)."""


def _ids(label: str, ids: tuple[str, ...]) -> str:
    """``"2 newly failing (a, b)"``, at most :data:`_FLIPS_SHOWN` ids named."""
    if not ids:
        return f"0 {label}"
    more = f" … and {len(ids) - _FLIPS_SHOWN} more" if len(ids) > _FLIPS_SHOWN else ""
    return f"{len(ids)} {label} ({', '.join(ids[:_FLIPS_SHOWN])}{more})"


def _print_gate(result: GateResult, baseline: Path, out: Console) -> None:
    table = Table(title=f"regression gate against {baseline}")
    table.add_column("method", overflow="fold", min_width=16)  # long names wrap instead of being cut
    for col in ("metric", "baseline", "new", "verdict"):
        table.add_column(col, no_wrap=True)
    for c in result.checks:
        verdict = Text("ok", "green") if c.ok else Text("REGRESSION", "bold red")
        table.add_row(c.method, c.metric, f"{c.baseline:.6g}", f"{c.new:.6g}", verdict)
    out = _wide(out)
    out.print(table)
    if result.only_new or result.only_baseline:
        out.print(
            Text(
                f"compared on the {result.compared_on} question(s) both reports share "
                f"({result.only_new} only in this report, {result.only_baseline} only in the baseline)",
                style="yellow",
            )
        )
    for method, flips in result.flips.items():
        if flips.newly_failing or flips.newly_passing:
            out.print(
                f"{method}: {_ids('newly failing', flips.newly_failing)}, {_ids('newly passing', flips.newly_passing)}"
            )
    if result.unmatched_methods:
        out.print(
            Text(f"not gated (in only one of the two reports): {', '.join(result.unmatched_methods)}", style="yellow")
        )
    style = "bold red" if result.regressions else "green"
    out.print(Text(f"gate: {result.regressions} regression(s) over {result.methods} method(s)", style=style))


def add_parsers(sub: Any) -> None:
    """Register ``podium eval`` on the top-level subparsers."""
    p = sub.add_parser(
        "eval",
        help="evaluate the conductor against baselines on a task set (quality, cost, latency)",
        description=(
            "Run conductors and baselines on a task set (live, over a pool) or an outcome matrix (replay); "
            "write eval.json, eval.md and pareto.png. Worker calls are cached by exact request, so reruns "
            "are incremental. With --baseline, exit 3 when quality drops or cost / p95 latency rise beyond "
            "the margins."
        ),
    )
    src = p.add_argument_group("what to run on")
    src.add_argument(
        "--tasks",
        type=Path,
        action="append",
        help="task set (JSONL): a regression set, GSM8K, HumanEval or MBPP file; repeat to evaluate several as one",
    )
    src.add_argument("--ids", type=Path, help="keep only these task ids (a file, one per line), in that order")
    src.add_argument(
        "--replay",
        type=Path,
        metavar="MATRIX.csv",
        help="outcome matrix (RouterBench columns), or a workflow bank's folder (podium bank record), where plan "
        "and LM conductors are scored by their whole workflow",
    )
    src.add_argument("--split", help="keep this split (MBPP: test/validation/train; replay default: test)")
    src.add_argument("--limit", action=WholeNumber, low=1, high=MANY, help="first N tasks")
    src.add_argument("--sample", action=WholeNumber, low=1, high=MANY, help="a seeded random sample of N tasks")
    src.add_argument(
        "--seed",
        action=WholeNumber,
        low=SEED[0],
        high=SEED[1],
        default=0,
        help="seed of --sample and --matrix-split (default 0)",
    )
    src.add_argument("--tag", action="append", default=[], help="keep tasks with this tag (repeatable)")
    src.add_argument(
        "--confirmed-only",
        action="store_true",
        help="leave out tasks whose reference is an unconfirmed candidate (reference_source candidate:…, from "
        "'podium tasks export'); without it eval warns and counts them",
    )
    src.add_argument("--from", dest="from_report", type=Path, metavar="EVAL.json",
                     help="do not run: re-render (and gate) a stored report")  # fmt: skip
    how = p.add_argument_group("how")
    how.add_argument(
        "--pool",
        help="pool file or preset (live; default: the embedded local pool); on a workflow bank, the pool whose step "
        "limit the conductors plan under",
    )
    how.add_argument(
        "--methods",
        help="comma-separated: conductor (the pool file's), conductor:POOL (another pool file's, same workers), "
        "single, single:NAME, cheapest, strongest, random, pipeline, moa, router, oracle, light:NAME[@vN], "
        "light:PATH.npz, lm:NAME[@vN], plan:ID, plans (live, or replay on a workflow bank) "
        "(default live: conductor,single,pipeline,moa; replay: "
        "single,random,router,oracle)",
    )
    how.add_argument(
        "--lambdas",
        help="router λ sweep, comma-separated 1/USD, the cost weight of the training reward 0.5 + 0.5·P − λ·cost "
        "(default: 23 values calibrated on the training split)",
    )
    how.add_argument(
        "--against",
        metavar="METHOD",
        help="compare every method with this one, paired per question (default: the single worker of highest "
        "quality on these questions)",
    )
    how.add_argument("--judge", help="pool worker that grades open-ended tasks")
    how.add_argument(
        "--pool-order",
        choices=["given", "reversed"],
        default="given",
        help="on a workflow bank: the order in which conductors see its workers (reversed: a permutation test)",
    )
    how.add_argument(
        "--router-data",
        type=Path,
        metavar="EVAL.json",
        help="live router training data: a report of '--methods single' on other questions",
    )
    how.add_argument(
        "--concurrency", action=WholeNumber, low=1, high=10_000, help="requests in flight (default: 1 live, 32 replay)"
    )
    how.add_argument(
        "--cache",
        type=store_location,
        metavar="FILE|URL",
        help="request cache: a SQLite file, or a database URL to share it between machines, e.g. "
        "postgresql://USER:PASSWORD@HOST/DB (default: ~/.cache/podium/eval/requests.sqlite3)",
    )
    how.add_argument("--no-cache", action="store_true", help="call every worker afresh (nothing read or stored)")
    how.add_argument("--traces", type=Path, help="also store every request's trace in this database")
    out = p.add_argument_group("output")
    out.add_argument("--out", type=Path, default=Path("podium-eval"), help="report folder (default: ./podium-eval)")
    out.add_argument("--no-plot", action="store_true", help="skip pareto.png")
    out.add_argument(
        "--matrix",
        type=Path,
        metavar="OUT.csv",
        help="also write (or extend) an outcome matrix of the single-worker results, for podium train --replay",
    )
    out.add_argument(
        "--matrix-split",
        type=float,
        metavar="SHARE",
        help="with --matrix: put this share of the file's questions in split 'train', the rest in 'test' "
        "(a seeded shuffle, --seed; e.g. 0.8). Without it a set with no splits is all 'test'",
    )
    out.add_argument("--summary-only", action="store_true", help="leave per-request results out of eval.json")
    out.add_argument("--json", action="store_true", help="print the summaries (not per-task results) as JSON")
    g = p.add_argument_group("regression gate")
    g.add_argument(
        "--baseline", type=Path, metavar="EVAL.json", help="compare with this report; exit 3 on a regression"
    )
    g.add_argument("--max-quality-drop", type=float, default=0.02, help="absolute (default 0.02)")
    g.add_argument("--max-cost-rise", type=float, default=0.10, help="relative (default 0.10 = +10 %%)")
    g.add_argument("--max-p95-rise", type=float, default=0.25, help="relative (default 0.25 = +25 %%)")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium eval``; returns the exit code."""
    return cmd_eval(args, out, err)
