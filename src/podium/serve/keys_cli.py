"""``podium keys create | list | rotate | revoke`` and ``podium kill-switch on | off | status``:
the API keys of ``podium serve`` and the kill switch, both kept in the key store
(:class:`podium.serve.keys.KeyStore`: the key file of one host, or the shared store of every
replica).
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from podium.serve.options import key_store

__all__ = ["cmd_keys", "cmd_kill_switch"]


def cmd_keys(args: argparse.Namespace, out: Console) -> int:
    """``podium keys``: create a key (printed once), give one a new secret (printed once), revoke
    one, or list them with this period's spending (USD)."""
    store = key_store(args)
    if args.keys_command == "create":
        secret = store.create(args.name, budget_usd=args.budget, period=args.period, scope=args.scope)
        budget = f"${args.budget:g} per {args.period}" if args.budget else "no budget"
        scope = "; admin: opens the web UI" if args.scope == "admin" else ""
        out.print(f"key {args.name!r} created ({budget}{scope}); it is shown only now:", highlight=False)
        print(secret)
        return 0
    if args.keys_command == "rotate":
        secret = store.rotate(args.name)
        out.print(f"key {args.name!r} has a new secret (the old one no longer works); it is shown only now:",
                  highlight=False)  # fmt: skip
        print(secret)
        return 0
    if args.keys_command == "revoke":
        store.revoke(args.name)
        out.print(f"key {args.name!r} revoked", highlight=False)
        return 0
    rows = []
    for key in store.list():
        ledger = store.budget(key) if key.revoked_at is None else None
        if ledger is not None:
            ledger.refresh()
        rows.append(
            {
                "name": key.name,
                "scope": key.scope,
                "budget_usd": key.budget_usd,
                "period": key.period,
                "spent_this_period_usd": ledger.spent_usd if ledger else None,
                "created_at": key.created_at,
                "revoked_at": key.revoked_at,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table("name", "scope", "budget", "spent this period", "created", "status", box=None)
    for r in rows:
        budget = f"${r['budget_usd']:g}/{r['period']}" if r["budget_usd"] else "-"
        spent = f"${r['spent_this_period_usd']:.6f}" if r["spent_this_period_usd"] is not None else "-"
        status = f"revoked {r['revoked_at']}" if r["revoked_at"] else "active"
        table.add_row(str(r["name"]), str(r["scope"]), budget, spent, str(r["created_at"]), status)
    out.print(table if rows else "no keys: the server is open to anyone who can reach it (podium keys create NAME)")
    return 0


def cmd_kill_switch(args: argparse.Namespace, out: Console) -> int:
    """``podium kill-switch``: set it (every replica serves the fallback pipeline), clear it, or
    show it."""
    from podium.store.settings import KILL_SWITCH, SharedSettings

    store = key_store(args)
    switches = SharedSettings(store.engine)
    try:
        if args.state == "on":
            switches.set(KILL_SWITCH, "fallback")
        elif args.state == "off":
            switches.clear(KILL_SWITCH)
        setting = switches.get(KILL_SWITCH)
    finally:
        store.close()
    on = setting is not None and setting.value == "fallback"
    if args.json:
        print(json.dumps({"on": on, "set_at": setting.updated_at if setting else None,
                          "set_by": setting.updated_by if setting else None}))  # fmt: skip
    elif on and setting is not None:
        out.print(
            f"kill switch ON (set {setting.updated_at} by {setting.updated_by}): every podium serve on this store "
            "serves the fallback pipeline within a few seconds; 'podium kill-switch off' hands back",
            highlight=False,
        )
    else:
        out.print("kill switch off: each podium serve follows its configuration's serving", highlight=False)
    return 0
