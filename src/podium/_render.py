"""Human-readable rendering of records for the CLI (rich). Machine form is ``--json``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from podium.records import Disclosure, PlanAttempt, RunRecord, StepRecord
from podium.trace.query import SearchHit, TraceSummary
from podium.workflow import ALL, Workflow

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from podium.dataflow import Register

__all__ = [
    "PIPED_WIDTH",
    "PlainProgress",
    "output_console",
    "print_record",
    "progress_bar",
    "render_plan",
    "render_register",
    "render_run",
    "render_search",
    "render_trace_list",
    "shorten",
]


PIPED_WIDTH = 120
"""Columns of tables printed to a pipe or file (CI logs, ``| less``): wide enough that a
question column stays readable, as a terminal's width would be."""


def output_console() -> Console:
    """The console of the CLI's standard output. In a terminal: its own width. Piped: at least
    :data:`PIPED_WIDTH` columns for tables, and lines of plain text are never hard-wrapped, so a
    path or a command in them stays whole (copyable, greppable); a pipe reader wraps as it
    likes."""
    probe = Console()
    if probe.is_terminal:
        return probe
    return _PipedConsole(width=max(probe.width, PIPED_WIDTH), soft_wrap=True)


class _PipedConsole(Console):
    """A console whose reader may stop early (``| head``): the broken pipe reaches
    :func:`podium.cli.main`, which ends quietly with 141 as other Unix tools do (rich's own
    handler would exit 1, a failure, with no word)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def progress_bar(label: str, console: Console, *, remaining: bool = False) -> Progress | PlainProgress:
    """The progress bar of long commands (eval, train): ``label``, bar, done/total, the task's
    description, elapsed time and, with ``remaining``, the estimate of time left. When
    ``console`` is not a terminal (output to a file or a CI log) a :class:`PlainProgress`
    prints plain lines instead, so long runs are never silent."""
    if not console.is_terminal:
        return PlainProgress(label, console)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}")]
    columns += [TimeElapsedColumn(), *([TimeRemainingColumn()] if remaining else [])]
    return Progress(*columns, console=console)


class PlainProgress:
    """Progress as plain lines for a console that is no terminal: a line when a task starts or
    changes what it is doing, and one at every tenth of its total or every ``every_s`` seconds,
    with done/total, elapsed time and the estimated time left (once at least 3 units, and 2 % of
    the total, have finished after the first). The subset of rich's
    ``Progress`` interface that podium's commands use."""

    def __init__(self, label: str, console: Console, *, every_s: float = 30.0) -> None:
        self.label = label
        self.console = console
        self.every_s = every_s
        self._tasks: dict[TaskID, dict[str, Any]] = {}

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        return None

    def stop(self) -> None:
        for task in self._tasks.values():
            if task["completed"] != task["shown"]:
                self._line(task, force=True)

    def add_task(self, description: str, total: float | None = None, **_: Any) -> TaskID:
        task_id = cast("TaskID", len(self._tasks))  # rich's TaskID is an int (NewType)
        now = time.monotonic()
        self._tasks[task_id] = {"description": description, "total": total, "completed": 0.0, "started": now,
                                "printed": now, "tenth": 0, "shown": 0.0}  # fmt: skip
        first = f"{self.label}: {description or 'starting'}" + (f" (0/{int(total)})" if total else "")
        self.console.print(first, highlight=False, markup=False, emoji=False)
        return task_id

    def update(
        self,
        task_id: TaskID,
        *,
        advance: float | None = None,
        completed: float | None = None,
        total: float | None = None,
        description: str | None = None,
        **_: Any,
    ) -> None:
        task = self._tasks[task_id]
        if total is not None:
            task["total"] = total
        if completed is not None:
            task["completed"] = completed
        if advance is not None:
            task["completed"] += advance
        if task.get("base") is None and task["completed"] > 0:
            # the rate is measured from the first finished unit on: set-up before it (loading a
            # model, embedding questions) would make the first estimates far too long
            task["base"] = (time.monotonic(), task["completed"])
        changed = description is not None and description != task["description"]
        if description is not None:
            task["description"] = description
        self._line(task, force=changed and not advance)

    def _line(self, task: dict[str, Any], *, force: bool = False) -> None:
        now = time.monotonic()
        total, done = task["total"], task["completed"]
        tenth = int(10 * done / total) if total else 0
        if not (force or tenth > task["tenth"] or now - task["printed"] >= self.every_s):
            return
        task["tenth"], task["printed"], task["shown"] = tenth, now, done
        elapsed = now - task["started"]
        left = ""
        base = task.get("base")
        if total and base is not None and done - base[1] >= max(3, total / 50):
            # a rate over fewer units is mostly which units came first (an eval's first
            # questions may be its slowest): 2h41m was shown for a run that took 1h30m
            rate = (now - base[0]) / (done - base[1])
            left = f", about {_duration(rate * (total - done))} left"
        count = f"{int(done)}/{int(total)} " if total else ""
        line = f"{self.label}: {count}{task['description']} · {_duration(elapsed)} elapsed{left}"
        self.console.print(line, highlight=False, markup=False, emoji=False)  # names are not markup: "single:b"


def _duration(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def shorten(text: str, limit: int = 400) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was left out."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f" … [+{len(text) - limit} chars]"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _sees(access: object, index: int) -> str:
    if access == ALL:
        return "all earlier" if index else "—"
    items = list(access)  # type: ignore[call-overload]
    return ", ".join(str(i) for i in items) if items else "—"


def _plan_table(workflow: Workflow, worker_names: Sequence[str], round_: int = 0) -> Table:
    title = "Workflow" if round_ == 0 else f"Workflow, round {round_} (steps seeing all also see round {round_ - 1})"
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("step", justify="right")
    table.add_column("worker")
    table.add_column("subtask", overflow="fold")
    table.add_column("sees steps")
    for i, step in enumerate(workflow.steps):
        name = worker_names[step.worker] if step.worker < len(worker_names) else "?"
        table.add_row(str(i), f"Model {step.worker} · {name}", escape(step.subtask), _sees(step.access, i))
    return table


def _attempts(attempts: Sequence[PlanAttempt]) -> Text:
    text = Text()
    for a in attempts:
        how = "constrained" if a.constrained else "free"
        where = f"round {a.round}, attempt {a.attempt}" if a.round else f"attempt {a.attempt}"
        if a.error_kind == "deadline":
            text.append(f"conductor {where}: cut off — {a.error}\n", "yellow")
        elif a.workflow is not None and len(a.workflow) == 0:
            text.append(f"conductor {where} ({how}): keeps the answer\n", "green")
        elif a.workflow is not None:
            text.append(f"conductor {where} ({how}): valid workflow, {len(a.workflow)} step(s)\n", "green")
        else:
            text.append(f"conductor {where} ({how}): invalid plan — {a.error_kind}: {a.error}\n", "yellow")
    return text


def _reasoning(attempt: PlanAttempt) -> str:
    first = attempt.raw_output.strip().splitlines()[0] if attempt.raw_output.strip() else ""
    return first if first.lower().startswith("reasoning") else ""


def _messages(step: StepRecord) -> Panel:
    body = Text()
    for message in step.messages:
        body.append(f"{message['role']}:\n", "bold")
        body.append(message["content"].rstrip() + "\n")
    label = "fallback" if step.phase == "fallback" else f"step {step.index}"
    return Panel(body, title=f"{label} · messages sent to {step.worker}", title_align="left", border_style="dim")


def _step_panel(step: StepRecord, *, is_answer: bool = False) -> Panel:
    """One step: its output shortened (``is_answer``: a pointer to the Answer panel, which shows
    the same text whole), or its error; then tokens, cost, time and what was disclosed."""
    label = "fallback" if step.phase == "fallback" else f"step {step.index}"
    if step.round:
        label = f"round {step.round} · {label}"
    meta = (
        f"{step.usage.input_tokens} in / {step.usage.output_tokens} out tokens"
        f"{' (estimated: no usage reported)' if step.usage.estimated else ''} · "
        f"${step.cost_usd:.6f} · {step.latency_s:.1f}s"
    )
    if step.finish_reason == "length":
        meta += " · hit max_tokens"
    for d in step.disclosures:
        meta += f" · sent to {d.provider or d.recipient}: {_pii_note(d)}"
    if step.error:
        body = Text(step.error, style="red")
    else:
        body = Text("(the answer, shown below)", style="italic") if is_answer else Text(shorten(step.output))
    return Panel(Group(body, Text(meta, style="dim")), title=f"{label} · {step.worker}", title_align="left")


def _pii_note(d: Disclosure) -> str:
    if d.blocked:
        return f"blocked ({d.blocked})"
    if d.masked:
        return "PII pseudonymized " + ", ".join(f"{k}×{n}" for k, n in sorted(d.masked.items()))
    if d.clear:
        return "PII in clear " + ", ".join(f"{k}×{n}" for k, n in sorted(d.clear.items()))
    return "no PII found" if d.scanned else "not scanned for PII"


def _totals(record: RunRecord) -> Table:
    t = record.totals
    table = Table(title="Totals", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("worker calls", str(t.worker_calls))
    table.add_row(
        "worker tokens in (cached) / out", f"{t.input_tokens:,} ({t.cached_input_tokens:,}) / {t.output_tokens:,}"
    )
    table.add_row("worker cost", f"${t.cost_usd:.6f}")
    table.add_row("conductor calls", str(t.conductor_calls))
    table.add_row(
        "conductor tokens in (cached) / out",
        f"{t.conductor_input_tokens:,} ({t.conductor_cached_input_tokens:,}) / {t.conductor_output_tokens:,}",
    )
    table.add_row("conductor cost", f"${t.conductor_cost_usd:.6f}")
    table.add_row("total cost (USD)", f"${t.total_cost_usd:.6f}")
    table.add_row("wall time", f"{t.wall_time_s:.1f} s")
    if t.estimated_calls:
        table.add_row(
            Text("estimated", style="yellow"),
            Text(f"tokens and cost of {t.estimated_calls} call(s): their server reported no usage", style="yellow"),
        )
    return table


def render_plan(console: Console, record: RunRecord) -> None:
    """The plan part of a record: the question, then per round its conductor attempts, the
    accepted attempt's reasoning and its workflow table."""
    console.print(Text.assemble(("Question: ", "bold"), shorten(record.question, 600)))
    rounds = sorted({a.round for a in record.attempts})
    for round_ in rounds:
        attempts = [a for a in record.attempts if a.round == round_]
        console.print(_attempts(attempts), end="")
        accepted = next((a for a in attempts if a.workflow is not None), None)
        if accepted is not None and (reasoning := _reasoning(accepted)):
            console.print(Text(reasoning, style="italic"))
        if accepted is not None and accepted.workflow is not None and len(accepted.workflow):
            console.print(_plan_table(accepted.workflow, record.workers, round_))


def render_run(console: Console, record: RunRecord, *, messages: bool = False, stored: bool = True) -> None:
    """A whole record: plan, each step's output (shortened; with ``messages`` also the exact
    messages the step's worker received), fallback, answer, totals."""
    render_plan(console, record)
    answered = record.mode == "run" and record.status != "error" and bool(record.answer)
    last = max((i for i, s in enumerate(record.steps) if s.output == record.answer), default=-1) if answered else -1
    for i, step in enumerate(record.steps):
        if messages:
            console.print(_messages(step), soft_wrap=False)  # a boxed panel wraps inside its box,
        console.print(_step_panel(step, is_answer=i == last), soft_wrap=False)  # even on a pipe (no crop)
    if record.fallback is not None:
        console.print(
            Text(f"Fallback pipeline ran: {record.fallback.reason} — {record.fallback.detail}", style="yellow")
        )
    if record.mode == "run":
        if record.status == "error":
            failed = Panel(Text(record.error or "no answer", style="red"), title="No answer", title_align="left")
            console.print(failed, soft_wrap=False)
        else:
            cut = last >= 0 and record.steps[last].finish_reason == "length"  # the answer's step ran out of tokens
            title = "Answer (cut off at the worker's max_tokens)" if cut else "Answer"
            border = "yellow" if cut else "green"
            answer = Panel(Text(record.answer), title=title, title_align="left", border_style=border)
            console.print(answer, soft_wrap=False)
            if cut:
                step = record.steps[last]
                console.print(
                    Text(
                        f"The answer may be incomplete: {step.worker} stopped at its limit of "
                        f"{step.usage.output_tokens} output tokens. Raise max_tokens for it in the pool file, "
                        "or ask for a shorter answer.",
                        style="yellow",
                    )
                )
    elif record.status == "error":
        console.print(Text(record.error or "no valid workflow", style="red"))
    console.print(_totals(record))
    console.print(Text(f"{_record_name(record, stored)} · {record.started_at} · status {record.status}", style="dim"))
    console.print(Text(f"pool {record.pool} · conductor {record.conductor}", style="dim"))
    if record.tags or record.subject:
        tags = f"tags {', '.join(record.tags)}" if record.tags else "no tags"
        subject = f" · subject {record.subject}" if record.subject else ""
        console.print(Text(tags + subject, style="dim"))


def render_trace_list(console: Console, rows: Sequence[TraceSummary]) -> None:
    """One line per request; fits 80 columns (the question takes what is left; the status column
    widens to show a plan-only request's ``fallback (plan)`` whole)."""
    table = Table(title="Traces (newest first, UTC)", title_justify="left", pad_edge=False)
    statuses = [r.status if r.mode == "run" else f"{r.status} (plan)" for r in rows]
    columns = (
        ("id", 8),
        ("started", 14),
        ("status", max([8, *map(len, statuses)])),
        ("steps", 5),
        ("USD", 7),
        ("s", 4),
    )
    for name, width in columns:
        table.add_column(name, no_wrap=True, width=width, justify="left" if width > 5 else "right")
    room = max(12, console.width - sum(w for _, w in columns) - 3 * (len(columns) + 1) - 2)
    table.add_column("question", no_wrap=True, width=room)
    for r, status in zip(rows, statuses, strict=True):
        started = r.started_at[5:19].replace("T", " ")  # MM-DD HH:MM:SS
        table.add_row(
            r.id[:8],
            started,
            status,
            str(r.steps),
            "" if r.total_cost_usd is None else f"{r.total_cost_usd:.5f}",
            "" if r.wall_time_s is None else f"{r.wall_time_s:.0f}",
            escape(_clip(" ".join(r.question.split()), room)),
        )
    console.print(table)


_ONE_LINE = {ord(c): " " for c in "\n\r\t\v\f"}


def render_search(console: Console, hits: Sequence[SearchHit]) -> None:
    """One block per matching request, best first: id, start (UTC), status, cost, where the best
    text matched and its snippet with the matched words highlighted."""
    if not hits:
        console.print("no matching requests")
        return
    for hit in hits:
        r = hit.trace
        where = f"{hit.field} ({hit.location})" if hit.location else hit.field
        more = f" · {hit.matches} matching texts" if hit.matches > 1 else ""
        cost = "" if r.total_cost_usd is None else f" · ${r.total_cost_usd:.5f}"
        head = Text.assemble((r.id[:8], "bold cyan"), f"  {r.started_at}  {r.status}{cost}  ", (where, "bold"), more)
        snippet = Text(hit.snippet.translate(_ONE_LINE))  # same length: the offsets still hold
        for start, end in hit.highlights:
            snippet.stylize("bold reverse", start, end)
        console.print(head)
        console.print(Text("  ").append(snippet))


def render_register(console: Console, register: Register) -> None:
    """The data-flow register as a table (``--md`` / ``--json`` give the document forms)."""
    title = f"Data-flow register: requests from {register.since} until {register.until} (UTC)"
    if not register.recipients:
        console.print(Text(f"{title}\nNo data was sent to any third party in this period."))
        return
    table = Table(title=title, title_justify="left", show_lines=True)
    for name in ("recipient · endpoint", "provider · region", "data categories", "PII", "requests / calls"):
        table.add_column(name, overflow="fold")
    for r in register.recipients:
        pii = []
        if r.pii_pseudonymized:
            pii.append("pseudonymized: " + ", ".join(f"{k}×{n}" for k, n in r.pii_pseudonymized.items()))
        if r.pii_in_clear:
            pii.append("IN CLEAR: " + ", ".join(f"{k}×{n}" for k, n in r.pii_in_clear.items()))
        if r.unscanned:
            pii.append(f"{r.unscanned} call(s) not scanned")
        if r.blocked:
            pii.append(f"{r.blocked} call(s) blocked")
        table.add_row(
            escape(f"{r.recipient}\n{r.endpoint or '—'}"),
            escape(f"{r.provider or '—'}\n{r.region or 'region not stated'}"),
            ", ".join(r.categories),
            "\n".join(pii) or "none found",
            f"{r.requests} / {r.calls}\nlast {r.last[:16].replace('T', ' ')}",
        )
    console.print(table)


def _record_name(record: RunRecord, stored: bool) -> str:
    """``trace ID`` for a stored trace; a request that stored none (``--no-trace``) says so, as
    ``podium trace show ID`` would not find it."""
    return f"trace {record.id}" if stored else f"request {record.id} (no trace stored: --no-trace)"


def print_record(record: RunRecord, as_json: bool, out: Console, *, stored: bool = True) -> None:
    """``record`` as JSON, or as the plan / run view ``podium plan`` and ``podium run`` print;
    ``stored``: whether its trace was stored (False under ``--no-trace``)."""
    import json

    from rich.text import Text

    if as_json:
        print(json.dumps(record.to_json(), indent=2, ensure_ascii=False))
    elif record.mode == "plan":
        render_plan(out, record)
        if record.status == "error":
            out.print(Text(record.error or "no valid workflow", style="red"))
        out.print(Text(_record_name(record, stored), style="dim"))
    else:
        render_run(out, record, stored=stored)
