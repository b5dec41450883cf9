"""yandex-tank's and pandora's ammo files read as requests, each at its line.

Formats (``ammo_type`` in tank's phantom section, ``ammo.type`` in a pandora pool):

- ``uri`` (URI-style): ``[Name: value]`` lines set a header for the requests after them, each
  other line is ``URI [tag]``, a GET;
- ``uripost``: the same header lines, then per request ``SIZE URI [tag]`` followed by SIZE bytes
  of body, a POST;
- ``phantom`` / ``raw`` (request-style): ``SIZE [tag]`` followed by SIZE bytes of a raw HTTP
  request (request line, headers, blank line, body);
- ``jsonline`` / ``http/json``: a JSON object a line, ``{"uri", "method", "headers", "host",
  "tag", "body"}``.

A file that is none of them where it says it is, is an :class:`~horde.errors.InvalidInput` at its
``file:line`` with a hint: the parsers raise nothing else (the tests fuzz them).

>>> [(r.method, r.uri, r.tag, r.headers) for r in parse_ammo(b"[Host: example.org]\\n/buy shop\\n/ \\n", "uri", "a")]
[('GET', '/buy', 'shop', {'Host': 'example.org'}), ('GET', '/', None, {'Host': 'example.org'})]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from horde.errors import InvalidInput
from horde.plan import METHODS

AMMO_TYPES = ("uri", "uripost", "phantom", "raw", "jsonline", "http/json")
#: The names each format goes by in tank's and pandora's configs.
ALIASES = {"http/json": "jsonline", "raw": "phantom", "http/raw": "phantom", "uripost": "uripost", "uri": "uri"}
_HEADER_LINE = re.compile(r"^\[\s*([^:\]]+?)\s*:\s*(.*?)\s*\]$")
_SIZE_LINE = re.compile(rb"^(\d+)(?:[ \t]+(\S.*?))?[ \t]*\r?$")


@dataclass(frozen=True)
class AmmoRequest:
    method: str
    #: Path and query, as sent.
    uri: str
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    tag: str | None = None
    #: ``file:line`` of the request in its ammo file.
    location: str = ""


def kind_of(ammo_type: str) -> str:
    """The format's own name (``raw`` is request-style, ``http/json`` is jsonline)."""
    return ALIASES.get(ammo_type, ammo_type)


def guess_type(data: bytes) -> str:
    """The format an ammo file without a stated type is in, by its first lines."""
    for raw in data.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith(b"{"):
            return "jsonline"
        if line.startswith((b"[", b"/", b"http://", b"https://")):
            return "uri"
        match = _SIZE_LINE.match(line)
        if match and match.group(2) and match.group(2).startswith(b"/"):
            return "uripost"
        return "phantom"
    return "uri"


def parse_ammo(data: bytes, ammo_type: str, label: str) -> list[AmmoRequest]:
    """The requests of an ammo file (``label``: its name in locations) of ``ammo_type``."""
    kind = kind_of(ammo_type)
    if kind == "uri":
        requests = _uri_style(data, label)
    elif kind == "uripost":
        requests = _sized(data, label, post=True)
    elif kind == "phantom":
        requests = _sized(data, label, post=False)
    elif kind == "jsonline":
        requests = _jsonline(data, label)
    else:
        raise InvalidInput(
            f"{label}: ammo type '{ammo_type}' is not one Horde reads",
            hint=f"ammo types: {', '.join(AMMO_TYPES)} (an access log: horde profile reads it)",
        )
    if not requests:
        raise InvalidInput(f"{label}: the ammo file holds no request", hint=f"check it is {kind} ammo")
    return requests


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(f"{where}: not UTF-8 text ({error.reason})", hint="save the ammo as UTF-8") from None


def _uri(text: str, where: str) -> str:
    """A request's path and query from an ammo URI (a path, or a whole URL)."""
    if text.startswith(("http://", "https://")):
        try:
            parts = urlsplit(text)
        except ValueError:
            parts = None
        if parts is None or not parts.netloc:
            raise InvalidInput(f"{where}: '{text[:80]}' is not a URL", hint="write a path such as /index.html")
        text = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if not text.startswith("/") or any(ch.isspace() or ord(ch) < 32 for ch in text):
        raise InvalidInput(
            f"{where}: '{text[:80]}' is not a request path", hint="a path starts with / and holds no space"
        )
    return text


def _header(line: str, where: str) -> tuple[str, str] | None:
    match = _HEADER_LINE.match(line)
    if match is None:
        return None
    name = match.group(1)
    if not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name):
        raise InvalidInput(f"{where}: '{name[:60]}' is not a header name", hint="write [Name: value]")
    return name, match.group(2)


def _uri_style(data: bytes, label: str) -> list[AmmoRequest]:
    headers: dict[str, str] = {}
    requests: list[AmmoRequest] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        where = f"{label}:{number}"
        line = _text(raw, where).strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            header = _header(line, where)
            if header is None:
                raise InvalidInput(f"{where}: '{line[:80]}' is not a header line", hint="write [Name: value]")
            headers[header[0]] = header[1]
            continue
        uri, _, tag = line.partition(" ")
        requests.append(AmmoRequest("GET", _uri(uri, where), dict(headers), None, tag.strip() or None, where))
    return requests


def _sized(data: bytes, label: str, *, post: bool) -> list[AmmoRequest]:
    """uripost (``post``) or request-style ammo: a size line, then that many bytes."""
    headers: dict[str, str] = {}
    requests: list[AmmoRequest] = []
    position, number = 0, 1
    while position < len(data):
        end = data.find(b"\n", position)
        end = len(data) if end < 0 else end
        raw = data[position:end]
        where = f"{label}:{number}"
        position, number = end + 1, number + 1
        line = _text(raw, where).strip()
        if not line:
            continue
        if post and line.startswith("["):
            header = _header(line, where)
            if header is None:
                raise InvalidInput(f"{where}: '{line[:80]}' is not a header line", hint="write [Name: value]")
            headers[header[0]] = header[1]
            continue
        match = _SIZE_LINE.match(raw.strip())
        if match is None:
            shape = "SIZE URI [TAG]" if post else "SIZE [TAG]"
            raise InvalidInput(
                f"{where}: '{line[:80]}' is not a {shape} line",
                hint=f"each request starts with {shape}, then SIZE bytes" + (" of body" if post else " of raw HTTP"),
            )
        size = int(match.group(1))
        rest = _text(match.group(2) or b"", where)
        if position + size > len(data):
            raise InvalidInput(
                f"{where}: the size says {size} bytes, {max(0, len(data) - position)} follow",
                hint="the size counts every byte of the request, \\r and \\n included",
            )
        chunk = data[position : position + size]
        number += chunk.count(b"\n")
        position += size
        if post:
            uri, _, tag = rest.partition(" ")
            if not uri:
                raise InvalidInput(f"{where}: no URI after the size", hint="write SIZE URI [TAG]")
            body = _text(chunk, where)
            requests.append(AmmoRequest("POST", _uri(uri, where), dict(headers), body, tag.strip() or None, where))
        else:
            requests.append(_raw_request(chunk, rest.strip() or None, where))
    return requests


def _raw_request(chunk: bytes, tag: str | None, where: str) -> AmmoRequest:
    head, separator, body = chunk.partition(b"\r\n\r\n")
    if not separator:
        head, separator, body = chunk.partition(b"\n\n")
    lines = _text(head, where).replace("\r\n", "\n").split("\n")
    request_line = lines[0].split(" ")
    if len(request_line) != 3 or not request_line[2].startswith("HTTP/"):
        raise InvalidInput(
            f"{where}: '{lines[0][:80]}' is not an HTTP request line",
            hint="a request-style ammo's request starts with METHOD URI HTTP/1.1",
        )
    method, uri, _ = request_line
    if method not in METHODS:
        raise InvalidInput(f"{where}: method '{method[:20]}' is not one Horde sends", hint=", ".join(METHODS))
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name):
            raise InvalidInput(f"{where}: '{line[:80]}' is not a header", hint="write Name: value")
        headers[name] = value.strip()
    text = _text(body, where) if body else None
    return AmmoRequest(method, _uri(uri, where), headers, text, tag, where)


def _jsonline(data: bytes, label: str) -> list[AmmoRequest]:
    requests: list[AmmoRequest] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        where = f"{label}:{number}"
        line = _text(raw, where).strip()
        if not line:
            continue
        try:
            item = json.loads(line)
        except (ValueError, RecursionError) as error:
            raise InvalidInput(f"{where}: not a JSON object ({error})", hint="one JSON object a line") from None
        if not isinstance(item, dict) or not isinstance(item.get("uri"), str):
            raise InvalidInput(f"{where}: no \"uri\" text", hint='write {"uri": "/", "method": "GET", ...}')
        method = item.get("method", "GET")
        if not isinstance(method, str) or method.upper() not in METHODS:
            raise InvalidInput(f"{where}: method {method!r:.30} is not one Horde sends", hint=", ".join(METHODS))
        headers = item.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise InvalidInput(f"{where}: \"headers\" must map names to text", hint='{"Accept": "*/*"}')
        for name in headers:
            if not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name):
                raise InvalidInput(f"{where}: '{name[:60]}' is not a header name", hint='{"Accept": "*/*"}')
        if isinstance(item.get("host"), str):
            headers = {**headers, "Host": item["host"]}
        body = item.get("body")
        if body is not None and not isinstance(body, str):
            body = json.dumps(body)
        tag = item.get("tag")
        requests.append(
            AmmoRequest(
                method.upper(),
                _uri(item["uri"], where),
                dict(headers),
                body,
                tag if isinstance(tag, str) and tag else None,
                where,
            )
        )
    return requests
