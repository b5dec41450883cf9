"""A real HTTP server on loopback that answers and remembers what it was sent, for the tests that
run a converted plan (``horde import``) and compare what arrived with what the source asked for.

Every request gets ``200`` and a small JSON body, unless the test set another answer for its path
(:meth:`RecordingTarget.answer`: a body, a status, headers such as ``Set-Cookie`` or ``Location``),
so a plan's extractions and cookies meet the values the test chose. Each request is recorded
(:class:`Received`: method, path, query, headers, body) in arrival order.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import pytest


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    #: The query's pairs in their order (a name may repeat).
    query: tuple[tuple[str, str], ...]
    #: Header names in lower case (HTTP's names ignore case); a repeated header keeps its last value.
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b'{"ok": true}'
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)


@dataclass
class RecordingTarget:
    base_url: str
    received: list[Received] = field(default_factory=list)
    _answers: dict[str, Answer] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(
        self,
        path: str,
        body: str | bytes,
        *,
        status: int = 200,
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
    ) -> None:
        """Answer requests for ``path`` (without its query) with this body, status and headers."""
        pairs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
        if not any(name.lower() == "content-type" for name, _ in pairs):
            pairs.append(("Content-Type", "application/json"))
        data = body.encode() if isinstance(body, str) else body
        self._answers[path] = Answer(status, data, tuple(pairs))

    def requests(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def clear(self) -> None:
        with self._lock:
            self.received.clear()

    def _record(self, request: Received) -> Answer:
        with self._lock:
            self.received.append(request)
        return self._answers.get(request.path, Answer())


def _handler(target: RecordingTarget) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 so that the engine's keep-alive connections are kept, as against a real target.
        protocol_version = "HTTP/1.1"
        # The head and the body go out in separate writes: with Nagle's algorithm on, the body
        # waits for the client's delayed ACK (40 ms a request).
        disable_nagle_algorithm = True

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            answer = target._record(
                Received(
                    method=self.command,
                    path=parts.path,
                    query=tuple(parse_qsl(parts.query, keep_blank_values=True)),
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=body,
                )
            )
            self.send_response(answer.status)
            for name, value in answer.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(answer.body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _serve

        def log_message(self, format: str, *args: object) -> None:
            """Silent: thousands of requests a second would drown pytest's output."""

    return Handler


@pytest.fixture
def recording_target() -> Iterator[RecordingTarget]:
    """A fresh recording target on a free port of 127.0.0.1, stopped after the test."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(target := RecordingTarget("")))
    server.daemon_threads = True
    host, port = server.server_address[:2]
    target.base_url = f"http://{host!s}:{port}"
    thread = threading.Thread(target=server.serve_forever, name="recording-target", daemon=True)
    thread.start()
    try:
        yield target
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
