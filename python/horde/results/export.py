"""Export a stored run second by second, step by step, as CSV or JSON (``horde export``).

One row per step per second (a second in which no step had an outcome still gets one row, with
empty step columns, so the run's gauges are never lost): the step's counters and the percentiles
of that second's histogram, beside the run's own figures for that second (VUs, target level,
dropped arrivals, the generator's CPU and timer lateness). Both formats hold the same rows; in
JSON the errors by kind are a dict, in CSV one ``errors_<kind>`` column per kind seen in the run.

Monitors (the target's side): in JSON, a ``monitors`` object keeps every sample of each monitor
as a row of its own (``{"second", "elapsed_s", "timestamp", "values", "error"}``: ``values`` null
and ``error`` the reason in a gap). In CSV they are columns after the run's own: for each
monitor, ``monitor.NAME.error`` (a gap's reason; empty when read) then ``monitor.NAME.FIGURE``
for every figure it gave during the run (in the order first given), each filled on the rows of
its sample's second; a sample of a second without a snapshot (second 0: its first reading
failed) is in the JSON only.

>>> csv_columns(["timeout", "status_503"])[:8]
['second', 'elapsed_s', 'interval_s', 'timestamp', 'final', 'scenario', 'step', 'kind']
>>> csv_columns(["timeout", "status_503"])[10:13]
['errors', 'errors_status_503', 'errors_timeout']
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from typing import Any, Final, Literal, TextIO

from horde.engine import histogram
from horde.results.stored_run import RunResults
from horde.engine.snapshot import StepSnapshot

ExportFormat = Literal["csv", "json"]
FORMATS: Final[tuple[ExportFormat, ...]] = ("csv", "json")

_TIME_COLUMNS: Final = ("second", "elapsed_s", "interval_s", "timestamp", "final")
_STEP_COLUMNS: Final = ("scenario", "step", "kind", "requests", "ok", "errors")
_FIGURE_COLUMNS: Final = ("rps", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "bytes_sent", "bytes_received")
#: The run's own figures of each second, repeated on each of that second's rows.
RUN_COLUMNS: Final = (
    "active_vus",
    "target_vus",
    "target_rate_per_s",
    "dropped_arrivals",
    "cpu_percent",
    "timer_lateness_p99_ms",
)
_PERCENTILES: Final = (50.0, 90.0, 95.0, 99.0)


def error_kinds(results: RunResults) -> list[str]:
    """Every error kind seen anywhere in the run, sorted."""
    return sorted({kind for snapshot in results.snapshots for entry in snapshot["steps"] for kind in entry["errors"]})


def csv_columns(kinds: Iterable[str]) -> list[str]:
    """The CSV header: the row's columns with ``errors_by_kind`` spread into one per kind."""
    per_kind = [f"errors_{kind}" for kind in sorted(kinds)]
    return [*_TIME_COLUMNS, *_STEP_COLUMNS, *per_kind, *_FIGURE_COLUMNS, *RUN_COLUMNS]


def monitor_columns(results: RunResults) -> list[str]:
    """The CSV's monitor columns: per monitor its gap column, then a column per figure it gave.

    >>> from horde.store import MonitorSample
    >>> run = RunResults(record=None, snapshots=[], summary={}, workers=1, monitor_samples={"db": [
    ...     MonitorSample("db", 1, 1.0, 0.0, {"cpu.busy_percent": 40.0}), MonitorSample("db", 2, 2.0, 0.0, None, "refused")]})
    >>> monitor_columns(run)
    ['monitor.db.error', 'monitor.db.cpu.busy_percent']
    """
    columns: list[str] = []
    for name, samples in results.monitor_samples.items():
        columns.append(f"monitor.{name}.error")
        columns.extend(
            dict.fromkeys(f"monitor.{name}.{metric}" for sample in samples for metric in sample.values or {})
        )
    return columns


def _monitor_cells(results: RunResults) -> dict[int, dict[str, Any]]:
    """Each second's monitor cells (column -> value) for the CSV."""
    cells: dict[int, dict[str, Any]] = {}
    for name, samples in results.monitor_samples.items():
        for sample in samples:
            into = cells.setdefault(sample.second, {})
            into[f"monitor.{name}.error"] = sample.error
            into.update({f"monitor.{name}.{metric}": value for metric, value in (sample.values or {}).items()})
    return cells


def export_rows(results: RunResults) -> list[dict[str, Any]]:
    """The export's rows, in second order then the snapshot's step order."""
    rows: list[dict[str, Any]] = []
    for snapshot in results.snapshots:
        when = {key: snapshot.get(key) for key in _TIME_COLUMNS}
        gauges = {key: snapshot.get(key) for key in RUN_COLUMNS}
        interval_s = float(snapshot.get("interval_s") or 0.0)
        if not snapshot["steps"]:
            rows.append({**when, **_empty_step(), **gauges})
        for entry in snapshot["steps"]:
            rows.append({**when, **_step_figures(entry, interval_s), **gauges})
    return rows


def write_export(results: RunResults, export_format: ExportFormat, stream: TextIO) -> None:
    """Write the export to ``stream`` (text) in ``export_format``."""
    rows = export_rows(results)
    kinds = error_kinds(results)
    if export_format == "json":
        record = results.record
        kinds_of_monitors = {
            str(monitor.get("name")): monitor.get("type") for monitor in record.plan.get("monitors") or []
        }
        document = {
            "run_id": record.run_id,
            "plan_name": record.plan_name,
            "status": record.status,
            "started_at": record.started_at.isoformat(),
            "ended_at": record.ended_at.isoformat() if record.ended_at else None,
            "tags": record.tags,
            "parameters": record.parameters,
            "error_kinds": kinds,
            "rows": rows,
            "monitors": {
                name: {
                    "type": kinds_of_monitors.get(name),
                    "samples": [
                        {
                            "second": sample.second,
                            "elapsed_s": sample.elapsed_s,
                            "timestamp": sample.timestamp,
                            "values": sample.values,
                            "error": sample.error,
                        }
                        for sample in samples
                    ],
                }
                for name, samples in results.monitor_samples.items()
            },
        }
        json.dump(document, stream, indent=1)
        stream.write("\n")
        return
    monitored = _monitor_cells(results)
    writer = csv.DictWriter(stream, fieldnames=[*csv_columns(kinds), *monitor_columns(results)], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        flat = {key: value for key, value in row.items() if key != "errors_by_kind"}
        flat.update(monitored.get(int(row["second"]), {}))
        by_kind = row["errors_by_kind"]
        for kind in kinds:
            # Every kind has a number on a step row (0 when absent); a row without a step has none.
            flat[f"errors_{kind}"] = by_kind.get(kind, 0) if row["step"] is not None else None
        writer.writerow({key: "" if value is None else value for key, value in flat.items()})


def _step_figures(entry: StepSnapshot, interval_s: float) -> dict[str, Any]:
    requests = int(entry["requests"])
    latency = histogram.stats(entry["histogram"], _PERCENTILES) if requests else None
    return {
        "scenario": entry["scenario"],
        "step": entry["step"],
        "kind": entry.get("kind") or "request",
        "requests": requests,
        "ok": int(entry["ok"]),
        "errors": requests - int(entry["ok"]),
        "errors_by_kind": dict(sorted((kind, int(count)) for kind, count in entry["errors"].items())),
        "rps": round(requests / interval_s, 3) if interval_s > 0 else None,
        "p50_ms": latency.percentile(50.0) if latency else None,
        "p90_ms": latency.percentile(90.0) if latency else None,
        "p95_ms": latency.percentile(95.0) if latency else None,
        "p99_ms": latency.percentile(99.0) if latency else None,
        "max_ms": latency.max_ms if latency else None,
        "bytes_sent": int(entry["bytes_sent"]),
        "bytes_received": int(entry["bytes_received"]),
    }


def _empty_step() -> dict[str, Any]:
    return {
        "scenario": None,
        "step": None,
        "kind": None,
        "requests": 0,
        "ok": 0,
        "errors": 0,
        "errors_by_kind": {},
        "rps": None,
        "p50_ms": None,
        "p90_ms": None,
        "p95_ms": None,
        "p99_ms": None,
        "max_ms": None,
        "bytes_sent": 0,
        "bytes_received": 0,
    }
