"""The target of a plan: where it is (base_url and its other instances) and how VUs reach it
(``connections``: one connection per VU or a pool; ``source_addresses``).

Exported by :mod:`horde.plan`; import the models from there.

>>> from horde.plan import Target
>>> Target(base_url="http://127.0.0.1:8080", connections={"pool": 100}).connections
ConnectionPool(pool=100)
>>> Target(base_url="http://127.0.0.1:8080").connections
'per_vu'
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any, Literal, Union
from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, Field, ValidatorFunctionWrapHandler, field_validator, model_validator

from horde.plan.message import Framing, KcpOptions, is_message_url, is_websocket_url, message_option_problems
from horde.plan.bounds import (
    DEFAULT_H2_CONNECTION_WINDOW_BYTES,
    DEFAULT_H2_STREAM_WINDOW_BYTES,
    DEFAULT_MAX_KEPT_BODY_BYTES,
    DEFAULT_MAX_RESPONSE_HEADER_BYTES,
    DEFAULT_PARALLEL_CONNECTIONS,
    MAX_H2_CONCURRENT_STREAMS,
    MAX_H2_WINDOW_BYTES,
    MAX_KEPT_BODY_BYTES,
    MAX_PARALLEL_CONNECTIONS,
    MAX_POOL_CONNECTIONS as MAX_POOL_CONNECTIONS,
    MAX_RESPONSE_HEADER_BYTES,
    MIN_H2_CONNECTION_WINDOW_BYTES,
    MIN_RESPONSE_HEADER_BYTES,
)
from horde.plan.sql import is_postgres_url
from horde.plan.common import MAX_TIMEOUT_MS, STRICT_KEYS, Located, custom, with_problems


_CONNECTIONS_HINT = (
    "write connections: per_vu (each VU owns its connection, the default) or connections: "
    "{pool: N} (N connections per generator process, shared by its VUs)"
)


class ConnectionPool(BaseModel):
    """``connections: {pool: N}``: N keep-alive connections per generator process, split over
    its worker threads and shared by their VUs."""

    model_config = STRICT_KEYS

    pool: int = Field(
        ge=1,
        le=MAX_POOL_CONNECTIONS,
        description="how many keep-alive connections the generator process holds at most, "
        "e.g. 100; a VU waits its turn when all are lent",
    )


#: How VUs reach the target: ``"per_vu"`` or a :class:`ConnectionPool`.
Connections = Union[Literal["per_vu"], ConnectionPool]


def _check_connections(data: dict[str, Any], problems: list[Located]) -> dict[str, Any]:
    """Problems of ``connections`` located and worded here (pydantic would list one per
    member of the union); a bad value is then left out so that it is reported once."""
    value = data.get("connections", "per_vu")
    if value == "per_vu" or isinstance(value, ConnectionPool):
        return data
    found: list[Located] = []
    if not isinstance(value, dict):
        found.append(
            (
                ("connections",),
                value,
                custom("connections", f"{_describe(value)} is not a way to connect", _CONNECTIONS_HINT),
            )
        )
    else:
        for key in value:
            if key != "pool":
                found.append(
                    (
                        ("connections", key),
                        value[key],
                        custom("connections_key", f"unknown key '{key}'", "a pool has one key: pool (its size)"),
                    )
                )
        size = value.get("pool")
        if "pool" not in value:
            found.append(
                (
                    ("connections", "pool"),
                    value,
                    custom("connections_pool", "is required but missing", "give the pool's size, e.g. {pool: 100}"),
                )
            )
        elif isinstance(size, bool) or not isinstance(size, int):
            found.append(
                (
                    ("connections", "pool"),
                    size,
                    custom(
                        "connections_pool",
                        f"must be a whole number (got {_describe(size)})",
                        "give the pool's size, e.g. {pool: 100}",
                    ),
                )
            )
        elif size < 1:
            found.append(
                (
                    ("connections", "pool"),
                    size,
                    custom(
                        "connections_pool",
                        f"must be at least 1 (got {size})",
                        "a pool holds at least one connection; per_vu gives each VU its own",
                    ),
                )
            )
        elif size > MAX_POOL_CONNECTIONS:
            found.append(
                (
                    ("connections", "pool"),
                    size,
                    custom(
                        "connections_pool",
                        f"must be at most {MAX_POOL_CONNECTIONS} (got {size})",
                        "one process cannot hold more; use more generator processes",
                    ),
                )
            )
    if not found:
        return data
    problems += found
    return {key: item for key, item in data.items() if key != "connections"}


class Http2Settings(BaseModel):
    """``http2``: what the HTTP/2 client advertises and keeps to on each connection
    (crates/horde-plan ``Http2Settings``: the same fields, defaults and bounds).

    >>> Http2Settings(stream_window_bytes=65535).connection_window_bytes
    16777216
    """

    model_config = STRICT_KEYS

    stream_window_bytes: int = Field(
        default=DEFAULT_H2_STREAM_WINDOW_BYTES,
        ge=1,
        le=MAX_H2_WINDOW_BYTES,
        description="each stream's receive window, advertised as SETTINGS_INITIAL_WINDOW_SIZE, "
        "from 1 to 2147483647 bytes (default 1048576): a response larger than it flows as the "
        "client reads it, one WINDOW_UPDATE per half window",
    )
    connection_window_bytes: int = Field(
        default=DEFAULT_H2_CONNECTION_WINDOW_BYTES,
        ge=MIN_H2_CONNECTION_WINDOW_BYTES,
        le=MAX_H2_WINDOW_BYTES,
        description="the connection's receive window, shared by its streams (raised from "
        "HTTP/2's initial 65535 by a WINDOW_UPDATE), from 65535 to 2147483647 bytes (default "
        "16777216)",
    )
    max_concurrent_streams: int | None = Field(
        default=None,
        ge=1,
        le=MAX_H2_CONCURRENT_STREAMS,
        description="the most streams the client opens at once on one connection, below the "
        "server's own SETTINGS_MAX_CONCURRENT_STREAMS (a request waits for a free stream, and "
        "the wait is part of its latency); left out: the server's limit only",
    )


#: ``http_version``'s values: HTTP/1.1 only (the default), HTTP/2 insisted on, or ALPN's choice.
HttpVersion = Literal["1.1", "2", "auto"]


def _check_http_version(data: dict[str, Any], problems: list[Located]) -> dict[str, Any]:
    """``http_version`` read as YAML writes it (``2`` and ``1.1`` unquoted are numbers) and
    checked against the rest of the target; crates/horde-plan (validate/target.rs) words the
    problems the same. A bad value is left out so that it is reported once."""
    if "http_version" not in data:
        return _check_http2(data, problems)
    value = data["http_version"]
    text = (
        {2: "2", 1.1: "1.1"}.get(value, value)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else value
    )
    problem = None
    if text not in ("1.1", "2", "auto"):
        problem = custom(
            "http_version",
            f"{_describe(value)} is not an HTTP version",
            "write http_version: '1.1' (the default), '2' (h2c for http://, h2 required over TLS) "
            "or auto (ALPN over TLS offers h2 and http/1.1)",
        )
    elif text != "1.1" and isinstance(data.get("base_url"), str) and is_postgres_url(data["base_url"]):
        problem = custom(
            "http_version",
            f"'{text}' is for http:// and https:// targets",
            "leave http_version out for a postgresql:// target",
        )
    elif text == "auto" and data.get("connections", "per_vu") != "per_vu":
        problem = custom(
            "http_version",
            "'auto' cannot be combined with connections: {pool: N} (a pool "
            "multiplexes HTTP/2 connections and must know the protocol before connecting)",
            "write http_version: '2' (the server speaks HTTP/2) or '1.1'",
        )
    if problem is None:
        return _check_http2({**data, "http_version": text}, problems)
    problems.append((("http_version",), value, problem))
    return {key: item for key, item in data.items() if key != "http_version"}


def _check_http2(data: dict[str, Any], problems: list[Located]) -> dict[str, Any]:
    """``http2`` only where HTTP/2 may be spoken; crates/horde-plan words it the same."""
    if data.get("http2") is None or data.get("http_version", "1.1") != "1.1":
        return data
    problems.append(
        (
            ("http2",),
            data["http2"],
            custom(
                "http2",
                "HTTP/2's settings need http_version '2' or 'auto' (the target speaks HTTP/1.1)",
                "add http_version: '2' or auto, or leave http2 out",
            ),
        )
    )
    return {key: item for key, item in data.items() if key != "http2"}


def _describe(value: Any) -> str:
    return repr(value) if isinstance(value, (str, int, float)) else type(value).__name__


def _password_env_problems(data: dict[str, Any]) -> list[Located]:
    """``password_env`` names a variable this environment sets: the engine reads the password
    from it when the run starts, and a variable left unset is the plan's problem, found by
    ``horde validate`` too, not a run that cannot start. (A name that is no variable's, and a
    password for a target of another protocol, are the engine's to word: validate/sql.rs.)

    >>> [problem[2].message() for problem in _password_env_problems(
    ...     {"base_url": "postgresql://app@db/game", "password_env": "HORDE_DOCTEST_UNSET"})]
    ["the environment variable 'HORDE_DOCTEST_UNSET' is not set"]
    """
    name, base_url = data.get("password_env"), data.get("base_url")
    if (
        not isinstance(name, str)
        or not name
        or "=" in name
        or "\0" in name
        or name in os.environ
        or not isinstance(base_url, str)
        or not is_postgres_url(base_url)
    ):
        return []
    return [
        (
            ("password_env",),
            name,
            custom(
                "password_env",
                f"the environment variable '{name}' is not set",
                f"export it where horde runs (export {name}='...'): the engine reads the password from it "
                "when the run starts, and never stores it",
            ),
        )
    ]


def _source_address_problems(data: dict[str, Any]) -> list[Located]:
    """Each source address an IP literal, listed once, of the family of the target's address
    (when the target is given by address: a name may resolve to either)."""
    addresses = data.get("source_addresses")
    if not isinstance(addresses, list):
        return []
    urls = [data.get("base_url"), *(data.get("instances") or [])]
    families = {ip.version for ip in map(_url_ip, urls) if ip is not None}
    problems: list[Located] = []
    seen: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for index, text in enumerate(addresses):
        if not isinstance(text, str):
            continue  # pydantic says it must be a string
        location = ("source_addresses", index)
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            problems.append(
                (
                    location,
                    text,
                    custom(
                        "source_address",
                        f"'{text}' is not an IP address",
                        "write IP addresses of this machine, e.g. '127.0.0.2' (names are not resolved here)",
                    ),
                )
            )
            continue
        if address in seen:
            problems.append(
                (location, text, custom("source_address", f"'{text}' is listed twice", "list each address once"))
            )
            continue
        seen.add(address)
        if any(family != address.version for family in families):
            own, other = ("IPv4", "IPv6") if address.version == 4 else ("IPv6", "IPv4")
            problems.append(
                (
                    location,
                    text,
                    custom(
                        "source_address",
                        f"'{text}' is an {own} address but the target is reached over {other}",
                        f"give {other} addresses, or reach the target over {own}",
                    ),
                )
            )
    return problems


def _url_ip(url: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The host of a target URL when it is an IP literal."""
    if not isinstance(url, str):
        return None
    try:
        host = urlsplit(url).hostname
        return ipaddress.ip_address(host) if host else None
    except ValueError:
        return None


def _host_as_written(parts: SplitResult) -> str:
    """The host of a URL as written (urlsplit's ``hostname`` is lower-cased, without brackets)."""
    host_and_port = parts.netloc.rpartition("@")[2]
    if host_and_port.startswith("["):
        return host_and_port[1:].partition("]")[0]
    return host_and_port.rpartition(":")[0] if ":" in host_and_port else host_and_port


def _host_problem(parts: SplitResult) -> str | None:
    """Why a URL's host cannot be connected to as written, if it cannot: an IPv6 literal that
    does not parse; a name with a space or another character no host name has, an empty label,
    a label starting or ending with ``-`` (``-bad-.com``) or a trailing dot (``example.com.``
    would go to the system resolver as an absolute name).
    crates/horde-plan (``host_problem`` in validate/target.rs) says the same.

    >>> _host_problem(urlsplit("http://example.com.:80")), _host_problem(urlsplit("http://[::1]:80"))
    ('it ends with a dot', None)
    """
    host = _host_as_written(parts)
    if parts.netloc.rpartition("@")[2].startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "not an IPv6 address"
        return None
    if any(character.isspace() or not character.isprintable() for character in host):
        return "it contains a space or a control character"
    if host.endswith("."):
        return "it ends with a dot"
    if not all(character.isascii() and (character.isalnum() or character in "-._") for character in host):
        return "a host name has only ASCII letters, digits, '-', '_' and '.'; write an international name as xn--..."
    if any(label == "" for label in host.split(".")):
        return "it has an empty label between dots"
    if any(label.startswith("-") or label.endswith("-") for label in host.split(".")):
        return "a label starts or ends with '-' (no resolver looks such a name up)"
    return None


HEADERS_DESCRIPTION = "HTTP headers as a mapping of name to value, e.g. {accept: application/json}"


class Target(BaseModel):
    """The system under test and how to reach it."""

    model_config = STRICT_KEYS

    base_url: str = Field(
        description="http:// or https:// URL of the target: a host, an optional port and an "
        "optional path prefix joined with each step's path, e.g. 'http://127.0.0.1:8080'; or a "
        "message target: tcp://, udp://, kcp:// host:port, ws:// or wss:// host[:port][/path] (WebSocket)",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description=f"{HEADERS_DESCRIPTION}; sent with every request (a step's headers override them)",
    )
    connect_timeout_ms: float = Field(
        default=5000,
        gt=0,
        le=MAX_TIMEOUT_MS,
        description="how long to wait for a connection (TCP and TLS), in milliseconds; > 0",
    )
    request_timeout_ms: float = Field(
        default=30000,
        gt=0,
        le=MAX_TIMEOUT_MS,
        description="how long a whole exchange may take, from sending the request to the last "
        "byte of the response body, in milliseconds; > 0",
    )
    insecure: bool = Field(
        default=False,
        description="true turns TLS certificate verification off (self-signed test servers)",
    )
    ca_file: str | None = Field(
        default=None,
        min_length=1,
        description="a PEM file of CA certificates to trust besides the usual roots, relative to "
        "the plan file's folder (a private CA: its certificates are verified, not waved through "
        "as with insecure)",
    )
    instances: list[str] = Field(
        default_factory=list,
        description="further base URLs of the same target, its other instances (base_url is "
        "instance 0), e.g. ['http://10.0.0.2:8080', 'http://10.0.0.3:8080']: VU number n sends "
        "all its requests to instance n mod (1 + the number of instances), over its own "
        "connection and with that instance's Host header; each has base_url's scheme and path "
        "prefix, none given twice",
    )
    connections: Connections = Field(
        default="per_vu",
        description="how VUs reach the target: 'per_vu' (the default: each VU owns a keep-alive "
        "connection, as real clients do) or {pool: N} (N keep-alive connections per generator "
        "process, shared by its VUs: a VU borrows an idle connection to its instance for one "
        "request and gives it back; when all are lent it waits its turn, and the wait counts in "
        "the request's latency and timeout)",
    )
    http_version: HttpVersion = Field(
        default="1.1",
        description="which HTTP the VUs speak: '1.1' (the default), '2' (HTTP/2: with prior "
        "knowledge, h2c, for http://; over TLS the server must choose h2 in ALPN, or the request "
        "fails as 'h2_refused') or 'auto' (over TLS ALPN offers h2 and http/1.1 and the server "
        "chooses; http:// stays 1.1). Over HTTP/2 a VU's requests share its connection, and a "
        "pool's N connections are multiplexed by all the VUs (within the server's limit of "
        "concurrent streams); 'auto' takes no pool",
    )
    http2: Http2Settings | None = Field(
        default=None,
        description="HTTP/2's knobs, with http_version '2' or 'auto': {stream_window_bytes, "
        "connection_window_bytes, max_concurrent_streams}; the receive windows the client "
        "advertises (default 1 MiB per stream, 16 MiB per connection) and a cap on the streams it "
        "opens at once per connection (default: the server's limit only)",
    )
    source_addresses: list[str] = Field(
        default_factory=list,
        description="local IP addresses outgoing connections bind to, taken in turn, one per "
        "connection, e.g. ['127.0.0.2', '127.0.0.3']: each address has its own ~28,000 "
        "ephemeral ports, so several hold more connections to one target; an address that "
        "cannot be bound fails that connection (counted as 'connect')",
    )
    max_response_header_bytes: int = Field(
        default=DEFAULT_MAX_RESPONSE_HEADER_BYTES,
        ge=MIN_RESPONSE_HEADER_BYTES,
        le=MAX_RESPONSE_HEADER_BYTES,
        description="the largest response head (status line and headers, any number of them) "
        "read, in bytes; a larger one counts as 'headers_too_large'. Default 262144 (256 KiB)",
    )
    max_kept_body_bytes: int = Field(
        default=DEFAULT_MAX_KEPT_BODY_BYTES,
        ge=1,
        le=MAX_KEPT_BODY_BYTES,
        description="the most of a response body a VU keeps for its step's checks and extractors, "
        "in bytes (every body is read to its end and counted; it is kept only when a check or an "
        "extractor reads it); a longer one fails such a step as 'body_too_large', its checks not "
        "judged. Default 1048576 (1 MiB)",
    )
    password_env: str | None = Field(
        default=None,
        min_length=1,
        description="a postgresql:// target: the environment variable the engine reads the "
        "password from when it connects (never stored), e.g. PGPASSWORD",
    )
    password_file: str | None = Field(
        default=None,
        min_length=1,
        description="a postgresql:// target: a file whose first line is the password",
    )
    framing: Framing | None = Field(
        default=None,
        description="a tcp:// target: how its byte stream is cut into messages: {type: newline} (the "
        "default), {type: length, bytes: 1|2|4, endian: big|little, adjust} or {type: raw}",
    )
    kcp: KcpOptions | None = Field(
        default=None,
        description="a kcp:// target: KCP's knobs {conv, nodelay, interval_ms, resend, no_congestion_window, "
        "send_window, receive_window, mtu}, ikcp.c's defaults when left out",
    )
    parallel_connections: int = Field(
        default=DEFAULT_PARALLEL_CONNECTIONS,
        ge=1,
        le=MAX_PARALLEL_CONNECTIONS,
        description="over HTTP/1.1, the most connections a VU uses at once for a parallel group's "
        "requests, its own among them (the others it keeps alive for its next group); requests "
        "past them wait for a free one, the wait counted in their latency. Default 6, as browsers "
        "open per host; over HTTP/2 a group's requests are streams of one connection",
    )
    connect_backoff: bool = Field(
        default=True,
        description="a closed-model VU whose connect failed pauses before its next request: 10 ms, "
        "doubling with each failure in a row up to 1 s, none again once a connect succeeds (the "
        "summary counts the pauses); false: it tries again at once. The open model's arrivals "
        "keep the plan's pace either way",
    )

    @staticmethod
    def _url_problem(url: str, field: str, location: tuple[str | int, ...] = ()) -> Located | None:
        """What is wrong with one URL of the target, if anything (``field``: how messages name it)."""
        if is_websocket_url(url):
            scheme = url.split("://", 1)[0]
            try:
                parts = urlsplit(url)
                port_ok = parts.port != 0
                well_formed = bool(parts.hostname) and port_ok and not (parts.query or parts.fragment or parts.username)
            except ValueError:
                well_formed = False
            if not well_formed:
                return (
                    location,
                    url,
                    custom(
                        "base_url",
                        f"'{url}' is not {scheme}://host[:port][/path]",
                        f"e.g. '{scheme}://127.0.0.1:8080/ws/echo'; a query goes in the connect step's path",
                    ),
                )
            return None
        if is_message_url(url):
            try:
                parts = urlsplit(url)
                well_formed = bool(parts.hostname and parts.port) and not (parts.path or parts.query or parts.username)
            except ValueError:
                well_formed = False
            if not well_formed:
                scheme = url.split("://", 1)[0]
                return (
                    location,
                    url,
                    custom(
                        "base_url",
                        f"'{url}' is not {scheme}://host:port",
                        f"e.g. '{scheme}://127.0.0.1:7000'",
                    ),
                )
            return None
        if is_postgres_url(url):
            if not urlsplit(url).hostname:
                return (
                    location,
                    url,
                    custom(
                        "base_url",
                        f"'{url}' names no host",
                        "e.g. 'postgresql://app@127.0.0.1:5432/game'",
                    ),
                )
            return None
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as error:
            return (
                location,
                url,
                custom(
                    "base_url",
                    f"'{url}' is not a valid URL ({error})",
                    "write it as scheme://host[:port][/prefix], e.g. 'http://127.0.0.1:8080'",
                ),
            )
        problem = None
        if parts.scheme not in ("http", "https") or not url.startswith(f"{parts.scheme}://"):
            if parts.scheme in ("http", "https") and url[: len(parts.scheme) + 3].lower() == f"{parts.scheme}://":
                message = f"'{url}' writes its scheme in upper case: write http:// or https://"
                hint = f"write '{parts.scheme}://{url[len(parts.scheme) + 3 :]}'"
            elif "://" in url:
                message = f"'{url}' uses scheme '{parts.scheme}'; only http and https are supported"
                hint = "use an http:// or https:// URL"
            else:
                message = f"'{url}' has no http:// or https:// scheme"
                hint = "write the full URL, e.g. 'http://127.0.0.1:8080'"
            problem = custom("base_url", message, hint)
        elif not parts.hostname:
            problem = custom(
                "base_url",
                f"'{url}' has no host",
                "put the host after the scheme, e.g. 'http://127.0.0.1:8080'",
            )
        elif parts.netloc.endswith(":"):
            problem = custom(
                "base_url",
                f"'{url}' has an empty port (a ':' with no number after it)",
                "write the port the target listens on, e.g. 'http://127.0.0.1:8080', or leave out "
                "the ':' for the scheme's default port",
            )
        elif (host_problem := _host_problem(parts)) is not None:
            problem = custom(
                "base_url",
                f"'{url}' has an invalid host '{_host_as_written(parts)}' ({host_problem})",
                "write a host name (letters, digits, '-', '.'), an IPv4 address, or an IPv6 "
                "address in brackets, e.g. 'http://[::1]:8080'",
            )
        elif port == 0:
            problem = custom("base_url", f"'{url}' has port 0", "use the port the target listens on")
        elif "@" in parts.netloc:
            # The engine does not send URL credentials, and they would be stored with the run.
            problem = custom(
                "base_url",
                f"{field} must not carry credentials (user:password@)",
                "send them as a header instead, e.g. headers: {Authorization: 'Basic ...'}; secret headers are redacted in the store",
            )
        elif parts.query or parts.fragment or url.endswith(("?", "#")):
            problem = custom(
                "base_url",
                f"'{url}' has a query or fragment",
                f"keep {field} to scheme, host, port and path prefix; put query strings in each step's path",
            )
        return None if problem is None else (location, url, problem)

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, url: str) -> str:
        problem = cls._url_problem(url, "base_url")
        if problem is not None:
            raise problem[2]
        return url

    @model_validator(mode="wrap")
    @classmethod
    def _check_instances(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # Checked on the raw data, beside the fields' own checks, so that a bad base_url does
        # not hide the instances' problems; crates/horde-plan (validate/target.rs) words them
        # the same.
        if not isinstance(data, dict):
            return handler(data)
        problems: list[Located] = []
        data = _check_connections(data, problems)
        data = _check_http_version(data, problems)
        problems += _source_address_problems(data)
        problems += _password_env_problems(data)
        problems += message_option_problems(data)
        if not isinstance(data.get("instances"), list):
            return with_problems(data, handler, problems, "Target", tuple(cls.model_fields))
        base_url = data.get("base_url")
        base = None
        seen: dict[tuple[str, int], str] = {}
        if isinstance(base_url, str) and cls._url_problem(base_url, "base_url") is None:
            base = urlsplit(base_url)
            seen[cls._address(base_url)] = "base_url"
        for index, url in enumerate(data["instances"]):
            if not isinstance(url, str):
                continue  # pydantic says it must be a string
            location = ("instances", index)
            problem = cls._url_problem(url, "an instance", location)
            if problem is not None:
                problems.append(problem)
                continue
            parts = urlsplit(url)
            if base is not None and parts.scheme != base.scheme:
                problems.append(
                    (
                        location,
                        url,
                        custom(
                            "instance_scheme",
                            f"'{url}' uses {parts.scheme}:// but base_url uses {base.scheme}://",
                            "the instances are one target behind one protocol; give each base_url's scheme",
                        ),
                    )
                )
                continue
            if base is not None and parts.path.rstrip("/") != base.path.rstrip("/"):
                problems.append(
                    (
                        location,
                        url,
                        custom(
                            "instance_prefix",
                            f"'{url}' has path prefix {cls._prefix(parts.path)} but base_url has "
                            f"{cls._prefix(base.path)}",
                            "instances differ only in host and port; give each base_url's path prefix",
                        ),
                    )
                )
                continue
            address = cls._address(url)
            if address in seen:
                problems.append(
                    (
                        location,
                        url,
                        custom(
                            "instance_duplicate",
                            f"'{url}' is the same instance as {seen[address]}",
                            "list each instance once (base_url is the first instance; a port left out is "
                            "the scheme's default)",
                        ),
                    )
                )
            else:
                seen[address] = f"instances[{index}]"
        return with_problems(data, handler, problems, "Target", tuple(cls.model_fields))

    @staticmethod
    def _address(url: str) -> tuple[str, int]:
        """An instance is its host and port: scheme and path prefix are base_url's anyway."""
        parts = urlsplit(url)
        default = 5432 if is_postgres_url(url) else 443 if parts.scheme == "https" else 80
        return (parts.hostname or "", parts.port or default)

    @staticmethod
    def _prefix(path: str) -> str:
        prefix = path.rstrip("/")
        return f"'{prefix}'" if prefix else "none"
