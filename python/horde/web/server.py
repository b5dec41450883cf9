"""The dashboard served by uvicorn in a background thread: ``horde ui`` and ``horde run --ui``.

>>> server = DashboardServer(None)      # the default store, 127.0.0.1, any free port  # doctest: +SKIP
>>> server.start(); print(server.url)                                               # doctest: +SKIP
http://127.0.0.1:43117/
>>> server.stop()                                                                    # doctest: +SKIP

The socket is bound in the calling thread, so a port in use or an address that is not this
machine's fails in :meth:`start` with a message (exit code 2), and ``port=0`` gives a free port
known at once. A host beyond loopback without a token gets a generated one (``.token``; the URL
carries it).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Final

import uvicorn

from horde.errors import InvalidInput
from horde.web.access import check_bind, is_loopback, new_token
from horde.web.app import create_app
from horde.web.dashboard import Dashboard

#: How long :meth:`DashboardServer.start` waits for uvicorn to serve before giving up.
START_TIMEOUT_S: Final = 15.0
#: How long open streams (a live run's page) may hold the server on stop before being cut.
STOP_GRACE_S: Final = 2.0


class DashboardServer:
    """The dashboard on ``host:port`` (``port=0``: any free port) over the store at ``store_url``."""

    def __init__(self, store_url: str | None, host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> None:
        self.store_url = store_url
        self.host = host
        self.requested_port = port
        #: The token every request must carry; generated when the host is not loopback and none was given.
        self.token = token if token is not None or is_loopback(host) else new_token()
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._dashboard: Dashboard | None = None

    @property
    def url(self) -> str:
        """The address to open (with ``?token=`` when there is one). A wildcard host (0.0.0.0,
        ::) is shown as this machine's loopback; :meth:`urls` lists the others."""
        return self._url(_reachable_host(self.host))

    def run_url(self, run_id: str) -> str:
        """The address of a run's page (``last``: the newest run when the page is opened)."""
        return self._url(_reachable_host(self.host), f"runs/{run_id}")

    @property
    def store_display_url(self) -> str:
        """The store served, password redacted (empty before :meth:`start`)."""
        return self._dashboard.store.display_url if self._dashboard is not None else ""

    def urls(self) -> list[str]:
        """Addresses the dashboard answers on: :attr:`url`, and for a wildcard host the
        machine's name too (what other machines would use)."""
        found = [self.url]
        if self.host in ("0.0.0.0", "::", ""):
            found.append(self._url(socket.gethostname()))
        return found

    def start(self) -> DashboardServer:
        """Listen, serve in a background thread, and return once requests are answered."""
        if self._thread is not None:
            raise RuntimeError("this dashboard server is already started")
        check_bind(self.host, self.token)  # before anything listens
        sock = _bind(self.host, self.requested_port)
        try:
            app = create_app(self.store_url, token=self.token, host=self.host)
        except BaseException:
            sock.close()
            raise
        self._dashboard = app.state.dashboard
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=int(STOP_GRACE_S)
        )
        self._server = uvicorn.Server(config)
        # uvicorn installs signal handlers only in the main thread; here Ctrl-C stays the caller's.
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="horde-dashboard", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                sock.close()
                raise InvalidInput(
                    f"the dashboard did not start on {self.host}:{self.port}",
                    hint="see the messages above; try another --port",
                )
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop serving (open live streams end within half a second) and wait for the thread."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        if self._dashboard is not None:
            self._dashboard.closing.set()
        server.should_exit = True
        thread.join(timeout=STOP_GRACE_S + 5.0)
        self._server = self._thread = None

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _url(self, host: str, path: str = "") -> str:
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/{path}" + (f"?token={self.token}" if self.token else "")


def _reachable_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host.strip("[]")


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or a message saying why there cannot be one."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        raise InvalidInput(
            f"cannot listen on {host!r}: {error.strerror}", hint="--host 127.0.0.1 (the default)"
        ) from None
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host == "::":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise InvalidInput(
            f"cannot listen on {host}:{port}: {error.strerror or error}",
            hint="choose another --port (0: any free one), or --host 127.0.0.1",
        ) from None
    return sock
