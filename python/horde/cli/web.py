"""``horde ui``: serve the web dashboard over a store until Ctrl-C.

``register(app)`` adds the command to the ``horde`` Typer application. Errors follow
``horde.cli``'s conventions: a :class:`~horde.errors.HordeError` with a hint, printed as
``error:``/``hint:`` lines, exit code 2 for a bad flag (a port in use, a host beyond loopback with
an empty token), 3 for a store that cannot be opened.
"""

from __future__ import annotations

import time
import webbrowser
from typing import Annotated, Optional

import typer
from rich.console import Console

from horde.cli.arguments import HordeCommand
from horde.errors import ExitCode

# Off a terminal (CI logs, pipes) rich would wrap at 80 columns and split the URL.
_stdout = Console() if Console().is_terminal else Console(width=400)

_COMMAND = "ui"


def register(app: typer.Typer) -> None:
    """Add ``horde ui`` to ``app`` (a second call does nothing)."""
    if any(info.name == _COMMAND for info in app.registered_commands):
        return
    app.command(
        _COMMAND,
        cls=HordeCommand,
        epilog="Examples:\n\n  horde ui\n\n  horde ui --host 0.0.0.0 --port 8089 --token \"$DASHBOARD_TOKEN\"",
    )(ui)


def ui(
    host: Annotated[
        str,
        typer.Option(
            "--host", help="address to listen on; beyond loopback a token is required (generated if not given)"
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="port to listen on (0: any free port)")] = 8089,
    token: Annotated[
        Optional[str], typer.Option("--token", help="token every request must carry (?token=, then a cookie)")
    ] = None,
    store_url: Annotated[
        Optional[str],
        typer.Option("--store", help="store path or URL (default: $HORDE_STORE or ~/.local/share/horde/runs.sqlite)"),
    ] = None,
    open_browser: Annotated[
        bool, typer.Option("--open-browser/--no-open-browser", help="open the dashboard in the default browser")
    ] = False,
) -> int:
    """Serve the web dashboard: stored runs, live runs updating each second, comparisons, trends."""
    from horde.web.server import DashboardServer

    server = DashboardServer(store_url, host=host, port=port, token=token).start()
    try:
        urls = server.urls()
        _stdout.print(
            f"horde dashboard on {urls[0]} (store {server.store_display_url}); Ctrl-C to stop",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        for other in urls[1:]:
            _stdout.print(f"from other machines: {other}", markup=False, highlight=False, soft_wrap=True)
        if server.token is not None and token is None:
            _stdout.print(
                "a token was generated: every request must carry it (the URL above does)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        if open_browser:
            webbrowser.open(server.url)
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    _stdout.print("dashboard stopped", markup=False, highlight=False)
    return ExitCode.OK
