"""A run's monitors in its summary: per monitor its samples, gaps and headline figures (mean,
peak, last), and the diagnosis; what ``horde show``, the report and the dashboard print.

A share's mean is the run's share, not the mean of each reading's: the HOT share is the run's
HOT updates over its updates, each reading's share weighted by the updates it covers; the cache
hit share the run's hits over its blocks accessed (hits and reads).

>>> readings = [MonitorSample("pg", 1, 1.0, 0.0, {"hot_update_percent": 90.0, "rows.updated_per_s": 100.0}),
...             MonitorSample("pg", 2, 2.0, 0.0, {"hot_update_percent": 10.0, "rows.updated_per_s": 300.0})]
>>> figures_of(readings, ["hot_update_percent"])["hot_update_percent"]
{'mean': 30.0, 'max': 90.0, 'last': 10.0}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from horde.monitors.diagnosis import Finding
from horde.store import MonitorSample
from horde.results.summary_blocks import MonitorsBlock

#: The figures a summary lists per kind of source, in this order, when the source gave them.
HEADLINE: dict[str, tuple[str, ...]] = {
    "host": (
        "cpu.busy_percent",
        "cpu.iowait_percent",
        "cpu.steal_percent",
        "load.1m",
        "memory.used_percent",
        "net.rx_bytes_per_s",
        "net.tx_bytes_per_s",
        "tcp.established",
        "tcp.time_wait",
        "files.open",
    ),
    "postgres": (
        "transactions_per_s",
        "statements.select_per_s",
        "statements.insert_per_s",
        "statements.update_per_s",
        "statements.delete_per_s",
        "rows.returned_per_s",
        "rows.fetched_per_s",
        "cache_hit_percent",
        "hot_update_percent",
        "dead_tuples",
        "autovacuum_runs",
        "connections.total",
        "locks_waiting",
        "deadlocks",
        "temp_bytes_per_s",
        "replication_lag_s",
        "replication_lag_bytes",
        "standby_xmin_age",
    ),
}
#: Figures added up over the run rather than averaged (counts per interval).
COUNTS = ("autovacuum_runs", "autoanalyze_runs", "deadlocks")
#: The most figures a prometheus source lists (its series, in the order first seen).
MAX_SERIES = 20
#: Shares (%) whose mean over a run is weighted: by the rate of what they are a share of.
SHARES_OF: dict[str, str] = {"hot_update_percent": "rows.updated_per_s", "cache_hit_percent": "blocks.accessed_per_s"}


def share_over_run(
    elapsed_s: Sequence[float], shares: Sequence[float | None], rates: Sequence[float | None]
) -> float | None:
    """The run's share (%) from each reading's share and the rate of what it is a share of, the
    readings on the run's time axis (``elapsed_s``): each share weighted by the count its rate
    gives over the time since the reading before (the run's start for the first; a gap's time
    counts in the next reading, whose rates span it). None when nothing was counted.

    >>> share_over_run([1.0, 2.0, 4.0], [100.0, None, 0.0], [50.0, 20.0, 200.0])
    11.111
    """
    part = whole = 0.0
    previous = 0.0
    for elapsed, share, rate in zip(elapsed_s, shares, rates):
        if rate is None:
            continue
        if share is not None:
            count = rate * (elapsed - previous)
            whole += count
            part += count * share / 100
        previous = elapsed
    return round(100 * part / whole, 3) if whole > 0 else None


def headline_metrics(kind: str, node_exporter: bool, seen: Sequence[str]) -> list[str]:
    if kind == "prometheus":
        series = [
            metric
            for metric in seen
            if not metric.startswith(("cpu.", "load.", "memory.", "net.", "tcp.", "disk.", "files."))
        ]
        return series[:MAX_SERIES] + ([m for m in HEADLINE["host"] if m in seen] if node_exporter else [])
    return [metric for metric in HEADLINE.get(kind, ()) if metric in seen]


def figures_of(samples: Sequence[MonitorSample], metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for metric in metrics:
        values = [sample.values[metric] for sample in samples if sample.values is not None and metric in sample.values]
        if not values:
            continue
        entry = {"mean": sum(values) / len(values), "max": max(values), "last": values[-1]}
        if metric in SHARES_OF:
            readings = [sample for sample in samples if sample.values is not None]
            run_share = share_over_run(
                [sample.elapsed_s for sample in readings],
                [(sample.values or {}).get(metric) for sample in readings],
                [(sample.values or {}).get(SHARES_OF[metric]) for sample in readings],
            )
            entry["mean"] = entry["mean"] if run_share is None else run_share
        if metric in COUNTS:
            entry["total"] = sum(values)
        figures[metric] = {key: round(value, 3) for key, value in entry.items()}
    return figures


def monitors_block(
    kinds: dict[str, str],
    node_exporters: set[str],
    samples: dict[str, list[MonitorSample]],
    findings: Sequence[Finding],
    warnings: Sequence[str],
) -> MonitorsBlock:
    """The summary's ``monitors`` block."""
    sources: dict[str, Any] = {}
    for name, kind in kinds.items():
        own = [sample for sample in samples.get(name, []) if sample.second > 0 or sample.is_gap]
        seen: list[str] = []
        for sample in own:
            for metric in sample.values or {}:
                if metric not in seen:
                    seen.append(metric)
        gaps = [sample for sample in own if sample.is_gap]
        sources[name] = {
            "type": kind,
            "samples": sum(1 for sample in own if not sample.is_gap),
            "gaps": len(gaps),
            "first_gap": None if not gaps else {"second": gaps[0].second, "reason": gaps[0].error},
            "figures": figures_of(own, headline_metrics(kind, name in node_exporters, seen)),
        }
    return {
        "sources": sources,
        "warnings": list(warnings),
        "diagnosis": [finding.to_json() for finding in sorted(findings, key=lambda f: (f.second, f.monitor))],
    }
