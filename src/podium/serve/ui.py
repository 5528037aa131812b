"""The trace browser inside ``podium serve``: ``/ui`` lists requests (filters, full-text search,
paging), ``/ui/requests/ID`` shows one (the same page as ``podium trace export --html``: plan,
access edges, per-step messages and outputs, tokens, cost, latency, fallback, PII kinds), and a
request can be purged from its page, and every request of a data subject from the list filtered
by that subject, each after a confirmation.

Report pages (:mod:`podium.serve.ui_reports`, reading :mod:`podium.serve.report_data` from a
:class:`ReportSources`):
``/ui/evals`` lists stored ``podium eval`` runs, ``/ui/evals/run?id=RUN`` shows one (methods
table with quality, cost per request and p95 latency, curve metrics, slices, Pareto plot at
``/ui/evals/pareto.png?id=RUN``), ``/ui/evals/compare?new=RUN&baseline=RUN`` puts two side by
side with the regression gate's checks and flips; ``/ui/shadow`` is the shadow report per use
case (``since`` / ``until``; ``/ui/shadow.md`` the same as Markdown); ``/ui/conductors`` the
conductor registry (versions, promotions, rollbacks), ``/ui/conductors/version?ref=NAME@vN`` one
version's training record and learning curve (``/ui/conductors/curve.png?ref=…``). A bad run id,
version or date is a 404 / 400 page saying so.

Access: a client signed in with an **admin key** (``podium keys create NAME --scope admin``;
``Authorization: Bearer …``, or the key entered on ``/ui/login``, kept in an HttpOnly,
SameSite=Strict cookie, Secure over HTTPS) is served from any address — put TLS in front of a
server reached from elsewhere. Without one, the UI answers clients on the loopback interface only
(127.0.0.1 / ::1; from elsewhere through an SSH tunnel, never a reverse proxy on the same host),
and only while the server has no active key at all: once it has keys, the UI needs an admin one
(an ``api`` key calls ``/v1`` only). Search words and the data subject
are sent in POST bodies, never in URLs (they may be personal data); URLs carry only request ids,
statuses, worker and conductor names, and numbers.

Pages are server-rendered Jinja2 templates (``podium/serve/templates``) with no script and no
external resource, so they work offline.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request  # FastAPI reads the route signatures' annotations at run time
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from podium.errors import ConfigError
from podium.serve.report_data import ReportSources
from podium.store.engine import StoreError
from podium.store.shadow import purge_shadow_copies

if TYPE_CHECKING:
    from podium.serve.server import Server
    from podium.trace.query import PurgeResult

__all__ = ["PAGE_SIZE", "ReportSources", "UIHeaders", "ui_router"]

PAGE_SIZE = 50
"""Requests per list page (older ones: the page's "older" button)."""

_COOKIE = "podium_ui_key"
_ADMIN_HINT = "podium keys create NAME --scope admin"
_REMOTE_REFUSED = (
    "podium's UI answers clients on 127.0.0.1, or anywhere to an admin key (sign in at /ui/login; "
    f"create one with '{_ADMIN_HINT}'); without one, use an SSH tunnel"
)
_FILTERS = ("status", "worker", "conductor", "since", "until", "min_cost", "max_cost", "min_latency", "max_latency",
            "before")  # fmt: skip
"""Request-list fields read from a URL too; ``before`` is the "older" page's cursor (started_at|id),
so an older page can be linked."""
_PRIVATE = ("q", "subject")
"""Request-list fields taken from a form only, never from a URL."""


def _loopback(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "testclient"  # Starlette's in-process test client


_CSP = (
    "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
"""Every UI page: nothing runs, nothing loads from elsewhere, no page frames it."""


class UIHeaders:
    """ASGI middleware: every ``/ui`` response — pages, error and 404 texts, redirects, 405s —
    carries the UI's Content-Security-Policy and may not be framed; other paths (the ``/v1`` API)
    pass untouched, at the cost of one string check."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope.get("type") == "http" else ""
        if path != "/ui" and not path.startswith("/ui/"):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-security-policy"]
                headers += [(b"content-security-policy", _CSP.encode()), (b"x-frame-options", b"DENY")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def ui_router(server: Server, sources: ReportSources | None = None) -> APIRouter:
    """The ``/ui`` routes for ``server`` (its trace store and key store) and the report pages
    over ``sources`` (default :meth:`ReportSources.defaults`: ``$PODIUM_EVAL_DIR`` or
    ``./podium-eval``, and the shadow store and registry in podium's data folder)."""
    from fastapi import APIRouter
    from fastapi.templating import Jinja2Templates

    from podium.trace.query import FILTER_STATUSES

    templates = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
    templates.env.globals["statuses"] = FILTER_STATUSES  # the list's filter offers what the store filters by
    router = APIRouter(prefix="/ui", include_in_schema=False)
    where = sources or ReportSources.defaults()

    def refused(request: Request) -> Response | None:
        """The answer to a client the UI does not serve, or None (see the module doc); 503 while
        the key store cannot be read."""
        try:
            return _refused(request)
        except StoreError as exc:
            return HTMLResponse(f"{exc}; try again shortly", status_code=503)

    def _refused(request: Request) -> Response | None:
        header = request.headers.get("authorization", "")
        secret = header[7:].strip() if header.lower().startswith("bearer ") else request.cookies.get(_COOKIE, "")
        key = server.keys.verify(secret) if secret and server.keys is not None else None
        if key is not None and key.admin:
            return None
        if not _loopback(request):
            return HTMLResponse(_REMOTE_REFUSED, status_code=403)
        if server.keys is not None and server.keys.active():
            return RedirectResponse("/ui/login", status_code=303)
        return None

    def page(request: Request, name: str, status: int = 200, **context: Any) -> Response:
        return templates.TemplateResponse(request, name, context, status_code=status)  # headers: UIHeaders

    def missing(request: Request, request_id: str) -> Response:
        message = f"no request {request_id!r} here (purged, or never stored)"
        return page(request, "error.html", status=404, message=message)

    @router.get("/logout", response_class=HTMLResponse)
    @router.post("/logout", response_class=HTMLResponse)
    async def logout(request: Request) -> Response:
        """Forget the sign-in cookie in this browser (the key itself stays valid)."""
        response = RedirectResponse("/ui/login" if server.keys is not None and server.keys.active() else "/ui", 303)
        response.delete_cookie(_COOKIE, path="/ui")
        return response

    @router.get("/login", response_class=HTMLResponse)
    async def login_form(request: Request) -> Response:
        return page(request, "login.html", error=None)

    @router.post("/login", response_class=HTMLResponse)
    async def login(request: Request) -> Response:
        form = await _form(request)
        secret = form.get("key", "").strip()
        try:
            key = server.keys.verify(secret) if secret and server.keys is not None else None
        except StoreError as exc:
            return page(request, "login.html", status=503, error=f"{exc}; try again shortly")
        if key is None or not key.admin:
            why = "that key is not an active key of this server" if key is None else f"key {key.name!r} is an API key"
            return page(request, "login.html", status=401, error=f"{why}; the UI needs an admin key: {_ADMIN_HINT}")
        response = RedirectResponse("/ui", status_code=303)
        secure = request.url.scheme == "https"
        response.set_cookie(_COOKIE, secret, httponly=True, samesite="strict", path="/ui", secure=secure)
        return response

    @router.get("", response_class=HTMLResponse)
    @router.post("", response_class=HTMLResponse)
    async def requests_page(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        if server.traces is None:
            return page(request, "list.html", status=503, rows=[], hits={}, form={}, error="no trace store")
        form = {k: v for k, v in request.query_params.items() if k in _FILTERS}
        if request.method == "POST":
            form = await _form(request)
        elif private := sorted(k for k in _PRIVATE if request.query_params.get(k, "").strip()):
            error = (  # silently listing everything instead would look like a search with no effect
                f"{' and '.join(private)} in a URL: search words and subjects go in the page's form (a POST "
                "body), never in URLs, which access logs and browser history keep"
            )
            return page(request, "list.html", status=400, rows=[], hits={}, form=form, error=error)
        try:
            where = _filter(form)
            query = form.get("q", "").strip()
            if query:
                hits = await _thread(server.traces.search, query, where=where, limit=PAGE_SIZE)
                rows, by_id = [h.trace for h in hits], {h.trace.id: h for h in hits}
            else:
                rows, by_id = await _thread(server.traces.list, limit=PAGE_SIZE, where=where), {}
        except ConfigError as exc:
            return page(request, "list.html", status=400, rows=[], hits={}, form=form, error=str(exc))
        older = f"{rows[-1].started_at}|{rows[-1].id}" if len(rows) == PAGE_SIZE and not query else None
        capped = bool(query) and len(rows) == PAGE_SIZE  # search pages are ranked, not paged: say so
        return page(request, "list.html", rows=rows, hits=by_id, form=form, error=None, older=older, capped=capped)

    @router.get("/requests/{request_id}", response_class=HTMLResponse)
    async def request_page(request: Request, request_id: str) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        from podium.trace.html import render_html

        record = await _thread(server.traces.get, request_id) if server.traces is not None else None
        if record is None and server.traces is not None and 4 <= len(request_id) < 32:
            try:  # a unique prefix, as every CLI command takes: go to the full id's page
                full = await _thread(server.traces.resolve_id, request_id)
            except ConfigError:
                full = None
            if full is not None:
                return RedirectResponse(f"/ui/requests/{full}", status_code=303)
        if record is None:
            return missing(request, request_id)
        actions = templates.get_template("request_actions.html").render(request_id=record.id)
        return HTMLResponse(render_html(record, header=actions, forms_to_self=True))

    @router.post("/requests/{request_id}/purge", response_class=HTMLResponse)
    async def purge(request: Request, request_id: str) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        form = await _form(request)
        if server.traces is None:
            return HTMLResponse("no trace store", status_code=503)
        if await _thread(server.traces.get, request_id) is None:
            return missing(request, request_id)
        if form.get("confirm") != request_id:
            return page(request, "purge.html", request_id=request_id)
        return await purged(request, await _thread(server.traces.purge, request_ids=[request_id]))

    async def purged(request: Request, result: PurgeResult) -> Response:
        """The purged page, after the shadow store's copies of the purged requests went too (the
        shadow store keeps each shadow run's question and both answers; `podium trace purge`
        removes them alike)."""
        try:
            shadow_rows, shadow_error = await _thread(purge_shadow_copies, where.shadow_store, result.request_ids), None
        except ConfigError as exc:  # StoreError too: the traces are purged already, say what is left
            shadow_rows, shadow_error = 0, str(exc)
        status = 200 if shadow_error is None else 500
        return page(request, "purged.html", status=status, result=dataclasses.asdict(result),
                    shadow_rows=shadow_rows, shadow_error=shadow_error)  # fmt: skip

    @router.post("/purge-subject", response_class=HTMLResponse)
    async def purge_subject(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        form = await _form(request)
        subject = form.get("subject", "").strip()
        if server.traces is None or not subject:
            return HTMLResponse("give the data subject's key", status_code=400)
        if form.get("confirm") != subject:
            dry = await _thread(server.traces.purge, subject=subject, dry_run=True)
            return page(request, "purge_subject.html", subject=subject, count=len(dry.request_ids))
        return await purged(request, await _thread(server.traces.purge, subject=subject))

    from podium.serve.ui_reports import add_report_routes

    add_report_routes(router, where, refused, page)

    @router.api_route("/{rest:path}", methods=["GET", "POST"], response_class=HTMLResponse)
    async def not_found(request: Request, rest: str) -> Response:  # last: every other /ui route wins
        if (answer := refused(request)) is not None:
            return answer
        return page(request, "error.html", status=404, message=f"no page /ui/{rest} here; the list is at /ui")

    return router


async def _thread(function: Any, *args: Any, **kwargs: Any) -> Any:
    import asyncio

    return await asyncio.to_thread(function, *args, **kwargs)


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form body (at most 64 KiB: more is HTTP 413, never read as an empty form),
    one value per field."""
    from fastapi import HTTPException

    body = await request.body()
    if len(body) > 65_536:
        raise HTTPException(413, "the form is larger than 64 KiB: shorten the search text")
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items() if v}


def _filter(form: dict[str, str]) -> Any:
    """The list's filters as a TraceFilter. Raises ConfigError naming a bad value."""
    from podium.trace.query import TraceFilter, parse_utc

    def number(name: str) -> float | None:
        value = form.get(name, "").strip()
        if not value:
            return None
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise ConfigError(f"{name.replace('_', ' ')} {value!r} is not a number; give e.g. 0.01") from None
        return number

    text = {k: (form.get(k) or "").strip() or None for k in ("status", "worker", "conductor", "subject")}
    since, until, before = (form.get(k, "").strip() for k in ("since", "until", "before"))
    cursor = None
    if before:  # the "older" button's cursor: the last listed request's start time and id
        started, _, request_id = before.partition("|")
        if not request_id or not started:
            raise ConfigError(f"page cursor {before!r} is not 'started_at|id': use the page's 'older' button")
        cursor = (parse_utc(started, flag="page cursor"), request_id)
    return TraceFilter(
        since=parse_utc(since, flag="since") if since else None,
        until=parse_utc(until, flag="until", end_of_day=True) if until else None,
        older_than=cursor,
        status=text["status"],
        worker=text["worker"],
        conductor=text["conductor"],
        subject=text["subject"],
        min_cost_usd=number("min_cost"),
        max_cost_usd=number("max_cost"),
        min_wall_s=number("min_latency"),
        max_wall_s=number("max_latency"),
    )
