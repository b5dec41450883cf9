"""Diagnosis: plain sentences about the target's side, each with the second it started.

The rules read monitors' samples as they come (live) or a stored run's (afterwards: the same
rules over the same samples give the same sentences). Their thresholds are the monitor's
``diagnosis`` settings (:mod:`horde.plan.monitors`). A rule speaks once per subject (a host, an
interface, a table, a standby) per run, at the first second its condition was met:

- host (and a node_exporter's machine): CPU busy above ``cpu_percent`` for ``cpu_for_s`` s; an
  interface above ``nic_percent`` of its link for ``nic_for_s`` s; time-wait sockets growing
  faster than ``time_wait_growth_per_s`` over ``time_wait_window_s`` s past ``time_wait_min``;
- postgres: a table's dead tuples growing faster than ``dead_tuples_growth_per_s`` over
  ``dead_tuples_window_s`` s past ``dead_tuples_min``, in their trend and in what autovacuum's
  runs in the window left (a sawtooth that stays bounded is autovacuum keeping up); a standby's
  replay lag rising over all of ``lag_window_s`` s past ``lag_min_bytes``;
  a standby's feedback xmin older than ``xmin_age_limit`` transactions for ``xmin_for_s`` s while
  dead tuples grow (hot_standby_feedback holding back vacuum); client connections at
  ``connections_percent`` of ``max_connections``.

>>> from horde.plan.monitors import HostMonitor
>>> from horde.store import MonitorSample
>>> diagnosis = Diagnosis([HostMonitor(name="db", diagnosis={"cpu_for_s": 3})])
>>> found = [diagnosis.observe(MonitorSample("db", second, float(second), 0.0, {"cpu.busy_percent": busy}))
...          for second, busy in enumerate([40, 95, 97, 99, 98], 1)]
>>> [finding.message for finding in diagnosis.findings]
['db: CPU busy above 90 % for 3 s from second 2 (up to 99 %)']
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from horde.plan.monitors import (
    HostDiagnosis,
    HostMonitor,
    Monitor,
    PostgresDiagnosis,
    PostgresMonitor,
    PrometheusMonitor,
)
from horde.store import MonitorSample


@dataclass(frozen=True)
class Finding:
    """One rule that fired: on which monitor and subject, from which second, in words."""

    monitor: str
    rule: str
    subject: str
    second: int
    message: str
    #: The figure the rule judged (``cpu.busy_percent``), for charts and the capacity block.
    metric: str

    def to_json(self) -> dict[str, Any]:
        return {
            "monitor": self.monitor,
            "rule": self.rule,
            "subject": self.subject,
            "second": self.second,
            "metric": self.metric,
            "message": self.message,
        }


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def format_bytes(value: float) -> str:
    """A byte count in the unit that reads best.

    >>> format_bytes(5_240_000), format_bytes(812)
    ('5.2 MB', '812 B')
    """
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,.0f} B"


class _Streak:
    """How long a condition has held in a row: (first second, seconds, worst value)."""

    def __init__(self) -> None:
        self.first: int | None = None
        self.last = 0
        self.worst = 0.0

    def add(self, second: int, interval_s: int, holds: bool, value: float) -> int:
        if not holds:
            self.first = None
            return 0
        if self.first is None:
            self.first, self.worst = second, value
        self.last = second
        self.worst = max(self.worst, value)
        return second - self.first + interval_s


class _Rules:
    """One monitor's rules and their state."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.fired: set[tuple[str, str]] = set()
        self.streaks: dict[tuple[str, str], _Streak] = {}
        self.windows: dict[tuple[str, str], deque[tuple[int, float]]] = {}
        #: Each table's readings over its dead-tuple window, and when the last sample was read.
        self.readings: dict[str, deque[_TableReading]] = {}
        self.previous_elapsed: float | None = None

    def streak(self, rule: str, subject: str) -> _Streak:
        return self.streaks.setdefault((rule, subject), _Streak())

    def window(self, rule: str, subject: str, second: int, value: float, length_s: int) -> deque[tuple[int, float]]:
        points = self.windows.setdefault((rule, subject), deque())
        points.append((second, value))
        while points and points[0][0] < second - length_s:
            points.popleft()
        return points

    def fire(self, rule: str, subject: str, second: int, metric: str, message: str) -> Finding | None:
        if (rule, subject) in self.fired:
            return None
        self.fired.add((rule, subject))
        return Finding(self.monitor.name, rule, subject, second, f"{self.monitor.name}: {message}", metric)


def _subjects(values: dict[str, float], prefix: str, suffix: str) -> Iterable[tuple[str, float]]:
    """(subject, value) of every figure named ``prefix.SUBJECT.suffix``."""
    for key, value in values.items():
        if key.startswith(prefix + ".") and key.endswith("." + suffix):
            subject = key[len(prefix) + 1 : -len(suffix) - 1]
            if subject:
                yield subject, value


def _slope(points: Sequence[tuple[int, float]]) -> float:
    """The least-squares slope of (second, value) points, per second: the trend of every point,
    where the first and last alone may sit at a trough and a peak of a sawtooth."""
    mean_second = sum(second for second, _ in points) / len(points)
    mean_value = sum(value for _, value in points) / len(points)
    spread = sum((second - mean_second) ** 2 for second, _ in points)
    if spread == 0:
        return 0.0
    return sum((second - mean_second) * (value - mean_value) for second, value in points) / spread


@dataclass(frozen=True)
class _TableReading:
    """A table's dead tuples at a reading, the autovacuum runs in the interval it ends, and the
    rows the database updated or deleted in that interval (None: not known), the most dead
    tuples the interval can have added to any one table."""

    second: int
    dead: float
    runs: float
    written: float | None


@dataclass(frozen=True)
class _Outrun:
    trend: float
    runs: float
    #: The reading after the run judged, and the least dead tuples that run can have left.
    run_second: int
    left: float
    #: The earlier reading it is compared with.
    earlier_second: int
    earlier: float


def _outrun(readings: Sequence[_TableReading], growth_per_s: float) -> _Outrun | None:
    """How dead tuples outran autovacuum over ``readings`` (a window), or None when nothing
    shows they did.

    Autovacuum makes a table's dead tuples a sawtooth: up between runs, down at each. Read
    once a second, a bounded sawtooth can rise for many readings in a row (runs every 1.05 s
    read every second drift across the tooth), so neither two readings nor their trend tell
    growth from it. What a run left does: at least the count read after it less the rows the
    database updated or deleted in the reading's interval and the one before (a backend
    publishes what it counted up to a second late). Dead tuples outran autovacuum when their
    trend exceeds ``growth_per_s`` and what a run left is above an earlier reading of the window
    by more than ``growth_per_s`` a second between them. A window with no run is judged by the
    caller on its growth alone: nothing took the dead tuples back down.

    >>> sawtooth = [_TableReading(second, 6 + 2276 * (second * 0.05 % 1), 1, 2276) for second in range(1, 12)]
    >>> _outrun(sawtooth, 20.0) is None
    True
    >>> held = [_TableReading(second, 1000.0 * second, 1, 1000) for second in range(1, 12)]
    >>> found = _outrun(held, 20.0)
    >>> found.trend, found.run_second, found.left, found.earlier_second, found.earlier
    (1000.0, 11, 9000.0, 1, 1000.0)
    """
    trend = _slope([(reading.second, reading.dead) for reading in readings])
    if trend <= growth_per_s:
        return None
    runs = sum(reading.runs for reading in readings[1:])  # the first reading's runs came before the window
    for index in range(len(readings) - 1, 0, -1):
        after, before = readings[index], readings[index - 1]
        if not after.runs or after.written is None or before.written is None:
            continue
        left = after.dead - after.written - before.written
        for earlier in readings[:index]:
            if left - earlier.dead > growth_per_s * (after.second - earlier.second):
                return _Outrun(trend, runs, after.second, left, earlier.second, earlier.dead)
    return None


def _host_rules(
    rules: _Rules, settings: HostDiagnosis, sample: MonitorSample, values: dict[str, float]
) -> list[Finding | None]:
    found: list[Finding | None] = []
    interval = rules.monitor.interval_s
    busy = values.get("cpu.busy_percent")
    if busy is not None:
        streak = rules.streak("host_cpu", "cpu")
        held = streak.add(sample.second, interval, busy > settings.cpu_percent, busy)
        if held >= settings.cpu_for_s and streak.first is not None:
            found.append(
                rules.fire(
                    "host_cpu",
                    "cpu",
                    streak.first,
                    "cpu.busy_percent",
                    f"CPU busy above {settings.cpu_percent:g} % for {settings.cpu_for_s} s from second "
                    f"{streak.first} (up to {streak.worst:.0f} %)",
                )
            )
    for interface, share in _subjects(values, "net", "link_percent"):
        streak = rules.streak("nic_saturated", interface)
        held = streak.add(sample.second, interval, share > settings.nic_percent, share)
        if held >= settings.nic_for_s and streak.first is not None:
            speed = values.get(f"net.{interface}.link_mbps", 0.0)
            found.append(
                rules.fire(
                    "nic_saturated",
                    interface,
                    streak.first,
                    f"net.{interface}.link_percent",
                    f"interface {interface} saturated: above {settings.nic_percent:g} % of its "
                    f"{speed:,.0f} Mbit/s for {settings.nic_for_s} s from second {streak.first} "
                    f"(up to {streak.worst:.0f} %)",
                )
            )
    time_wait = values.get("tcp.time_wait")
    if time_wait is not None:
        points = rules.window("time_wait", "tcp", sample.second, time_wait, settings.time_wait_window_s)
        (first_second, first), (last_second, last) = points[0], points[-1]
        span = last_second - first_second
        if span >= settings.time_wait_window_s and last > settings.time_wait_min:
            growth = (last - first) / span
            if growth > settings.time_wait_growth_per_s:
                found.append(
                    rules.fire(
                        "time_wait",
                        "tcp",
                        first_second,
                        "tcp.time_wait",
                        f"time-wait sockets piling up: from {first:,.0f} to {last:,.0f} in {span} s "
                        f"(+{growth:,.0f}/s) from second {first_second}",
                    )
                )
    return found


def _postgres_rules(
    rules: _Rules, settings: PostgresDiagnosis, sample: MonitorSample, values: dict[str, float]
) -> list[Finding | None]:
    found: list[Finding | None] = []
    interval = rules.monitor.interval_s
    previous = rules.previous_elapsed
    rules.previous_elapsed = sample.elapsed_s
    updated, deleted = values.get("rows.updated_per_s"), values.get("rows.deleted_per_s")
    written = (
        None
        if updated is None or deleted is None or previous is None
        else (updated + deleted) * (sample.elapsed_s - previous)
    )
    for table, dead in _subjects(values, "tables", "dead_tuples"):
        readings = rules.readings.setdefault(table, deque())
        runs = values.get(f"tables.{table}.autovacuum_runs", 0.0)
        readings.append(_TableReading(sample.second, dead, runs, written))
        while readings[0].second < sample.second - settings.dead_tuples_window_s:
            readings.popleft()
        span = sample.second - readings[0].second
        if span < settings.dead_tuples_window_s or dead <= settings.dead_tuples_min:
            continue
        window = list(readings)
        growth = (dead - window[0].dead) / span
        if (
            not any(reading.runs for reading in window[1:])
            and growth > settings.dead_tuples_growth_per_s
            and _slope([(reading.second, reading.dead) for reading in window]) > settings.dead_tuples_growth_per_s
        ):
            # No autovacuum run at all in the window while dead tuples grew: nothing takes
            # them back down (autovacuum off for the table, or its naptime longer than the run).
            first_second = window[0].second
            found.append(
                rules.fire(
                    "dead_tuples",
                    table,
                    first_second,
                    f"tables.{table}.dead_tuples",
                    f"table {table}: dead tuples grew from {window[0].dead:,.0f} to {dead:,.0f} in {span} s "
                    f"(+{_number(growth)}/s) from second {first_second}, with no autovacuum run meanwhile",
                )
            )
            continue
        outrun = _outrun(window, settings.dead_tuples_growth_per_s)
        if outrun is not None:
            first_second = readings[0].second
            found.append(
                rules.fire(
                    "dead_tuples",
                    table,
                    first_second,
                    f"tables.{table}.dead_tuples",
                    f"table {table}: dead tuples outrunning autovacuum from second {first_second}: a trend of "
                    f"+{_number(outrun.trend)}/s over {span} s to {dead:,.0f}; the autovacuum run read at second "
                    f"{outrun.run_second} ({outrun.runs:.0f} in that time) left at least {outrun.left:,.0f}, "
                    f"against {outrun.earlier:,.0f} at second {outrun.earlier_second}",
                )
            )
    dead_total = values.get("dead_tuples")
    dead_points = (
        rules.window("dead_total", "all", sample.second, dead_total, settings.xmin_for_s)
        if dead_total is not None
        else None
    )
    for standby, lag in _subjects(values, "replication", "replay_lag_bytes"):
        points = rules.window("replication_lag", standby, sample.second, lag, settings.lag_window_s)
        (first_second, first), (last_second, last) = points[0], points[-1]
        span = last_second - first_second
        rising = all(later >= earlier for (_, earlier), (_, later) in zip(points, list(points)[1:]))
        if span >= settings.lag_window_s and rising and last > first and last > settings.lag_min_bytes:
            found.append(
                rules.fire(
                    "replication_lag",
                    standby,
                    first_second,
                    f"replication.{standby}.replay_lag_bytes",
                    f"standby {standby}: replication lag rising without bound, from {format_bytes(first)} to "
                    f"{format_bytes(last)} of WAL behind in {span} s from second {first_second}",
                )
            )
    for standby, age in _subjects(values, "replication", "xmin_age"):
        streak = rules.streak("standby_xmin", standby)
        held = streak.add(sample.second, interval, age > settings.xmin_age_limit, age)
        growing = dead_points is not None and len(dead_points) > 1 and dead_points[-1][1] > dead_points[0][1]
        if held >= settings.xmin_for_s and growing and streak.first is not None:
            # The age as the rule fired, labelled: the run's peak (summary, what broke first) is another.
            found.append(
                rules.fire(
                    "standby_feedback",
                    standby,
                    streak.first,
                    f"replication.{standby}.xmin_age",
                    f"standby {standby} holds back vacuum: the xmin it reports (hot_standby_feedback) was over "
                    f"{settings.xmin_age_limit:,} transactions old from second {streak.first} ({age:,.0f} "
                    f"transactions old as this rule fired, at second {sample.second}) while dead tuples grew to "
                    f"{dead_total or 0:,.0f}",
                )
            )
    total, maximum = values.get("connections.total"), values.get("connections.max")
    if total is not None and maximum:
        if total >= maximum * settings.connections_percent / 100:
            found.append(
                rules.fire(
                    "connections",
                    "server",
                    sample.second,
                    "connections.total",
                    f"connections at max_connections: {total:,.0f} of {maximum:,.0f} from second {sample.second}",
                )
            )
    return found


class Diagnosis:
    """The rules of a run's monitors; feed it samples in order of second, per monitor."""

    def __init__(self, monitors: Sequence[Monitor]) -> None:
        self._rules = {monitor.name: _Rules(monitor) for monitor in monitors}
        self.findings: list[Finding] = []

    def observe(self, sample: MonitorSample) -> list[Finding]:
        """The findings this sample completes (usually none)."""
        rules = self._rules.get(sample.monitor)
        if rules is None or sample.values is None:
            return []
        monitor = rules.monitor
        if isinstance(monitor, HostMonitor) or (isinstance(monitor, PrometheusMonitor) and monitor.node_exporter):
            found = _host_rules(rules, monitor.diagnosis, sample, sample.values)
        elif isinstance(monitor, PostgresMonitor):
            found = _postgres_rules(rules, monitor.diagnosis, sample, sample.values)
        else:
            found = []
        new = [finding for finding in found if finding is not None]
        self.findings.extend(new)
        return new

    def observe_all(self, samples: dict[str, list[MonitorSample]]) -> list[Finding]:
        """Every finding of a stored run's samples, in order of the second they started."""
        for monitor_samples in samples.values():
            for sample in monitor_samples:
                self.observe(sample)
        return sorted(self.findings, key=lambda finding: (finding.second, finding.monitor))


_MONITORS = TypeAdapter(list[Monitor])


def plan_monitors(plan: Mapping[str, Any]) -> list[Monitor]:
    """The monitors of a stored plan (its JSON), to judge its stored samples again: a run still
    going, or one whose process died before it stored its summary. None at all when they do not
    validate (a plan stored by another version of Horde)."""
    try:
        return _MONITORS.validate_python(plan.get("monitors") or [])
    except ValidationError:
        return []
