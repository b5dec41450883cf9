"""The snapshot: one interval (normally one second) of a run's merged metrics, as the engine hands
it to the control plane (``Run.poll``) and as a cluster's coordinator merges its generators'.

It is the second contract between Python and the engine, beside the plan: ARCHITECTURE.md
describes it field by field, ``crates/horde-engine/src/snapshot.rs`` builds it. Latencies travel
as HDR V2 histograms (microseconds, 3 significant digits), never as averaged percentiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict, cast

from horde import _engine


class ErrorDetail(TypedDict):
    """One distinct message of an error kind: ``refused``, ``Connection refused (os error 111)
    to 127.0.0.1:1``, and how many failures carried it."""

    kind: str
    message: str
    count: int


class CheckCount(TypedDict):
    """One check of a step (``status in [200]``, ``json $.ok == true``): passes and failures."""

    check: str
    passes: int
    failures: int


class CheckJudged(TypedDict):
    """One check of a recorded exchange: in words, whether it passed, and why not (expected and
    found)."""

    check: str
    passed: bool
    why: str | None


class ExchangeVar(TypedDict):
    """A variable the step extracts, with its value after the step (None: unset)."""

    name: str
    value: str | None


class Exchange(TypedDict):
    """One exchange recorded in full (``horde run --debug N``, ``horde try``): bounded (heads at
    8 KiB, bodies at 2 KiB) and with credentials already redacted by the engine."""

    scenario: str
    step: str
    phase: str  # "setup", "steps" or "teardown"
    transport: str  # "http", "sql" or "message"
    vu: int
    iteration: int
    started_s: float  # since the run's time zero
    request: str  # HTTP: request line and headers; SQL: the statements with their parameters
    request_body: str
    request_body_bytes: int
    response: str  # HTTP: status line and headers; SQL: the rows and the first row kept
    response_body: str
    response_body_truncated: bool
    status: int | None
    latency_us: int
    outcome: str  # "ok" or the error kind (status_401, check_failed, refused...)
    detail: str | None  # why it failed, as the error details say it
    checks: list[CheckJudged]
    vars: list[ExchangeVar]


class MessageCounts(TypedDict):
    """A message step's traffic over the interval (``tcp://``, ``udp://`` targets): messages sent
    and received; datagrams put on and taken off the wire (UDP, KCP; with an impaired network,
    lost ones are not sent and duplicates are sent twice); replies to pings already counted
    lost; KCP's data segments sent again."""

    sent: int
    received: int
    datagrams_sent: int
    datagrams_received: int
    late: int
    retransmitted: NotRequired[int]


#: The counters of :class:`MessageCounts`, in order.
MESSAGE_COUNTERS: tuple[str, ...] = tuple(MessageCounts.__annotations__)


class StepSnapshot(TypedDict):
    """One step's (or group's) outcomes over the interval."""

    scenario: str
    step: str
    kind: str  # "request", or "group" (one pass through the group, timed whole)
    requests: int
    ok: int
    errors: dict[str, int]  # error kind -> count; requests = ok + sum(errors)
    bytes_sent: int
    bytes_received: int
    # Rows returned or changed by an ``sql`` step's statements: present when there were any.
    rows: NotRequired[int]
    # With http_version "2" or "auto": the requests sent over HTTP/1.1 and over HTTP/2, each
    # present when there were any (a request that reached no connection is in neither).
    http1: NotRequired[int]
    http2: NotRequired[int]
    # Requests over HTTP/2 whose body waited over 100 ms for the server's flow-control window
    # (counted, not an error): present when there were any.
    h2_stalls: NotRequired[int]
    histogram: bytes  # latency as felt: from an open-model arrival's intended start
    # Present when some request was timed from an intended start: the same requests' latency
    # from their actual send (what the target took).
    from_send_histogram: NotRequired[bytes]
    # The first distinct messages of each error kind, counted (at most 8 per kind, 200 bytes
    # each): present when something failed.
    error_details: NotRequired[list[ErrorDetail]]
    # Each check of the step in words, with its passes and failures: present when it has checks.
    checks: NotRequired[list[CheckCount]]
    # A message step's messages and datagrams: present when it moved any.
    messages: NotRequired[MessageCounts]


class MonitorLatest(TypedDict):
    """A monitor's latest sample, as the conductor hands it to the sinks: the second it covers,
    its figures (``cpu.busy_percent``... per second for rates), or ``None`` and the gap's reason."""

    second: int
    values: dict[str, float] | None
    error: str | None


class Snapshot(TypedDict):
    """One interval of a run. ``second`` is 1-based and covers (second-1, second] since start;
    the last snapshot may be shorter and has ``final`` set."""

    second: int
    elapsed_s: float
    interval_s: float
    timestamp: float
    final: bool
    steps: list[StepSnapshot]
    active_vus: int  # VUs alive at the end of the interval
    peak_vus: int  # the most VUs alive at once during the interval
    busy_vus: int  # VUs inside an iteration at the end of the interval
    iterations: int
    dropped_arrivals: int  # open model: arrivals that found no free VU
    connections_opened: int
    # Pauses VUs took after a failed connect (``target.connect_backoff``) and their time summed
    # over VUs; absent from runs stored before the backoff existed.
    connect_backoffs: NotRequired[int]
    connect_backoff_s: NotRequired[float]
    # VUs whose setup failed (each VU counted once); absent from runs stored before it existed.
    setup_failures: NotRequired[int]
    target_vus: int | None  # what the workload model asked for at the end of the interval
    target_rate_per_s: float | None  # open model only
    cpu_percent: float  # the generator's CPU over the interval (100 = one core)
    timer_lateness_p99_ms: float
    timer_lateness_max_ms: float
    run_delay_ms: float  # time its threads waited for a CPU (Linux schedstat)
    steal_percent: float  # the machine's CPU time taken by its hypervisor
    # A cluster run's merged snapshot adds each generator's figures and the share lost with
    # lost generators (:mod:`horde.cluster.merge`).
    generators: NotRequired[list[dict[str, Any]]]
    lost_share: NotRequired[float]
    # What the conductor adds for its sinks while a steering runs: its phase, step, level, last verdict.
    steering: NotRequired[dict[str, Any]]
    # What the conductor adds for its sinks while monitors run: each monitor's latest sample
    # (:mod:`horde.control.watching`); never from the engine, never stored with the snapshot.
    monitors: NotRequired[dict[str, MonitorLatest]]
    # Exchanges recorded in full during the interval, when the run records them (``--debug``);
    # ``Run.poll`` takes them off and hands them to its ``on_exchanges`` before anything else
    # (the store, the sinks) sees the snapshot.
    exchanges: NotRequired[list[Exchange]]


#: The keys of :class:`Snapshot` that Python adds, never the engine: a cluster's merge, and
#: what the conductor shows its sinks. Every other key is one of the engine's own snapshot
#: fields (``crates/horde-engine/src/snapshot.rs``; tests/test_snapshot_contract.py compares them).
ADDED_IN_PYTHON = frozenset({"generators", "lost_share", "steering", "monitors"})
#: Keys the engine sends only when they hold something (a step's optional counters, details,
#: checks and messages; a second's recorded exchanges).
SENT_WHEN_SET = frozenset(
    {"exchanges", "rows", "http1", "http2", "h2_stalls", "from_send_histogram", "error_details", "checks", "messages"}
)


def merge_steps(parts: Sequence[StepSnapshot]) -> StepSnapshot:
    """Several snapshots of one step as one, by the engine's rules (``StepSnapshot::merge``):
    counters summed; errors, checks and error details added up by kind, check and message in
    the order they first occurred, at most 8 distinct messages per kind; histograms merged
    exactly. The name and kind are the first part's.

    >>> part = {"scenario": "s", "step": "get", "kind": "request", "requests": 2, "ok": 1,
    ...         "errors": {"refused": 1}, "bytes_sent": 10, "bytes_received": 0, "histogram": b"",
    ...         "error_details": [{"kind": "refused", "message": "m", "count": 1}]}
    >>> merged = merge_steps([part, part])
    >>> merged["requests"], merged["errors"], merged["error_details"]
    (4, {'refused': 2}, [{'kind': 'refused', 'message': 'm', 'count': 2}])
    """
    return cast(StepSnapshot, _engine.merge_steps(list(parts)))


def merge_seconds(parts: Sequence[Snapshot], *, final: bool) -> Snapshot:
    """Several generators' snapshots of one second as the run's, by the engine's rules
    (``Snapshot::merge_generators``): steps merged as :func:`merge_steps` does; counts summed;
    the interval and clock the longest; the level asked for the first generator's (each
    reports the plan's); CPU, timer lateness, run delay and steal the sickest generator's (one
    saturated generator distorts the run). Keys Python adds (:data:`ADDED_IN_PYTHON`) are
    left out; the caller adds its own."""
    return cast(Snapshot, _engine.merge_seconds(list(parts), final))
