"""The dashboard as a Starlette application: routes, error pages, access rules.

>>> from horde.web import create_app                                  # doctest: +SKIP
>>> app = create_app("sqlite:////tmp/runs.sqlite", token=None)        # doctest: +SKIP

Pages: ``/`` (runs, with filters), ``/runs/{run}`` (a run, live while it runs), ``/compare?run=A&run=B``,
``/trend?key=K``. The JSON API and the live stream are described in :mod:`horde.web.api`.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from pathlib import Path
from typing import Final

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from horde.errors import HordeError, InvalidInput, RunNotFound, StoreUnavailable
from horde.report.page import linked_axes_js, plotly_js, plotly_js_gzip
from horde.store import Store, resolve_store_url
from horde.web import api, pages
from horde.web.access import AccessGate, check_bind
from horde.web.dashboard import Dashboard, render
from horde.web.store_reads import StoreReader

STATIC_DIRECTORY: Final = Path(__file__).resolve().parent / "static"
#: Where the pages load plotly.js from (the templates' <script src>).
PLOTLY_PATH: Final = "/static/plotly-basic.min.js"


def create_app(store_url: str | None, *, token: str | None, host: str = "127.0.0.1") -> Starlette:
    """The dashboard over the store at ``store_url`` (resolved as ``--store``: None means
    ``$HORDE_STORE`` or the default file).

    ``host`` is the address it will be served on: a non-loopback one without a token raises
    :class:`~horde.web.access.InsecureBind` (exit code 2). The store is opened here, so an
    unreachable one fails now (``StoreUnavailable``, exit code 3), not on the first page.
    """
    check_bind(host, token)
    resolved = resolve_store_url(store_url)
    store = Store.open(resolved)
    try:
        reader = StoreReader(resolved)
    except BaseException:
        store.close()
        raise
    dashboard = Dashboard(store_url=resolved, store=store, reader=reader)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            dashboard.close()

    routes = [
        Route("/", pages.runs_page, name="runs"),
        Route("/runs/{run}", pages.run_page, name="run"),
        Route("/compare", pages.compare_page, name="compare"),
        Route("/trend", pages.trend_page, name="trend"),
        Route("/api/runs", api.runs_list),
        Route("/api/runs/{run}", api.run_detail),
        Route("/api/runs/{run}/events", api.run_events),
        Route("/api/runs/{run}/control", api.run_control, methods=["POST"]),
        Route("/api/load-requests/{request_id:int}", api.control_answer),
        Route("/api/compare", api.comparison),
        Route("/api/trend", api.trend_points),
        # Before the static mount: the chart code is the report's own (horde/report/vendor/, and
        # linked_axes.js beside it), served once per browser and then from its cache.
        Route(PLOTLY_PATH, _plotly),
        Route("/static/linked_axes.js", _linked_axes),
        Mount("/static", StaticFiles(directory=STATIC_DIRECTORY), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(AccessGate, token=token)],
        exception_handlers={HordeError: _horde_error},
        lifespan=lifespan,
    )
    app.state.dashboard = dashboard
    return app


@lru_cache(maxsize=None)
def _script_file(name: str) -> tuple[bytes, bytes | None, str]:
    """(the script, its gzip form or None, its ETag), made once per process."""
    body, gzipped = (
        (plotly_js().encode("utf-8"), plotly_js_gzip())
        if name == "plotly"
        else (linked_axes_js().encode("utf-8"), None)
    )
    # The content's hash: a new install's file is never mistaken for the one a browser holds.
    return body, gzipped, f'"{hashlib.sha256(body).hexdigest()[:16]}"'


def _script(request: Request, name: str) -> Response:
    """A script that only changes with Horde's install: cached a day, then revalidated by its
    ETag (304 when the browser already holds it), gzip-encoded when the browser takes it."""
    body, gzipped, etag = _script_file(name)
    headers = {"cache-control": "public, max-age=86400", "etag": etag, "vary": "accept-encoding"}
    if etag in [tag.strip() for tag in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=304, headers=headers)
    if gzipped is not None and "gzip" in request.headers.get("accept-encoding", ""):
        return Response(gzipped, media_type="text/javascript", headers={**headers, "content-encoding": "gzip"})
    return Response(body, media_type="text/javascript", headers=headers)


def _plotly(request: Request) -> Response:
    return _script(request, "plotly")


def _linked_axes(request: Request) -> Response:
    # The report's own script (it inlines it): one file zooms both pages' time axes together.
    return _script(request, "linked_axes")


def _horde_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HordeError)
    status = (
        404
        if isinstance(error, RunNotFound)
        else 400
        if isinstance(error, InvalidInput)
        else (503 if isinstance(error, StoreUnavailable) else 500)
    )
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": error.message, "hint": error.hint}, status_code=status)
    return HTMLResponse(
        render("error.html.j2", title="Horde: error", message=error.message, hint=error.hint), status_code=status
    )
