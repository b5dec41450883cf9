"""The snapshot: one interval (normally one second) of a run's merged metrics, as the engine hands
it to the control plane (``Run.poll``) and as a cluster's coordinator merges its generators'.

It is the second contract between Python and the engine, beside the plan: ARCHITECTURE.md
describes it field by field, ``crates/horde-engine/src/snapshot.rs`` builds it. Latencies travel
as HDR V2 histograms (microseconds, 3 significant digits), never as averaged percentiles.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


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
    histogram: bytes  # latency as felt: from an open-model arrival's intended start
    # Present when some request was timed from an intended start: the same requests' latency
    # from their actual send (what the target took).
    from_send_histogram: NotRequired[bytes]


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
