"""A run's figures for Prometheus (and through it Grafana), served while the run goes (a sink).

:class:`PrometheusExporter` is one of the conductor's sinks: it takes each snapshot, keeps the run's
totals and the last second's figures, and serves them at ``http://HOST:PORT/metrics`` in the
Prometheus text exposition format 0.0.4 (written by prometheus-client) from a thread of its own.
:class:`RunFigures` folds the same snapshots into the same :class:`Family` list for the push
outputs (:mod:`horde.sinks.push`). ``update()`` never waits for a
scrape: it folds the snapshot's counters and quantiles into a new state outside any lock and
only swaps a reference (and queues the snapshot's histograms) under the lock; a scrape takes the
state and the queued histograms under the same lock, then decodes and renders outside it.

Every series carries the labels ``run`` and ``plan`` and one per tag of the run (:func:`run_labels`); per-step series add ``scenario``, ``step``
and ``step_kind`` (``request``, or ``group``: a group's pass, made of requests already counted,
so ``step_kind="request"`` selects each request once). Names (see ``examples/grafana/``):

- counters since the run started: ``horde_requests_total``, ``horde_ok_responses_total``,
  ``horde_errors_total`` (``kind``: the error kind), ``horde_sent_bytes_total``,
  ``horde_received_bytes_total`` (per step), ``horde_messages_total`` (message steps; label
  ``counter``: sent, received, datagrams_sent, datagrams_received, late, retransmitted);
  ``horde_iterations_total``,
  ``horde_dropped_arrivals_total``, ``horde_connections_opened_total`` (the run's);
- gauges: ``horde_active_vus``, ``horde_busy_vus``, ``horde_target_vus``,
  ``horde_target_rate_per_second`` (open model only), ``horde_generator_cpu_percent``,
  ``horde_timer_lateness_p99_seconds``, ``horde_generator_saturated`` and
  ``horde_generator_starved`` (0 or 1),
  ``horde_step_requests_per_second``, ``horde_step_latency_quantile_seconds`` and
  ``horde_latency_quantile_seconds`` (all requests) with ``quantile`` 0.5, 0.9, 0.95, 0.99 and 1
  (the maximum), ``horde_run_elapsed_seconds``, ``horde_run_finished``;
- the target's side (the run's monitors, their latest sample): ``horde_monitor_value`` (labels
  ``monitor`` and ``metric``, the figure's name as the plan's conditions write it:
  ``cpu.busy_percent``), ``horde_monitor_up`` (1 when the latest sample was read, 0 in a gap)
  and ``horde_monitor_sample_second`` (the run's second that sample belongs to);
- a histogram: ``horde_step_latency_seconds`` (``_bucket``, ``_sum``, ``_count``), cumulative.

The last second's figures (rates, quantiles, CPU, timer lateness, saturation) come from full
seconds only: the run's final snapshot is the drain, often a few milliseconds, over which a rate
is noise, so it moves the counters, the histogram and the VU gauges and leaves the last full
second's figures in place. Everything stays served, unchanged, until :meth:`stop`.

>>> from horde.engine.histogram import from_values
>>> exporter = PrometheusExporter("r1", "shop", cpu_limit_percent=90.0)
>>> exporter.update({"second": 1, "elapsed_s": 1.0, "interval_s": 1.0, "final": False,
...     "steps": [{"scenario": "s", "step": "home", "kind": "request", "requests": 2, "ok": 2,
...                "errors": {}, "bytes_sent": 10, "bytes_received": 20,
...                "histogram": from_values([1000, 3000])}],
...     "active_vus": 2, "busy_vus": 1, "iterations": 2, "dropped_arrivals": 0,
...     "connections_opened": 2, "target_vus": 2, "target_rate_per_s": None,
...     "cpu_percent": 12.5, "timer_lateness_p99_ms": 0.25})
>>> [line for line in exporter.render().splitlines() if line.startswith("horde_requests_total")]
['horde_requests_total{plan="shop",run="r1",scenario="s",step="home",step_kind="request"} 2.0']
"""

from __future__ import annotations

import errno
import re
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, cast

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from horde.engine import histogram
from horde.errors import InvalidInput
from horde.engine.histogram import buckets
from horde.results.summary import GENERATOR_SATURATED, GENERATOR_STARVED, generator_state
from horde.engine.snapshot import MESSAGE_COUNTERS, MonitorLatest, Snapshot

#: Upper bounds (seconds) of the latency histogram's buckets; ``+Inf`` follows.
#:
#: Resolution: ``histogram_quantile`` interpolates linearly inside a bucket, so a quantile read
#: off these buckets is only known to lie between two bounds (a p95 of 130 ms reads as somewhere
#: in (100 ms, 250 ms]); every latency under 1 ms falls in the first bucket and every one over
#: 60 s only in ``+Inf``. Each bound is also only as sharp as the HDR histograms it is derived
#: from (3 significant digits): a latency less than 0.1 % above a bound may be counted under it.
#: For exact figures use the quantile gauges (exact per second) or ``horde show`` (exact per run).
LATENCY_BUCKETS_S: Final = (
    0.001,
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    30.0,
    60.0,
)
_BUCKET_BOUNDS_US: Final = tuple(round(bound * 1_000_000) for bound in LATENCY_BUCKETS_S)

#: The quantile gauges: the ``quantile`` label's value and the percentile it reads (1 = max).
QUANTILES: Final = (("0.5", 50.0), ("0.9", 90.0), ("0.95", 95.0), ("0.99", 99.0))
MAX_QUANTILE: Final = "1"

#: What a scrape answers with: the text exposition format, version 0.0.4.
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

# A step's identity in the exposition: (scenario, step, step kind).
_StepKey = tuple[str, str, str]


class PrometheusEndpointUnavailable(InvalidInput):
    """The metrics endpoint cannot listen where it was asked to (port in use, no such address)."""


#: Each second's histograms wait for the next scrape to be decoded into the buckets; past this
#: many, update() merges them (natively, one per step), so memory stays bounded when nobody scrapes.
_PENDING_LIMIT: Final = 1024


@dataclass(frozen=True)
class _StepTotals:
    """One step's counters since the run started."""

    requests: int = 0
    ok: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)
    bytes_sent: int = 0
    bytes_received: int = 0
    #: A message step's counters (``messages`` in the snapshot): sent, received, datagrams...
    messages: Mapping[str, int] = field(default_factory=dict)

    def plus(self, entry: Mapping[str, Any]) -> _StepTotals:
        errors = dict(self.errors)
        for kind, count in entry["errors"].items():
            errors[kind] = errors.get(kind, 0) + int(count)
        return _StepTotals(
            requests=self.requests + int(entry["requests"]),
            ok=self.ok + int(entry["ok"]),
            errors=errors,
            bytes_sent=self.bytes_sent + int(entry.get("bytes_sent", 0)),
            bytes_received=self.bytes_received + int(entry.get("bytes_received", 0)),
            messages={
                counter: self.messages.get(counter, 0) + int((entry.get("messages") or {}).get(counter) or 0)
                for counter in MESSAGE_COUNTERS
            }
            if entry.get("messages") or self.messages
            else self.messages,
        )


@dataclass
class _Buckets:
    """One step's latencies per bucket of LATENCY_BUCKETS_S since the run started (not
    cumulative; the last count is over 60 s), and their sum in microseconds."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    sum_us: int = 0

    def add(self, blob: bytes) -> None:
        """Adds an HDR histogram's latencies. An HDR bucket is counted under a bound when its
        lowest value is at or under it, so a latency recorded exactly at a bound is counted under
        it; the sum takes each bucket's middle value, as HDR's own mean does."""
        index = 0
        for bucket in buckets(blob):
            # HDR buckets come lowest first, so the bound index only ever moves up.
            while index < len(_BUCKET_BOUNDS_US) and bucket.lowest_us > _BUCKET_BOUNDS_US[index]:
                index += 1
            self.counts[index] += bucket.count
            width = bucket.highest_us - bucket.lowest_us + 1
            self.sum_us += bucket.count * (bucket.lowest_us + width // 2)

    def copy(self) -> _Buckets:
        return _Buckets(list(self.counts), self.sum_us)


@dataclass(frozen=True)
class _Second:
    """The last full second's figures."""

    requests_per_second: Mapping[_StepKey, float]
    #: Per step with requests in that second: quantile label -> seconds.
    step_quantiles: Mapping[_StepKey, Mapping[str, float]]
    #: All requests of that second (groups left out); empty when there were none.
    quantiles: Mapping[str, float]
    cpu_percent: float
    timer_lateness_p99_s: float
    saturated: bool
    starved: bool


@dataclass(frozen=True)
class _State:
    """Everything a scrape shows; replaced whole by each update, never changed in place."""

    steps: Mapping[_StepKey, _StepTotals] = field(default_factory=dict)
    iterations: int = 0
    dropped_arrivals: int = 0
    connections_opened: int = 0
    vus: Mapping[str, float] = field(default_factory=dict)
    target_rate_per_s: float | None = None
    second: _Second | None = None
    elapsed_s: float | None = None
    finished: bool = False
    #: Each monitor's latest sample (its values None in a gap).
    monitors: Mapping[str, MonitorLatest] = field(default_factory=dict)


class PrometheusExporter:
    """Serves a run's figures at ``http://HOST:PORT/metrics``; a sink of the conductor.

    ``run_id`` and ``plan_name`` label every series. ``cpu_limit_percent`` is the generator's CPU
    limit (``conductor.cpu_limit_percent(workers)``), for ``horde_generator_saturated``. Port 0
    picks a free port: :attr:`port` says which once :meth:`start` has returned.

    ``update()`` is called from one thread at a time (the run loop); scrapes come from the
    server's threads. Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        run_id: str,
        plan_name: str,
        *,
        cpu_limit_percent: float,
        port: int = 0,
        host: str = "127.0.0.1",
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self.plan_name = plan_name
        self.tags = dict(tags or {})
        self.host = host
        self.cpu_limit_percent = cpu_limit_percent
        self._run_id = run_id
        self._requested_port = port
        # _lock guards _state, _pending and _run_id, and is only ever held for a few assignments
        # (or, when nobody scrapes for long, a native merge); _fold_lock guards _buckets and is
        # held by one scrape at a time while it decodes histograms.
        self._lock = threading.Lock()
        self._state = _State()
        #: The histograms of each step entry since the last scrape, in arrival order.
        self._pending: list[tuple[_StepKey, bytes]] = []
        self._fold_lock = threading.Lock()
        self._buckets: dict[_StepKey, _Buckets] = {}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- the Sink protocol -------------------------------------------------------------------

    def update(self, snapshot: Snapshot) -> None:
        """Takes one snapshot in. Never waits for a scrape: the counters and the second's
        quantiles (native HDR calls) are computed outside the lock, and decoding histograms into
        the fixed buckets, the costly part, is left to the next scrape."""
        with self._lock:
            previous = self._state
        state = _advanced(previous, snapshot, self.cpu_limit_percent)
        with self._lock:
            self._state = state
            self._pending.extend((_key(entry), entry["histogram"]) for entry in snapshot["steps"])
            if len(self._pending) > _PENDING_LIMIT:
                self._pending = _merged_by_step(self._pending)

    def note_stopping(self) -> None:
        """Nothing to show: the counters and gauges already say what the run does."""

    def note(self, message: str) -> None:
        """Nothing to show: Prometheus takes numbers, not messages."""

    # -- serving -----------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self._run_id

    def set_run_id(self, run_id: str) -> None:
        """Labels every series with ``run_id`` from now on: for a caller that builds the
        exporter before the run is recorded (and its id known); best before the first update."""
        with self._lock:
            self._run_id = run_id

    @property
    def port(self) -> int:
        """The port served (the one picked when 0 was asked, once started)."""
        return self._server.server_address[1] if self._server is not None else self._requested_port

    @property
    def url(self) -> str:
        """Where Prometheus scrapes: ``http://HOST:PORT/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> None:
        """Listens on HOST:PORT and serves from a daemon thread; raises
        :class:`PrometheusEndpointUnavailable` when it cannot listen there."""
        if self._server is not None:
            return
        server_class = _ServerIPv6 if ":" in self.host else _Server
        try:
            server = server_class((self.host, self._requested_port), _Handler)
        except OSError as error:
            raise _unavailable(self.host, self._requested_port, error) from error
        server.exporter = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"horde-prometheus-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stops serving and frees the port (idempotent)."""
        server, thread = self._server, self._thread
        self._server, self._thread = None, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> PrometheusExporter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the exposition ----------------------------------------------------------------------

    def render(self) -> str:
        """The exposition of the current state (what ``/metrics`` answers)."""
        with self._fold_lock:
            # State and pending histograms are taken together, so each step's _count equals
            # its requests_total in every scrape.
            with self._lock:
                state, run_id = self._state, self._run_id
                pending, self._pending = self._pending, []
            # Decoding the merge of the seconds since the last scrape, rather than each second,
            # does the costly part once per scrape (a second's buckets mostly recur).
            for key, blob in _merged_by_step(pending):
                self._buckets.setdefault(key, _Buckets()).add(blob)
            latency = {key: self._buckets[key].copy() for key in state.steps if key in self._buckets}
        return exposition(families(state, latency, run_labels(run_id, self.plan_name, self.tags)))


def _unavailable(host: str, port: int, error: OSError) -> PrometheusEndpointUnavailable:
    where = f"{host}:{port}"
    if error.errno == errno.EADDRINUSE:
        return PrometheusEndpointUnavailable(
            f"cannot serve Prometheus metrics on {where}: the port is already in use",
            hint=f"choose another port (--prometheus PORT; 0 picks a free one), or find the process "
            f"holding it with `ss -ltnp 'sport = :{port}'`",
        )
    if error.errno == errno.EACCES:
        return PrometheusEndpointUnavailable(
            f"cannot serve Prometheus metrics on {where}: permission denied",
            hint="ports below 1024 need privileges; Horde's usual port is 9464",
        )
    return PrometheusEndpointUnavailable(
        f"cannot serve Prometheus metrics on {where}: {error.strerror or error}",
        hint="listen on 127.0.0.1 (this machine), 0.0.0.0 (every interface) or one of this machine's addresses",
    )


class RunFigures:
    """A run's figures folded from its snapshots, by one thread, histograms decoded as they come:
    what a push output sends each second (the exporter defers that decoding to its scrapes)."""

    def __init__(self, cpu_limit_percent: float) -> None:
        self.cpu_limit_percent = cpu_limit_percent
        self._state = _State()
        self._buckets: dict[_StepKey, _Buckets] = {}

    def update(self, snapshot: Snapshot) -> None:
        self._state = _advanced(self._state, snapshot, self.cpu_limit_percent)
        for entry in snapshot["steps"]:
            self._buckets.setdefault(_key(entry), _Buckets()).add(entry["histogram"])

    def families(self, base: Labels) -> list[Family]:
        return families(self._state, self._buckets, base)


# -- folding snapshots in ---------------------------------------------------------------------


def _advanced(previous: _State, snapshot: Snapshot, cpu_limit_percent: float) -> _State:
    steps = dict(previous.steps)
    for entry in snapshot["steps"]:
        key = _key(entry)
        steps[key] = steps.get(key, _StepTotals()).plus(entry)
    state = replace(
        previous,
        steps=steps,
        iterations=previous.iterations + int(snapshot.get("iterations", 0)),
        dropped_arrivals=previous.dropped_arrivals + int(snapshot.get("dropped_arrivals", 0)),
        connections_opened=previous.connections_opened + int(snapshot.get("connections_opened", 0)),
        vus={
            name: value
            for name, value in (
                ("active_vus", snapshot.get("active_vus")),
                ("busy_vus", snapshot.get("busy_vus")),
                ("target_vus", snapshot.get("target_vus")),
            )
            if value is not None
        },
        target_rate_per_s=snapshot.get("target_rate_per_s"),
        elapsed_s=float(snapshot.get("elapsed_s", previous.elapsed_s or 0.0)),
        finished=bool(snapshot.get("final", False)),
        # The conductor adds each monitor's latest sample to the snapshot the sinks get.
        monitors=snapshot.get("monitors") or previous.monitors,
    )
    if snapshot.get("final", False):
        return state
    return replace(state, second=_second(snapshot, steps, cpu_limit_percent))


def _second(snapshot: Snapshot, steps: Iterable[_StepKey], cpu_limit_percent: float) -> _Second:
    interval_s = float(snapshot.get("interval_s") or 1.0)
    # A step seen earlier but idle this second did 0 requests per second, not "no data".
    rates = dict.fromkeys(steps, 0.0)
    step_quantiles: dict[_StepKey, Mapping[str, float]] = {}
    request_histograms: list[bytes] = []
    for entry in snapshot["steps"]:
        key = _key(entry)
        rates[key] = int(entry["requests"]) / interval_s
        quantiles = _quantiles(entry["histogram"])
        if quantiles:
            step_quantiles[key] = quantiles
        if key[2] == "request":
            request_histograms.append(entry["histogram"])
    return _Second(
        requests_per_second=rates,
        step_quantiles=step_quantiles,
        quantiles=_quantiles(histogram.merge(request_histograms)),
        cpu_percent=float(snapshot["cpu_percent"]),
        timer_lateness_p99_s=_seconds(float(snapshot["timer_lateness_p99_ms"])),
        saturated=generator_state(snapshot, cpu_limit_percent) == GENERATOR_SATURATED,
        starved=generator_state(snapshot, cpu_limit_percent) == GENERATOR_STARVED,
    )


def _key(entry: Mapping[str, Any]) -> _StepKey:
    # Stores written before groups existed have no kind: every entry was a request.
    return (str(entry["scenario"]), str(entry["step"]), str(entry.get("kind", "request")))


def _quantiles(blob: bytes) -> dict[str, float]:
    """The quantile gauges' values (seconds) of one HDR histogram; empty when it holds nothing."""
    stats = histogram.stats(blob, [percentile for _, percentile in QUANTILES])
    if not stats.count:
        return {}
    values = {label: _seconds(stats.percentile(percentile)) for label, percentile in QUANTILES}
    values[MAX_QUANTILE] = _seconds(stats.max_ms)
    return values


def _seconds(milliseconds: float) -> float:
    # HDR values are whole microseconds: dividing those keeps 3.001 ms at 0.003001 s, where
    # 3.001 / 1000 would print as 0.0030009999999999998.
    return round(milliseconds * 1000) / 1_000_000


def _merged_by_step(pending: Iterable[tuple[_StepKey, bytes]]) -> list[tuple[_StepKey, bytes]]:
    """One exact merge per step of its pending histograms."""
    by_step: dict[_StepKey, list[bytes]] = {}
    for key, blob in pending:
        by_step.setdefault(key, []).append(blob)
    return [(key, blobs[0] if len(blobs) == 1 else histogram.merge(blobs)) for key, blobs in by_step.items()]


# -- rendering --------------------------------------------------------------------------------

Labels = Sequence[tuple[str, str]]
#: One series' value: its name (a histogram's ``_bucket``, ``_sum``, ``_count``), labels, value.
Sample = tuple[str, Labels, float | int]


@dataclass(frozen=True)
class Family:
    """One metric family as the scrape endpoint serves it and the push outputs send it: the
    exposition's name (counters keep their ``_total``), ``counter``, ``gauge`` or ``histogram``,
    its HELP text and its samples, each already carrying the run's labels."""

    name: str
    kind: str
    help: str
    samples: tuple[Sample, ...]


def families(state: _State, latency: Mapping[_StepKey, _Buckets], base: Labels) -> list[Family]:
    """Every family of ``state`` (``latency``: each step's buckets), in the order served; ``base``
    labels every series (run, plan and the run's tags)."""
    found: list[Family] = []

    def family(name: str, kind: str, help_text: str, samples: Iterable[Sample]) -> None:
        found.append(
            Family(
                name,
                kind,
                help_text,
                tuple((sample_name, (*base, *labels), value) for sample_name, labels, value in samples),
            )
        )

    steps = sorted(state.steps.items())

    def per_step(name: str, read: Callable[[_StepTotals], int]) -> list[Sample]:
        return [(name, _step_labels(key), read(totals)) for key, totals in steps]

    family(
        "horde_requests_total",
        "counter",
        "Requests completed since the run started (a group: passes).",
        per_step("horde_requests_total", lambda totals: totals.requests),
    )
    family(
        "horde_ok_responses_total",
        "counter",
        "Requests answered with a status below 400 and passing their checks.",
        per_step("horde_ok_responses_total", lambda totals: totals.ok),
    )
    family(
        "horde_errors_total",
        "counter",
        "Failed requests by error kind (status_503, timeout, check_failed...).",
        [
            ("horde_errors_total", [*_step_labels(key), ("kind", kind)], count)
            for key, totals in steps
            for kind, count in sorted(totals.errors.items())
        ],
    )
    family(
        "horde_sent_bytes_total",
        "counter",
        "Bytes sent to the target.",
        per_step("horde_sent_bytes_total", lambda totals: totals.bytes_sent),
    )
    family(
        "horde_received_bytes_total",
        "counter",
        "Bytes received from the target.",
        per_step("horde_received_bytes_total", lambda totals: totals.bytes_received),
    )
    message_steps = [(key, totals) for key, totals in steps if totals.messages]
    family(
        "horde_messages_total",
        "counter",
        "Message steps (tcp://, udp://, kcp://): messages and datagrams by direction, late replies, KCP resends.",
        [
            ("horde_messages_total", [*_step_labels(key), ("counter", counter)], totals.messages.get(counter, 0))
            for key, totals in message_steps
            for counter in MESSAGE_COUNTERS
        ],
    )
    family(
        "horde_iterations_total",
        "counter",
        "Iterations completed since the run started.",
        [("horde_iterations_total", (), state.iterations)],
    )
    family(
        "horde_dropped_arrivals_total",
        "counter",
        "Open model: arrivals that found every VU busy (never run late).",
        [("horde_dropped_arrivals_total", (), state.dropped_arrivals)],
    )
    family(
        "horde_connections_opened_total",
        "counter",
        "Connections the VUs opened to the target.",
        [("horde_connections_opened_total", (), state.connections_opened)],
    )

    for name, snapshot_key, help_text in (
        ("horde_active_vus", "active_vus", "VUs alive at the end of the last interval."),
        ("horde_busy_vus", "busy_vus", "VUs inside an iteration at the end of the last interval."),
        ("horde_target_vus", "target_vus", "VUs the workload model asked for at the end of the last interval."),
    ):
        family(name, "gauge", help_text, [(name, (), state.vus[snapshot_key])] if snapshot_key in state.vus else [])
    family(
        "horde_target_rate_per_second",
        "gauge",
        "Open model: the arrival rate asked for at the end of the last interval.",
        [] if state.target_rate_per_s is None else [("horde_target_rate_per_second", (), state.target_rate_per_s)],
    )

    second = state.second
    family(
        "horde_generator_cpu_percent",
        "gauge",
        "The generator's CPU over the last full second (100 = one core).",
        [] if second is None else [("horde_generator_cpu_percent", (), second.cpu_percent)],
    )
    family(
        "horde_timer_lateness_p99_seconds",
        "gauge",
        "How late the engine's timers fired, p99 over the last full second.",
        [] if second is None else [("horde_timer_lateness_p99_seconds", (), second.timer_lateness_p99_s)],
    )
    family(
        "horde_generator_saturated",
        "gauge",
        "1 when the generator itself was the bottleneck in the last full second (CPU over its limit, or "
        "timer lateness over its limit with at least half of it used).",
        [] if second is None else [("horde_generator_saturated", (), int(second.saturated))],
    )
    family(
        "horde_generator_starved",
        "gauge",
        "1 when the generator was not scheduled in the last full second (timer lateness over its limit with "
        "little CPU used): that second's latency may carry the machine's delays.",
        [] if second is None else [("horde_generator_starved", (), int(second.starved))],
    )
    family(
        "horde_step_requests_per_second",
        "gauge",
        "Requests per second of the last full second.",
        []
        if second is None
        else [
            ("horde_step_requests_per_second", _step_labels(key), rate)
            for key, rate in sorted(second.requests_per_second.items())
        ],
    )
    # Gauges, not a Prometheus summary: these are exact percentiles of one second's HDR
    # histogram, not a client-side sliding estimate, and they cannot be aggregated over time or
    # steps (a summary's _sum/_count would invite that). For any range, use the histogram below.
    family(
        "horde_step_latency_quantile_seconds",
        "gauge",
        "Latency of the last full second at a quantile (exact, from HDR histograms); quantile 1 is the maximum.",
        []
        if second is None
        else [
            ("horde_step_latency_quantile_seconds", [*_step_labels(key), ("quantile", label)], value)
            for key, quantiles in sorted(second.step_quantiles.items())
            for label, value in quantiles.items()
        ],
    )
    family(
        "horde_latency_quantile_seconds",
        "gauge",
        "Latency of all requests (groups left out) in the last full second at a quantile; quantile 1 is the maximum.",
        []
        if second is None
        else [
            ("horde_latency_quantile_seconds", [("quantile", label)], value)
            for label, value in second.quantiles.items()
        ],
    )

    histogram_samples: list[Sample] = []
    for key, _ in steps:
        labels = _step_labels(key)
        step_buckets = latency.get(key, _Buckets())
        cumulative = 0
        for bound, count in zip([*map(_bound, LATENCY_BUCKETS_S), "+Inf"], step_buckets.counts):
            cumulative += count
            histogram_samples.append(("horde_step_latency_seconds_bucket", [*labels, ("le", bound)], cumulative))
        histogram_samples.append(("horde_step_latency_seconds_sum", labels, step_buckets.sum_us / 1_000_000))
        histogram_samples.append(("horde_step_latency_seconds_count", labels, cumulative))
    family(
        "horde_step_latency_seconds",
        "histogram",
        "Latency since the run started, in fixed buckets derived from the exact HDR histograms (histogram_quantile reads "
        "a quantile to within its bucket only).",
        histogram_samples,
    )

    monitors = sorted(state.monitors.items())
    family(
        "horde_monitor_value",
        "gauge",
        "A monitor's figure (the target's side) at its latest sample; metric is the figure's name as conditions "
        "write it (monitor.NAME.METRIC).",
        [
            ("horde_monitor_value", (("monitor", name), ("metric", metric)), float(value))
            for name, latest in monitors
            for metric, value in sorted((latest.get("values") or {}).items())
            if isinstance(value, (int, float))
        ],
    )
    family(
        "horde_monitor_up",
        "gauge",
        "1 when a monitor's latest sample was read, 0 when its source could not be (a gap).",
        [
            ("horde_monitor_up", (("monitor", name),), int(latest.get("values") is not None))
            for name, latest in monitors
        ],
    )
    family(
        "horde_monitor_sample_second",
        "gauge",
        "The run's second a monitor's latest sample belongs to.",
        [
            ("horde_monitor_sample_second", (("monitor", name),), int(latest.get("second") or 0))
            for name, latest in monitors
        ],
    )
    family(
        "horde_run_elapsed_seconds",
        "gauge",
        "Seconds since the run started, at the end of the last interval.",
        [] if state.elapsed_s is None else [("horde_run_elapsed_seconds", (), state.elapsed_s)],
    )
    family(
        "horde_run_finished",
        "gauge",
        "1 once the run's final snapshot has come (the figures no longer move).",
        [("horde_run_finished", (), int(state.finished))],
    )
    return found


def _step_labels(key: _StepKey) -> Labels:
    scenario, step, kind = key
    return (("scenario", scenario), ("step", step), ("step_kind", kind))


def _bound(bound: float) -> str:
    # The ``le`` label as Prometheus' own clients write it: 0.001, 1.0, 60.0.
    return repr(float(bound))


#: Horde's own label names: a tag never takes one of them.
_HORDE_LABELS: Final = frozenset(
    {"run", "plan", "scenario", "step", "step_kind", "kind", "counter", "quantile", "le", "monitor", "metric"}
)


def run_labels(run_id: str, plan_name: str, tags: Mapping[str, str] | None = None) -> Labels:
    """The labels of every series of a run: ``run``, ``plan`` and one per tag (``--tag build=1234``
    is ``build="1234"``). A tag's key becomes a valid label name (other characters are ``_``) and
    one that is a Horde label's name, or starts with ``__`` (Prometheus' own), is ``tag_KEY``."""
    labels: list[tuple[str, str]] = [("run", run_id), ("plan", plan_name)]
    for key, value in sorted((tags or {}).items()):
        name = re.sub(r"[^a-zA-Z0-9_]", "_", key)
        if not name or name[0].isdigit() or name in _HORDE_LABELS or name.startswith("__"):
            name = f"tag_{name}"
        labels.append((name, value))
    return labels


class _Families(Collector):
    """prometheus-client's view of a list of families, for its exposition."""

    def __init__(self, found: Sequence[Family]) -> None:
        self.found = found

    def collect(self) -> Iterator[Metric]:
        for family in self.found:
            # prometheus-client names a counter's family without ``_total`` and adds it back.
            name = family.name.removesuffix("_total") if family.kind == "counter" else family.name
            metric = Metric(name, family.help, family.kind)
            for sample_name, labels, value in family.samples:
                metric.add_sample(sample_name, dict(labels), value)
            yield metric


def exposition(found: Sequence[Family]) -> str:
    """The text exposition format 0.0.4 of ``found``, written by prometheus-client."""
    return generate_latest(_Families(found)).decode("utf-8")


# -- the HTTP side ----------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Never share the port with another listener: a second exporter must fail, not split scrapes.
    allow_reuse_port = False
    exporter: PrometheusExporter

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks the host's name up (socket.getfqdn), which can hang on a
        # machine without DNS; the name is only used in CGI environments.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _ServerIPv6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server_version = "horde"

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def _answer(self, *, with_body: bool) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body = cast(_Server, self.server).exporter.render().encode("utf-8", "replace")
            content_type = CONTENT_TYPE
            status = 200
        elif path == "/":
            body = b"Horde: Prometheus metrics at /metrics\n"
            content_type = "text/plain; charset=utf-8"
            status = 200
        else:
            body = b"not found: Horde serves /metrics\n"
            content_type = "text/plain; charset=utf-8"
            status = 404
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # Each scrape would print a line over the live view.
        pass
