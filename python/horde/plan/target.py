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

import os
from typing import Any, Literal, Union

from pydantic import BaseModel, Field, ValidationError, ValidatorFunctionWrapHandler, model_validator

from horde.plan.message import Framing, KcpOptions
from horde.plan.build_rules import target_problems
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
from horde.plan.common import (
    MAX_TIMEOUT_MS,
    STRICT_KEYS,
    Located,
    custom,
    merged,
    raise_located,
    with_problems,
)


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
    """``http_version`` read as YAML writes it (``2`` and ``1.1`` unquoted are numbers), and a
    value that is no HTTP version told once (pydantic's Literal error would not say what to
    write); a bad value is then left out so that it is reported once. Whether the version suits
    the rest of the target is the engine's rule (``target_problems``)."""
    if "http_version" not in data:
        return data
    value = data["http_version"]
    text = (
        {2: "2", 1.1: "1.1"}.get(value, value)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else value
    )
    if text in ("1.1", "2", "auto"):
        return {**data, "http_version": text}
    problem = custom(
        "http_version",
        f"{_describe(value)} is not an HTTP version",
        "write http_version: '1.1' (the default), '2' (h2c for http://, h2 required over TLS) "
        "or auto (ALPN over TLS offers h2 and http/1.1)",
    )
    problems.append((("http_version",), value, problem))
    return {key: item for key, item in data.items() if key != "http_version"}


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

    @model_validator(mode="wrap")
    @classmethod
    def _check_target(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """The forms pydantic's own messages would garble (connections' union, http_version as
        YAML writes it), told once each, and whether password_env is set where horde runs; then
        the engine's rules on the target, asked (horde-plan's ``target_problems``: its URLs
        of any protocol, its instances, source addresses, and options against its protocol).
        A value of the wrong type hides none of the engine's problems with the others."""
        if not isinstance(data, dict):
            return handler(data)
        problems: list[Located] = []
        data = _check_connections(data, problems)
        data = _check_http_version(data, problems)
        problems += _password_env_problems(data)
        order = tuple(cls.model_fields)
        try:
            target = with_problems(data, handler, problems, "Target", order)
        except ValidationError as error:
            asked = _asked_beside(data, handler, error)
            if not asked:
                raise
            raise merged(error, asked, order) from None
        asked = target_problems(target.model_dump_json(by_alias=True))
        if asked:
            raise_located("Target", asked)
        return target


def _asked_beside(data: dict[str, Any], handler: ValidatorFunctionWrapHandler, error: ValidationError) -> list[Located]:
    """The engine's problems of a target some of whose values pydantic refused: those values left
    out (a list's refused items dropped, the others' places kept), the engine asked about the
    rest. None when base_url itself was refused (every other URL is judged against it)."""
    refused: dict[str, set[int] | None] = {}
    for line in error.errors():
        loc = line["loc"]
        if not loc:
            return []
        key = str(loc[0])
        if len(loc) > 1 and isinstance(loc[1], int) and isinstance(data.get(key), list):
            indices = refused.setdefault(key, set())
            if indices is not None:
                indices.add(loc[1])
        else:
            refused[key] = None
    if "base_url" in refused:
        return []
    partial: dict[str, Any] = {}
    places: dict[str, list[int]] = {}
    for key, value in data.items():
        if key not in refused:
            partial[key] = value
        elif (indices := refused[key]) is not None:
            places[key] = [index for index in range(len(value)) if index not in indices]
            partial[key] = [value[index] for index in places[key]]
    try:
        rest = handler(partial)
    except ValidationError:
        return []
    located: list[Located] = []
    for loc, value, kind in target_problems(rest.model_dump_json(by_alias=True)):
        key = str(loc[0])
        if key in refused and refused[key] is None:
            continue  # about the default that stood in for a refused value
        if key in places and len(loc) > 1 and isinstance(loc[1], int):
            loc = (loc[0], places[key][loc[1]], *loc[2:])
        located.append((loc, value, kind))
    return located
