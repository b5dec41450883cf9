"""Limits crossed: when each monitored resource first passed the limit its diagnosis rule sets,
for "what broke first" beside a capacity answer.

A diagnosis rule speaks once a condition has lasted (CPU above 90 % for 10 s); a find-max step
at a saturating level may last less than that before the steering backs off. The question here
is earlier and plainer: from which second was the resource at its limit? For the figures a rule
judges second by second (a host's CPU busy, an interface's share of its link, connections
against ``max_connections``, a standby's xmin age) that is the first second past the rule's
threshold; for the rules that judge a trend (time-wait sockets and dead tuples piling up,
replication lag rising) it is the second their finding says the trend began.

>>> from horde.plan.monitors import HostMonitor
>>> from horde.store import MonitorSample
>>> samples = {"db": [MonitorSample("db", s, float(s), 0.0, {"cpu.busy_percent": v}) for s, v in
...                   [(1, 40.0), (2, 93.0), (3, 97.0), (4, 60.0), (5, 99.0)]]}
>>> [crossing.phrase for crossing in limit_crossings([HostMonitor(name="db")], samples, [])]
['db host CPU 97 % from second 2']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from horde.plan.monitors import HostMonitor, Monitor, PostgresMonitor, PrometheusMonitor
from horde.store import MonitorSample


@dataclass(frozen=True)
class Crossing:
    """A resource at its limit: on which monitor, judged by which rule, from which second."""

    monitor: str
    #: The diagnosis rule whose threshold is the limit (``host_cpu``, ``nic_saturated``...).
    rule: str
    subject: str
    metric: str
    second: int
    #: The highest the figure went while it stayed past the limit (None for a trend's finding).
    value: float | None
    #: ``> 90 %``: the limit in words.
    limit: str
    #: ``db host CPU 97 % from second 412``.
    phrase: str

    def to_json(self) -> dict[str, Any]:
        return {
            "monitor": self.monitor,
            "rule": self.rule,
            "subject": self.subject,
            "metric": self.metric,
            "second": self.second,
            "value": None if self.value is None else round(self.value, 3),
            "limit": self.limit,
            "phrase": self.phrase,
        }


# A limit judged second by second: (rule, figure prefix, figure suffix, limit of a sample's values
# (None: not judged in it), the limit in words, the phrase from monitor, subject, peak while past
# the limit, second, and the run's peak).
_Limit = tuple[
    str, str, str, Callable[[Mapping[str, float]], float | None], str, Callable[[str, str, float, int, float], str]
]


def _first_streak(
    samples: Sequence[MonitorSample], metric: str, limit: Callable[[Mapping[str, float]], float | None]
) -> tuple[int, float] | None:
    """The first second ``metric`` passed its limit, and its peak until it fell back under."""
    start: int | None = None
    peak = 0.0
    for sample in samples:
        values = sample.values or {}
        value, bound = values.get(metric), limit(values)
        above = value is not None and bound is not None and value > bound
        if above and value is not None:
            if start is None:
                start, peak = sample.second, value
            peak = max(peak, value)
        elif start is not None:
            break
    return None if start is None else (start, peak)


def _subjects(samples: Sequence[MonitorSample], prefix: str, suffix: str) -> list[str]:
    found: dict[str, None] = {}
    for sample in samples:
        for key in sample.values or {}:
            if key.startswith(prefix + ".") and key.endswith("." + suffix) and len(key) > len(prefix) + len(suffix) + 2:
                found.setdefault(key[len(prefix) + 1 : -len(suffix) - 1], None)
    return list(found)


def _limits(monitor: Monitor) -> list[_Limit]:
    if isinstance(monitor, HostMonitor) or (isinstance(monitor, PrometheusMonitor) and monitor.node_exporter):
        host = monitor.diagnosis
        return [
            (
                "host_cpu",
                "cpu",
                "busy_percent",
                lambda values: host.cpu_percent,
                f"> {host.cpu_percent:g} %",
                lambda name, subject, peak, second, _: f"{name} host CPU {peak:.0f} % from second {second}",
            ),
            (
                "nic_saturated",
                "net",
                "link_percent",
                lambda values: host.nic_percent,
                f"> {host.nic_percent:g} % of the link",
                lambda name, subject, peak, second, _: (
                    f"{name} interface {subject} at {peak:.0f} % of its link from second {second}"
                ),
            ),
        ]
    if isinstance(monitor, PostgresMonitor):
        database = monitor.diagnosis

        def connections(values: Mapping[str, float]) -> float | None:
            maximum = values.get("connections.max")
            # At the limit is already too many: the rule fires at (not past) its share.
            return maximum * database.connections_percent / 100 - 1e-9 if maximum else None

        return [
            (
                "connections",
                "connections",
                "total",
                connections,
                f">= {database.connections_percent:g} % of max_connections",
                lambda name, subject, peak, second, _: (
                    f"{name} connections at {peak:,.0f} (max_connections) from second {second}"
                ),
            ),
            (
                "standby_feedback",
                "replication",
                "xmin_age",
                lambda values: float(database.xmin_age_limit),
                f"> {database.xmin_age_limit:,} transactions",
                # Labelled as the run's peak: the diagnosis gives the age as its rule fired.
                lambda name, subject, peak, second, run_peak: (
                    f"{name} standby {subject} holding back vacuum from second {second} "
                    f"(its xmin {run_peak:,.0f} transactions old at the run's peak)"
                ),
            ),
        ]
    return []


#: Rules that judge a trend: their finding's second is when it began.
_TRENDS = {
    "time_wait": lambda name, subject, second: f"{name} time-wait sockets piling up from second {second}",
    "dead_tuples": lambda name, subject, second: (
        f"{name} table {subject}: dead tuples outrunning autovacuum from second {second}"
    ),
    "replication_lag": lambda name, subject, second: (
        f"{name} standby {subject}: replication lag rising from second {second}"
    ),
}


def limit_crossings(
    monitors: Sequence[Monitor], samples: Mapping[str, Sequence[MonitorSample]], findings: Iterable[Mapping[str, Any]]
) -> list[Crossing]:
    """Every resource that crossed its limit during the run, first crossed first. ``findings``
    are the run's diagnosis (JSON, as the summary keeps it)."""
    crossings: list[Crossing] = []
    for monitor in monitors:
        own = samples.get(monitor.name, [])
        for rule, prefix, suffix, limit, words, phrase in _limits(monitor):
            subjects = [""] if prefix in ("cpu", "connections") else _subjects(own, prefix, suffix)
            for subject in subjects:
                metric = ".".join(part for part in (prefix, subject, suffix) if part)
                streak = _first_streak(own, metric, limit)
                if streak is not None:
                    second, peak = streak
                    run_peak = max((sample.values or {}).get(metric, peak) for sample in own)
                    crossings.append(
                        Crossing(
                            monitor.name,
                            rule,
                            subject or prefix,
                            metric,
                            second,
                            peak,
                            words,
                            phrase(monitor.name, subject, peak, second, run_peak),
                        )
                    )
    seen = {(crossing.monitor, crossing.rule, crossing.subject) for crossing in crossings}
    for finding in findings:
        rule, subject = str(finding["rule"]), str(finding["subject"])
        if rule in _TRENDS and (finding["monitor"], rule, subject) not in seen:
            second = int(finding["second"])
            crossings.append(
                Crossing(
                    str(finding["monitor"]),
                    rule,
                    subject,
                    str(finding["metric"]),
                    second,
                    None,
                    "its diagnosis rule",
                    _TRENDS[rule](str(finding["monitor"]), subject, second),
                )
            )
    return sorted(crossings, key=lambda crossing: (crossing.second, crossing.monitor, crossing.rule))
