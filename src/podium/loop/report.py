"""What ``podium loop`` shows: one run's report (``runs/NNNN/report.md``, stage 7) and the
folder's state (``podium loop status``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podium.loop.state import Folder

__all__ = ["run_markdown", "stage_lines", "status_json", "status_markdown"]

_STAGES = ("drift", "export", "labels", "record", "train", "promote")


def _drift(d: Mapping[str, Any]) -> str:
    if d["status"] != "done":
        return f"exit {d['exit_code']}, not compared: {d.get('error', '')}"
    kinds = f" ({', '.join(d['kinds'])} shift)" if d.get("kinds") else ""
    plot = f" · {d['plot']}" if d.get("plot") else ""
    judge = ""
    if j := d.get("judge"):
        judge = f" · judge {j['worker']}: {j['judged']} answer(s) graded, {j['unscored']} unscored"
    elif d.get("judge_error"):
        judge = f" · judge failed, compared without it: {d['judge_error']}"
    return f"exit {d['exit_code']} — {d['alerts']} alert(s){kinds} · {d['report']}{plot}{judge}"


def _export(d: Mapping[str, Any]) -> str:
    line = (
        f"{d['added']} new task(s) of {d['read']} request(s) read ({d['already_in_set']} already in the set, "
        f"{d['dropped_before']} dropped before, {d['duplicates']} duplicate(s)) · {d['in_set']} in the set"
    )
    if d.get("review"):
        line += f" · review file {d['review']} ({d['review_rows']} row(s), {d['review_candidates']} candidate(s))"
    if d.get("rewritten_reviews"):
        line += f" · rewrote lost review file(s) {', '.join(d['rewritten_reviews'])}"
    return line


def _labels(d: Mapping[str, Any]) -> str:
    parts = [
        f"{f['file']}: {f['changed']} changed ({f['accepted']} accepted, {f['fixed']} fixed, {f['retyped']} retyped), "
        f"{f['dropped']} dropped"
        for f in d["reviews"]
    ] or ["no review file filled since the last run"]
    if j := d.get("judge"):
        calls = f", {j['calls']} call(s)" if j.get("calls") is not None else ""
        counts = f"{j['confirmed']} confirmed, {j['rejected']} rejected, {j['unscored']} unscored"
        why = f" (first: {j['unscored_example']})" if j.get("unscored_example") else ""
        parts.append(f"judge {j['worker']}: {counts}{why}{calls}")
    parts.append(f"{d['candidates_left']} unconfirmed candidate(s) ({d['status']})")
    return " · ".join(parts)


def _record(d: Mapping[str, Any]) -> str:
    splits = " / ".join(f"{n} {k}" for k, n in d.get("splits", {}).items())
    if d["status"] == "skipped":
        line = f"skipped: {d['reason']} · {d['questions']} question(s) · {splits}"
    else:
        line = (
            f"{d['questions']} question(s) in the matrix ({d['new_questions']} new, {d['removed_questions']} removed; "
            f"{d['calls']} call(s), {d['cache_hits']} from the cache) · {splits} · {d['report']}"
        )
    if b := d.get("bank"):
        line += f" · bank: {b['recorded']} question(s) recorded, {b['in_bank']} in it"
        if b.get("open_left_out"):
            line += f" ({b['open_left_out']} open one(s) left out)"
        if b.get("rescored") or b.get("dropped"):
            line += f"; after reviews {b['rescored']} row(s) rescored, {b['dropped']} dropped"
    return line


def _train(d: Mapping[str, Any]) -> str:
    if d["status"] == "done":
        reward = f" · validation reward {d['validation_reward']:.4f}" if "validation_reward" in d else ""
        if d.get("policy") == "plans":
            reward = f" of the bank · cross-validated quality {d['validation_quality']:.3f}"
        if d.get("policy") == "lm":
            last = f", last reward {d['reward']:.3f}, parsed {d['parse_rate']:.0%}" if "reward" in d else ""
            reward = f" · {d['grpo_steps']} GRPO step(s){last}"
        warning = f" · warning: {d['warning']}" if d.get("warning") else ""
        return f"{d['version']} on {d['questions']} training question(s){reward}{warning}"
    return f"{d['status']}: {d.get('reason', '')}"


def _promote(d: Mapping[str, Any]) -> str:
    if d["status"] in ("promoted", "refused"):
        return str(d["reason"])
    if d["status"] == "skipped" and "decision" in d:
        return f"skipped: the gate judged {d['candidate']} in run {d['decided_in']} ({d['decision']}): {d['reason']}"
    if d["status"] == "already promoted":
        return f"{d['candidate']} is the promoted version"
    return f"{d['status']}: {d.get('reason', '')}"


_SHOW = {"drift": _drift, "export": _export, "labels": _labels, "record": _record, "train": _train, "promote": _promote}


def stage_lines(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(``N. stage``, what it did) for each stage the run reached."""
    stages = run.get("stages", {})
    return [(f"{i}. {name}", _SHOW[name](stages[name])) for i, name in enumerate(_STAGES, 1) if name in stages]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def run_markdown(run: Mapping[str, Any], folder: Folder) -> str:
    """One run's report: a row per stage, the outcome, and the command each stage stood for."""
    window = run["window"]
    lines = [
        f"# podium loop · run {run['id']} · {run['status']} (exit {run['exit_code']})",
        "",
        f"Folder `{folder.root}` · started {run['started']}, ended {run.get('finished', '–')} · traffic "
        f"{window['since']} → {window['until']}",
        "",
        "| stage | what it did |",
        "|---|---|",
        *(f"| {name} | {_cell(text)} |" for name, text in stage_lines(run)),
        "",
        f"The set: {run.get('set', {}).get('tasks', 0)} task(s). "
        f"Promoted version now: {run.get('promoted') or 'none'}.",
    ]
    if run.get("message"):
        lines += ["", "```", str(run["message"]), "```"]
    judge = run.get("stages", {}).get("labels", {}).get("judge") or {}
    if checks := judge.get("spot_check"):
        lines += [
            "",
            f"## Spot-check the judge: {len(checks)} of its {judge['confirmed']} confirmation(s) this run",
            "",
            "A judge tends to agree with what it is shown. Where a reference is wrong, fix it in the set's review "
            "file (verdict fix) and run the loop again.",
            "",
            "| task | question | confirmed reference |",
            "|---|---|---|",
            *(f"| {c['id']} | {_cell(c['question'])} | {_cell(c['reference'])} |" for c in checks),
        ]
    if run.get("error"):
        lines += ["", f"Stopped by an error: {run['error']}"]
    if run.get("commands"):
        lines += ["", "## What each stage ran", ""]
        lines += [f"- {stage}: `{c}`" for stage, cs in run["commands"].items() for c in cs]
    return "\n".join(lines) + "\n"


def status_json(state: Mapping[str, Any], folder: Folder) -> dict[str, Any]:
    """The folder's state as ``podium loop status --json`` prints it: the settings, the set and
    matrix now, the promoted version, the runs (without their command lines) and the review files
    (rows, rows filled in, unconfirmed candidates among their tasks)."""
    from podium.eval.matrix import split_counts
    from podium.loop.stages import candidates
    from podium.registry import Registry
    from podium.traffic.export import read_set
    from podium.traffic.review import read_review

    records = read_set(folder.set) if folder.set.is_file() else []
    left = set(candidates(records))
    reviews = []
    for entry in state.get("reviews", []):
        path = folder.root / entry["file"]
        rows = read_review(path) if path.is_file() else []
        filled = sum(1 for r in rows if r.get("verdict", "").strip() or r.get("reference", "").strip())
        reviews.append(
            {"file": entry["file"], "run": entry["run"], "rows": len(entry["ids"]), "filled": filled,
             "unconfirmed": len(left & set(entry["ids"])), "exists": path.is_file()}
        )  # fmt: skip
    name = state.get("settings", {}).get("name", "light")
    promoted = Registry().promoted(name)
    return {
        "dir": str(folder.root),
        "settings": state.get("settings", {}),
        "set": {"tasks": len(records), "unconfirmed": len(left)},
        "matrix": split_counts(folder.matrix) if folder.matrix.is_file() else {},
        "promoted": promoted.ref if promoted else None,
        "runs": [{k: v for k, v in r.items() if k != "commands"} for r in state.get("runs", [])],
        "reviews": reviews,
    }


def _drift_cell(drift: Mapping[str, Any]) -> str:
    """A run's drift stage in a word or two: ``quiet``, the kinds of shift it alerted on, ``too few
    requests`` (no slice had ``--min-requests`` in both windows, so nothing could alert), or
    ``not compared`` (e.g. no traffic before a first run's window)."""
    if drift.get("status") != "done":
        return str(drift.get("status", "–"))
    kinds = drift.get("kinds") or []
    if kinds:
        return f"{' + '.join(kinds)} shift"
    return "too few requests" if drift.get("compared") == [] else "quiet"


def status_markdown(status: Mapping[str, Any]) -> str:
    """``podium loop status``: the folder at a glance."""
    s = status["settings"]
    if not status["runs"]:
        return f"# podium loop · {status['dir']}\n\nNo run yet: podium loop run --dir {status['dir']}\n"
    keys = (
        *("pool", "judge", "eval_judge", "drift_judge_sample", "reference_since", "reference_until", "threshold"),
        *("source", "tag"),
        *("allow_pii", "seed", "matrix_split"),
        *("name", "policy", "lam", "bank", "embedder", "generations", "dims", "clusters", "model", "steps"),
    )
    shown = ", ".join(f"{k} {s[k]}" for k in keys if s.get(k) is not None and s[k] is not False and s[k] != [])
    matrix = " / ".join(f"{n} {k}" for k, n in status["matrix"].items()) or "none yet"
    lines = [
        f"# podium loop · {status['dir']}",
        "",
        f"Settings: {shown or 'defaults'}",
        f"The set: {status['set']['tasks']} task(s), {status['set']['unconfirmed']} unconfirmed candidate(s); "
        f"the matrix: {matrix}; promoted: {status['promoted'] or 'none'}",
        "",
        "| run | window | status | exit | drift | new tasks | trained | gate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in status["runs"]:
        st = r.get("stages", {})
        window = " → ".join(str(r.get("window", {}).get(k, "?"))[:16].replace("T", " ") for k in ("since", "until"))
        added = st.get("export", {}).get("added", "–")
        trained = st.get("train", {}).get("version") or st.get("train", {}).get("status", "–")
        gate = st.get("promote", {}).get("status", "–")
        exit_code = "–" if r.get("exit_code") is None else r["exit_code"]
        cells = (r["id"], window, r["status"], exit_code, _drift_cell(st.get("drift", {})), added, trained, gate)
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if status["reviews"]:
        lines += ["", "| review file | rows | filled in | unconfirmed |", "|---|---|---|---|"]
        for v in status["reviews"]:
            missing = " (missing)" if not v["exists"] else ""
            lines.append(f"| {v['file']}{missing} | {v['rows']} | {v['filled']} | {v['unconfirmed']} |")
    last = status["runs"][-1]
    if last.get("message"):
        lines += ["", "```", str(last["message"]), "```"]
    return "\n".join(lines) + "\n"
