"""Who may use the dashboard: loopback by default, a token as soon as anything else can reach it.

The dashboard can stop runs and change their load, so it is safe by default:

- Bound to a loopback address with no token, it answers only requests that arrived on a loopback
  address *and* name a loopback host (``Host: 127.0.0.1:8089``, ``localhost``, ``[::1]``). The
  second check defeats DNS rebinding: a web page from elsewhere whose name was re-pointed at
  127.0.0.1 still sends its own name in ``Host``.
- With a token, every request must carry it: ``?token=`` once (a page request is then redirected
  to the same address without it, and a cookie carries it from there, so it leaves the address
  bar and the history), the cookie, or an ``Authorization: Bearer`` / ``X-Horde-Token`` header.
  Anything else gets 401.
- A bind to a non-loopback address without a token is refused before anything listens
  (:class:`InsecureBind`, exit code 2).

Requests that change something (``POST``) must come from the dashboard's own pages: a JSON body
(a cross-site form cannot send one without a CORS preflight, which is never granted) and, when
the browser sends ``Origin``, the dashboard's own origin.

>>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("localhost"), is_loopback("0.0.0.0")
(True, True, True, False)
>>> host_of_header("[::1]:8089"), host_of_header("localhost:80"), host_of_header("example.org")
('::1', 'localhost', 'example.org')
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Iterable
from http.cookies import SimpleCookie
from typing import Final
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from horde.errors import InvalidInput

#: The query parameter that carries the token on the first request.
TOKEN_PARAMETER: Final = "token"
#: The header a script (or curl) may carry the token in, besides ``Authorization: Bearer``.
TOKEN_HEADER: Final = "x-horde-token"
_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


class InsecureBind(InvalidInput):
    """The dashboard was asked to listen beyond loopback without a token."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) can only be reached from this machine."""
    host = host.strip().strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of_header(value: str) -> str:
    """The host part of a ``Host`` header (no port, no brackets)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind that has no token (see the module's docstring)."""
    if token is not None and not token.strip():
        raise InsecureBind(
            "the dashboard's token is empty", hint="give a non-empty --token, or leave it out to have one generated"
        )
    if token is None and not is_loopback(host):
        raise InsecureBind(
            f"the dashboard would listen on {host}, beyond this machine, without a token",
            hint="give --token T (or let `horde ui` generate one), or listen on 127.0.0.1 (the default)",
        )


def new_token() -> str:
    """A token for a dashboard reachable from other machines (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def cookie_name(port: int) -> str:
    """Cookies are shared by every port of a host, so each dashboard names its own."""
    return f"horde_token_{port}"


class AccessGate:
    """ASGI middleware enforcing the rules of this module on every HTTP request."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if scope["method"] == "POST":
            refusal = _cross_site_refusal(headers)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if self.token is None or not any(name == TOKEN_PARAMETER for name, _ in query):
            await self.app(scope, receive, send)
            return
        # The token came in the address: from now on a cookie carries it.
        cookie = _set_cookie(cookie_name(_local_port(scope)), self.token)
        if scope["method"] == "GET" and "text/html" in headers.get("accept", ""):
            remaining = urlencode([(name, value) for name, value in query if name != TOKEN_PARAMETER])
            location = scope.get("root_path", "") + scope["path"] + (f"?{remaining}" if remaining else "")
            redirect = RedirectResponse(location, status_code=303)
            redirect.headers.append("set-cookie", cookie)
            await redirect(scope, receive, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append("set-cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> Response | None:
        if self.token is None:
            local = (scope.get("server") or ("", 0))[0] or ""
            host = host_of_header(headers.get("host", ""))
            if is_loopback(str(local)) and is_loopback(host):
                return None
            return PlainTextResponse(
                "this dashboard has no token, so it answers only on a loopback address under a loopback name "
                "(http://127.0.0.1:PORT/); start it with --token to reach it from elsewhere\n",
                status_code=403,
            )
        if any(secrets.compare_digest(given.encode(), self.token.encode()) for given in _tokens_given(scope, headers)):
            return None
        message = "this dashboard needs its token: open the address `horde ui` printed (it ends in ?token=...)"
        if "text/html" in headers.get("accept", ""):
            return PlainTextResponse(message + "\n", status_code=401)
        return JSONResponse({"error": message}, status_code=401, headers={"www-authenticate": "Bearer"})


def _tokens_given(scope: Scope, headers: dict[str, str]) -> Iterable[str]:
    """Every token the request offers, wherever it carries one."""
    for name, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
        if name == TOKEN_PARAMETER:
            yield value
    authorization = headers.get("authorization", "")
    if authorization.lower().startswith("bearer "):
        yield authorization[7:].strip()
    if TOKEN_HEADER in headers:
        yield headers[TOKEN_HEADER].strip()
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed Cookie header is simply no token
        return
    wanted = cookie_name(_local_port(scope))
    if wanted in cookies:
        yield cookies[wanted].value


def _cross_site_refusal(headers: dict[str, str]) -> Response | None:
    content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "application/json":
        return JSONResponse({"error": "send JSON (Content-Type: application/json)"}, status_code=415)
    origin = headers.get("origin")
    if origin is not None and origin.split("://", 1)[-1].rstrip("/").lower() != headers.get("host", "").lower():
        return JSONResponse({"error": f"a request from {origin} may not change runs"}, status_code=403)
    return None


def _local_port(scope: Scope) -> int:
    server = scope.get("server") or ("", 0)
    return int(server[1] or 0)


def _set_cookie(name: str, value: str) -> str:
    # HttpOnly: page scripts never need it; SameSite=Strict: no other site's page sends it.
    return f"{name}={value}; Path=/; HttpOnly; SameSite=Strict"
