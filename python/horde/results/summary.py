"""The summary of a run: totals and exact percentiles over its whole duration, per step too.

The same code summarises a run as it ends and a stored run (``horde show``), so both give the
same numbers: percentiles come from the exact merge of every per-second histogram.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

from horde.engine import histogram
from horde.engine.snapshot import ErrorDetail, MessageCounts, Snapshot, StepSnapshot, merge_steps
from horde.results.littles_law import LittlesLaw, plan_shape
from horde.results.summary_blocks import (
    AutostopBlock,
    CapacityBlock,
    ClusterBlock,
    LittlesLawBlock,
    MonitorsBlock,
    OutputBlock,
    SightBlock,
    ThresholdVerdict,
)


class Latency(TypedDict):
    """Exact percentiles, maximum and mean of the responses' latencies, in ms (0 with none)."""

    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    mean: float


class MessageFigures(MessageCounts):
    """A message step's counts over the run, with the rates a second of those on the wire."""

    sent_per_s: float
    received_per_s: float
    datagrams_sent_per_s: float
    datagrams_received_per_s: float


class Figures(TypedDict):
    """What a step's seconds, or the run's requests, add up to."""

    requests: int
    errors: int
    error_percent: float
    errors_by_kind: dict[str, int]
    rps: float
    bytes_sent: int
    bytes_received: int
    #: Rows an sql step's statements returned or changed (absent for HTTP steps).
    rows: NotRequired[int]
    rows_per_s: NotRequired[float]
    #: With http_version "2" or "auto": requests by the protocol they went over (when any).
    http1: NotRequired[int]
    http2: NotRequired[int]
    #: Bodies held back over 100 ms by the server's HTTP/2 flow-control window (when any).
    h2_stalls: NotRequired[int]
    #: The requests the latency figures cover: those that got a response (any status).
    responses: int
    error_details: list[ErrorDetail]
    #: A message step's counts and their rates a second.
    messages: NotRequired[MessageFigures]
    latency_ms: Latency


class StepFigures(Figures):
    """A step's figures: ``kind`` is ``request``, ``group`` (a parallel group's pass) or ``sql``..."""

    kind: str


class CheckFigures(TypedDict):
    step: str
    check: str
    passes: int
    failures: int
    pass_percent: float


class GeneratorHealth(TypedDict):
    """The generator's sickest seconds: its CPU, late timers, seconds saturated and starved."""

    cpu_percent_max: float
    timer_lateness_p99_ms: float
    saturated_seconds: int
    starved_seconds: int
    run_delay_ms_max: float
    steal_percent_max: float


class SummaryBlocks(TypedDict, total=False):
    """The blocks judged as a run ends, which its seconds alone cannot give again: folded in by
    the run's observers (``control.observers``) and the command (``sight``, ``outputs``), and
    kept as stored when a stored run's summary is recomputed (:func:`with_stored_blocks`)."""

    thresholds: list[ThresholdVerdict]
    autostop: AutostopBlock
    #: A steering's answer, or a plain run's throughput asked a capacity question; with the
    #: monitors, what broke first beside it.
    capacity: CapacityBlock
    monitors: MonitorsBlock
    #: How a cluster run's load was spread over its generators.
    cluster: ClusterBlock
    sight: SightBlock
    #: What the push outputs (``--out``) delivered.
    outputs: list[OutputBlock]


#: The blocks' names, in the order a summary shows them.
STORED_BLOCKS: tuple[str, ...] = tuple(SummaryBlocks.__annotations__)


class Summary(Figures, SummaryBlocks):
    """A run's summary: the requests' figures over the whole run, each step's, the generator's
    health and the Little's-law check (:class:`SummaryBuilder`), then the blocks judged as it
    ended (:class:`SummaryBlocks`)."""

    run_id: str
    status: str
    duration_s: float
    iterations: int
    dropped_arrivals: int
    connections_opened: int
    connect_backoffs: int
    connect_backoff_s: float
    setup_failures: int
    checks: list[CheckFigures]
    peak_vus: int
    steps: dict[str, StepFigures]
    generator: GeneratorHealth
    littles_law: LittlesLawBlock


def with_stored_blocks(summary: Summary, stored: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Puts the blocks of a stored summary (``stored``, as the run's record keeps it) into
    ``summary``, recomputed from the run's seconds; returns the names of those it put.

    >>> summary = summarise([], run_id="r", status="finished")
    >>> with_stored_blocks(summary, {"capacity": {"max_rps": 10.0}, "requests": 99}), summary["requests"]
    (('capacity',), 0)
    """
    # What the store gives back is JSON; these keys were written from these blocks' types.
    kept = cast(SummaryBlocks, {key: stored[key] for key in STORED_BLOCKS if stored and key in stored})
    fold_blocks(summary, kept)
    return tuple(kept)


def fold_blocks(summary: Summary, blocks: SummaryBlocks) -> None:
    """``blocks`` put into ``summary`` (a block already there is replaced)."""
    # mypy takes only a TypedDict with every key of Summary for its update; SummaryBlocks'
    # keys are Summary's own, with the same types.
    summary.update(blocks)  # type: ignore[typeddict-item]


#: Above this share of one core per engine worker, the generator itself may be the bottleneck.
CPU_SATURATION_PERCENT_PER_WORKER = 90.0
#: Timers firing later than this (p99 of a second) mean the generator cannot keep its schedule.
TIMER_LATENESS_LIMIT_MS = 10.0
#: Late timers in a second where the process used less than this share of its CPU limit mean
#: the generator was not scheduled (starved: a busy or overcommitted machine, a hypervisor's
#: steal, a VM's timer hiccup), not that it had too much to do (saturated). A shared VM
#: overshoots a 1 ms sleep by 5-15 ms in most seconds with the generator almost idle.
STARVED_CPU_SHARE = 0.5

#: What a second says of the generator: it kept its schedule (``ok``); it used its CPU and fell
#: behind (``saturated``: more load would measure the generator, not the target); or it was not
#: scheduled (``starved``: that second's figures may carry the machine's delays, but the
#: generator has room to spare). The run's first second is start-up, never starved.
GENERATOR_OK, GENERATOR_SATURATED, GENERATOR_STARVED = "ok", "saturated", "starved"


def step_key(scenario: str, step: str, ambiguous: set[str]) -> str:
    """A step's name in summaries: its own name, or ``scenario/step`` when several scenarios
    have a step of that name."""
    return f"{scenario}/{step}" if step in ambiguous else step


#: A step that did nothing: the run's totals when it has no request step.
NOTHING: StepSnapshot = {
    "scenario": "",
    "step": "",
    "kind": "request",
    "requests": 0,
    "ok": 0,
    "errors": {},
    "bytes_sent": 0,
    "bytes_received": 0,
    "histogram": b"",
}


@dataclass
class _StepTotals:
    """A step's seconds so far, merged as they come by the engine's rules (:func:`merge_steps`:
    counts summed, histograms merged exactly)."""

    merged: StepSnapshot

    def add(self, entry: StepSnapshot) -> None:
        self.merged = merge_steps([self.merged, entry])

    @property
    def kind(self) -> str:
        return self.merged.get("kind", "request")


class SummaryBuilder:
    """Accumulates snapshots as they arrive (merging histograms as it goes, so memory stays
    flat however long the run) and produces the summary at any time."""

    def __init__(self, *, workers: int | None = None, plan: Mapping[str, Any] | None = None) -> None:
        """``plan``: the run's plan as stored; without it the Little's-law check is not known."""
        self._steps: dict[tuple[str, str], _StepTotals] = {}
        self.duration_s = 0.0
        self.iterations = 0
        self.dropped_arrivals = 0
        self.connections_opened = 0
        self.connect_backoffs = 0
        self.connect_backoff_s = 0.0
        self.setup_failures = 0
        self.cpu_percent_max = 0.0
        self.timer_lateness_p99_ms_max = 0.0
        self.saturated_seconds = 0
        self.starved_seconds = 0
        self.run_delay_ms_max = 0.0
        self.steal_percent_max = 0.0
        self.peak_vus = 0
        self._cpu_limit = CPU_SATURATION_PERCENT_PER_WORKER * (workers or _default_workers())
        self._littles_law = LittlesLaw(plan_shape(plan)) if plan is not None else None

    def add(self, snapshot: Snapshot) -> None:
        if self._littles_law is not None:
            self._littles_law.add(snapshot)
        for entry in snapshot["steps"]:
            key = (entry["scenario"], entry["step"])
            totals = self._steps.get(key)
            if totals is None:
                self._steps[key] = _StepTotals(entry)
            else:
                totals.add(entry)
        self.duration_s = max(self.duration_s, float(snapshot["elapsed_s"]))
        self.iterations += int(snapshot["iterations"])
        self.dropped_arrivals += int(snapshot["dropped_arrivals"])
        self.connections_opened += int(snapshot["connections_opened"])
        # Runs stored before the connect backoff have neither.
        self.connect_backoffs += int(snapshot.get("connect_backoffs") or 0)
        self.connect_backoff_s += float(snapshot.get("connect_backoff_s") or 0.0)
        self.setup_failures += int(snapshot.get("setup_failures") or 0)
        # Stores written before snapshots carried their interval's peak have only active_vus.
        self.peak_vus = max(self.peak_vus, int(snapshot.get("peak_vus", snapshot["active_vus"])))
        # The final interval is a few milliseconds of draining; its rates are noise.
        if not snapshot["final"]:
            cpu = float(snapshot["cpu_percent"])
            lateness = float(snapshot["timer_lateness_p99_ms"])
            self.cpu_percent_max = max(self.cpu_percent_max, cpu)
            self.timer_lateness_p99_ms_max = max(self.timer_lateness_p99_ms_max, lateness)
            self.run_delay_ms_max = max(self.run_delay_ms_max, float(snapshot.get("run_delay_ms") or 0.0))
            self.steal_percent_max = max(self.steal_percent_max, float(snapshot.get("steal_percent") or 0.0))
            state = generator_state(snapshot, self._cpu_limit)
            if state == GENERATOR_SATURATED:
                self.saturated_seconds += 1
            elif state == GENERATOR_STARVED:
                self.starved_seconds += 1

    def summary(self, *, run_id: str, status: str) -> Summary:
        names = [step for _, step in self._steps]
        ambiguous = {name for name in names if names.count(name) > 1}
        keyed = {step_key(scenario, step, ambiguous): totals for (scenario, step), totals in self._steps.items()}
        steps: dict[str, StepFigures] = {
            key: {"kind": totals.kind, **_figures(totals.merged, self.duration_s)} for key, totals in keyed.items()
        }
        # The run's totals count requests only: a group's pass is made of requests already
        # counted. Rows and checks are each step's own.
        requests_only = [totals.merged for totals in self._steps.values() if totals.kind == "request"]
        everything: StepSnapshot = {**merge_steps(requests_only), "rows": 0, "checks": []} if requests_only else NOTHING
        checks: list[CheckFigures] = [
            {
                "step": key,
                "check": check["check"],
                "passes": check["passes"],
                "failures": check["failures"],
                "pass_percent": round(100.0 * check["passes"] / (check["passes"] + check["failures"]), 2)
                if check["passes"] + check["failures"]
                else 0.0,
            }
            for key, totals in keyed.items()
            for check in totals.merged.get("checks") or []
        ]
        generator: GeneratorHealth = {
            "cpu_percent_max": round(self.cpu_percent_max, 1),
            "timer_lateness_p99_ms": round(self.timer_lateness_p99_ms_max, 3),
            "saturated_seconds": self.saturated_seconds,
            "starved_seconds": self.starved_seconds,
            "run_delay_ms_max": round(self.run_delay_ms_max, 3),
            "steal_percent_max": round(self.steal_percent_max, 2),
        }
        return {
            "run_id": run_id,
            "status": status,
            "duration_s": round(self.duration_s, 3),
            # The blocks judged as the run ends come later (mypy would have them in a ** item).
            **_figures(everything, self.duration_s),  # type: ignore[typeddict-item]
            "iterations": self.iterations,
            "dropped_arrivals": self.dropped_arrivals,
            "connections_opened": self.connections_opened,
            "connect_backoffs": self.connect_backoffs,
            "connect_backoff_s": round(self.connect_backoff_s, 3),
            "setup_failures": self.setup_failures,
            "checks": checks,
            "peak_vus": self.peak_vus,
            "steps": steps,
            "generator": generator,
            # Whether the VUs' time is all in the figures (a gap: something queued unmeasured).
            "littles_law": self._littles_law.block(generator)
            if self._littles_law is not None
            else {"consistent": None, "why": "not known: the run's plan was not read"},
        }


#: Error kinds of a request that failed before any connection was open (``sql_login_failed``:
#: PostgreSQL refused the login, a wrong password or no such database, so no session opened).
CONNECT_KINDS = ("refused", "connect", "no_route", "dns", "tls", "timeout", "sql_login_failed")


def no_connection(summary: Mapping[str, Any]) -> bool:
    """Whether requests were tried and not one connection could be opened (a target down, a
    wrong address, a refused certificate): the run has its own exit code.

    >>> no_connection({"requests": 5, "ok": 0, "connections_opened": 0, "errors_by_kind": {"refused": 5}})
    True
    >>> no_connection({"requests": 5, "ok": 0, "connections_opened": 0, "errors_by_kind": {"template_failed": 5}})
    False
    """
    requests = int(summary.get("requests") or 0)
    kinds = summary.get("errors_by_kind") or {}
    return (
        requests > 0
        and int(summary.get("connections_opened") or 0) == 0
        and requests == int(summary.get("errors") or requests)
        and any(kinds.get(kind) for kind in CONNECT_KINDS)
    )


#: Error kinds of a request that got no answer at all: no connection, or a connection on which
#: nothing came back before the request's timeout, the end of the run, or the connection's end.
NO_ANSWER_KINDS = (*CONNECT_KINDS, "cut", "reset", "io", "lost", "ws_closed")


def never_answered(summary: Mapping[str, Any]) -> bool:
    """Whether requests were tried and the target answered not one of them: no connection
    (:func:`no_connection`), or connections opened and not one response came back (a server
    that accepts and never answers, or answers a byte a second: its requests time out or are
    cut at the end). Both have the exit code 7. A response of any status is an answer.

    >>> never_answered({"requests": 4, "errors": 4, "responses": 0, "connections_opened": 4, "errors_by_kind": {"cut": 4}})
    True
    >>> never_answered({"requests": 4, "errors": 4, "responses": 4, "connections_opened": 4, "errors_by_kind": {"status_503": 4}})
    False
    >>> never_answered({"requests": 4, "errors": 4, "responses": 0, "connections_opened": 4, "errors_by_kind": {"template_failed": 4}})
    False

    A message target (``tcp://``, ``udp://``, ``kcp://``, ``ws://``) is judged by what came
    back: a message sent is sent whatever the peer, so its sends succeed against a closed port
    or a silent peer. Not one message received, while the steps that waited for one got nothing
    (refused by an ICMP port unreachable, lost, timed out), is a target that never answered:

    >>> silent = {"requests": 8, "errors": 4, "responses": 4, "connections_opened": 1, "errors_by_kind": {"lost": 4},
    ...           "messages": {"sent": 8, "received": 0, "datagrams_received": 0}}
    >>> never_answered(silent), never_answered({**silent, "messages": {"sent": 8, "received": 3, "datagrams_received": 3}})
    (True, False)
    """
    if no_connection(summary):
        return True
    requests = int(summary.get("requests") or 0)
    kinds = {kind for kind, count in (summary.get("errors_by_kind") or {}).items() if count}
    # A group's pass failed because its steps did: its own kind says nothing about the target.
    kinds.discard("step_failed")
    if not (requests > 0 and kinds and kinds <= set(NO_ANSWER_KINDS)):
        return False
    if _nothing_came_back(summary):
        return True
    return requests == int(summary.get("errors") or 0) and not int(summary.get("responses") or 0)


def _nothing_came_back(summary: Mapping[str, Any]) -> bool:
    """Whether a run against a message target sent messages and received not one, not even a
    datagram that its impaired network then dropped."""
    messages = summary.get("messages") or {}
    return (
        int(messages.get("sent") or 0) > 0
        and not int(messages.get("received") or 0)
        and not int(messages.get("datagrams_received") or 0)
    )


def nothing_completed(summary: Mapping[str, Any]) -> str | None:
    """The line a summary opens with when not one request succeeded (a dead, stalled or broken
    target; requests cut at the end of the grace period count as failed), else ``None``. When
    not one connection could be opened, it says so, with the first reason.

    >>> nothing_completed({"requests": 4, "errors": 4, "connections_opened": 0, "errors_by_kind": {"refused": 4},
    ...     "error_details": [{"kind": "refused", "message": "Connection refused (os error 111) to 127.0.0.1:1", "count": 4}]})
    'no connection could be opened: all 4 requests failed to connect (refused 4: Connection refused (os error 111) to 127.0.0.1:1)'

    >>> nothing_completed({"requests": 3, "errors": 3, "errors_by_kind": {"status_500": 3}, "responses": 3})
    'nothing completed: none of the 3 requests succeeded (status_500 3)'
    >>> nothing_completed({"requests": 3, "errors": 3, "errors_by_kind": {"cut": 3}, "connections_opened": 3})
    'the target never answered: 3 connections opened, not one of the 3 requests got a response (cut 3)'
    >>> nothing_completed({"requests": 0, "errors": 0, "errors_by_kind": {}})
    'nothing completed: not one request was sent'
    >>> nothing_completed({"requests": 5, "errors": 1, "errors_by_kind": {"timeout": 1}}) is None
    True

    A message target whose sends went out and from which nothing came back (its sends
    succeeded: a datagram or a line sent is sent whatever the peer):

    >>> nothing_completed({"requests": 6, "errors": 3, "errors_by_kind": {"refused": 3}, "connections_opened": 3,
    ...     "messages": {"sent": 3, "received": 0, "datagrams_received": 0},
    ...     "error_details": [{"kind": "refused", "message": "udp://127.0.0.1:9 is closed: an ICMP port unreachable came back", "count": 3}]})
    'the target never answered: 3 messages sent, not one came back (refused 3: udp://127.0.0.1:9 is closed: an ICMP port unreachable came back)'
    """
    requests, errors = int(summary.get("requests") or 0), int(summary.get("errors") or 0)
    if requests and errors < requests:
        if never_answered(summary):
            sent = int((summary.get("messages") or {}).get("sent") or 0)
            return f"the target never answered: {sent:,} message{'s' if sent != 1 else ''} sent, not one came back ({_first_reason(summary)})"
        return None
    if not requests:
        return "nothing completed: not one request was sent"
    if no_connection(summary):
        return f"no connection could be opened: all {requests:,} requests failed to connect ({_first_reason(summary)})"
    kinds = sorted((summary.get("errors_by_kind") or {}).items(), key=lambda item: (-int(item[1]), item[0]))
    why = ", ".join(f"{kind} {count:,}" for kind, count in kinds[:4]) + (", ..." if len(kinds) > 4 else "")
    if never_answered(summary):
        opened = int(summary.get("connections_opened") or 0)
        return (
            f"the target never answered: {opened:,} connection{'s' if opened != 1 else ''} opened, "
            f"not one of the {requests:,} requests got a response ({why})"
        )
    return f"nothing completed: none of the {requests:,} requests succeeded ({why})"


def _first_reason(summary: Mapping[str, Any]) -> str:
    """The commonest error kind, its count and its first message in words."""
    kinds = sorted((summary.get("errors_by_kind") or {}).items(), key=lambda item: (-int(item[1]), item[0]))
    kind, count = kinds[0]
    first = next((detail["message"] for detail in summary.get("error_details") or [] if detail["kind"] == kind), None)
    return f"{kind} {count:,}{': ' + first if first else ''}"


def generator_state(snapshot: Snapshot, cpu_limit_percent: float) -> str:
    """``ok``, ``saturated`` or ``starved`` (see :data:`GENERATOR_OK`): saturated when the
    process used its CPU, or its timers were late while it used at least half of it; starved
    when its timers were late while it used little CPU (it was waiting to run, not running).

    >>> second = {"second": 5, "cpu_percent": 4.0, "timer_lateness_p99_ms": 27.0}
    >>> generator_state(second, 180.0), generator_state({**second, "cpu_percent": 175.0}, 180.0)
    ('starved', 'saturated')
    >>> generator_state({**second, "timer_lateness_p99_ms": 2.0}, 180.0), generator_state({**second, "second": 1}, 180.0)
    ('ok', 'ok')
    """
    cpu = float(snapshot["cpu_percent"])
    if cpu >= cpu_limit_percent:
        return GENERATOR_SATURATED
    if float(snapshot["timer_lateness_p99_ms"]) <= TIMER_LATENESS_LIMIT_MS:
        return GENERATOR_OK
    if cpu >= STARVED_CPU_SHARE * cpu_limit_percent:
        return GENERATOR_SATURATED
    # Start-up (threads, connections, the first timers) is late once, whatever the machine.
    return GENERATOR_OK if int(snapshot.get("second", 0)) <= 1 else GENERATOR_STARVED


def is_generator_saturated(snapshot: Snapshot, cpu_limit_percent: float) -> bool:
    """Whether, in this second, the generator itself was likely the bottleneck (it used its CPU
    and fell behind); a starved second is not (see :func:`generator_state`)."""
    return generator_state(snapshot, cpu_limit_percent) == GENERATOR_SATURATED


def _default_workers() -> int:
    import os

    return os.cpu_count() or 1


def _figures(totals: StepSnapshot, duration_s: float) -> Figures:
    latency = histogram.stats(totals["histogram"]) if totals["histogram"] else None
    if latency is not None and not latency.count:
        latency = None
    requests = int(totals["requests"])
    errors = requests - int(totals["ok"])
    figures: Figures = {
        "requests": requests,
        "errors": errors,
        "error_percent": round(100.0 * errors / requests, 3) if requests else 0.0,
        "errors_by_kind": dict(sorted(totals["errors"].items())),
        "rps": round(requests / duration_s, 3) if duration_s > 0 else 0.0,
        "bytes_sent": totals["bytes_sent"],
        "bytes_received": totals["bytes_received"],
        # Requests that got no response (refused, reset, timeout, cut...) are counted, never timed.
        "responses": latency.count if latency else 0,
        "error_details": sorted(
            totals.get("error_details") or [], key=lambda detail: (-detail["count"], detail["kind"])
        ),
        "latency_ms": {
            "p50": latency.percentile(50.0) if latency else 0.0,
            "p90": latency.percentile(90.0) if latency else 0.0,
            "p95": latency.percentile(95.0) if latency else 0.0,
            "p99": latency.percentile(99.0) if latency else 0.0,
            "max": latency.max_ms if latency else 0.0,
            "mean": round(latency.mean_ms, 3) if latency else 0.0,
        },
    }
    # The counts a step has only where they apply (rows of sql steps, the protocols of an
    # "auto" target, HTTP/2 stalls, a message step's counts) are left out where they are 0.
    rows = totals.get("rows", 0)
    if rows:
        figures["rows"] = rows
        figures["rows_per_s"] = round(rows / duration_s, 3) if duration_s > 0 else 0.0
    http1, http2, h2_stalls = totals.get("http1", 0), totals.get("http2", 0), totals.get("h2_stalls", 0)
    if http1:
        figures["http1"] = http1
    if http2:
        figures["http2"] = http2
    if h2_stalls:
        figures["h2_stalls"] = h2_stalls
    messages = totals.get("messages")
    if messages:
        figures["messages"] = _message_figures(messages, duration_s)
    return figures


def _message_figures(counts: MessageCounts, duration_s: float) -> MessageFigures:
    """A message step's counts with their rates (messages and datagrams a second).

    >>> _message_figures({"sent": 20, "received": 10, "datagrams_sent": 20, "datagrams_received": 10, "late": 0}, 10.0)["sent_per_s"]
    2.0
    """

    def rate(count: int) -> float:
        return round(count / duration_s, 3) if duration_s > 0 else 0.0

    return {
        **counts,
        "sent_per_s": rate(counts["sent"]),
        "received_per_s": rate(counts["received"]),
        "datagrams_sent_per_s": rate(counts["datagrams_sent"]),
        "datagrams_received_per_s": rate(counts["datagrams_received"]),
    }


def summarise(
    snapshots: Iterable[Snapshot],
    *,
    run_id: str,
    status: str,
    workers: int | None = None,
    plan: Mapping[str, Any] | None = None,
) -> Summary:
    """The summary of a complete list of snapshots (``horde show`` uses this on stored runs);
    ``plan`` (the plan as stored) lets it check the run by Little's law."""
    builder = SummaryBuilder(workers=workers, plan=plan)
    for snapshot in snapshots:
        builder.add(snapshot)
    return builder.summary(run_id=run_id, status=status)
