"""The report's charts as plotly figure specifications (plain dicts: ``{"data", "layout"}``).

Figures are built as JSON-ready dicts rather than with ``plotly.graph_objects``: the report only
needs plotly.js, and plain dicts keep the pages' content obvious and cheap to produce. A chart
over the run's time axis says so in its layout (``meta``: :data:`TIME_AXIS`): the pages zoom
such charts together (``linked_axes.js``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from horde.monitors.summary import headline_metrics
from horde.report.series import PERCENTILE_NAMES, MessageSeries, MonitorSeries, RunSeries
from horde.results.stored_run import ALL_REQUESTS
from horde.results.summary import TIMER_LATENESS_LIMIT_MS

Figure = dict[str, Any]

_TIME_AXIS: Final = {"title": {"text": "seconds since start"}, "rangemode": "tozero", "zeroline": False}
#: The layout's ``meta`` of a chart over the run's time axis: zoomed with the others.
TIME_AXIS: Final = "time-axis"
_DASHES: Final = {"p50": "solid", "p90": "dot", "p95": "dash", "p99": "longdash", "max": "dashdot"}


def chart_layout(title: str, **extra: Any) -> dict[str, Any]:
    """The layout every chart of a run shares; over the run's time axis (:data:`TIME_AXIS`,
    zoomed with the others) unless ``extra`` gives its own ``xaxis``."""
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0.01, "xanchor": "left"},
        "height": 380,
        "margin": {"l": 64, "r": 64, "t": 48, "b": 48},
        "legend": {"orientation": "h", "y": -0.18},
        "hovermode": "x unified",
        "xaxis": dict(_TIME_AXIS),
        "paper_bgcolor": "white",
        "plot_bgcolor": "#fafafa",
    }
    if "xaxis" not in extra:
        layout["meta"] = TIME_AXIS
    layout.update(extra)
    return layout


def _line(name: str, x: list[float], y: list[Any], **extra: Any) -> dict[str, Any]:
    return {"type": "scatter", "mode": "lines+markers", "marker": {"size": 4}, "name": name, "x": x, "y": y, **extra}


def throughput_chart(series: RunSeries) -> Figure:
    return {
        "data": [
            _line("requests/s", series.rate_elapsed_s, series.requests_per_s),
            _line("errors/s", series.rate_elapsed_s, series.errors_per_s, line={"color": "#d62728"}),
        ],
        "layout": chart_layout(
            "Requests and errors per second", yaxis={"title": {"text": "per second"}, "rangemode": "tozero"}
        ),
    }


def latency_chart(series: RunSeries) -> Figure:
    """Percentiles over time for all requests and for each step, one selection shown at a time
    (a drop-down chooses; the selection is made in the browser, offline)."""
    data: list[dict[str, Any]] = []
    selections = list(series.latency)
    for index, selection in enumerate(selections):
        latency = series.latency[selection]
        for name in PERCENTILE_NAMES:
            data.append(
                _line(
                    f"{name}",
                    latency.elapsed_s,
                    latency.values[name],
                    visible=index == 0,
                    line={"dash": _DASHES[name]},
                    legendgroup=name,
                )
            )
    buttons = []
    per_selection = len(PERCENTILE_NAMES)
    for index, selection in enumerate(selections):
        visible = [index * per_selection <= trace < (index + 1) * per_selection for trace in range(len(data))]
        buttons.append(
            {
                "label": selection,
                "method": "update",
                "args": [{"visible": visible}, {"title.text": f"Latency over time: {selection}"}],
            }
        )
    return {
        "data": data,
        "layout": chart_layout(
            f"Latency over time: {selections[0]}",
            yaxis={"title": {"text": "ms"}, "rangemode": "tozero"},
            updatemenus=[
                {
                    "buttons": buttons,
                    "direction": "down",
                    "x": 1.0,
                    "xanchor": "right",
                    "y": 1.16,
                    "yanchor": "top",
                    "showactive": True,
                }
            ]
            if len(buttons) > 1
            else [],
        ),
    }


def distribution_chart(series: RunSeries) -> Figure:
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "line": {"shape": "hv", "width": 3 if name == ALL_REQUESTS else 1.5},
            "name": name,
            "x": xs,
            "y": ys,
        }
        for name, (xs, ys) in series.distribution.items()
    ]
    return {
        "data": data,
        "layout": chart_layout(
            "Latency distribution (whole run, exact merge)",
            xaxis={"title": {"text": "latency, ms (log scale)"}, "type": "log"},
            yaxis={"title": {"text": "% of requests at or below"}, "range": [0, 100.5]},
            hovermode="closest",
        ),
    }


def errors_chart(series: RunSeries) -> Figure:
    data = [
        {"type": "bar", "name": kind, "x": series.rate_elapsed_s, "y": values}
        for kind, values in series.errors_per_s_by_kind.items()
    ]
    layout = chart_layout(
        "Errors per second by kind", barmode="stack", yaxis={"title": {"text": "errors/s"}, "rangemode": "tozero"}
    )
    if not data:
        layout["annotations"] = [
            {
                "text": "no errors in this run",
                "showarrow": False,
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 0.5,
                "font": {"size": 16, "color": "#2ca02c"},
            }
        ]
    return {"data": data, "layout": layout}


def load_chart(series: RunSeries) -> Figure:
    data = [
        _line("active VUs", series.elapsed_s, series.active_vus),
        _line("target VUs", series.elapsed_s, series.target_vus, line={"dash": "dash"}),
    ]
    if any(value is not None for value in series.target_rate_per_s):
        data.append(
            _line("target rate/s", series.elapsed_s, series.target_rate_per_s, yaxis="y2", line={"dash": "dot"})
        )
    data.append(
        {
            "type": "bar",
            "name": "dropped arrivals/s",
            "x": series.rate_elapsed_s,
            "y": series.dropped_arrivals_per_s,
            "yaxis": "y2",
            "marker": {"color": "#d62728"},
            "opacity": 0.6,
        }
    )
    return {
        "data": data,
        "layout": chart_layout(
            "Load: VUs, target rate, dropped arrivals",
            yaxis={"title": {"text": "VUs"}, "rangemode": "tozero"},
            yaxis2={
                "title": {"text": "per second"},
                "overlaying": "y",
                "side": "right",
                "rangemode": "tozero",
                "showgrid": False,
            },
        ),
    }


def generator_chart(series: RunSeries) -> Figure:
    """The generator's own health, with its limits drawn and saturated seconds shaded."""
    start = series.elapsed_s[0] - 1.0 if series.elapsed_s else 0.0
    end = series.elapsed_s[-1] if series.elapsed_s else 1.0
    data = [
        _line("generator CPU %", series.elapsed_s, series.cpu_percent),
        _line("timer lateness p99 (ms)", series.elapsed_s, series.timer_lateness_p99_ms, yaxis="y2"),
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"CPU limit {series.cpu_limit_percent:g} %",
            "x": [start, end],
            "y": [series.cpu_limit_percent] * 2,
            "line": {"dash": "dot", "color": "#1f77b4", "width": 1},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"lateness limit {TIMER_LATENESS_LIMIT_MS:g} ms",
            "yaxis": "y2",
            "x": [start, end],
            "y": [TIMER_LATENESS_LIMIT_MS] * 2,
            "line": {"dash": "dot", "color": "#ff7f0e", "width": 1},
        },
    ]
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": begin,
            "x1": finish,
            "y0": 0,
            "y1": 1,
            "fillcolor": "#d62728",
            "opacity": 0.15,
            "line": {"width": 0},
        }
        for begin, finish in series.saturated_intervals
    ]
    return {
        "data": data,
        "layout": chart_layout(
            "Generator health: CPU and timer lateness (shaded: saturated seconds)",
            yaxis={"title": {"text": "CPU % (100 = one core)"}, "rangemode": "tozero"},
            yaxis2={
                "title": {"text": "ms"},
                "overlaying": "y",
                "side": "right",
                "rangemode": "tozero",
                "showgrid": False,
            },
            shapes=shapes,
        ),
    }


def run_charts(series: RunSeries) -> dict[str, Figure]:
    """The run report's charts by element id, in page order; a message run's three charts
    (:func:`message_charts`) once it has a second of them."""
    return {
        "chart-throughput": throughput_chart(series),
        "chart-latency": latency_chart(series),
        "chart-distribution": distribution_chart(series),
        **(message_charts(series.messages) if series.messages.elapsed_s else {}),
        "chart-errors": errors_chart(series),
        "chart-load": load_chart(series),
        "chart-generator": generator_chart(series),
    }


# -- messages: a message run's traffic, losses and round-trip time --------------------------------

#: The traces of the message charts: (series key, trace name, line style).
_TRAFFIC: Final = (
    ("sent", "messages sent/s", "solid"),
    ("received", "messages received/s", "solid"),
    ("datagrams_sent", "datagrams out/s", "dot"),
    ("datagrams_received", "datagrams in/s", "dot"),
)
_TROUBLE: Final = (
    ("lost", "lost replies/s", "#d62728"),
    ("late", "late replies/s", "#ff7f0e"),
    ("retransmitted", "KCP resends/s", "#9467bd"),
)


def message_charts(series: MessageSeries) -> dict[str, Figure]:
    """Messages and datagrams (packets) each way per second; lost and late replies and KCP's
    resends per second; the pings' round-trip time percentiles. All on the run's time axis."""
    traffic = [_line(name, series.elapsed_s, series.per_s[key], line={"dash": dash}) for key, name, dash in _TRAFFIC]
    trouble = [_line(name, series.elapsed_s, series.per_s[key], line={"color": color}) for key, name, color in _TROUBLE]
    rtt = series.rtt
    round_trip = [
        _line(name, rtt.elapsed_s, rtt.values[name], line={"dash": _DASHES[name]}) for name in PERCENTILE_NAMES
    ]
    layout_rtt = chart_layout(
        "Ping round-trip time (all ping steps)", yaxis={"title": {"text": "ms"}, "rangemode": "tozero"}
    )
    if not rtt.elapsed_s:
        layout_rtt["annotations"] = [
            {
                "text": "no ping answered yet",
                "showarrow": False,
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 0.5,
                "font": {"size": 14, "color": "#7f7f7f"},
            }
        ]
    return {
        "chart-messages": {
            "data": traffic,
            "layout": chart_layout(
                "Messages and datagrams (packets) per second",
                yaxis={"title": {"text": "per second"}, "rangemode": "tozero"},
            ),
        },
        "chart-message-losses": {
            "data": trouble,
            "layout": chart_layout(
                "Lost and late replies, KCP resends per second",
                yaxis={"title": {"text": "per second"}, "rangemode": "tozero"},
            ),
        },
        "chart-rtt": {"data": round_trip, "layout": layout_rtt},
    }


# -- monitors: a chart per source on the run's time axis -------------------------------------------

#: A monitor's figures grouped by unit, in the order its chart's menu offers them: (group, axis title).
#: Rows a second (a scan returns thousands a statement) have their own: on the statements' axis
#: they would flatten every other line.
MONITOR_UNITS: Final = (
    ("%", "%"),
    ("per second", "per second"),
    ("rows/s", "rows per second"),
    ("bytes/s", "bytes per second"),
    ("values", "value"),
    ("seconds", "seconds"),
    ("bytes", "bytes"),
)
#: The group a source's chart opens on: its most telling figures.
_FIRST_UNIT: Final = {"host": "%", "postgres": "per second"}


def metric_unit(metric: str) -> str:
    """The unit group of a monitor's figure, read off its name (names carry their units).

    >>> metric_unit("cpu.busy_percent"), metric_unit("net.rx_bytes_per_s"), metric_unit("transactions_per_s")
    ('%', 'bytes/s', 'per second')
    >>> metric_unit("replication_lag_s"), metric_unit("replication_lag_bytes"), metric_unit("tcp.time_wait")
    ('seconds', 'bytes', 'values')
    >>> metric_unit("rows.returned_per_s")
    'rows/s'
    """
    if metric.endswith("_percent"):
        return "%"
    if metric.endswith("bytes_per_s"):
        return "bytes/s"
    if metric.startswith("rows.") and metric.endswith("_per_s"):
        return "rows/s"
    if metric.endswith("_per_s"):
        return "per second"
    if metric.endswith("_s"):
        return "seconds"
    if metric.endswith("_bytes"):
        return "bytes"
    return "values"


def charted_metrics(series: MonitorSeries, findings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The figures a monitor's chart draws: its headline figures (those the summary lists), then
    those its diagnosis judged (a table's dead tuples, a standby's lag), so a finding's evidence
    is on the chart."""
    metrics = headline_metrics(series.kind, series.node_exporter, list(series.values))
    for finding in findings:
        metric = str(finding.get("metric"))
        if finding.get("monitor") == series.name and metric in series.values and metric not in metrics:
            metrics.append(metric)
    return metrics


def moment_lines(lines: Sequence[tuple[float, str, str]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Moments on the run's time axis, each (second, label, colour): a dotted line across the
    chart and its label (layout ``shapes`` and ``annotations``)."""
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for index, (second, label, color) in enumerate(lines):
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": second,
                "x1": second,
                "y0": 0,
                "y1": 1,
                "line": {"color": color, "dash": "dot", "width": 1.5},
            }
        )
        # Labels step down the chart, so two marks at one second stay readable.
        annotations.append(
            {
                "x": second,
                "y": 1 - 0.07 * (index % 5),
                "xref": "x",
                "yref": "paper",
                "text": label,
                "showarrow": False,
                "xanchor": "left",
                "yanchor": "top",
                "font": {"size": 11, "color": color},
            }
        )
    return shapes, annotations


def _monitor_moments(
    series: MonitorSeries, findings: Sequence[Mapping[str, Any]], marks: Sequence[tuple[float, str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A monitor chart's shapes and annotations: its gaps shaded, its findings and ``marks``."""
    shapes: list[dict[str, Any]] = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": second - 1,
            "x1": second,
            "y0": 0,
            "y1": 1,
            "fillcolor": "#7f7f7f",
            "opacity": 0.2,
            "line": {"width": 0},
        }
        for second, _ in series.gaps
    ]
    lines = [
        (float(finding["second"]), str(finding["rule"]).replace("_", " "), "#d62728")
        for finding in findings
        if finding.get("monitor") == series.name
    ]
    lines += [(second, label, "#1f77b4") for second, label in marks]
    drawn, annotations = moment_lines(lines)
    return shapes + drawn, annotations


def monitor_chart(
    series: MonitorSeries, findings: Sequence[Mapping[str, Any]], marks: Sequence[tuple[float, str]] = ()
) -> Figure:
    """One monitor's figures over the run, a unit group at a time (a menu chooses); each of its
    findings marked at the second it started, gaps shaded, and ``marks`` (second, label: the
    knee) drawn as on every chart of the run's axis."""
    metrics = charted_metrics(series, findings)
    present = [unit for unit, _ in MONITOR_UNITS if any(metric_unit(metric) == unit for metric in metrics)]
    first = _FIRST_UNIT.get(series.kind, present[0] if present else "values")
    units = ([first] if first in present else []) + [unit for unit in present if unit != first]
    titles = dict(MONITOR_UNITS)
    data: list[dict[str, Any]] = []
    owners: list[str] = []
    for unit in units:
        for metric in (metric for metric in metrics if metric_unit(metric) == unit):
            data.append(_line(metric, series.seconds, series.values[metric], visible=unit == units[0]))
            owners.append(unit)
    buttons = [
        {
            "label": titles[unit],
            "method": "update",
            "args": [{"visible": [owner == unit for owner in owners]}, {"yaxis.title.text": titles[unit]}],
        }
        for unit in units
    ]
    shapes, annotations = _monitor_moments(series, findings, marks)
    if not data:
        reason = f": {series.gaps[0][1]}" if series.gaps else ""
        annotations.append(
            {
                "text": f"no figures from this monitor{reason}",
                "showarrow": False,
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 0.5,
                "font": {"size": 14, "color": "#7f7f7f"},
            }
        )
    kind = "node_exporter" if series.node_exporter else series.kind
    return {
        "data": data,
        "layout": chart_layout(
            f"Monitor {series.name} ({kind})",
            shapes=shapes,
            annotations=annotations,
            yaxis={"title": {"text": titles.get(units[0], "value") if units else "value"}, "rangemode": "tozero"},
            updatemenus=[
                {
                    "buttons": buttons,
                    "direction": "down",
                    "x": 1.0,
                    "xanchor": "right",
                    "y": 1.16,
                    "yanchor": "top",
                    "showactive": True,
                }
            ]
            if len(buttons) > 1
            else [],
        ),
    }


def monitor_charts(
    series: Mapping[str, MonitorSeries], findings: Sequence[Mapping[str, Any]], marks: Sequence[tuple[float, str]] = ()
) -> dict[str, Figure]:
    """A chart per monitor by element id (``chart-monitor-NAME``; monitor names are ids' letters),
    each followed by its kind's own charts (a postgres monitor's: :func:`postgres_charts`)."""
    charts: dict[str, Figure] = {}
    for name, one in series.items():
        charts[f"chart-monitor-{name}"] = monitor_chart(one, findings, marks)
        if one.kind == "postgres":
            charts.update(postgres_charts(one, findings, marks))
    return charts


# -- a postgres monitor: the statement mix, tables, standbys, rows --------------------------------

#: The statement mix's kinds, in the order they stack.
STATEMENT_KINDS: Final = ("select", "insert", "update", "delete", "other")
_ROW_FIGURES: Final = ("returned", "fetched", "inserted", "updated", "deleted")
#: The most tables drawn one by one beside all followed tables' dead tuples (the most dead first).
MAX_TABLES_DRAWN: Final = 5
#: A second axis on the right; ticks of its own (round numbers), not at the left axis' gridlines.
_RIGHT_AXIS: Final = {"overlaying": "y", "side": "right", "rangemode": "tozero", "showgrid": False, "tickmode": "auto"}


def statement_shares(series: MonitorSeries) -> dict[str, list[float | None]]:
    """Each statement kind's share (%) of each reading's statements, for the kinds the monitor
    gave; None at a reading without a mix (a gap, the first reading) or without statements.

    >>> one = MonitorSeries("pg", "postgres", seconds=[1.0, 2.0, 3.0], values={
    ...     "statements.select_per_s": [None, 300.0, 0.0], "statements.update_per_s": [None, 100.0, 0.0]})
    >>> statement_shares(one)
    {'select': [None, 75.0, None], 'update': [None, 25.0, None]}
    """
    kinds = [kind for kind in STATEMENT_KINDS if f"statements.{kind}_per_s" in series.values]
    shares: dict[str, list[float | None]] = {kind: [] for kind in kinds}
    for index in range(len(series.seconds)):
        rates = {kind: series.values[f"statements.{kind}_per_s"][index] for kind in kinds}
        total = sum(rate for rate in rates.values() if rate is not None)
        for kind, rate in rates.items():
            shares[kind].append(100.0 * (rate or 0.0) / total if total > 0 else None)
    return shares


def _total(columns: Sequence[Sequence[float | None]], length: int) -> list[float | None]:
    """The sum at each reading of the columns that have a value there; None where none has."""
    sums: list[float | None] = []
    for index in range(length):
        known = [column[index] for column in columns if column[index] is not None]
        sums.append(sum(value for value in known if value is not None) if known else None)
    return sums


def _subjects_of(series: MonitorSeries, prefix: str, suffix: str) -> list[str]:
    """The subjects (tables, standbys) of the figures named ``prefix.SUBJECT.suffix``."""
    head, tail = prefix + ".", "." + suffix
    return [
        metric[len(head) : -len(tail)]
        for metric in series.values
        if metric.startswith(head) and metric.endswith(tail) and len(metric) > len(head) + len(tail)
    ]


def _postgres_figure(
    series: MonitorSeries,
    findings: Sequence[Mapping[str, Any]],
    marks: Sequence[tuple[float, str]],
    data: list[dict[str, Any]],
    title: str,
    **axes: Any,
) -> Figure:
    shapes, annotations = _monitor_moments(series, findings, marks)
    layout = chart_layout(f"Monitor {series.name} (postgres): {title}", shapes=shapes, annotations=annotations, **axes)
    return {"data": data, "layout": layout}


def postgres_charts(
    series: MonitorSeries, findings: Sequence[Mapping[str, Any]], marks: Sequence[tuple[float, str]] = ()
) -> dict[str, Figure]:
    """A postgres monitor's telling figures, each where it reads: the statement mix as shares of
    each second's statements (``-statements``); dead tuples with the autovacuum runs that cut
    them, and the HOT share of updates (``-tables``); each standby's replay lag and the age of
    the xmin it holds back, when one streams (``-replication``); rows a second (``-rows``),
    thousands a statement, on an axis of their own."""
    name, seconds, values = series.name, series.seconds, series.values
    missing: list[float | None] = [None] * len(seconds)
    charts: dict[str, Figure] = {}

    shares = statement_shares(series)
    # Without pg_stat_statements the mix is the tuple counters' (rows, not statements).
    from_statements = any(value == 1.0 for value in values.get("statements.from_pg_stat_statements", []))
    unit = "statements" if from_statements or not shares else "rows"
    mix = [
        {
            "type": "scatter",
            "mode": "lines",
            "stackgroup": "mix",
            "name": f"{kind} %",
            "x": seconds,
            "y": share,
            "hovertemplate": "%{y:.1f} %",
        }
        for kind, share in shares.items()
    ]
    rates = [values[f"statements.{kind}_per_s"] for kind in shares]
    mix.append(
        _line(f"{unit}/s", seconds, _total(rates, len(seconds)), yaxis="y2", line={"dash": "dot", "color": "#444"})
    )
    counted = (
        "statements" if unit == "statements" else ("rows (the tuple counters: pg_stat_statements is not installed)")
    )
    title = f"statement mix, % of each second's {counted}"
    charts[f"chart-monitor-{name}-statements"] = _postgres_figure(
        series,
        findings,
        marks,
        mix,
        title,
        yaxis={"title": {"text": f"% of {unit}"}, "range": [0, 100]},
        yaxis2={"title": {"text": f"{unit} per second"}, **_RIGHT_AXIS},
    )

    def most_dead(table: str) -> float:
        return max((value or 0.0 for value in values[f"tables.{table}.dead_tuples"]), default=0.0)

    tables = sorted(_subjects_of(series, "tables", "dead_tuples"), key=most_dead, reverse=True)
    dead = values.get("dead_tuples", missing)
    health = [_line("dead tuples (followed tables)", seconds, dead, line={"color": "#d62728"})]
    if len(tables) > 1:
        health += [
            _line(f"dead tuples {table}", seconds, values[f"tables.{table}.dead_tuples"], line={"dash": "dot"})
            for table in tables[:MAX_TABLES_DRAWN]
        ]
    runs = values.get("autovacuum_runs", missing)
    ran = [(second, level, count) for second, level, count in zip(seconds, dead, runs) if count]
    health.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "autovacuum ran",
            "x": [second for second, _, _ in ran],
            "y": [level for _, level, _ in ran],
            "text": [f"{count:.0f} autovacuum runs" for _, _, count in ran],
            "marker": {"symbol": "triangle-down", "size": 9, "color": "#2ca02c"},
        }
    )
    hot = values.get("hot_update_percent", missing)
    health.append(_line("HOT updates, % of updates", seconds, hot, yaxis="y2", line={"color": "#9467bd"}))
    charts[f"chart-monitor-{name}-tables"] = _postgres_figure(
        series,
        findings,
        marks,
        health,
        "dead tuples, autovacuum runs, HOT updates",
        yaxis={"title": {"text": "dead tuples"}, "rangemode": "tozero"},
        yaxis2={**_RIGHT_AXIS, "title": {"text": "HOT, % of updates"}, "rangemode": "normal", "range": [0, 100]},
    )

    lagging = _subjects_of(series, "replication", "replay_lag_bytes")
    holding = _subjects_of(series, "replication", "xmin_age")
    if lagging or holding:
        replication = [
            _line(f"{standby} replay lag (bytes)", seconds, values[f"replication.{standby}.replay_lag_bytes"])
            for standby in lagging
        ]
        replication += [
            _line(
                f"{standby} xmin age (transactions)",
                seconds,
                values[f"replication.{standby}.xmin_age"],
                yaxis="y2",
                line={"dash": "dash"},
            )
            for standby in holding
        ]
        charts[f"chart-monitor-{name}-replication"] = _postgres_figure(
            series,
            findings,
            marks,
            replication,
            "standbys' replay lag, the age of the xmin each holds back",
            yaxis={"title": {"text": "bytes of WAL behind"}, "rangemode": "tozero"},
            yaxis2={"title": {"text": "xmin age, transactions"}, **_RIGHT_AXIS},
        )

    rows = [
        _line(f"rows {what}/s", seconds, values[f"rows.{what}_per_s"])
        for what in _ROW_FIGURES
        if f"rows.{what}_per_s" in values
    ]
    charts[f"chart-monitor-{name}-rows"] = _postgres_figure(
        series,
        findings,
        marks,
        rows,
        "rows per second (returned by scans, fetched by index, written)",
        yaxis={"title": {"text": "rows per second"}, "rangemode": "tozero"},
    )
    return charts


# -- comparison: one trace per run ----------------------------------------------------------------


def comparison_charts(labels: list[str], runs: list[RunSeries]) -> dict[str, Figure]:
    """Overlaid charts of several runs (each on its own time axis from its start)."""
    throughput = [_line(label, s.rate_elapsed_s, s.requests_per_s) for label, s in zip(labels, runs)]
    p95 = [
        _line(label, s.latency[ALL_REQUESTS].elapsed_s, s.latency[ALL_REQUESTS].values["p95"])
        for label, s in zip(labels, runs)
    ]
    vus = [_line(label, s.elapsed_s, s.active_vus) for label, s in zip(labels, runs)]
    return {
        "chart-throughput": {
            "data": throughput,
            "layout": chart_layout("Requests per second", yaxis={"rangemode": "tozero"}),
        },
        "chart-p95": {
            "data": p95,
            "layout": chart_layout("p95 latency over time, all requests (ms)", yaxis={"rangemode": "tozero"}),
        },
        "chart-distribution": _distribution_overlay(labels, runs),
        "chart-load": {"data": vus, "layout": chart_layout("Active VUs", yaxis={"rangemode": "tozero"})},
    }


def _distribution_overlay(labels: list[str], runs: list[RunSeries]) -> Figure:
    selections = list(dict.fromkeys(name for s in runs for name in s.distribution))
    data: list[dict[str, Any]] = []
    owners: list[str] = []
    for selection in selections:
        for label, s in zip(labels, runs):
            xs, ys = s.distribution.get(selection, ([], []))
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "line": {"shape": "hv"},
                    "name": label,
                    "x": xs,
                    "y": ys,
                    "visible": selection == selections[0],
                }
            )
            owners.append(selection)
    buttons = [
        {
            "label": selection,
            "method": "update",
            "args": [
                {"visible": [owner == selection for owner in owners]},
                {"title.text": f"Latency distribution: {selection}"},
            ],
        }
        for selection in selections
    ]
    return {
        "data": data,
        "layout": chart_layout(
            f"Latency distribution: {selections[0] if selections else ALL_REQUESTS}",
            xaxis={"title": {"text": "latency, ms (log scale)"}, "type": "log"},
            yaxis={"title": {"text": "% of requests at or below"}, "range": [0, 100.5]},
            hovermode="closest",
            updatemenus=[
                {"buttons": buttons, "direction": "down", "x": 1.0, "xanchor": "right", "y": 1.16, "yanchor": "top"}
            ]
            if len(buttons) > 1
            else [],
        ),
    }
