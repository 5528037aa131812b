"""``podium conductor list | show | export | eval | promote | rollback``: the registry of trained
conductors (:class:`podium.registry.Registry`).

``eval`` and ``promote`` run the gate of :mod:`podium.train.promotion` (a held-out evaluation
against baselines, kept beside the version; the rule of :func:`podium.registry.promotion_verdict`);
``promote`` returns :data:`EXIT_REFUSED` when the rule refuses. ``export`` converts an LM
conductor's LoRA adapter to GGUF.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from podium.errors import ConfigError
from podium.registry import Registry, Version
from podium.train.promotion import EXIT_REFUSED, GateSpec, evaluate_version, promote_version

__all__ = ["EXIT_REFUSED", "cmd_conductor"]


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
                kept = info.get("best_generation")
                kept_line = f"kept generation {kept}; " if kept is not None else ""
                out.print(f"  {kept_line}evals: {evals}")
        return 0
    if args.conductor_command == "export":
        return _export(registry, args, out, err)
    if args.conductor_command == "rollback":
        target = registry.rollback(args.name)
        out.print(f"[green]{args.name}: {target.ref} is current again[/]")
        return 0
    if args.conductor_command == "eval":
        candidate = registry.get(args.ref, bare="latest")
        _warn_if_trained_on(candidate, args, err)
        report, folder = evaluate_version(candidate, registry.promoted(candidate.name), _gate(args), status=err.status)
        if args.json:
            print(json.dumps({k: v for k, v in report.items() if k != "results"}, indent=1))
        else:
            _summary(report, out)
            out.print(Text(f"report: {folder}", style="dim"))
        return 0
    candidate = registry.get(args.ref, bare="latest")
    _warn_if_trained_on(candidate, args, err)
    current = registry.promoted(candidate.name)
    if current is not None and current.number == candidate.number:  # before minutes of evaluation
        out.print(f"{candidate.ref} is already the promoted version; nothing evaluated")
        return 0
    promotion = promote_version(registry, args.ref, _gate(args), status=err.status)
    _summary(promotion.report, out)
    if promotion.already:
        out.print(f"{promotion.candidate} is already the promoted version")
        return 0
    style = "bold yellow" if promotion.overridden else "bold green" if promotion.promoted else "bold red"
    out.print(Text(promotion.line, style=style))
    return 0 if promotion.promoted else EXIT_REFUSED


def _warn_if_trained_on(candidate: Version, args: argparse.Namespace, err: Console) -> None:
    """A warning when the gate would score ``candidate`` on the split of the matrix it was
    trained on: its figures would be training figures, not held-out ones."""
    data = candidate.training().data if (candidate.path / "train.json").is_file() else {}
    matrix, split = data.get("matrix"), data.get("split")
    if matrix and split == args.split and Path(str(matrix)).name == Path(args.replay).name:
        err.print(
            Text(
                f"warning: {candidate.ref} was trained on {matrix}'s {split} split, the questions this gate scores it "
                "on: the figures are training figures, not held-out ones (the held-out split is --split test)",
                style="yellow",
            )
        )


def _gate(args: argparse.Namespace) -> GateSpec:
    """``podium conductor eval | promote``'s options as the gate's spec."""
    gate = GateSpec(replay=args.replay, split=args.split, tags=tuple(args.tag), limit=args.limit)
    if args.conductor_command != "promote":
        return gate
    strictness = {"lam": args.lam, "max_quality_drop": args.max_quality_drop}
    return dataclasses.replace(gate, **strictness, allow_quality_drop=args.allow_quality_drop)


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
    base = info.base_model
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


def _finished(version: Version) -> bool:
    """Whether a training stored its result in ``version`` (a policy file or a training record);
    a run stopped before that leaves only its checkpoints and metrics."""
    return version.policy_path.is_file() or (version.path / "train.json").is_file()


def _trained_on(data: Any) -> str | None:
    """``MATRIX (SPLIT, N questions)`` from a training record's ``data`` (None when it names no
    matrix: a version stored before the field existed, or one that stopped before its record)."""
    if not data.get("matrix"):
        return None
    detail = [str(data["split"])] if data.get("split") else []
    detail += [f"{data['questions']} questions"] if data.get("questions") else []
    return f"{data['matrix']} ({', '.join(detail)})" if detail else str(data["matrix"])


def _list(registry: Registry, as_json: bool, out: Console) -> int:
    rows: list[dict[str, Any]] = []
    for name in registry.names():
        promoted = registry.promoted(name)
        for v in registry.versions(name):
            info = v.training()
            rows.append(
                {
                    "ref": v.ref,
                    "policy": info.policy if _finished(v) else "unfinished",
                    "resumable": any(v.path.glob("checkpoint-*")),
                    "promoted": promoted is not None and promoted.number == v.number,
                    "lam": info.config.get("lam"),
                    "data": _trained_on(info.data),
                    "generations": len(info.history) or (info.config.get("steps") if info.policy == "plans" else 0),
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
        if r["policy"] == "unfinished":  # a training that stopped before it stored its result
            resume = f"resume: podium train --resume {r['ref']}"
            steps = resume if r["resumable"] else "stopped before its first checkpoint"
        table.add_row(r["ref"], r["policy"], "★" if r["promoted"] else "", lam, r["data"] or "–", steps)
    out.print(table)
    return 0
