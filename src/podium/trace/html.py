"""A request's trace as one static, self-contained HTML page (``podium trace export --html``).

The workflow is drawn as an inline SVG graph computed here (no JavaScript, nothing fetched):
one node per step labelled with its worker, an edge from every step whose output a step was
shown (its *visible* steps, and in later rounds the previous round's), steps of equal
dependency depth in one column (they could run in parallel), one band per round and one for
the fallback pipeline, and the answer. Edges are routed around the boxes (:func:`_routes`), so
none is hidden behind one. Below it: the conductor's attempts and, per step, the
exact input messages, the output, tokens, cost and latency.

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

__all__ = [
    "LANE_GAP",
    "render_html",
]

NODE_W, NODE_H = 210, 66
COL_GAP, ROW_GAP, BAND_GAP = 64, 18, 50
TOP, LEFT = 48, 16


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


def _layout(record: RunRecord) -> tuple[list[_Band], list[tuple[str, str, str]], float, float]:
    """Bands of positioned nodes, edges (from key, to key, css class), width and height."""
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
    x = LEFT
    height = 0.0
    for band in bands:
        band.x = x
        for c, column in enumerate(band.columns):
            for r, node in enumerate(column):
                node.x = x + c * (NODE_W + COL_GAP)
                node.y = TOP + r * (NODE_H + ROW_GAP)
            height = max(height, TOP + len(column) * (NODE_H + ROW_GAP))
        band.width = len(band.columns) * (NODE_W + COL_GAP) - COL_GAP
        x += band.width + BAND_GAP
    return bands, edges, max(x - BAND_GAP + LEFT, 320), height + 8


LANE_GAP = 8
"""Vertical distance between two lanes above (or below) the boxes, px."""


@dataclass
class _Route:
    """How one edge is drawn: a curve through the gap between two adjacent columns, or a path
    along a lane above (``"over"``) or below (``"under"``) every box."""

    source: _Node
    target: _Node
    css: str
    side: str = "direct"  # direct, over, under
    lane: int = 0
    out_x: float = 0.0
    in_x: float = 0.0
    out_y: float = 0.0
    in_y: float = 0.0


def _blocked(a: _Node, b: _Node, nodes: Iterable[_Node]) -> bool:
    """Whether a direct curve from ``a``'s right side to ``b``'s left side could pass through
    another box: a box meets the rectangle the curve stays in (the hull of its control points)."""
    x1, x2 = a.x + NODE_W, b.x
    y1, y2 = min(a.y, b.y), max(a.y, b.y) + NODE_H  # wherever on their sides the curve's ends sit
    margin = 4.0  # vertically; columns are apart by a gap, so a box beside the source or target is no obstacle
    return any(
        n is not a
        and n is not b
        and n.x < x2
        and n.x + NODE_W > x1
        and n.y < y2 + margin
        and n.y + NODE_H > y1 - margin
        for n in nodes
    )


def _routes(nodes: Sequence[_Node], edges: Sequence[tuple[str, str, str]]) -> list[_Route]:
    """Route every edge so that no box hides it (a layered layout's edge routing).

    An edge between adjacent columns is a curve through the empty gap between them. An edge that
    would cross another box (it skips a column: step 0 → step 2 past step 1) leaves its source to
    the right, climbs in the gap beside it to a lane of its own above all boxes, runs along it and
    comes down in the gap left of its target; previous-round edges do the same below the boxes.
    Gaps hold no boxes, and each edge has its own lane and its own place in every gap it uses, so
    every edge stays visible and tells itself apart from the others. Longer edges get the outer
    lanes, so lanes nest. Moves the nodes down to make room for the lanes above."""
    at = {n.key: n for n in nodes}
    routes = [_Route(at[s], at[t], css) for s, t, css in edges if s in at and t in at]
    for r in routes:
        if "previous" in r.css:
            r.side = "under"
        elif _blocked(r.source, r.target, nodes):
            r.side = "over"
    for side in ("over", "under"):
        lanes = sorted((r for r in routes if r.side == side), key=lambda r: (r.source.x - r.target.x, r.source.y))
        for k, r in enumerate(lanes):  # k = 0: the longest edge, on the outermost lane
            r.lane = k
    over = sum(r.side == "over" for r in routes)
    if over:
        for n in nodes:
            n.y += over * LANE_GAP + 6
    _ports(routes)
    lefts = sorted({n.x for n in nodes})
    # every vertical stretch in a gap gets its own x: per gap (keyed by its left edge), edges
    # leaving the column on its left, then edges entering the column on its right
    users: dict[float, list[tuple[int, _Route, str]]] = {}
    for r in routes:
        if r.side == "direct":
            continue
        users.setdefault(r.source.x + NODE_W, []).append((0 if r.side == "over" else 1, r, "out"))
        before = max((x for x in lefts if x < r.target.x), default=r.target.x - BAND_GAP)
        users.setdefault(before + NODE_W, []).append((3 if r.side == "over" else 2, r, "in"))
    for left, group in users.items():
        right = min((x for x in lefts if x > left), default=left + BAND_GAP)
        group.sort(key=lambda u: (u[0], u[1].lane if u[0] < 2 else -u[1].lane))  # outer lanes: outside
        lo, hi = left + 8, right - 12  # room for the arrowhead after the last turn
        for i, (_, r, end) in enumerate(group):
            x = lo + (i + 1) * (hi - lo) / (len(group) + 1)
            if end == "out":
                r.out_x = x
            else:
                r.in_x = x
    return routes


def _ports(routes: Sequence[_Route]) -> None:
    """Where each edge leaves its source (right side) and enters its target (left side): the
    edges of one side spread over it, ordered as they run (from above, level, from below), so
    no two arrowheads meet at one point."""
    rank = {"over": 0, "direct": 1, "under": 2}
    outs: dict[str, list[_Route]] = {}
    ins: dict[str, list[_Route]] = {}
    for r in routes:
        outs.setdefault(r.source.key, []).append(r)
        ins.setdefault(r.target.key, []).append(r)
    for group in outs.values():
        group.sort(key=lambda r: (rank[r.side], r.lane if r.side == "over" else -r.lane, r.target.y, r.target.x))
        for k, r in enumerate(group):
            r.out_y = r.source.y + NODE_H * (k + 1) / (len(group) + 1)
    for group in ins.values():
        group.sort(key=lambda r: (rank[r.side], r.lane if r.side == "over" else -r.lane, r.source.y, r.source.x))
        for k, r in enumerate(group):
            r.in_y = r.target.y + NODE_H * (k + 1) / (len(group) + 1)


def _rounded(points: Sequence[tuple[float, float]], radius: float = 6.0) -> str:
    """An SVG path through ``points`` (an orthogonal polyline) with rounded corners."""
    (x0, y0), *rest = points
    d = [f"M{x0:.0f},{y0:.0f}"]
    for i in range(1, len(points) - 1):
        (ax, ay), (px, py), (bx, by) = points[i - 1], points[i], points[i + 1]
        into, out = abs(px - ax) + abs(py - ay), abs(bx - px) + abs(by - py)
        r = min(radius, into / 2, out / 2)
        if r <= 0:
            continue
        sx, sy = px - r * _sign(px - ax), py - r * _sign(py - ay)
        ex, ey = px + r * _sign(bx - px), py + r * _sign(by - py)
        d.append(f"L{sx:.1f},{sy:.1f} Q{px:.1f},{py:.1f} {ex:.1f},{ey:.1f}")
    xn, yn = rest[-1]
    d.append(f"L{xn:.0f},{yn:.0f}")
    return " ".join(d)


def _sign(value: float) -> float:
    return (value > 0) - (value < 0)


def _path(r: _Route, top: float, bottom: float) -> str:
    """The SVG path of ``r``; ``top``: the top of the first lane above the boxes, ``bottom``:
    the y of the first lane below them."""
    a, b = r.source, r.target
    x1, y1, x2, y2 = a.x + NODE_W, r.out_y, b.x, r.in_y
    if r.side == "direct":
        bend = max(30.0, (x2 - x1) / 2)
        return f"M{x1:.0f},{y1:.0f} C{x1 + bend:.0f},{y1:.0f} {x2 - bend:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"
    lane = top + 2 + r.lane * LANE_GAP if r.side == "over" else bottom + r.lane * LANE_GAP
    return _rounded([(x1, y1), (r.out_x, y1), (r.out_x, lane), (r.in_x, lane), (r.in_x, y2), (x2, y2)])


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _svg(record: RunRecord) -> str:
    bands, edges, width, height = _layout(record)
    at = {n.key: n for b in bands for col in b.columns for n in col}
    routes = _routes(list(at.values()), edges)
    under = sum(r.side == "under" for r in routes)
    bottom = max(n.y + NODE_H for n in at.values()) + 14  # the first lane under the boxes
    over = sum(r.side == "over" for r in routes)
    height = max(height + (over * LANE_GAP + 6 if over else 0), bottom + under * LANE_GAP)
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
                x = band.x + c * (NODE_W + COL_GAP)
                out.append(f'<text class="group" x="{x:.0f}" y="38">parallel: {len(column)} steps</text>')
    for r in routes:
        out.append(
            f'<path class="{r.css}" data-from="{_e(r.source.key)}" data-to="{_e(r.target.key)}" '
            f'data-route="{r.side}" d="{_path(r, TOP, bottom)}" marker-end="url(#arrow)"/>'
        )
    for node in at.values():
        body = [
            f'<rect x="{node.x:.0f}" y="{node.y:.0f}" width="{NODE_W}" height="{NODE_H}" rx="8"/>',
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
target step was shown the source step's output (dashed violet: from the previous round); arrows that skip a
column run above the boxes. Click a step for its messages and output.</p>
<div class="graph">{_svg(record)}</div>
{fallback}
<h2 id="answer">Answer</h2>{answer}
<h2>Conductor</h2>{"".join(attempts) or '<p class="dim">No conductor call.</p>'}
<h2>Steps</h2>{steps}
</body></html>
"""
