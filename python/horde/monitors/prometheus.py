"""The ``prometheus`` source: one scrape of an exporter's ``/metrics`` per interval.

The series a monitor asks for (by name and label filters) are kept; a counter's value becomes
its per-second rate since the last scrape (a counter that went down was reset: it counted from
zero), a gauge stays its value. A series' figure is named after the series and the values of the
labels the filter did not pin, in label order: ``node_network_receive_bytes_total.eth0``; a
filter with ``sum: true`` adds its series into one figure named after the metric. With
``node_exporter: true`` the scrape also gives the host source's figures
(:mod:`horde.monitors.node_exporter`), so a remote machine is watched and judged like this one.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request

from horde.monitors.exposition import ExpositionError, Family, is_counter, parse_exposition
from horde.monitors.node_exporter import NodeFigures
from horde.monitors.source import CounterRates, SourceUnavailable
from horde.plan.monitors import PrometheusMonitor, Series

# Scrapes are small; a runaway endpoint must not fill the control plane's memory.
_MAX_BYTES = 32 * 1024 * 1024
_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"


def _matches(series: Series, labels: dict[str, str]) -> bool:
    for label, wanted in series.labels.items():
        value = labels.get(label, "")
        if wanted.startswith("~"):
            if re.fullmatch(wanted[1:], value) is None:
                return False
        elif value != wanted:
            return False
    return True


def figure_name(series: Series, name: str, labels: dict[str, str]) -> str:
    """``name`` followed by the values of the labels the filter did not pin to one value.

    >>> figure_name(Series(name="x_total", labels={"mode": "idle"}), "x_total", {"cpu": "0", "mode": "idle"})
    'x_total.0'
    """
    pinned = {label for label, value in series.labels.items() if not value.startswith("~")}
    free = [labels[label] for label in sorted(labels) if label not in pinned]
    return ".".join([name, *free])


def select_series(series: Series, families: dict[str, Family]) -> list[tuple[str, bool, float]]:
    """The samples a filter keeps: (figure name, is a counter, value)."""
    family = families.get(series.name)
    if family is None:
        for candidate in families.values():
            if any(sample[0] == series.name for sample in candidate.samples):
                family = candidate
                break
    if family is None:
        return []
    kept = [
        (figure_name(series, name, labels), is_counter(family, name), value)
        for name, labels, value in family.samples
        if name == series.name and _matches(series, labels)
    ]
    if series.sum and kept:
        return [(series.name, kept[0][1], sum(value for _, _, value in kept))]
    return kept


class PrometheusSource:
    kind = "prometheus"

    def __init__(self, monitor: PrometheusMonitor) -> None:
        self.name = monitor.name
        self._monitor = monitor
        self._rates = CounterRates()
        self._node = NodeFigures(monitor.diagnosis.link_speed_mbps) if monitor.node_exporter else None

    def scrape(self) -> dict[str, Family]:
        request = urllib.request.Request(self._monitor.url, headers={"Accept": _ACCEPT, "User-Agent": "horde-monitor"})
        try:
            with urllib.request.urlopen(request, timeout=self._monitor.timeout_ms / 1000) as response:  # noqa: S310 - http(s) checked by the plan
                body = response.read(_MAX_BYTES + 1)
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            raise SourceUnavailable(f"cannot scrape {self._monitor.url}: {reason}") from error
        if len(body) > _MAX_BYTES:
            raise SourceUnavailable(f"{self._monitor.url} answered more than {_MAX_BYTES // 2**20} MiB")
        try:
            return parse_exposition(body.decode("utf-8", errors="replace"))
        except ExpositionError as error:
            raise SourceUnavailable(f"{self._monitor.url} is not a Prometheus endpoint: {error}") from error

    def open(self) -> None:
        self.scrape()

    def close(self) -> None:
        pass

    def read(self, now: float) -> dict[str, float]:
        families = self.scrape()
        values: dict[str, float] = {}
        for series in self._monitor.series:
            for figure, counter, value in select_series(series, families):
                if counter:
                    rate = self._rates.rate(figure, value, now)
                    if rate is not None:
                        values[figure] = rate
                else:
                    values[figure] = value
        if self._node is not None:
            values.update(self._node.read(families, now))
        return values
