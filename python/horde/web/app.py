"""The dashboard as a Starlette application: routes, error pages, access rules.

>>> from horde.web import create_app                                  # doctest: +SKIP
>>> app = create_app("sqlite:////tmp/runs.sqlite", token=None)        # doctest: +SKIP

Pages: ``/`` (runs, with filters), ``/runs/{run}`` (a run, live while it runs), ``/compare?run=A&run=B``,
``/trend?key=K``. The JSON API and the live stream are described in :mod:`horde.web.api`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from horde import __version__
from horde.errors import HordeError, InvalidInput, RunNotFound, StoreUnavailable
from horde.report.page import linked_axes_js, plotly_js
from horde.store import Store, resolve_store_url
from horde.web import api, pages
from horde.web.access import AccessGate, check_bind
from horde.web.dashboard import Dashboard, render
from horde.web.store_reads import StoreReader

STATIC_DIRECTORY: Final = Path(__file__).resolve().parent / "static"


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
        # Before the static mount: plotly.js is read from the installed plotly package.
        Route("/static/plotly.min.js", _plotly),
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


def _plotly(request: Request) -> Response:
    # The file only changes with the plotly package, which only changes with Horde's install.
    return Response(plotly_js(), media_type="text/javascript",
                    headers={"cache-control": "public, max-age=86400", "etag": f'"plotly-{__version__}"'})


def _linked_axes(request: Request) -> Response:
    # The report's own script (it inlines it): one file zooms both pages' time axes together.
    return Response(linked_axes_js(), media_type="text/javascript",
                    headers={"cache-control": "public, max-age=86400", "etag": f'"linked-axes-{__version__}"'})


def _horde_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HordeError)
    status = 404 if isinstance(error, RunNotFound) else 400 if isinstance(error, InvalidInput) else (
        503 if isinstance(error, StoreUnavailable) else 500)
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": error.message, "hint": error.hint}, status_code=status)
    return HTMLResponse(render("error.html.j2", title="Horde: error", message=error.message, hint=error.hint),
                        status_code=status)
