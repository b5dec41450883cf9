"""The message transports' part of the plan: raw TCP, UDP and KCP gateways (game servers, brokers)
and WebSockets.

A plan whose ``target.base_url`` is ``tcp://host:port``, ``udp://host:port`` or ``kcp://host:port``
(reliable messages over UDP, ``ikcp.c``'s protocol, its knobs in ``target.kcp``), or
``ws://host[:port][/path]`` / ``wss://...`` (WebSocket, over TLS for wss) runs message steps:
``connect``, ``send``, ``receive``, ``ping``, ``stream`` and ``close``. Over TCP ``target.framing``
cuts the byte stream into messages; over UDP a datagram is a message, and a scenario's
``network`` impairs the engine's own datagrams both ways (delay, jitter, loss, duplicates,
reordering, a rate limit); over a WebSocket a data frame is a
message, ``connect`` is the HTTP/1.1 upgrade (its ``path`` and ``headers``, the VU's cookies),
and http steps may go beside the message steps to the same host (a login before the upgrade).
``{{ seq }}`` in a message template is the VU's message number. crates/horde-plan
(``message.rs``, ``validate/message.rs``) holds the same model and checks.

>>> step = PingStep.model_validate({"type": "ping", "name": "rtt", "timeout_ms": 500})
>>> step.text, step.reply_seq, step.timeout_ms
('ping {{ seq }}', '(\\\\d+)', 500.0)
>>> StreamStep.model_validate({"type": "stream", "name": "move", "text": "move {{ seq }}",
...     "per_second": 10, "duration_ms": 1000}).per_second
10.0
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, field_validator

from horde.plan.common import (
    MAX_TIMEOUT_MS,
    STRICT_KEYS,
    TAGGED,
    THINK_TIME_DESCRIPTION,
    ThinkTime,
    check_json_value,
    custom,
)
from horde.plan.rules import Check, Extractor

__all__ = [
    "MESSAGE_SCHEMES",
    "WEBSOCKET_SCHEMES",
    "CloseStep",
    "ConnectStep",
    "KcpOptions",
    "LengthFraming",
    "Network",
    "NewlineFraming",
    "PingStep",
    "RawFraming",
    "ReceiveStep",
    "SendStep",
    "StreamStep",
    "is_message_url",
    "is_websocket_url",
]

#: The schemes of a message target.
MESSAGE_SCHEMES = ("tcp", "udp", "kcp", "ws", "wss")
#: The schemes of a WebSocket target.
WEBSOCKET_SCHEMES = ("ws", "wss")


def is_message_url(url: str) -> bool:
    """Whether a base URL names a TCP or UDP gateway.

    >>> is_message_url("udp://127.0.0.1:7000"), is_message_url("http://h")
    (True, False)
    """
    return url.startswith(tuple(f"{scheme}://" for scheme in MESSAGE_SCHEMES))


def is_websocket_url(url: str) -> bool:
    """Whether a base URL names a WebSocket.

    >>> is_websocket_url("wss://h/ws"), is_websocket_url("tcp://h:1")
    (True, False)
    """
    return url.startswith(("ws://", "wss://"))


class NewlineFraming(BaseModel):
    """Each message ends with a line break (the default framing of a tcp:// target)."""

    model_config = TAGGED

    type: Literal["newline"] = Field(default="newline", description="this framing: 'newline'")


class LengthFraming(BaseModel):
    """Each message is preceded by its length in 1, 2 or 4 bytes."""

    model_config = TAGGED

    type: Literal["length"] = Field(default="length", description="this framing: 'length'")
    bytes: Literal[1, 2, 4] = Field(description="the length field's size: 1, 2 or 4 bytes")
    endian: Literal["big", "little"] = Field(
        default="big", description="the field's byte order: 'big' (default) or 'little'"
    )
    adjust: int = Field(
        default=0,
        ge=-(2**31),
        le=2**31,
        description="added to the payload's length in the field, e.g. 2 when a 2-byte field counts itself",
    )


class RawFraming(BaseModel):
    """No framing: each read is a message, each send written as is."""

    model_config = TAGGED

    type: Literal["raw"] = Field(default="raw", description="this framing: 'raw'")


Framing = Annotated[Union[NewlineFraming, LengthFraming, RawFraming], Field(discriminator="type")]


# --- KCP's knobs (target.kcp) --------------------------------------------------------------------


class KcpOptions(BaseModel):
    """A ``kcp://`` target's KCP knobs, with ``ikcp.c``'s defaults (its fast mode: nodelay true,
    interval_ms 10, resend 2, no_congestion_window true)."""

    model_config = STRICT_KEYS

    conv: int | None = Field(
        default=None,
        ge=0,
        le=2**32 - 1,
        description="the conversation id; each VU its own (its number + 1) when left out",
    )
    nodelay: bool = Field(default=False, description="no exponential RTO backoff and a 30 ms minimum RTO")
    interval_ms: int = Field(default=100, ge=10, le=5000, description="KCP's internal update interval")
    resend: int = Field(default=0, ge=0, le=100, description="fast resend after this many duplicate ACKs (0: off)")
    no_congestion_window: bool = Field(default=False, description="turn the congestion window off")
    send_window: int = Field(default=32, ge=1, le=65535, description="the send window, in segments")
    receive_window: int = Field(default=128, ge=1, le=65535, description="the receive window, in segments")
    mtu: int = Field(default=1400, ge=50, le=65000, description="the largest datagram KCP writes")


# --- the impaired network (scenario.network) ------------------------------------------------------


class Network(BaseModel):
    """The impaired network the engine puts a scenario's UDP datagrams through, each way."""

    model_config = STRICT_KEYS

    delay_ms: float = Field(default=0, ge=0, le=MAX_TIMEOUT_MS, description="added to every datagram, each way")
    jitter_ms: float = Field(default=0, ge=0, le=MAX_TIMEOUT_MS, description="each delay drawn in delay_ms ± jitter_ms")
    loss_percent: float = Field(default=0, ge=0, le=100, description="the share of datagrams dropped, each way")
    duplicate_percent: float = Field(default=0, ge=0, le=100, description="the share of datagrams sent twice")
    reorder_percent: float = Field(
        default=0,
        ge=0,
        le=100,
        description="the share of datagrams held back one more delay + jitter (at least 1 ms) so later ones overtake them",
    )
    # A number or a text with a unit: its forms and bounds are horde-plan's (RateLimit).
    rate_limit: float | str | None = Field(
        default=None,
        description="the link's bytes a second each way, a token bucket: a number (bytes/s) or a string such as '1mbit', "
        "'500kbit', '125kB/s' (bit, kbit, mbit, gbit: bits/s; B, kB, MB, GB: bytes/s; k, M, G powers of 1000); "
        "datagrams that would wait more than 100 ms for it are dropped",
    )
    seed: int = Field(default=1, ge=0, le=2**64 - 1, description="the draws' seed: same seed, same impairment")

    @field_validator("rate_limit", mode="before")
    @classmethod
    def _no_bool(cls, value: Any) -> Any:
        # pydantic would read true as the number 1: a rate is a number or a text, never true/false.
        if isinstance(value, bool):
            raise custom(
                "rate_limit", f"{value!r} is not a rate", "e.g. rate_limit: 1mbit, or a number of bytes a second"
            )
        return value


class ConnectStep(BaseModel):
    """Opens the VU's connection (TCP) or socket (UDP), or upgrades to a WebSocket (ws://, wss://);
    its time is the step's latency."""

    model_config = STRICT_KEYS

    type: Literal["connect"] = Field(default="connect", description="this step: 'connect' (a message target)")
    name: str = Field(min_length=1, description="the step's name, unique in its scenario")
    path: str | None = Field(
        default=None,
        description="a WebSocket's upgrade path, starting with '/', joined to target.base_url's path; a template, "
        "its query included, e.g. '/ws/rooms/{{ room }}'; base_url's path alone when left out",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="a WebSocket's upgrade request headers (templates), after the target's and the scenario's; "
        "the VU's cookies go with them",
    )
    think_time: ThinkTime | None = Field(
        default=None, description=f"the pause after this step: {THINK_TIME_DESCRIPTION}"
    )


class SendStep(BaseModel):
    """Sends one message (connecting first when the VU has no connection)."""

    model_config = STRICT_KEYS

    type: Literal["send"] = Field(default="send", description="this step: 'send'")
    name: str = Field(min_length=1, description="the step's name, unique in its scenario")
    text: str | None = Field(
        default=None, description="the message as text, a template ({{ seq }}: the message number)"
    )
    hex: str | None = Field(default=None, description="the message as bytes in hex, e.g. '0a0b'; a template")
    base64: str | None = Field(default=None, description="the message as bytes in base64; a template")
    json_: Any = Field(default=None, alias="json", description="the message as JSON whose strings are templates")
    think_time: ThinkTime | None = Field(
        default=None, description=f"the pause after this step: {THINK_TIME_DESCRIPTION}"
    )

    @field_validator("json_")
    @classmethod
    def _check_json(cls, value: Any) -> Any:
        return check_json_value(value)


class ReceiveStep(BaseModel):
    """Waits for the first message that matches; those before it are counted and skipped."""

    model_config = STRICT_KEYS

    type: Literal["receive"] = Field(default="receive", description="this step: 'receive'")
    name: str = Field(min_length=1, description="the step's name, unique in its scenario")
    match: str | None = Field(default=None, min_length=1, description="a regular expression the message must match")
    json_path: str | None = Field(
        default=None, min_length=1, description="a JSONPath that must find something in the message"
    )
    timeout_ms: float = Field(
        default=5000, gt=0, le=MAX_TIMEOUT_MS, description="how long to wait; past it the step is a timeout"
    )
    extract: list[Extractor] = Field(
        default_factory=list, description="values taken from the message: from json or regex"
    )
    checks: list[Check] = Field(
        default_factory=list, description="conditions on the message: json, body_contains, body_matches"
    )
    on_check_failure: Literal["continue", "end_iteration"] = Field(
        default="continue",
        description="what a failed check does next: 'continue' (default) or 'end_iteration'",
    )
    think_time: ThinkTime | None = Field(
        default=None, description=f"the pause after this step: {THINK_TIME_DESCRIPTION}"
    )


class PingStep(BaseModel):
    """Sends a numbered message and times the reply carrying the same number (lost past a timeout)."""

    model_config = STRICT_KEYS

    type: Literal["ping"] = Field(default="ping", description="this step: 'ping'")
    name: str = Field(min_length=1, description="the step's name, unique in its scenario")
    text: str = Field(default="ping {{ seq }}", description="the message, carrying {{ seq }}: its number")
    reply_seq: str = Field(
        default=r"(\d+)",
        description="a regular expression whose first group is a reply's number; the reply with the ping's number ends the step",
    )
    timeout_ms: float = Field(default=1000, gt=0, le=MAX_TIMEOUT_MS, description="past it, the ping counts as lost")
    control_frame: bool = Field(
        default=False,
        description="a ws:// or wss:// target: the ping goes as a WebSocket ping control frame (its payload the text, "
        "at most 125 bytes) and the pong carrying its number ends it: the server's WebSocket stack answers, not its application",
    )
    think_time: ThinkTime | None = Field(
        default=None, description=f"the pause after this step: {THINK_TIME_DESCRIPTION}"
    )


class StreamStep(BaseModel):
    """Sends a message every N ms (or N a second) for a duration, reading meanwhile."""

    model_config = STRICT_KEYS

    type: Literal["stream"] = Field(default="stream", description="this step: 'stream'")
    name: str = Field(min_length=1, description="the step's name, unique in its scenario")
    text: str | None = Field(default=None, description="each message as text, a template ({{ seq }}: its number)")
    hex: str | None = Field(default=None, description="each message as bytes in hex; a template")
    base64: str | None = Field(default=None, description="each message as bytes in base64; a template")
    json_: Any = Field(default=None, alias="json", description="each message as JSON whose strings are templates")
    every_ms: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_MS, description="the interval between sends")
    per_second: float | None = Field(default=None, gt=0, le=1_000_000, description="or: sends a second")
    duration_ms: float = Field(gt=0, le=MAX_TIMEOUT_MS, description="how long the stream lasts")
    think_time: ThinkTime | None = Field(
        default=None, description=f"the pause after this step: {THINK_TIME_DESCRIPTION}"
    )

    @field_validator("json_")
    @classmethod
    def _check_json(cls, value: Any) -> Any:
        return check_json_value(value)


class CloseStep(BaseModel):
    """Closes the VU's connection; the next message step opens a new one."""

    model_config = TAGGED

    type: Literal["close"] = Field(default="close", description="this step: 'close'")
