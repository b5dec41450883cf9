"""A small Chrome DevTools Protocol client: a real headless chromium driven by the tests.

Only what the dashboard's browser tests need: open a page, evaluate JavaScript, wait (bounded)
for a condition, click, collect console errors and uncaught exceptions, take a screenshot.
Chromium is started with ``--remote-debugging-port=0``; the port it chose is read from the
``DevToolsActivePort`` file it writes into its profile directory, and the page's WebSocket from
``/json/list``. The browser gets no name resolution (every host maps to NOTFOUND), so a page
that needed the network would fail to draw. Debian's chromium is used; nothing is downloaded.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

#: The most a single protocol command may take.
COMMAND_TIMEOUT_S = 30.0


def chromium_or_skip() -> str:
    """Debian's chromium, or a skip (a failure when HORDE_REQUIRE_BROWSER=1, as in CI)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    reason = "Debian's chromium is not installed (apt-get install chromium); the dashboard's browser tests need it"
    if os.environ.get("HORDE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"HORDE_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


class Browser:
    """One headless chromium with one page. Use as a context manager: it is always killed."""

    def __init__(self, profile: Path, *, window: str = "1400,2600") -> None:
        self.profile = profile
        self.window = window
        self.process: subprocess.Popen[bytes] | None = None
        self._socket: ClientConnection | None = None
        self._closing = ExitStack()
        self._next_id = 0
        #: Protocol events received so far (method, params), in order.
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __enter__(self) -> Browser:
        self.profile.mkdir(parents=True, exist_ok=True)
        # A profile used before keeps the last browser's port file: only a new one counts.
        (self.profile / "DevToolsActivePort").unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [
                chromium_or_skip(),
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-default-apps",
                # No name resolves but loopback: a page needing anything from the network fails.
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={self.window}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port = self._debugging_port(timeout_s=30.0)
            page = self._page_socket_url(port, timeout_s=15.0)
            self._socket = self._closing.enter_context(connect(page, max_size=64 * 1024 * 1024, open_timeout=15))
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._socket is not None:
            self._socket = None
            try:
                self._closing.close()
            except Exception:  # noqa: BLE001 - closing a browser that is going away anyway
                pass
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    # -- the protocol ------------------------------------------------------------------------------

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run one command and return its result (events arriving meanwhile are kept)."""
        assert self._socket is not None, "the browser is not open"
        self._next_id += 1
        command_id = self._next_id
        self._socket.send(json.dumps({"id": command_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"chromium did not answer {method} within {COMMAND_TIMEOUT_S} s")
            message = json.loads(self._socket.recv(timeout=left))
            if message.get("id") == command_id:
                if "error" in message:
                    raise AssertionError(f"{method} failed: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append((message["method"], message.get("params", {})))

    def open(self, url: str, *, timeout_s: float = 30.0) -> None:
        """Navigate and wait (bounded) until the document has loaded."""
        self.send("Page.navigate", {"url": url})
        self.wait_for(
            "document.readyState === 'complete' && location.href !== 'about:blank'",
            timeout_s=timeout_s,
            what=f"{url} to load",
        )

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, *, timeout_s: float, what: str) -> Any:
        """Poll ``expression`` until it is truthy; its value. Fails after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout_s} s for {what}; last value {value!r}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def errors(self) -> list[str]:
        """Console errors, error log entries and uncaught exceptions seen so far."""
        self.evaluate("0")  # drain the events that arrived since the last command
        found = []
        for method, params in self.events:
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(
                    "console: "
                    + " ".join(str(arg.get("value", arg.get("description"))) for arg in params.get("args", []))
                )
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append(
                    "exception: " + str(details.get("exception", {}).get("description") or details.get("text"))
                )
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                found.append(f"log: {entry.get('text')} ({entry.get('url', '')})")
        return found

    # -- start-up ----------------------------------------------------------------------------------

    def _debugging_port(self, *, timeout_s: float) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"chromium exited with {self.process.returncode} before listening")
            try:
                first_line = marker.read_text().splitlines()[0]
                return int(first_line)
            except (OSError, IndexError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"chromium wrote no {marker} within {timeout_s} s")
            time.sleep(0.05)

    @staticmethod
    def _page_socket_url(port: int, *, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as response:
                    targets = json.loads(response.read())
                pages = [target for target in targets if target.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"chromium listed no page on port {port} within {timeout_s} s")
            time.sleep(0.1)
