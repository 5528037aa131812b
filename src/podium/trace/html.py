"""A request's trace as one static, self-contained HTML page (``podium trace export --html``).

The workflow is drawn as an inline SVG graph computed here (no JavaScript, nothing fetched):
one node per step labelled with its worker, an edge from every step whose output a step was
shown (its *visible* steps, and in later rounds the previous round's), steps of equal
dependency depth in one column (they could run in parallel), one band per round and one for
the fallback pipeline, and the answer. The columns are laid out as a layered drawing by igraph's
Sugiyama layout, which also reserves a slot for an edge in every column it passes
(:func:`_layout`), so no box hides an edge. Below it: the conductor's attempts and, per step,
the exact input messages, the output, tokens, cost and latency.

Questions and outputs are untrusted text: everything is HTML-escaped, and the page carries a
Content-Security-Policy that allows no script and no network at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from podium.records import RunRecord, StepRecord
from podium.workflow import ALL, Workflow

__all__ = ["render_html"]

_NODE_W, _NODE_H = 210, 66
_COL_GAP, _ROW_GAP, _BAND_GAP = 64, 18, 50
_TOP, _LEFT = 48, 16


def _e(value: object) -> str:
    return escape(str(value), quote=True)


@dataclass
class _Node:
    key: str  # "r0-s1", "fb-s0", "answer"
    title: str  # first line
    worker: str
    meta: str
    kind: str  # ok, error, cancelled, planned, fallback, answer, note
    tooltip: str
    x: float = 0.0
    y: float = 0.0
    link: str | None = None


@dataclass
class _Band:
    label: str
    columns: list[list[_Node]] = field(default_factory=list)
    x: float = 0.0
    width: float = 0.0


def _meta(step: StepRecord) -> str:
    tokens = f"{step.usage.input_tokens}→{step.usage.output_tokens} tok{' (est.)' if step.usage.estimated else ''}"
    return f"${step.cost_usd:.6f} · {step.latency_s:.2f} s · {tokens}"


def _kind(step: StepRecord) -> str:
    if step.error_type == "Cancelled":
        return "cancelled"
    if step.error:
        return "error"
    return "fallback" if step.phase == "fallback" else "ok"


def _visible(workflow: Workflow, index: int, done: StepRecord | None) -> tuple[int, ...]:
    """The this-round steps whose output step ``index`` saw (or, not run, would have seen)."""
    if done is not None:
        return tuple(done.visible)
    access = workflow.steps[index].access
    return tuple(range(index)) if access == ALL else tuple(access)


def _bands(record: RunRecord) -> tuple[list[_Band], list[tuple[str, str, str]]]:
    """The graph's nodes in bands of columns, and its edges (from key, to key, css class)."""
    names = record.workers
    bands: list[_Band] = []
    edges: list[tuple[str, str, str]] = []
    last_key: str | None = None
    for round_, workflow in enumerate(record.workflows):
        done = {s.index: s for s in record.steps if s.phase == "workflow" and s.round == round_}
        if not workflow.steps:
            note = _Node(f"r{round_}-keep", "conductor kept the answer", "", "", "note", "empty workflow")
            bands.append(_Band(f"round {round_}", [[note]]))
            continue
        depth: dict[int, int] = {}
        nodes: dict[int, _Node] = {}
        for i, step in enumerate(workflow.steps):
            seen = _visible(workflow, i, done.get(i))
            depth[i] = 1 + max((depth[j] for j in seen if j in depth), default=-1)
            ran = done.get(i)
            worker = names[step.worker] if step.worker < len(names) else "?"
            key = f"r{round_}-s{i}"
            nodes[i] = _Node(
                key,
                f"step {i} · Model {step.worker}",
                worker,
                _meta(ran) if ran else "not run",
                _kind(ran) if ran else "planned",
                f"{worker}: {step.subtask}",
                link=f"#step-{key}" if ran else None,
            )
            edges += [(f"r{round_}-s{j}", key, "edge") for j in seen]
            if ran:
                edges += [(f"r{r}-s{j}", key, "edge previous") for r, j in ran.visible_previous]
        columns: list[list[_Node]] = [[] for _ in range(max(depth.values()) + 1)]
        for i, node in nodes.items():
            columns[depth[i]].append(node)
        bands.append(_Band(f"round {round_}" if len(record.workflows) > 1 else "workflow", columns))
        if done:
            last_key = nodes[max(done)].key
    accepted = len(record.workflows)
    for round_ in sorted({a.round for a in record.attempts if a.round >= accepted}):  # rounds with no valid plan
        tried = [a for a in record.attempts if a.round == round_]
        kinds = sorted({a.error_kind or "invalid" for a in tried})
        note = _Node(f"r{round_}-failed", "no valid plan", f"{len(tried)} attempt(s)", ", ".join(kinds), "error",
                     f"round {round_}: " + "; ".join(a.error or "" for a in tried)[:300])  # fmt: skip
        bands.append(_Band(f"round {round_}", [[note]]))
    fallback = [s for s in record.steps if s.phase == "fallback"]
    if fallback:
        reason = record.fallback.reason if record.fallback else "fallback"
        nodes_fb = [
            _Node(
                f"fb-s{s.index}",
                "fallback",
                s.worker,
                _meta(s),
                _kind(s),
                f"{s.worker}: {s.subtask}",
                link=f"#step-fb-s{s.index}",
            )
            for s in fallback
        ]
        bands.append(_Band(f"fallback pipeline ({reason})", [nodes_fb]))
        last_key = nodes_fb[-1].key
    if record.status != "error" and record.mode == "run" and last_key is not None:
        answer = _Node("answer", "answer", "", f"status {record.status}", "answer", record.answer[:300], link="#answer")
        bands.append(_Band("", [[answer]]))
        edges.append((last_key, "answer", "edge answer"))
    return bands, edges


@dataclass
class _Route:
    """One edge as drawn: from its source's right side through ``via`` (the centre lines of the
    slots the layout reserved for it in the columns it passes, x from, x to, y) to its target's
    left side."""

    source: _Node
    target: _Node
    css: str
    via: list[tuple[float, float, float]]
    out_y: float = 0.0
    in_y: float = 0.0


def _layout(record: RunRecord) -> tuple[list[_Band], list[_Route], float, float]:
    """Position every node and route every edge: bands, routes, width and height (px).

    The columns are the layers of a layered (Sugiyama) drawing computed by igraph
    (``Graph.layout_sugiyama``: crossing reduction by the barycenter heuristic, Sugiyama et al.
    1981). An edge that spans columns (step 0 → step 2 past step 1, a previous round's step) gets
    a slot of its own in every column between, which no box takes, so it runs through the gaps
    between columns and those slots and no box hides it."""
    import igraph  # imported here: it takes 0.1-1 s, paid by pages with a graph only

    bands, edges = _bands(record)
    nodes = [n for band in bands for column in band.columns for n in column]
    index = {n.key: i for i, n in enumerate(nodes)}
    layers: list[int] = []
    column_x: list[float] = []
    x = float(_LEFT)
    for band in bands:
        band.x = x
        for column in band.columns:
            layers += [len(column_x)] * len(column)
            column_x.append(x)
            x += _NODE_W + _COL_GAP
        band.width = len(band.columns) * (_NODE_W + _COL_GAP) - _COL_GAP
        x += _BAND_GAP - _COL_GAP
    kept = [(s, t, css) for s, t, css in edges if s in index and t in index]
    graph = igraph.Graph(n=len(nodes), edges=[(index[s], index[t]) for s, t, _ in kept], directed=True)
    # the extended graph: every edge that spans columns is split at a dummy vertex per column
    coords, extended = graph.layout_sugiyama(layers=layers, hgap=1, vgap=1, return_extended_graph=True)
    slot = _NODE_H + _ROW_GAP
    lowest = min((u for u, _ in coords), default=0.0)
    for node, (u, _) in zip(nodes, coords[: len(nodes)], strict=True):
        node.x, node.y = column_x[layers[index[node.key]]], _TOP + (u - lowest) * slot
    dummies: dict[int, list[int]] = {}
    for edge in extended.es:
        if edge.target >= len(nodes):
            dummies.setdefault(edge["_original_eid"], []).append(edge.target)
    routes = []
    for eid, (s, t, css) in enumerate(kept):
        bends = sorted((coords[v][1], coords[v][0]) for v in dummies.get(eid, []))
        via = [
            (column_x[int(layer)], column_x[int(layer)] + _NODE_W, _TOP + (u - lowest) * slot + _NODE_H / 2)
            for layer, u in bends
        ]
        routes.append(_Route(nodes[index[s]], nodes[index[t]], css, via))
    _ports(routes)
    height = max([n.y + _NODE_H for n in nodes] + [y + _NODE_H / 2 for r in routes for _, _, y in r.via], default=_TOP)
    return bands, routes, max(x - _BAND_GAP + _LEFT, 320), height + 8


def _ports(routes: Sequence[_Route]) -> None:
    """Where each edge leaves its source (right side) and enters its target (left side): the
    edges of one side spread over it in the order of where they go next (or come from), so no
    two arrowheads meet at one point and no two edges leave along one line."""
    outs: dict[str, list[_Route]] = {}
    ins: dict[str, list[_Route]] = {}
    for r in routes:
        outs.setdefault(r.source.key, []).append(r)
        ins.setdefault(r.target.key, []).append(r)
    for group in outs.values():
        group.sort(key=lambda r: (r.via[0][2] if r.via else r.target.y + _NODE_H / 2, r.target.x))
        for k, r in enumerate(group):
            r.out_y = r.source.y + _NODE_H * (k + 1) / (len(group) + 1)
    for group in ins.values():
        group.sort(key=lambda r: (r.via[-1][2] if r.via else r.source.y + _NODE_H / 2, -r.source.x))
        for k, r in enumerate(group):
            r.in_y = r.target.y + _NODE_H * (k + 1) / (len(group) + 1)


def _path(r: _Route) -> str:
    """The SVG path of ``r``: a curve across each gap between columns (level at both ends, so it
    stays inside the gap), a straight run through each slot reserved for it."""
    points = [(r.source.x + _NODE_W, r.out_y)]
    for x_in, x_out, y in r.via:
        points += [(x_in, y), (x_out, y)]
    points.append((r.target.x, r.in_y))
    (x0, y0), *_ = points
    d = [f"M{x0:.0f},{y0:.1f}"]
    for i in range(1, len(points)):
        (x1, y1), (x2, y2) = points[i - 1], points[i]
        if i % 2:  # across a gap
            bend = max(20.0, (x2 - x1) / 2)
            d.append(f"C{x1 + bend:.0f},{y1:.1f} {x2 - bend:.0f},{y2:.1f} {x2:.0f},{y2:.1f}")
        else:  # through a column's slot
            d.append(f"L{x2:.0f},{y2:.1f}")
    return " ".join(d)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _svg(record: RunRecord) -> str:
    bands, routes, width, height = _layout(record)
    at = {n.key: n for b in bands for col in b.columns for n in col}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="graph" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="workflow graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    ]
    for band in bands:
        if band.label:
            out.append(f'<text class="band" x="{band.x:.0f}" y="20">{_e(band.label)}</text>')
        for c, column in enumerate(band.columns):
            if len(column) > 1 and band.label.startswith(("round", "workflow")):
                x = band.x + c * (_NODE_W + _COL_GAP)
                out.append(f'<text class="group" x="{x:.0f}" y="38">parallel: {len(column)} steps</text>')
    for r in routes:
        out.append(
            f'<path class="{r.css}" data-from="{_e(r.source.key)}" data-to="{_e(r.target.key)}" '
            f'data-bends="{len(r.via)}" d="{_path(r)}" marker-end="url(#arrow)"/>'
        )
    for node in at.values():
        body = [
            f'<rect x="{node.x:.0f}" y="{node.y:.0f}" width="{_NODE_W}" height="{_NODE_H}" rx="8"/>',
            f'<text x="{node.x + 10:.0f}" y="{node.y + 20:.0f}" class="title">{_e(_clip(node.title, 30))}</text>',
            f'<text x="{node.x + 10:.0f}" y="{node.y + 38:.0f}" class="worker">{_e(_clip(node.worker, 30))}</text>',
            f'<text x="{node.x + 10:.0f}" y="{node.y + 55:.0f}" class="meta">{_e(_clip(node.meta, 36))}</text>',
            f"<title>{_e(node.tooltip)}</title>",
        ]
        group = f'<g class="node {node.kind}" id="node-{_e(node.key)}" data-key="{_e(node.key)}">{"".join(body)}</g>'
        out.append(f'<a href="{_e(node.link)}">{group}</a>' if node.link else group)
    out.append("</svg>")
    return "\n".join(out)


def _table(rows: Iterable[tuple[str, object]]) -> str:
    cells = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f'<table class="facts">{cells}</table>'


def _pre(text: str, css: str = "") -> str:
    return f'<pre class="{css}">{_e(text)}</pre>'


def _access(access: Any, visible: Sequence[int], previous: Sequence[tuple[int, int]]) -> str:
    written = '"all"' if access == ALL else "[" + ", ".join(str(i) for i in access) + "]"
    seen = ", ".join(f"step {i}" for i in visible) or "none"
    if previous:
        seen += "; previous round: " + ", ".join(f"round {r} step {i}" for r, i in previous)
    return f"{written} — saw {seen}"


def _step_section(step: StepRecord) -> str:
    key = f"fb-s{step.index}" if step.phase == "fallback" else f"r{step.round}-s{step.index}"
    label = "fallback pipeline" if step.phase == "fallback" else f"round {step.round} · step {step.index}"
    facts = _table(
        [
            ("worker", f"Model {step.worker_index} · {step.worker}"),
            ("subtask", step.subtask),
            ("access list", _access(step.access, step.visible, step.visible_previous)),
            (
                "tokens in (cached) / out",
                f"{step.usage.input_tokens} ({step.usage.cached_input_tokens}) / {step.usage.output_tokens}"
                + (" — estimated: the server reported no usage" if step.usage.estimated else ""),
            ),
            ("cost (USD)", f"{step.cost_usd:.6f}"),
            ("latency (s)", f"{step.latency_s:.3f}"),
            ("finish reason", step.finish_reason),
            ("started / finished (UTC)", f"{step.started_at} / {step.finished_at}"),
            *([("error", step.error)] if step.error else []),
        ]
    )
    messages = "".join(
        f'<div class="message"><div class="role">{_e(m["role"])}</div>{_pre(m["content"])}</div>' for m in step.messages
    )
    return (
        f'<section class="step" id="step-{key}"><h3>{_e(label)}</h3>{facts}'
        f"<details><summary>input messages ({len(step.messages)})</summary>{messages}</details>"
        f"<h4>output</h4>{_pre(step.output or '(no output)', 'output')}</section>"
    )


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d1f23;max-width:1280px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px} h4{font-size:13px;margin:10px 0 4px;color:#555}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f7f9;border:1px solid #e3e5e8;border-radius:6px;
padding:8px 10px;margin:4px 0;font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
table.facts{border-collapse:collapse;margin:4px 0} table.facts th{text-align:left;color:#555;font-weight:500;
padding:2px 14px 2px 0;vertical-align:top;white-space:nowrap} table.facts td{padding:2px 0}
.dim{color:#666} .graph{overflow-x:auto;border:1px solid #e3e5e8;border-radius:8px;padding:6px;background:#fcfcfd}
.message .role{font-size:12px;color:#555;margin-top:6px} section.step{border-top:1px dashed #ddd;padding-top:4px}
svg text{font:12px system-ui,sans-serif;fill:#1d1f23} svg text.title{font-weight:600}
svg text.meta,svg text.group{fill:#555;font-size:11px} svg text.band{font-weight:600;fill:#333;font-size:13px}
.node rect{fill:#e8f1fb;stroke:#3b78c2;stroke-width:1.5} .node.error rect{fill:#fde8e8;stroke:#c23b3b}
.node.cancelled rect{fill:#f0f0f0;stroke:#999;stroke-dasharray:5 3} .node.planned rect{fill:#fff;stroke:#999;
stroke-dasharray:5 3} .node.fallback rect{fill:#fff4e0;stroke:#c28a1e} .node.answer rect{fill:#e7f6ea;stroke:#2e8b47}
.node.note rect{fill:#fff;stroke:#bbb} path.edge{fill:none;stroke:#555;stroke-width:1.4}
path.edge.previous{stroke-dasharray:6 4;stroke:#7a5bb5;stroke-linejoin:round}
path.edge.answer{stroke:#2e8b47;stroke-dasharray:3 3}
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def render_html(record: RunRecord, *, header: str = "", forms_to_self: bool = False) -> str:
    """The whole page for ``record``: a complete HTML document (UTF-8), with no script and no
    external resource, safe to open whatever the question and outputs contain.

    Args:
        header: trusted HTML put first in the body (the server's UI adds its links and purge
            button; never the record's text).
        forms_to_self: let forms post to the page's own origin (the UI's purge); the exported
            file allows no form at all.
    """
    t = record.totals
    summary = _table(
        [
            ("status", record.status + (f" — {record.error}" if record.error else "")),
            ("started / finished (UTC)", f"{record.started_at} / {record.finished_at}"),
            ("pool · conductor", f"{record.pool} · {record.conductor}"),
            ("workers", ", ".join(f"Model {i}: {w}" for i, w in enumerate(record.workers))),
            ("tags", ", ".join(record.tags) or "—"),
            ("subject", record.subject or "—"),
            ("worker calls · tokens in/out", f"{t.worker_calls} · {t.input_tokens:,} / {t.output_tokens:,}"),
            (
                "conductor calls · tokens in/out",
                f"{t.conductor_calls} · {t.conductor_input_tokens:,} / {t.conductor_output_tokens:,}",
            ),
            ("cost (USD)", f"{t.total_cost_usd:.6f} (workers {t.cost_usd:.6f}, conductor {t.conductor_cost_usd:.6f})"),
            ("wall time (s)", f"{t.wall_time_s:.3f}"),
            *(
                [("estimated", f"tokens and cost of {t.estimated_calls} call(s): their server reported no usage")]
                if t.estimated_calls
                else []
            ),
        ]
    )
    attempts = []
    for a in record.attempts:
        if a.workflow is None:
            verdict = f"invalid plan — {a.error_kind}: {a.error}"
        elif not len(a.workflow):
            verdict = "kept the answer"
        else:
            verdict = f"valid workflow, {len(a.workflow)} step(s)"
        attempts.append(
            f"<h3>round {a.round} · attempt {a.attempt}</h3>"
            + _table(
                [
                    ("result", verdict),
                    ("tokens in / out", f"{a.usage.input_tokens} / {a.usage.output_tokens}"),
                    ("cost (USD) · latency (s)", f"{a.cost_usd:.6f} · {a.latency_s:.3f}"),
                    ("constrained decoding", "yes" if a.constrained else "no"),
                ]
            )
            + f"<details><summary>conductor output</summary>{_pre(a.raw_output)}</details>"
        )
    fallback = (
        f'<p class="dim">Fallback pipeline ran: {_e(record.fallback.reason)} — {_e(record.fallback.detail)}</p>'
        if record.fallback
        else ""
    )
    answer = _pre(record.answer) if record.status != "error" else _pre(record.error or "no answer", "error")
    steps = "".join(_step_section(s) for s in record.steps) or '<p class="dim">No step ran.</p>'
    csp = _CSP.replace("form-action 'none'", "form-action 'self'") if forms_to_self else _CSP
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>podium trace {_e(record.id[:12])}</title>
<style>{_CSS}</style></head>
<body>{header}
<h1>podium trace <code>{_e(record.id)}</code></h1>
<h2>Question</h2>{_pre(record.question, "question")}
{summary}
<h2>Workflow</h2>
<p class="dim">Steps in one column have the same dependency depth and could run in parallel; an arrow means the
target step was shown the source step's output (dashed violet: from the previous round); an arrow that skips
a column runs through a free place in it. Click a step for its messages and output.</p>
<div class="graph">{_svg(record)}</div>
{fallback}
<h2 id="answer">Answer</h2>{answer}
<h2>Conductor</h2>{"".join(attempts) or '<p class="dim">No conductor call.</p>'}
<h2>Steps</h2>{steps}
</body></html>
"""
