"""A run as the dashboard shows it, built second by second while the run is still going.

The report draws a finished run in one pass (``report.series.run_series`` over every
snapshot, then ``report.charts``). A live run gets a new second every second for hours, so
redoing that pass each second would cost more the longer the run. :class:`RunView` keeps what
the pass would build and extends it with each batch of new seconds: the batch goes through
``run_series`` itself, and its series are appended to the run's; the summary comes from the
same ``SummaryBuilder`` that ``horde show`` uses, fed as seconds arrive. Fed the whole run, in
any number of batches, a view equals the report's figures and ``horde show``'s numbers (the
tests hold it to that).

:class:`FigureDeltas` then turns successive figures into what a browser that already drew the
previous ones needs: the new points of each trace (``Plotly.extendTraces``), a trace replaced
when it changed otherwise (the generator's limit lines grow with the run), changed layout keys,
or a whole chart when its traces changed (a new step, a new error kind).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from horde.control.measure import Figures, Scope, combine, format_limit, format_value, measure, unit_of
from horde.engine import histogram
from horde.plan.control import AutostopRule, Threshold
from horde.plan.message import is_message_url
from horde.report.capacity_view import capacity_view
from horde.report.charts import Figure, monitor_charts, run_charts
from horde.report.monitors_view import MonitorsWatch
from horde.report.series import LatencySeries, RunSeries, distribution, run_series, saturation_note
from horde.results.stored_run import ALL_REQUESTS, RunResults, StepId, step_names, workers_of
from horde.store import MonitorSample, RunRecord
from horde.results.littles_law import littles_law_warning
from horde.results.summary import CPU_SATURATION_PERCENT_PER_WORKER, Summary, SummaryBuilder, summarise
from horde.engine.snapshot import Snapshot

#: How far behind the latest second taken the monitors' samples are read again (a monitor's
#: thread may store second N after another's N + 1; a reading slower than this is a gap anyway).
MONITOR_LAG_S: Final = 10
#: The figures of the per-step table, in its column order (``horde show --json``'s keys).
STEP_FIELDS: Final = ("requests", "errors", "error_percent", "rps")
LATENCY_FIELDS: Final = ("p50", "p90", "p95", "p99", "max")


def step_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per step, then all requests: the summary's figures, untouched, and how many
    responses its latency figures cover (none: the page shows no latency, not 0 ms)."""
    rows = []
    for name, figures in [*summary.get("steps", {}).items(), (ALL_REQUESTS, summary)]:
        rows.append(
            {
                "name": name,
                "kind": figures.get("kind", "request"),
                **{key: figures.get(key) for key in STEP_FIELDS},
                **{key: figures.get("latency_ms", {}).get(key) for key in LATENCY_FIELDS},
                "responses": figures.get("responses"),
                "errors_by_kind": figures.get("errors_by_kind") or {},
            }
        )
    return rows


def _scoped(condition: str, step: str | None, scenario: str | None) -> str:
    """A condition with the scope it is judged on, as the verdicts word it: ``p95 < 200ms [step login]``."""
    if step is None and scenario is None:
        return condition
    return f"{condition} [{Scope.of(step=step, scenario=scenario).describe()}]"


def _judged_rows(verdicts: list[Any]) -> list[dict[str, str]]:
    """The stored verdicts (the summary's ``thresholds``) as the page lists them."""
    rows = []
    for record in verdicts:
        if not isinstance(record, dict):
            continue
        verdict = "passed" if record.get("passed") else "failed"
        name = _scoped(str(record.get("condition")), record.get("step"), record.get("scenario"))
        message = str(record.get("message") or "")
        # The message repeats the condition: "p95 < 200ms passed: 150 ms"; what follows is the figure.
        detail = message.split(f" {verdict}: ", 1)[1] if f" {verdict}: " in message else message
        rows.append({"condition": name, "verdict": verdict, "detail": detail})
    return rows


class LiveThresholds:
    """A running run's thresholds judged on its seconds so far (each scope's figures extended by
    each batch, never read again), for the page to show where each stands before the verdict
    that counts: the one judged on the whole stored run when it ends."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.thresholds: list[Threshold | str] = []
        for item in plan.get("thresholds") or []:
            try:
                self.thresholds.append(Threshold.model_validate(item))
            except ValidationError:  # a plan stored by another version of Horde: shown, not judged
                self.thresholds.append(str(item.get("condition") if isinstance(item, dict) else item))
        self._figures: dict[Scope, Figures] = {}

    def add(self, snapshots: list[Snapshot]) -> None:
        """Take the next seconds of the run (each once)."""
        scopes = {
            Scope.of(step=threshold.step, scenario=threshold.scenario)
            for threshold in self.thresholds
            if not isinstance(threshold, str) and threshold.monitor_condition is None
        }
        for scope in scopes:
            part = measure(snapshots, steps=scope.steps, scenario=scope.scenario)
            self._figures[scope] = combine([self._figures[scope], part]) if scope in self._figures else part

    def rows(self) -> list[dict[str, str]]:
        rows = []
        for threshold in self.thresholds:
            if isinstance(threshold, str):
                rows.append({"condition": threshold, "verdict": "pending", "detail": "judged when the run ends"})
                continue
            name = _scoped(threshold.condition, threshold.step, threshold.scenario)
            if threshold.monitor_condition is not None:
                rows.append(
                    {
                        "condition": name,
                        "verdict": "pending",
                        "detail": "judged on the monitor's samples when the run ends",
                    }
                )
                continue
            figures = self._figures.get(Scope.of(step=threshold.step, scenario=threshold.scenario))
            condition = threshold.parsed
            measured = figures.value(condition) if figures is not None else None
            if measured is None:
                rows.append({"condition": name, "verdict": "pending", "detail": "nothing measured yet"})
                continue
            holds = condition.holds(measured)
            shown = format_value(measured, unit_of(condition))
            rows.append(
                {
                    "condition": name,
                    "verdict": "passing" if holds else "failing",
                    "detail": f"{shown} so far" + ("" if holds else f", not {format_limit(condition)}"),
                }
            )
        return rows


def threshold_rows(
    record: RunRecord, status: str, summary: Mapping[str, Any], live: LiveThresholds | None = None
) -> list[dict[str, str]]:
    """Each threshold of the run, readable, with its verdict: ``condition`` (with its scope),
    ``verdict`` (``passed`` or ``failed`` once judged; while the run goes, ``passing``,
    ``failing`` or ``pending`` on its seconds so far) and ``detail`` (the figure)."""
    judged = summary.get("thresholds")
    if isinstance(judged, list):
        return _judged_rows(judged)
    if live is not None:
        return live.rows()
    # A stored run without verdicts: interrupted before they were judged, or its process died.
    detail = "judged when the run ends" if status == "running" else "not judged: the run stored no verdict"
    return [{**row, "verdict": "pending", "detail": detail} for row in LiveThresholds(record.plan).rows()]


def autostop_texts(plan: dict[str, Any]) -> list[str]:
    """The plan's autostop rules in words: ``p95 > 500ms over the last 10 s [step login], from 30 s``."""
    texts = []
    for item in plan.get("autostop") or []:
        try:
            rule = AutostopRule.model_validate(item)
        except ValidationError:
            texts.append(str(item.get("when") if isinstance(item, dict) else item))
            continue
        text = f"{_scoped(rule.when, rule.step, rule.scenario)} over the last {rule.window_s} s"
        texts.append(text + (f", from {rule.after_s:g} s into the run" if rule.after_s else ""))
    return texts


def run_header(record: RunRecord, status: str | None = None) -> dict[str, Any]:
    """A run's identity, JSON-ready."""
    return {
        "run_id": record.run_id,
        "plan_name": record.plan_name,
        "status": status or record.status,
        "started_at": record.started_at.isoformat(),
        "ended_at": record.ended_at.isoformat() if record.ended_at else None,
        "host": record.host,
        "pid": record.pid,
        "tags": record.tags,
        "parameters": record.parameters,
        # What the run was asked to judge, as the plan holds it (the page shows state["thresholds"]).
        "thresholds": record.plan.get("thresholds") or [],
        "autostop": record.plan.get("autostop") or [],
        "autostop_rules": autostop_texts(record.plan),
        "steer": record.plan.get("steer"),
        "models": sorted(
            {scenario.get("workload", {}).get("type", "closed") for scenario in record.plan.get("scenarios", [])}
        ),
        "scenarios": [scenario.get("name") for scenario in record.plan.get("scenarios", [])],
        "monitors": [monitor.get("name") for monitor in record.plan.get("monitors") or []],
        # A message target: the page holds the message charts, drawn once its seconds come.
        "messages": is_message_url(str((record.plan.get("target") or {}).get("base_url") or "")),
    }


def run_state(
    record: RunRecord,
    status: str,
    summary: Mapping[str, Any],
    last: Snapshot | None,
    monitors: dict[str, Any] | None = None,
    thresholds: LiveThresholds | None = None,
) -> dict[str, Any]:
    """What the run page draws but the figures, JSON-ready: the run, its summary and steps
    table, its thresholds with their verdicts (:func:`threshold_rows`; ``thresholds``: a running
    run's, judged so far), the saturation warning, the gauges of its last second (``last``),
    and the monitors' tables and diagnosis (``monitors``:
    :func:`~horde.report.monitors_view.monitors_view`)."""
    seen: dict[str, Any] = dict(last) if last is not None else {}
    verdicts = threshold_rows(record, status, summary, thresholds)
    return {
        "monitors": monitors,
        "run": run_header(record, status),
        "summary": summary,
        "steps": step_rows(summary),
        "thresholds": verdicts,
        "thresholds_failed": sum(1 for row in verdicts if row["verdict"] == "failed"),
        "saturation": saturation_note(summary),
        "littles_law": littles_law_warning(summary),
        # The capacity answer as a lab shows it (facts, the steps' table); its charts are figures.
        "capacity": capacity_view(summary.get("capacity")),
        "last_second": int(seen.get("second") or 0),
        "elapsed_s": seen.get("elapsed_s"),
        "timestamp": seen.get("timestamp"),
        "now": {
            key: seen.get(key)
            for key in (
                "active_vus",
                "target_vus",
                "target_rate_per_s",
                "busy_vus",
                "cpu_percent",
                "timer_lateness_p99_ms",
                "lost_share",
            )
        },
        # A run over several generators: each one's last second (a slow or lost one stands out).
        "generators": seen.get("generators"),
    }


class RunView:
    """One run's summary and figures, extended by :meth:`add` as seconds arrive."""

    def __init__(self, record: RunRecord, *, distribution_every_s: int = 1) -> None:
        """``distribution_every_s``: redraw the latency distribution at most once per that many
        of the run's seconds (and on its final second). It is the costly part of a second (each
        step's histogram read bucket by bucket) and the bulkiest to send; 1 keeps it exact."""
        self.record = record
        self.distribution_every_s = distribution_every_s
        self._distribution_second: int | None = None
        #: Each step's distribution curve (None: all requests) as last drawn.
        self._curves: dict[StepId | None, tuple[list[float], list[float]]] = {}
        self.workers = workers_of(record)
        #: The last second added (0 before any).
        self.last_second = 0
        self.last_snapshot: Snapshot | None = None
        self._builder = SummaryBuilder(workers=self.workers, plan=record.plan)
        self._kinds: dict[StepId, str] = {}
        self._merged: dict[StepId, bytes] = {}
        self._names: dict[StepId, str] = {}
        self._series = _empty_series(self.workers)
        self.monitors = MonitorsWatch(record.plan)
        self.thresholds = LiveThresholds(record.plan)

    def add_monitor_samples(self, samples: dict[str, list[MonitorSample]]) -> None:
        """Take the monitors' samples stored since the last call (any already taken are skipped)."""
        self.monitors.add(samples)

    @property
    def monitors_read_after(self) -> int:
        """The second after which the monitors' samples are read again: a little behind the
        latest taken, as the samples of one second are stored by several threads."""
        return max(0, max(self.monitors.last_seconds.values(), default=0) - MONITOR_LAG_S)

    def add(self, snapshots: list[Snapshot]) -> None:
        """Take the next seconds of the run (in order, none seen before)."""
        if not snapshots:
            return
        self.thresholds.add(snapshots)
        for snapshot in snapshots:
            self._builder.add(snapshot)
            for entry in snapshot["steps"]:
                step_id = (entry["scenario"], entry["step"])
                self._kinds.setdefault(step_id, entry.get("kind") or "request")
                previous = self._merged.get(step_id)
                self._merged[step_id] = histogram.merge(
                    [previous, entry["histogram"]] if previous else [entry["histogram"]]
                )
        # The batch's summary is not read by its series: an empty one stands in.
        empty = summarise([], run_id=self.record.run_id, status=self.record.status)
        batch = _Seconds(record=self.record, snapshots=snapshots, summary=empty, workers=self.workers)
        part = run_series(batch)
        self._rename_steps()
        batch_ids = {name: step_id for step_id, name in step_names(batch.step_ids()).items()}
        _extend(self._series, part, lambda name: name if name == ALL_REQUESTS else self._names[batch_ids[name]])
        self.last_second = int(snapshots[-1]["second"])
        self.last_snapshot = snapshots[-1]
        if (
            self._distribution_second is None
            or snapshots[-1]["final"]
            or self.last_second - self._distribution_second >= self.distribution_every_s
        ):
            self._distribution_second = self.last_second
            self._curves = {None: distribution(self._all_requests_histogram())}
            self._curves.update({step_id: distribution(blob) for step_id, blob in self._merged.items()})
        # Keyed by the steps' names now (a step may have been renamed since its curve was drawn).
        self._series.distribution = {ALL_REQUESTS: self._curves[None]}
        for step_id in self._merged:
            self._series.distribution[self._names[step_id]] = self._curves.get(step_id, ([], []))

    def summary(self, status: str) -> Summary:
        """The summary ``horde show --json`` would print for the seconds added so far."""
        return self._builder.summary(run_id=self.record.run_id, status=status)

    def figures(self) -> dict[str, Figure]:
        """The report's charts over the seconds added so far."""
        return {**run_charts(self._series), **monitor_charts(self.monitors.series, self.monitors.findings)}

    def state(self, status: str) -> dict[str, Any]:
        """Everything the run page draws but the figures, JSON-ready."""
        return run_state(
            self.record, status, self.summary(status), self.last_snapshot, self.monitors.view(), self.thresholds
        )

    def _all_requests_histogram(self) -> bytes:
        return histogram.merge(blob for step_id, blob in self._merged.items() if self._kinds[step_id] == "request")

    def _rename_steps(self) -> None:
        """Name steps over every step seen so far; a step name a new scenario shares becomes
        ``scenario/step`` everywhere, as it would in the report of the whole run."""
        names = step_names(self._kinds)
        renamed = {
            self._names[step_id]: name
            for step_id, name in names.items()
            if step_id in self._names and self._names[step_id] != name
        }
        self._names = names
        if renamed:
            self._series.latency = {renamed.get(key, key): value for key, value in self._series.latency.items()}


class _Seconds(RunResults):
    """A batch of a run's seconds, for ``run_series``: the view keeps the run's distribution
    itself (from its merged histograms), so the batch's own is not worth computing."""

    def merged_histograms(self) -> dict[StepId, bytes]:
        return {}

    def all_requests_histogram(self) -> bytes:
        return histogram.merge([])


def _empty_series(workers: int) -> RunSeries:
    return RunSeries(
        rate_elapsed_s=[],
        requests_per_s=[],
        errors_per_s=[],
        errors_per_s_by_kind={},
        dropped_arrivals_per_s=[],
        elapsed_s=[],
        active_vus=[],
        target_vus=[],
        target_rate_per_s=[],
        cpu_percent=[],
        timer_lateness_p99_ms=[],
        saturated_intervals=[],
        cpu_limit_percent=CPU_SATURATION_PERCENT_PER_WORKER * workers,
        latency={ALL_REQUESTS: LatencySeries()},
        distribution={},
    )


def _extend(total: RunSeries, part: RunSeries, name_of: Callable[[str], str]) -> None:
    """Append ``part`` (the series of the next seconds) to ``total``, as if both had been one
    pass: an error kind new in ``part`` reads 0 before, one it lacks reads 0 in it, and the
    kinds stay sorted as ``run_series`` sorts them."""
    earlier_points = len(total.rate_elapsed_s)
    new_points = len(part.rate_elapsed_s)
    for name in (
        "rate_elapsed_s",
        "requests_per_s",
        "errors_per_s",
        "dropped_arrivals_per_s",
        "elapsed_s",
        "active_vus",
        "target_vus",
        "target_rate_per_s",
        "cpu_percent",
        "timer_lateness_p99_ms",
        "saturated_intervals",
    ):
        getattr(total, name).extend(getattr(part, name))
    kinds = sorted(total.errors_per_s_by_kind.keys() | part.errors_per_s_by_kind.keys())
    total.errors_per_s_by_kind = {
        kind: total.errors_per_s_by_kind.get(kind, [0.0] * earlier_points)
        + part.errors_per_s_by_kind.get(kind, [0.0] * new_points)
        for kind in kinds
    }
    for name, latency in part.latency.items():
        _extend_latency(total.latency.setdefault(name_of(name), LatencySeries()), latency)
    total.messages.elapsed_s.extend(part.messages.elapsed_s)
    for key, values in part.messages.per_s.items():
        total.messages.per_s[key].extend(values)
    _extend_latency(total.messages.rtt, part.messages.rtt)


def _extend_latency(into: LatencySeries, latency: LatencySeries) -> None:
    into.elapsed_s.extend(latency.elapsed_s)
    for key, values in latency.values.items():
        into.values[key].extend(values)


@dataclass
class _SentTrace:
    x: list[Any]
    y: list[Any]
    rest: dict[str, Any]


class FigureDeltas:
    """What changed in a page's figures since the last call (see the module's docstring).

    Each change, by chart id, is ``{"replace": figure}`` or any of ``{"extend": {"indices",
    "x", "y"}, "restyle": [{"index", "x", "y"}], "relayout": {key: value}}``.
    """

    def __init__(self) -> None:
        self._sent: dict[str, tuple[list[_SentTrace], dict[str, Any]]] = {}

    def changes(self, figures: dict[str, Figure]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for chart_id, figure in figures.items():
            change = self._chart_change(self._sent.get(chart_id), figure)
            if change:
                found[chart_id] = change
            self._sent[chart_id] = (
                [
                    _SentTrace(list(trace.get("x", [])), list(trace.get("y", [])), _rest(trace))
                    for trace in figure["data"]
                ],
                copy.deepcopy(figure["layout"]),
            )
        return found

    @staticmethod
    def _chart_change(sent: tuple[list[_SentTrace], dict[str, Any]] | None, figure: Figure) -> dict[str, Any]:
        if sent is None:
            return {"replace": figure}
        traces, layout = sent
        data = figure["data"]
        if len(data) != len(traces) or any(_rest(trace) != old.rest for trace, old in zip(data, traces)):
            return {"replace": figure}
        change: dict[str, Any] = {}
        extend: dict[str, list[Any]] = {"indices": [], "x": [], "y": []}
        restyle = []
        for index, (trace, old) in enumerate(zip(data, traces)):
            x, y = list(trace.get("x", [])), list(trace.get("y", []))
            grown = len(x) - len(old.x)
            if x[: len(old.x)] == old.x and y[: len(old.y)] == old.y and grown == len(y) - len(old.y) and grown >= 0:
                if grown:
                    extend["indices"].append(index)
                    extend["x"].append(x[len(old.x) :])
                    extend["y"].append(y[len(old.y) :])
            else:
                restyle.append({"index": index, "x": x, "y": y})
        if extend["indices"]:
            change["extend"] = extend
        if restyle:
            change["restyle"] = restyle
        relayout = {key: value for key, value in figure["layout"].items() if layout.get(key) != value}
        relayout.update({key: None for key in layout if key not in figure["layout"]})
        if relayout:
            change["relayout"] = relayout
        return change


def _rest(trace: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in trace.items() if key not in ("x", "y")}
