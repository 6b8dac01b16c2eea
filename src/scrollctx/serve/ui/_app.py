"""The inspector's ASGI app (Starlette): routes, the read-only and token guards, error pages.

Invariants:

- Read-only: the store is opened with :meth:`EventLog.open_read_only` (no write can reach the
  file or the payload folder) and the app answers only GET and HEAD (405 otherwise).
- Guarded by the guard of every HTTP door (:class:`~scrollctx.serve._network.TokenGuard`):
  with a token, every request must carry it (``?token=`` once, which sets an HttpOnly
  same-site cookie, or ``Authorization: Bearer``); without one (loopback only, see
  :mod:`._server`) the ``Host`` header must name a loopback address, so a web page elsewhere
  cannot reach the store through DNS rebinding; a page of another site gets 403. Every
  response forbids inline script and any origin but this one (Content-Security-Policy).
- A bad URL (unknown session, seq, call, page) is a 404 page; a store error an error page;
  never a traceback. Session ids travel as query parameters (they hold ``/`` and ``:``).
- Reads are serialized (one SQLite connection); pages never load a whole payload or session.
"""

from __future__ import annotations

import hmac
import json
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from scrollctx.agent import rebuild_call
from scrollctx.errors import MissingDependency, ScrollError, UsageError
from scrollctx.log import EventLog
from scrollctx.serve._network import TokenGuard
from scrollctx.serve.ui import _calls, _plots, _search, _sessions
from scrollctx.serve.ui._bench import BenchReports
from scrollctx.serve.ui._html import make_environment
from scrollctx.view import call_seqs

__all__ = ["TOKEN_COOKIE", "create_app"]

TOKEN_COOKIE = "scroll_ui_token"
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_SQLITE_INTEGERS = range(-(2**63), 2**63)
"""The numbers a query can take (a bigger one is no seq, offset or call of any store)."""
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _Inspector:
    """What every page reads: the read-only log (one reader at a time), caches, reports."""

    def __init__(self, db_path: Path, results_dir: Path | None) -> None:
        self.log = EventLog.open_read_only(db_path)
        self.db_path = db_path
        self.lock = threading.Lock()
        self.templates = make_environment()
        self.scratch = tempfile.TemporaryDirectory(prefix="scroll-ui-")
        self.bench = BenchReports(results_dir, Path(self.scratch.name))
        self._calls: dict[tuple[str, int], _plots.SessionCalls] = {}

    def close(self) -> None:
        self.log.close()
        self.scratch.cleanup()

    def session_calls(self, session_id: str) -> _plots.SessionCalls:
        key = (session_id, self.log.last_seq())
        if key not in self._calls:
            self._calls = {key: _plots.session_calls(self.log, session_id)}
        return self._calls[key]

    def page(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        template_ = self.templates.get_template(template)
        html = template_.render(url_for=request.url_for, **context)
        return HTMLResponse(html, status_code=status)


Handler = Callable[[_Inspector, Request], Response]


def _endpoint(inspector: _Inspector, handler: Handler) -> Callable[[Request], Response]:
    def run(request: Request) -> Response:
        with inspector.lock:
            return handler(inspector, request)

    return run


def _param(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise HTTPException(404, f"the URL needs ?{name}=")
    return value


def _number(request: Request, name: str, default: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None and default is not None:
        return default
    value = _whole(raw)
    if value is None:
        raise HTTPException(404, f"?{name}= must be a whole number, got {raw!r}")
    return value


def _whole(raw: str | None) -> int | None:
    """``raw`` as a whole number SQLite can compare, or None (not a number, or too big)."""
    try:
        value = int(raw or "")
    except ValueError:
        return None
    return value if value in _SQLITE_INTEGERS else None


def _session(inspector: _Inspector, request: Request) -> str:
    session_id = _param(request, "session")
    if not _sessions.session_exists(inspector.log, session_id):
        raise HTTPException(404, f"no session {session_id!r} in this store")
    return session_id


# -- pages ---------------------------------------------------------------------------------


def sessions_page(inspector: _Inspector, request: Request) -> Response:
    kind = request.query_params.get("kind", "")
    query = request.query_params.get("q", "")
    rows = _sessions.list_sessions(inspector.log, kind=kind, query=query)
    return inspector.page(
        request, "sessions.html", sessions=rows, kind=kind, q=query, kinds=_sessions.KINDS
    )


def timeline_page(inspector: _Inspector, request: Request) -> Response:
    session_id = _session(inspector, request)
    at = _number(request, "at", 0)
    span = request.query_params.get("span", "")
    lo, _, hi = span.partition("-")
    first, last = _whole(lo), _whole(hi or lo)
    marked = (first, last) if first is not None and last is not None else None
    page = _sessions.timeline(inspector.log, session_id, at=at)
    calls = {seq: n for n, seq in enumerate(call_seqs(inspector.log, session_id), start=1)}
    return inspector.page(
        request, "timeline.html", session_id=session_id, page=page, calls=calls, marked=marked
    )


def event_page(inspector: _Inspector, request: Request) -> Response:
    seq = int(request.path_params["seq"])
    event = _event(inspector, seq)
    url = request.url_for("timeline").include_query_params(session=event.session_id, at=seq)
    return RedirectResponse(f"{url}#seq-{seq}", status_code=303)


def text_chunk(inspector: _Inspector, request: Request) -> Response:
    seq = int(request.path_params["seq"])
    _event(inspector, seq)
    offset = max(0, _number(request, "offset", 0))
    event, text, after = _sessions.text_chunk(inspector.log, seq, offset)
    return inspector.page(request, "chunk.html", event=event, text=text, after=after)


def _event(inspector: _Inspector, seq: int) -> Any:
    found = inspector.log.events([seq]) if seq in _SQLITE_INTEGERS else []
    if not found:
        raise HTTPException(404, f"no event at seq {seq}")
    return found[0]


def calls_page(inspector: _Inspector, request: Request) -> Response:
    session_id = _session(inspector, request)
    events = inspector.log.events(call_seqs(inspector.log, session_id))
    calls = [(n, e, e.metadata.get("model_call") or {}) for n, e in enumerate(events, start=1)]
    return inspector.page(request, "calls.html", session_id=session_id, calls=calls)


def call_page(inspector: _Inspector, request: Request) -> Response:
    session_id, number, seqs = _call_target(inspector, request)
    page = _calls.call_page(inspector.log, session_id, number, seqs)
    return inspector.page(
        request, "call.html", session_id=session_id, page=page, runs=_calls.spans_text
    )


def call_json(inspector: _Inspector, request: Request) -> Response:
    session_id, number, seqs = _call_target(inspector, request)
    call = rebuild_call(inspector.log, session_id, number, seqs=seqs)
    body = {"session_id": session_id, "call": number, "response_seq": call.seq}
    body["messages"] = call.wire_messages()
    return Response(
        json.dumps(body, ensure_ascii=False), media_type="application/json", headers=_HEADERS
    )


def _call_target(inspector: _Inspector, request: Request) -> tuple[str, int, list[int]]:
    session_id = _session(inspector, request)
    number = _number(request, "n", 1)
    seqs = call_seqs(inspector.log, session_id)
    if not 1 <= number <= len(seqs):
        raise HTTPException(
            404, f"session {session_id!r} has {len(seqs)} model calls, not {number}"
        )
    return session_id, number, seqs


def index_page(inspector: _Inspector, request: Request) -> Response:
    session_id = _session(inspector, request)
    at = _number(request, "at") if request.query_params.get("at") else None
    page = _calls.index_page(inspector.log, session_id, at)
    if at is not None and page.data is None:
        raise HTTPException(404, f"no index event at or before seq {at} in {session_id!r}")
    return inspector.page(request, "index.html", session_id=session_id, page=page)


def plots_page(inspector: _Inspector, request: Request) -> Response:
    session_id = _session(inspector, request)
    calls = len(call_seqs(inspector.log, session_id))
    return inspector.page(
        request, "plots.html", session_id=session_id, plots=_plots.PLOTS, calls=calls
    )


def plot_image(inspector: _Inspector, request: Request) -> Response:
    session_id = _session(inspector, request)
    name = request.path_params["name"]
    if name not in _plots.PLOTS:
        raise HTTPException(404, f"no plot {name!r}")
    svg = _plots.plot_svg(name, inspector.session_calls(session_id), session_id)
    return Response(svg, media_type="image/svg+xml", headers=_HEADERS)


def search_page(inspector: _Inspector, request: Request) -> Response:
    form = _search.SearchForm.from_query(request.query_params)
    try:
        result = _search.run_search(inspector.db_path, form) if form.query else None
    except UsageError as exc:  # a query the language cannot run: say so on the page
        return inspector.page(
            request, "search.html", status=400, form=form, result=None, error=str(exc)
        )
    return inspector.page(request, "search.html", form=form, result=result, error=None)


def bench_page(inspector: _Inspector, request: Request) -> Response:
    name = request.query_params.get("file")
    if not name:
        return inspector.page(
            request, "bench.html", files=inspector.bench.files(), folder=inspector.bench.results_dir
        )
    try:
        blocks = inspector.bench.report(name)
    except UsageError as exc:
        raise HTTPException(404, str(exc)) from exc
    return inspector.page(request, "report.html", name=name, blocks=blocks)


def bench_plot(inspector: _Inspector, request: Request) -> Response:
    try:
        data = inspector.bench.plot(_param(request, "file"), _param(request, "image"))
    except UsageError as exc:
        raise HTTPException(404, str(exc)) from exc
    return Response(data, media_type="image/png", headers=_HEADERS)


# -- guards and errors ---------------------------------------------------------------------


class _Guard(BaseHTTPMiddleware):
    """Only GET/HEAD; ``?token=`` traded for a cookie; security headers.

    The token itself (or, without one, a loopback ``Host``) is checked before this, by the
    guard every HTTP door shares (:class:`~scrollctx.serve._network.TokenGuard`).
    """

    def __init__(self, app: Any, token: str | None) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if request.method not in ("GET", "HEAD"):
            return _plain(
                405, "the inspector is read-only: only GET and HEAD", {"Allow": "GET, HEAD"}
            )
        given = request.query_params.get("token")
        if self.token is not None and given is not None and _same(given, self.token):
            return _enter(request, self.token)
        response = await call_next(request)
        response.headers.update(_HEADERS)
        return response


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def _enter(request: Request, token: str) -> Response:
    """Trade ``?token=`` for a cookie and drop it from the URL (and from history)."""
    params = {k: v for k, v in request.query_params.items() if k != "token"}
    response = RedirectResponse(str(request.url.replace_query_params(**params)), status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
    response.headers.update(_HEADERS)
    return response


def _plain(status: int, text: str, headers: dict[str, str] | None = None) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain",
                    headers={**_HEADERS, **(headers or {})})  # fmt: skip


def _error_handlers(inspector: _Inspector) -> dict[Any, Any]:
    def page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
        return inspector.page(request, "error.html", status=status, title=title, message=message)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        title = "Not found" if exc.status_code == 404 else f"Error {exc.status_code}"
        return page(request, exc.status_code, title, str(exc.detail))

    async def scroll_error(request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, UsageError) else 500
        if isinstance(exc, MissingDependency):
            status = 501
        return page(request, status, type(exc).__name__, str(exc))

    return {HTTPException: http_error, ScrollError: scroll_error}


def _lifespan(inspector: _Inspector) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            inspector.close()

    return lifespan


def create_app(
    db_path: Path, *, token: str | None = None, results_dir: Path | None = None
) -> ASGIApp:
    """Build the inspector over the store file ``db_path`` (opened read-only here).

    ``token``: required of every request when given (see the module docstring);
    ``results_dir``: where the bench result files are (``*.jsonl``).

    Raises:
        StoreError: there is no store at ``db_path``.
    """
    inspector = _Inspector(db_path, results_dir)
    pages: list[tuple[str, Handler, str]] = [
        ("/", sessions_page, "sessions"),
        ("/timeline", timeline_page, "timeline"),
        ("/events/{seq:int}", event_page, "event"),
        ("/events/{seq:int}/text", text_chunk, "text"),
        ("/calls", calls_page, "calls"),
        ("/call", call_page, "call"),
        ("/call.json", call_json, "call_json"),
        ("/index", index_page, "index"),
        ("/plots", plots_page, "plots"),
        ("/plots/{name}.svg", plot_image, "plot"),
        ("/search", search_page, "search"),
        ("/bench", bench_page, "bench"),
        ("/bench/plot", bench_plot, "bench_plot"),
    ]
    routes: list[Route | Mount] = [
        Route(path, _endpoint(inspector, handler), methods=["GET", "HEAD"], name=name)
        for path, handler, name in pages
    ]
    static = StaticFiles(packages=[("scrollctx.serve.ui", "static")])
    routes.append(Mount("/static", app=static, name="static"))
    app = Starlette(
        routes=routes,
        middleware=[Middleware(_Guard, token=token)],
        exception_handlers=_error_handlers(inspector),
        lifespan=_lifespan(inspector),
    )
    app.state.inspector = inspector
    return TokenGuard(app, token, cookie=TOKEN_COOKIE, query="token")
