"""Per-second series of a stored run, as the report's charts draw them.

Everything here is read off the stored snapshots: rates from each interval's counts and true
length, percentiles from each interval's histograms merged exactly (never averaged), the
distribution from the run's merged histogram buckets. Each monitor's samples become a
:class:`MonitorSeries` on the same axis (a sample's second is the snapshot's). A run against a
message target (``tcp://``, ``udp://``, ``kcp://``) adds its :class:`MessageSeries`: its message
steps' counts per second and its pings' round-trip time.
"""

from __future__ import annotations

from collections.abc import Mapping

from dataclasses import dataclass, field
from typing import Any, Final

from horde.engine import histogram
from horde.engine.histogram import buckets
from horde.engine.snapshot import StepSnapshot
from horde.plan.message import is_message_url
from horde.results.stored_run import ALL_REQUESTS, RunResults, step_names
from horde.results.summary import CPU_SATURATION_PERCENT_PER_WORKER, is_generator_saturated
from horde.store import MonitorSample

#: A final interval shorter than this is left out of rate and latency series: a few milliseconds
#: of draining turn two requests into hundreds per second, and a percentile of two requests.
MIN_RATE_INTERVAL_S: Final = 0.5
#: The percentiles drawn over time, with the maximum.
PERCENTILES: Final = (50.0, 90.0, 95.0, 99.0)
PERCENTILE_NAMES: Final = ("p50", "p90", "p95", "p99", "max")
#: Most points of one distribution curve (a wide distribution has thousands of buckets).
MAX_DISTRIBUTION_POINTS: Final = 800
#: A message step's counts drawn per second (the snapshot's ``messages`` keys, and ``lost``:
#: pings whose reply never came, an error kind).
MESSAGE_RATES: Final = ("sent", "received", "datagrams_sent", "datagrams_received", "lost", "late", "retransmitted")


@dataclass
class LatencySeries:
    """One selection's latency over time (ms): p50, p90, p95, p99 and max per second."""

    elapsed_s: list[float] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in PERCENTILE_NAMES})


@dataclass
class MessageSeries:
    """A message run's figures per second, its message steps summed: each of
    :data:`MESSAGE_RATES` per second, and its ping steps' round-trip time (ms, merged exactly)."""

    elapsed_s: list[float] = field(default_factory=list)
    per_s: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in MESSAGE_RATES})
    rtt: LatencySeries = field(default_factory=LatencySeries)


@dataclass
class RunSeries:
    """Every per-second series of one run, on the ``elapsed_s`` axis (seconds since start)."""

    #: Intervals long enough for rates and percentiles (see MIN_RATE_INTERVAL_S).
    rate_elapsed_s: list[float]
    requests_per_s: list[float]
    errors_per_s: list[float]
    errors_per_s_by_kind: dict[str, list[float]]
    dropped_arrivals_per_s: list[float]
    #: Every interval.
    elapsed_s: list[float]
    active_vus: list[float | None]
    target_vus: list[float | None]
    target_rate_per_s: list[float | None]
    cpu_percent: list[float | None]
    timer_lateness_p99_ms: list[float | None]
    #: (start, end) of each second in which the generator was saturated.
    saturated_intervals: list[tuple[float, float]]
    cpu_limit_percent: float
    #: ``all requests`` first, then each step by its summary name.
    latency: dict[str, LatencySeries]
    #: The same keys: (latency ms at each bucket's top, % of requests at or below it).
    distribution: dict[str, tuple[list[float], list[float]]]
    #: A message run's figures (none for an HTTP or SQL run).
    messages: MessageSeries = field(default_factory=MessageSeries)


@dataclass
class MonitorSeries:
    """One monitor's figures over a run: its samples' seconds (the snapshots' axis) and each
    figure's value at each of them (None: the figure was not given then, or a gap)."""

    name: str
    #: ``host``, ``prometheus`` or ``postgres``.
    kind: str
    #: A prometheus source read as a remote host (its figures are the host's).
    node_exporter: bool = False
    seconds: list[float] = field(default_factory=list)
    values: dict[str, list[float | None]] = field(default_factory=dict)
    #: (second, reason) of each sample its source could not give.
    gaps: list[tuple[int, str]] = field(default_factory=list)

    def add(self, sample: MonitorSample) -> None:
        """Appends a sample (in order of second; one already added is ignored)."""
        if self.seconds and sample.second <= self.seconds[-1]:
            return
        before = len(self.seconds)
        self.seconds.append(float(sample.second))
        if sample.values is None:
            self.gaps.append((sample.second, sample.error or "not read"))
        for metric, value in (sample.values or {}).items():
            self.values.setdefault(metric, [None] * before).append(value)
        # A figure this sample lacks (a gap: every figure) reads None, so the line breaks there.
        for column in self.values.values():
            if len(column) == before:
                column.append(None)


def monitor_series(plan: dict[str, Any], samples: dict[str, list[MonitorSample]]) -> dict[str, MonitorSeries]:
    """Each monitor of the stored plan (in its order) with its samples; a monitor with samples
    but not in the plan (a store written by hand) comes after, as a prometheus source."""
    series = {
        str(monitor["name"]): MonitorSeries(
            str(monitor["name"]), str(monitor.get("type", "host")), bool(monitor.get("node_exporter", False))
        )
        for monitor in plan.get("monitors") or []
        if isinstance(monitor, dict) and "name" in monitor
    }
    for name, found in samples.items():
        into = series.setdefault(name, MonitorSeries(name, "prometheus"))
        for sample in found:
            into.add(sample)
    return series


def run_series(results: RunResults) -> RunSeries:
    """All the series the report draws for ``results``."""
    kinds = results.step_kinds()
    names = step_names(results.step_ids())
    cpu_limit = CPU_SATURATION_PERCENT_PER_WORKER * results.workers
    # Run-wide error figures count requests only, as the summary's do (a group's failed pass is
    # a failed request already counted).
    all_kinds = sorted(
        {
            kind
            for snapshot in results.snapshots
            for entry in snapshot["steps"]
            if kinds[(entry["scenario"], entry["step"])] == "request"
            for kind in entry["errors"]
        }
    )
    series = RunSeries(
        rate_elapsed_s=[],
        requests_per_s=[],
        errors_per_s=[],
        errors_per_s_by_kind={k: [] for k in all_kinds},
        dropped_arrivals_per_s=[],
        elapsed_s=[],
        active_vus=[],
        target_vus=[],
        target_rate_per_s=[],
        cpu_percent=[],
        timer_lateness_p99_ms=[],
        saturated_intervals=[],
        cpu_limit_percent=cpu_limit,
        latency={ALL_REQUESTS: LatencySeries(), **{names[s]: LatencySeries() for s in results.step_ids()}},
        distribution={},
    )
    plan = results.record.plan
    message_run = is_message_url(str((plan.get("target") or {}).get("base_url") or ""))
    pings = ping_steps(plan) if message_run else set()
    for snapshot in results.snapshots:
        elapsed = float(snapshot["elapsed_s"])
        interval = float(snapshot["interval_s"] or 0.0)
        requests = [e for e in snapshot["steps"] if kinds[(e["scenario"], e["step"])] == "request"]
        full_interval = interval >= MIN_RATE_INTERVAL_S or not snapshot["final"]
        if full_interval:
            per_s = 1.0 / interval if interval > 0 else 0.0
            series.rate_elapsed_s.append(elapsed)
            series.requests_per_s.append(sum(int(e["requests"]) for e in requests) * per_s)
            series.errors_per_s.append(sum(int(e["requests"]) - int(e["ok"]) for e in requests) * per_s)
            for kind in all_kinds:
                count = sum(int(e["errors"].get(kind, 0)) for e in requests)
                series.errors_per_s_by_kind[kind].append(count * per_s)
            series.dropped_arrivals_per_s.append(int(snapshot.get("dropped_arrivals") or 0) * per_s)
            if message_run:
                _add_messages(series.messages, elapsed, per_s, snapshot["steps"], pings)
        series.elapsed_s.append(elapsed)
        series.active_vus.append(snapshot.get("active_vus"))
        series.target_vus.append(snapshot.get("target_vus"))
        series.target_rate_per_s.append(snapshot.get("target_rate_per_s"))
        # The final interval's CPU and lateness are noise (summary.py ignores them too).
        generator_known = not snapshot["final"] and snapshot.get("cpu_percent") is not None
        series.cpu_percent.append(snapshot.get("cpu_percent") if generator_known else None)
        series.timer_lateness_p99_ms.append(snapshot.get("timer_lateness_p99_ms") if generator_known else None)
        if generator_known and is_generator_saturated(snapshot, cpu_limit):
            series.saturated_intervals.append((elapsed - interval, elapsed))
        if not full_interval:
            continue  # a few requests of the drain: no percentile worth a point (they are in the totals)
        if requests:
            _add_latency(series.latency[ALL_REQUESTS], elapsed, [e["histogram"] for e in requests])
        for entry in snapshot["steps"]:
            _add_latency(series.latency[names[(entry["scenario"], entry["step"])]], elapsed, [entry["histogram"]])
    series.distribution[ALL_REQUESTS] = distribution(results.all_requests_histogram())
    for step_id, blob in results.merged_histograms().items():
        series.distribution[names[step_id]] = distribution(blob)
    return series


def ping_steps(plan: dict[str, Any]) -> set[tuple[str, str]]:
    """The (scenario, step) of each ``ping`` step of a stored plan, at any depth (groups, loops,
    branches)."""
    found: set[tuple[str, str]] = set()

    def walk(scenario: str, node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(scenario, item)
        elif isinstance(node, dict):
            if node.get("type") == "ping" and isinstance(node.get("name"), str):
                found.add((scenario, node["name"]))
            for key, value in node.items():
                if key != "json":  # a message's payload, not a step
                    walk(scenario, value)

    for scenario in plan.get("scenarios") or []:
        if isinstance(scenario, dict):
            walk(str(scenario.get("name")), [scenario.get(key) for key in ("setup", "steps", "teardown")])
    return found


def _add_messages(
    target: MessageSeries, elapsed: float, per_s: float, entries: list[StepSnapshot], pings: set[tuple[str, str]]
) -> None:
    target.elapsed_s.append(elapsed)
    counts: list[dict[str, Any]] = [dict(entry.get("messages") or {}) for entry in entries]
    for name in MESSAGE_RATES:
        if name == "lost":
            total = sum(int(entry["errors"].get("lost", 0)) for entry in entries)
        else:
            total = sum(int(count.get(name) or 0) for count in counts)
        target.per_s[name].append(total * per_s)
    replies = [entry["histogram"] for entry in entries if (entry["scenario"], entry["step"]) in pings]
    if replies:
        _add_latency(target.rtt, elapsed, replies)


def distribution(blob: bytes) -> tuple[list[float], list[float]]:
    """The cumulative distribution of a histogram: each bucket's top (ms) and the % of requests
    at or below it, thinned to at most MAX_DISTRIBUTION_POINTS points (the last one kept)."""
    found = buckets(blob)
    total = sum(bucket.count for bucket in found)
    if not total:
        return [], []
    points: list[tuple[float, float]] = []
    below = 0
    for bucket in found:
        below += bucket.count
        points.append((bucket.highest_us / 1000.0, 100.0 * below / total))
    if len(points) > MAX_DISTRIBUTION_POINTS:
        stride = -(-len(points) // MAX_DISTRIBUTION_POINTS)
        points = points[::stride] + ([points[-1]] if (len(points) - 1) % stride else [])
    return [x for x, _ in points], [y for _, y in points]


def _add_latency(target: LatencySeries, elapsed: float, blobs: list[bytes]) -> None:
    merged = blobs[0] if len(blobs) == 1 else histogram.merge(blobs)
    stats = histogram.stats(merged, PERCENTILES)
    if not stats.count:
        return
    target.elapsed_s.append(elapsed)
    for name, value in zip(PERCENTILE_NAMES, (*(stats.percentile(p) for p in PERCENTILES), stats.max_ms)):
        target.values[name].append(value)


def saturation_note(summary: Mapping[str, Any]) -> str | None:
    """The warning to show when the generator was saturated, as ``horde show`` words it."""
    seconds = int(summary.get("generator", {}).get("saturated_seconds") or 0)
    if not seconds:
        return None
    return (
        f"The generator was saturated for {seconds} s: latency and rate figures of those seconds may be "
        "the generator's, not the target's."
    )
