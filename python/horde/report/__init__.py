"""Self-contained HTML reports of stored runs (``horde report``): one file, offline from disk.

A run report draws the run's stored snapshots (rates, latency percentiles per second overall and
per step, the latency distribution, errors by kind, load, the generator's health), each monitor's
figures on the same time axis with the diagnosis, and tables
whose numbers are exactly those of ``horde show RUN --json``. A comparison report overlays
several runs and gives, for each against the first, the per-step verdicts of
:mod:`horde.results.compare`.

>>> from horde.store import Store                                     # doctest: +SKIP
>>> from horde.results.stored_run import load_run                            # doctest: +SKIP
>>> with Store.open() as store:                                       # doctest: +SKIP
...     write_report([load_run(store, "last")], Path("report.html"))
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from horde import __version__
from horde.results.compare import ComparisonRule, RunComparison, compare_runs
from horde.results.littles_law import littles_law_warning
from horde.errors import InvalidInput
from horde.plan.redaction import redact_plan
from horde.report.capacity_view import broke_first_marks, capacity_charts, capacity_view
from horde.report.charts import comparison_charts, monitor_charts, run_charts
from horde.report.monitors_view import monitors_view, stored_findings
from horde.report.page import ReportUnavailable, render
from horde.report.series import monitor_series, run_series, saturation_note
from horde.results.stored_run import ALL_REQUESTS, RunResults

__all__ = ["ReportUnavailable", "render_comparison_report", "render_run_report", "write_report"]

#: Summary sections judged when the run ended, shown when present (in this order, then any other).
KNOWN_SECTIONS: Final = {
    "thresholds": "Thresholds",
    "autostop": "Autostop",
    "capacity": "Capacity",
    "sight": "Sighting shot",
}

_STEP_FIELDS: Final = ("requests", "errors", "error_percent", "rps")
_LATENCY_FIELDS: Final = ("p50", "p90", "p95", "p99", "max")


def render_run_report(results: RunResults) -> str:
    """The HTML of one run's report."""
    summary = results.summary
    monitors = monitor_series(results.record.plan, results.monitor_samples)
    findings = stored_findings(results.record.plan, summary, results.monitor_samples)
    return render(
        "run.html.j2",
        title=f"Horde run {results.run_id} — {results.record.plan_name}",
        version=__version__,
        run=_run_header(results),
        summary=summary,
        step_rows=_step_rows(summary),
        latency=_latency(summary),
        saturation=saturation_note(summary),
        littles_law=littles_law_warning(summary),
        sections=_sections(results),
        capacity=capacity_view(summary.get("capacity")),
        monitors=monitors_view(monitors, findings, summary.get("monitors")),
        figures={
            **run_charts(run_series(results)),
            **capacity_charts(summary.get("capacity")),
            **monitor_charts(monitors, findings, broke_first_marks(summary.get("capacity"))),
        },
        all_requests=ALL_REQUESTS,
    )


def render_comparison_report(runs: Sequence[RunResults], rule: ComparisonRule | None = None) -> str:
    """The HTML of a comparison of ``runs``: the first is the baseline, each other is compared
    with it."""
    if len(runs) < 2:
        raise InvalidInput("a comparison report needs at least two runs", hint="horde report BASELINE CANDIDATE [...]")
    rule = rule or ComparisonRule()
    comparisons: list[RunComparison] = [compare_runs(runs[0], candidate, rule) for candidate in runs[1:]]
    labels = [_label(results) for results in runs]
    return render(
        "comparison.html.j2",
        title=f"Horde comparison of {len(runs)} runs — baseline {runs[0].run_id}",
        version=__version__,
        runs=[_run_header(results) | {"label": label} for results, label in zip(runs, labels)],
        comparisons=comparisons,
        rule=rule,
        figures=comparison_charts(labels, [run_series(results) for results in runs]),
    )


def write_report(runs: Sequence[RunResults], path: Path, rule: ComparisonRule | None = None) -> Path:
    """Write the report of one run, or the comparison of several, to ``path``; return it."""
    html = render_run_report(runs[0]) if len(runs) == 1 else render_comparison_report(runs, rule)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    except OSError as error:
        raise InvalidInput(
            f"cannot write the report to {path}: {error.strerror or error}", hint="give a writable file path with -o"
        ) from error
    return path


def _label(results: RunResults) -> str:
    tags = " ".join(f"{key}={value}" for key, value in results.record.tags.items())
    return f"{results.run_id} ({tags})" if tags else results.run_id


def _run_header(results: RunResults) -> dict[str, Any]:
    record = results.record
    return {
        "run_id": record.run_id,
        "plan_name": record.plan_name,
        "status": record.status,
        "started_at": record.started_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "ended_at": record.ended_at.strftime("%Y-%m-%d %H:%M:%S UTC") if record.ended_at else None,
        "duration_s": results.summary["duration_s"],
        "host": record.host,
        "tags": record.tags,
        "parameters": record.parameters,
        # Stored plans are redacted when stored; again here for runs stored by other means.
        "plan_json": json.dumps(redact_plan(record.plan), indent=2),
    }


def _latency(figures: Mapping[str, Any]) -> dict[str, Any] | None:
    """A step's (or the run's) latency figures, or None where no request got a response: the
    summary writes 0 there, a figure no response measured (``responses`` says how many were
    timed; summaries stored before it carry latency alone)."""
    if figures.get("responses", 1) == 0:
        return None
    return {key: figures["latency_ms"][key] for key in _LATENCY_FIELDS}


def _step_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per step, then all requests: the summary's figures, untouched, but for latency
    where nothing answered (``latency`` None: the page says so instead of 0 ms)."""
    rows = []
    for name, figures in [*summary["steps"].items(), (ALL_REQUESTS, summary)]:
        latency = _latency(figures)
        rows.append(
            {
                "name": name,
                "kind": figures.get("kind", "request"),
                **{key: figures[key] for key in _STEP_FIELDS},
                "latency": latency,
                "errors_by_kind": figures.get("errors_by_kind") or {},
                # sql steps: the rows their statements returned or changed.
                "rows": figures.get("rows"),
                "rows_per_s": figures.get("rows_per_s"),
                # http_version "2" or "auto": requests by the protocol they went over.
                "http1": figures.get("http1"),
                "http2": figures.get("http2"),
                "h2_stalls": figures.get("h2_stalls"),
            }
        )
    return rows


def _sections(results: RunResults) -> list[dict[str, Any]]:
    """The summary's further sections (thresholds, autostop, capacity, any other), each with the
    shape it has: a list of records is a table, a mapping a list of figures."""
    summary: Mapping[str, Any] = results.summary
    found = {key: summary[key] for key in KNOWN_SECTIONS if summary.get(key) is not None}
    for key, value in results.stored_sections().items():
        if value is not None:
            found.setdefault(key, value)
    sections = []
    found.pop("capacity", None)  # drawn on its own: facts, the steps' table, the knee's charts
    found.pop("monitors", None)  # drawn on its own: the diagnosis, a table and a chart per source
    for key, value in found.items():
        title = KNOWN_SECTIONS.get(key, key.replace("_", " ").capitalize())
        if isinstance(value, list) and all(isinstance(item, dict) for item in value):
            columns = list(dict.fromkeys(column for item in value for column in item))
            sections.append({"key": key, "title": title, "shape": "records", "columns": columns, "records": value})
        elif isinstance(value, dict):
            sections.append({"key": key, "title": title, "shape": "mapping", "items": list(value.items())})
        else:
            sections.append({"key": key, "title": title, "shape": "value", "value": value})
    return sections
