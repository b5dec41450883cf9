"""A capacity answer as a capacity lab shows it, from the summary's ``capacity`` block; the
report and the dashboard both draw it.

- Find-max: the answer's facts in words (with what broke first, when the run was monitored),
  the table of its steps (level, verdict, throughput, latency), and the load–throughput and
  load–latency curves with the knee marked.
- Target response time: its answer's sentence first, then the facts behind it (the target,
  what held it and for how long, the levels either side of T), the table of its readings (each
  level judged, its percentile with an interval), and one chart over the run's time axis: the
  level, and the percentile against T and its band, the seconds T held shaded. None of it is
  worded as a maximum: a level that holds a percentile at T is not the most the target serves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from horde.control.target_response_time import BAND, HELD_WINDOW_S
from horde.report.charts import chart_layout, moment_lines

Figure = dict[str, Any]

#: The capacity block's ``method`` of target response time.
TARGET_RESPONSE_TIME: Final = "target_response_time"
#: The charts of each kind of answer, by element id, in page order.
FIND_MAX_CHARTS: Final = ("chart-capacity-throughput", "chart-capacity-latency")
TARGET_CHART: Final = "chart-capacity-target"

#: The step table's columns: (heading, key in a step, digits).
STEP_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("step", "index", 0),
    ("phase", "phase", 0),
    ("level", "level", 3),
    ("verdict", "verdict", 0),
    ("req/s", "rps", 1),
    ("ok req/s", "ok_rps", 1),
    ("latency ms (from send)", "latency_ms", 2),
    ("latency ms (as felt)", "felt_latency_ms", 2),
    ("samples", "samples", 0),
    ("seconds", "seconds", 0),
    ("set aside s", "set_aside_s", 0),
    ("errors %", "error_percent", 2),
    ("dropped %", "dropped_percent", 2),
)

#: The answer's facts worth a line, in order: (label, key).
_FACTS: tuple[tuple[str, str], ...] = (
    ("method", "method"),
    ("search", "search"),
    ("max sustainable req/s", "max_rps"),
    ("served when overloaded req/s", "overloaded_rps"),
    ("level at the knee", "level_at_max"),
    ("latency ms at the knee (from send)", "latency_ms_at_max"),
    ("latency ms at the knee (as felt)", "felt_latency_ms_at_max"),
    ("first saturated level", "first_saturated_level"),
    ("knee within %", "bracket_percent"),
    ("saturation", "saturation_reason"),
    ("ended because", "ended_because"),
    ("answer after s", "answer_after_s"),
    ("seconds set aside", "set_aside_s"),
    ("users supported", "users_supported"),
    ("instances needed", "instances_needed"),
    ("instances model", "instances_model"),
)


def capacity_facts(capacity: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The answer in labelled figures (the steps go to :func:`capacity_steps`, notes last)."""
    if capacity.get("method") == TARGET_RESPONSE_TIME:
        return _target_response_time_facts(capacity)
    facts: list[tuple[str, Any]] = []
    for label, key in _FACTS:
        value = capacity.get(key)
        if value is not None and value != "":
            if key == "level_at_max" or key == "first_saturated_level":
                value = f"{value:,.6g} {'VUs' if capacity.get('level_unit') == 'vus' else 'arrivals/s'}"
            facts.append((label, value))
    percentile = capacity.get("percentile")
    if percentile is not None:
        facts.insert(1, ("percentile judged", f"p{percentile:g}"))
    # Keys this view does not name (a newer or hand-made block) are shown as they are.
    named = {key for _, key in _FACTS} | {
        "percentile",
        "sight",
        "notes",
        "steps",
        "history",
        "first_saturated_step",
        "level_unit",
        "latency_basis",
        "samples_needed",
        "precision_percent",
        "stopped_by_steering",
    }
    facts.extend(
        (key, value)
        for key, value in capacity.items()
        if key not in named and value is not None and not isinstance(value, (dict, list))
    )
    broke = capacity.get("what_broke_first")
    if broke:
        # Next to the knee: the monitors' evidence, in the order things gave way.
        after = max(
            (
                index
                for index, (label, _) in enumerate(facts)
                if label
                in ("level at the knee", "latency ms at the knee (as felt)", "first saturated level", "saturation")
            ),
            default=len(facts) - 1,
        )
        facts[after + 1 : after + 1] = [
            ("what broke first", broke["sentence"]),
            *(("also crossed", crossing["phrase"]) for crossing in broke.get("crossings", [])[1:]),
            *_knee_facts(broke.get("why_the_knee")),
        ]
    facts.extend(_sight_and_notes(capacity))
    return facts


def _knee_facts(why: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """Find-max's knee by the utilization law: its answer, then the other candidates' figures."""
    if not why:
        return []
    return [
        ("why the knee is there", why["sentence"]),
        *(("knee candidate", candidate["phrase"]) for candidate in why.get("candidates", [])[1:]),
    ]


def _sight_and_notes(capacity: Mapping[str, Any]) -> list[tuple[str, Any]]:
    facts: list[tuple[str, Any]] = []
    sight = capacity.get("sight")
    if sight:
        facts.append(
            (
                "sighting shot",
                f"{sight['rate_per_s']:g}/s for {sight['seconds']} s: p50 {sight['p50_ms']:g} ms, "
                f"one VU ≈ {sight['one_vu_rate_per_s']:,.1f}/s, start {sight['start']:g}",
            )
        )
    for note in capacity.get("notes") or []:
        facts.append(("note", note))
    return facts


def capacity_steps(capacity: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The answer's table as rows (heading → value), in the order they ran: find-max's steps,
    or target response time's readings."""
    if capacity.get("method") == TARGET_RESPONSE_TIME:
        return [_reading_row(reading, capacity) for reading in capacity.get("readings") or []]
    rows = []
    for step in capacity.get("steps") or []:
        row: dict[str, Any] = {}
        for heading, key, digits in STEP_COLUMNS:
            if key == "verdict":
                value: Any = step.get("saturated_reason") or "good"
            elif key == "index":
                value = int(step["index"]) + 1
            else:
                value = step.get(key)
                if isinstance(value, float):
                    value = round(value, digits)
            row[heading] = value
        rows.append(row)
    return rows


def capacity_columns(capacity: Mapping[str, Any]) -> list[str]:
    """The headings of :func:`capacity_steps`' rows, in order."""
    if capacity.get("method") == TARGET_RESPONSE_TIME:
        return list(_reading_columns(capacity))
    return [heading for heading, _, _ in STEP_COLUMNS]


def capacity_chart_ids(capacity: Mapping[str, Any] | None) -> list[str]:
    """The element ids :func:`capacity_charts` draws into, in page order."""
    if not capacity:
        return []
    if capacity.get("method") == TARGET_RESPONSE_TIME:
        return [TARGET_CHART] if capacity.get("history") and capacity.get("target_ms") else []
    return list(FIND_MAX_CHARTS) if capacity.get("steps") else []


def capacity_charts(capacity: Mapping[str, Any] | None) -> dict[str, Figure]:
    """Find-max: load–throughput and load–latency of its steps, the knee marked. Target response
    time: the level and the percentile over the run's time axis
    (:func:`target_response_time_chart`). None without steps, or without seconds."""
    if capacity and capacity.get("method") == TARGET_RESPONSE_TIME:
        if not capacity_chart_ids(capacity):
            return {}
        return {TARGET_CHART: target_response_time_chart(capacity)}
    steps = (capacity or {}).get("steps") or []
    if not steps:
        return {}
    assert capacity is not None
    unit = "VUs" if capacity.get("level_unit") == "vus" else "arrivals/s"
    ordered = sorted(steps, key=lambda step: step["level"])
    good = [step for step in ordered if step.get("saturated_reason") is None]
    saturated = [step for step in ordered if step.get("saturated_reason") is not None]
    knee_level = capacity.get("level_at_max")
    knee = next((step for step in steps if step["level"] == knee_level and step.get("saturated_reason") is None), None)

    def points(name: str, chosen: list[dict[str, Any]], key: str, color: str, symbol: str) -> dict[str, Any]:
        return {
            "type": "scatter",
            "mode": "markers",
            "name": name,
            "x": [step["level"] for step in chosen],
            "y": [step.get(key) for step in chosen],
            "marker": {"size": 9, "color": color, "symbol": symbol},
            "text": [step.get("saturated_reason") or "good" for step in chosen],
        }

    def curve(key: str, name: str, dash: str) -> dict[str, Any]:
        return {
            "type": "scatter",
            "mode": "lines",
            "name": name,
            "x": [step["level"] for step in ordered],
            "y": [step.get(key) for step in ordered],
            "line": {"color": "#7f7f7f", "dash": dash},
            "hoverinfo": "skip",
        }

    def knee_marker(key: str) -> list[dict[str, Any]]:
        if knee is None:
            return []
        return [
            {
                "type": "scatter",
                "mode": "markers+text",
                "name": "knee",
                "x": [knee["level"]],
                "y": [knee.get(key)],
                "text": ["knee"],
                "textposition": "top center",
                "marker": {"size": 16, "color": "rgba(0,0,0,0)", "line": {"width": 2, "color": "#1f77b4"}},
            }
        ]

    percentile = f"p{capacity.get('percentile', 95):g}"
    layout = {
        "height": 380,
        "margin": {"l": 64, "r": 32, "t": 48, "b": 48},
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "closest",
        "paper_bgcolor": "white",
        "plot_bgcolor": "#fafafa",
        "xaxis": {"title": {"text": f"load ({unit})"}, "rangemode": "tozero"},
    }
    throughput = [
        curve("ok_rps", "successful req/s", "dot"),
        points("good", good, "ok_rps", "#2ca02c", "circle"),
        points("saturated", saturated, "ok_rps", "#d62728", "x"),
        *knee_marker("ok_rps"),
    ]
    if capacity.get("level_unit") != "vus":
        top = max(step["level"] for step in ordered)
        throughput.insert(
            0,
            {
                "type": "scatter",
                "mode": "lines",
                "name": "offered",
                "x": [0, top],
                "y": [0, top],
                "line": {"color": "#c7c7c7"},
                "hoverinfo": "skip",
            },
        )
    latency = [
        curve("latency_ms", f"{percentile} from send", "dot"),
        points("good", good, "latency_ms", "#2ca02c", "circle"),
        points("saturated", saturated, "latency_ms", "#d62728", "x"),
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{percentile} as felt",
            "x": [step["level"] for step in ordered],
            "y": [step.get("felt_latency_ms") for step in ordered],
            "line": {"color": "#9467bd", "dash": "dash"},
        },
        *knee_marker("latency_ms"),
    ]
    return {
        "chart-capacity-throughput": {
            "data": throughput,
            "layout": {
                **layout,
                "title": {"text": "Load and throughput, by find-max step", "x": 0.01, "xanchor": "left"},
                "yaxis": {"title": {"text": "successful req/s"}, "rangemode": "tozero"},
            },
        },
        "chart-capacity-latency": {
            "data": latency,
            "layout": {
                **layout,
                "title": {"text": f"Load and latency ({percentile}), by find-max step", "x": 0.01, "xanchor": "left"},
                "yaxis": {"title": {"text": "ms (log scale)"}, "type": "log"},
            },
        },
    }


def broke_first_marks(capacity: Mapping[str, Any] | None) -> list[tuple[float, str]]:
    """The moments of what broke first, to mark on the charts over the run's time axis: the
    first limit a monitor saw crossed, and when the load side gave way."""
    broke = (capacity or {}).get("what_broke_first") or {}
    marks = []
    if broke.get("first"):
        marks.append(
            (float(broke["first"]["second"]), f"first limit: {broke['first']['monitor']} {broke['first']['rule']}")
        )
    if broke.get("load"):
        marks.append((float(broke["load"]["second"]), "load gave way"))
    return marks


def capacity_view(capacity: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The capacity block as the report and the dashboard draw it: ``facts``; the table's
    ``steps`` (rows), ``columns`` (headings), ``table`` (its ``data-section``) and ``passed``
    (each row's verdict: a good step, a reading under T or at it); the ``charts``' element ids,
    and ``chart_note``, what a reader needs to read them (None when they explain themselves)."""
    if not capacity:
        return None
    target = capacity.get("method") == TARGET_RESPONSE_TIME
    if target:
        passed = [reading.get("verdict") in ("under", "at") for reading in capacity.get("readings") or []]
    else:
        passed = [step.get("saturated_reason") is None for step in capacity.get("steps") or []]
    charts = capacity_chart_ids(capacity)
    note = None
    if target and charts:
        note = _TARGET_CHART_NOTE.format(percentile=_percentile(capacity), window=HELD_WINDOW_S, band=f"{BAND * 100:g}")
    return {
        "facts": capacity_facts(capacity),
        "steps": capacity_steps(capacity),
        "columns": capacity_columns(capacity),
        "table": "capacity-readings" if target else "capacity-steps",
        "passed": passed,
        "charts": charts,
        "chart_note": note,
    }


# -- target response time --------------------------------------------------------------------------

#: Each outcome in a few words, as the facts' ``outcome`` line gives it.
_OUTCOMES: Final = {
    "held": "T held",
    "unreachable": "T unreachable: even the lowest level was over T",
    "not_reached": "T not reached: latency stayed under T at the highest level allowed",
    "cliff": "T cannot be held: latency jumps past T between two adjacent levels",
    "kept_crossing": "T not held: latency kept crossing T",
    "not_converged": "not converged: the run ended before the level settled",
}
#: What stopped the level short of T (``limit``, with ``not_reached``).
_LIMITS: Final = {
    "max": "the plan's max level",
    "generator_saturated": "the generator's own CPU",
    "dropped_arrivals": "the open model's max_vus: arrivals were dropped",
}
#: What the steering moved, by the level's unit.
_STEERED: Final = {
    "vus": "the number of VUs",
    "rate_per_s": "the arrival rate (open model)",
    "pace": "the pace of a fixed population of VUs (their think times and pacing divided by it)",
}
#: The level's unit as a table heading, and the readings' colours on the chart by verdict.
_LEVEL_HEADINGS: Final = {"vus": "VUs", "rate_per_s": "arrivals/s", "pace": "pace factor"}
_VERDICT_COLORS: Final = {"under": "#17becf", "at": "#2ca02c", "over": "#d62728", "limit": "#9467bd"}
#: The keys the facts word, or leave to the readings' table and the chart; any other is shown
#: as it is (a newer block's).
_TARGET_KEYS: Final = frozenset(
    {
        "method",
        "by",
        "level_unit",
        "percentile",
        "target_ms",
        "outcome",
        "limit",
        "sentence",
        "max_rps",
        "level_at_max",
        "latency_ms_at_max",
        "converged_after_s",
        "held_s",
        "tracked_s",
        "held_percent",
        "set_aside_s",
        "samples_needed",
        "latency_basis",
        "highest_under_target",
        "lowest_over_target",
        "readings",
        "history",
        "notes",
        "what_broke_first",
        "stopped_by_steering",
        "sight",
        "users_supported",
        "per_user_rate",
        "instances_needed",
        "instances_model",
        "peak_rps",
        "headroom_percent",
        "rate_unit",
    }
)
#: Above this many times T, the chart's latency axis stops at it: a queue without bound (a cliff,
#: a level far over T while climbing) would flatten T's band into a line.
_CUT_AT_TIMES_T: Final = 3.0
_TARGET_CHART_NOTE: Final = (
    "The level (grey, right axis) and the {percentile} over the run's time: of the level's current window "
    "(blue), over the {window} s ending each second once the level converged (orange: what a second holding "
    "T is judged on), and each reading (diamonds, with their interval), against T (dashed) and ±{band} % of "
    "it (the green band). Shaded green: seconds T held; grey: seconds set aside (the generator starved). "
    "Zooming it over time zooms the run's other charts."
)


def _percentile(capacity: Mapping[str, Any]) -> str:
    return f"p{capacity.get('percentile', 95):g}"


def _level_text(level: float, unit: str) -> str:
    """A level with its unit.

    >>> _level_text(39.0, "vus"), _level_text(383.8645, "rate_per_s"), _level_text(1.25, "pace")
    ('39 VUs', '383.9 arrivals/s', 'pace ×1.25')
    """
    if unit == "vus":
        return f"{level:,.0f} VUs"
    if unit == "pace":
        return f"pace ×{level:.3g}"
    return f"{level:,.1f} arrivals/s"


def _level_value(level: float, unit: str) -> float:
    """A level as the readings' table shows it (its unit is in the heading)."""
    if unit == "vus":
        return round(level)
    return round(level, 3 if unit == "pace" else 1)


def _target_response_time_facts(capacity: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The answer's sentence, then the facts behind it, in the words of a latency target: what
    held T and for how long, never a maximum or a knee."""
    unit = str(capacity.get("level_unit") or "")
    percentile = _percentile(capacity)
    band = f"±{BAND * 100:g} %"
    facts: list[tuple[str, Any]] = []
    if capacity.get("sentence"):
        facts.append(("answer", capacity["sentence"]))
    outcome = capacity.get("outcome")
    if outcome is not None:
        words = _OUTCOMES.get(str(outcome), str(outcome))
        limit = capacity.get("limit")
        if outcome == "not_reached" and limit:
            words += f" ({_LIMITS.get(str(limit), str(limit))})"
        facts.append(("outcome", words))
    target = capacity.get("target_ms")
    if target is not None:
        basis = {"from_send": "from each request's send"}.get(str(capacity.get("latency_basis")), "as felt")
        facts.append(
            (
                "target",
                f"{percentile} {target:g} ms, latency timed {basis}; held within {band} "
                f"({target * (1 - BAND):g} to {target * (1 + BAND):g} ms)",
            )
        )
    if unit in _STEERED:
        facts.append(("steered by", _STEERED[unit]))
    if outcome == "held" and capacity.get("max_rps") is not None:
        level = _level_text(capacity["level_at_max"], unit)
        facts.append(("level held", f"{level} (the median over the held seconds)"))
        rate = f"{capacity['max_rps']:,.1f} req/s successful"
        facts.append(("rate held", f"{rate} (the mean over the held seconds)"))
        if capacity.get("latency_ms_at_max") is not None:
            facts.append((f"{percentile} over the held seconds", f"{capacity['latency_ms_at_max']:,.2f} ms"))
    converged = capacity.get("converged_after_s")
    if converged is not None and capacity.get("tracked_s"):
        facts.append(
            (
                "seconds T held",
                f"{capacity['held_s']} of {capacity['tracked_s']} s after convergence "
                f"({capacity['held_percent']:g} %): the {percentile} over the {HELD_WINDOW_S} s ending each "
                f"second within {band} of T",
            )
        )
    facts.append(("converged after", "did not converge" if converged is None else f"{converged} s"))
    for label, key in (
        ("highest level under T", "highest_under_target"),
        ("lowest level over T", "lowest_over_target"),
    ):
        reading = capacity.get(key)
        if isinstance(reading, dict):
            latency = reading.get("latency_ms")
            timed = "no response timed" if latency is None else f"{percentile} {latency:,.2f} ms"
            facts.append(
                (
                    label,
                    f"{_level_text(reading['level'], unit)}: {reading['ok_rps']:,.1f} req/s "
                    f"successful, {timed} (judged at second {reading['second']})",
                )
            )
    broke = capacity.get("what_broke_first")
    if broke:
        facts.append(("what broke first", broke["sentence"]))
        facts.extend(("also crossed", crossing["phrase"]) for crossing in broke.get("crossings", [])[1:])
    rate_unit = str(capacity.get("rate_unit") or "req/s")
    if capacity.get("users_supported") is not None:
        facts.append(
            ("users supported", f"{capacity['users_supported']:,} at {capacity['per_user_rate']:g} {rate_unit} each")
        )
    if capacity.get("instances_needed") is not None:
        facts.append(
            (
                "instances needed",
                f"{capacity['instances_needed']} for a peak of {capacity['peak_rps']:,.1f} {rate_unit} "
                f"with {capacity['headroom_percent']:g} % headroom"
                + (f" ({capacity['instances_model']})" if capacity.get("instances_model") else ""),
            )
        )
    facts.extend(
        (key, value)
        for key, value in capacity.items()
        if key not in _TARGET_KEYS and value is not None and not isinstance(value, (dict, list))
    )
    facts.extend(_sight_and_notes(capacity))
    return facts


def _reading_columns(capacity: Mapping[str, Any]) -> tuple[str, ...]:
    unit = _LEVEL_HEADINGS.get(str(capacity.get("level_unit")), "level")
    return (
        "reading",
        "at second",
        "phase",
        f"level ({unit})",
        "verdict",
        "ok req/s",
        f"{_percentile(capacity)} ms (interval)",
        "samples",
        "seconds",
    )


def _reading_row(reading: dict[str, Any], capacity: Mapping[str, Any]) -> dict[str, Any]:
    """One judged window as a table row: its verdict says why when the interval did not decide
    (the time was up, errors, a limit), its percentile comes with the interval it lies in."""
    verdict = str(reading.get("verdict"))
    basis = reading.get("basis")
    if basis and basis != "confident":
        verdict += f" ({str(basis).replace('_', ' ')})"
    latency, low, high = reading.get("latency_ms"), reading.get("low_ms"), reading.get("high_ms")
    timed = None
    if latency is not None:
        timed = f"{latency:,.2f}"
        if low is not None and high is not None:
            timed += f" ({low:,.2f}–{'∞' if math.isinf(high) else format(high, ',.2f')})"
    level = _level_value(float(reading["level"]), str(capacity.get("level_unit")))
    values = (
        int(reading["index"]) + 1,
        reading.get("judged_at_s"),
        reading.get("phase"),
        level,
        verdict,
        round(float(reading.get("ok_rps") or 0.0), 1),
        timed,
        reading.get("samples"),
        reading.get("seconds"),
    )
    return dict(zip(_reading_columns(capacity), values))


def _spans(seconds: Iterable[int]) -> list[tuple[float, float]]:
    """Runs of consecutive seconds as (start, end) on the time axis (second N covers N-1 to N).

    >>> _spans([3, 4, 5, 9])
    [(2.0, 5.0), (8.0, 9.0)]
    """
    spans: list[tuple[float, float]] = []
    for second in sorted(seconds):
        if spans and spans[-1][1] == second - 1:
            spans[-1] = (spans[-1][0], float(second))
        else:
            spans.append((second - 1.0, float(second)))
    return spans


def _readings_trace(readings: list[dict[str, Any]], unit: str) -> dict[str, Any]:
    """Each reading that timed a response at the second it was judged, coloured by its verdict,
    with its interval as an error bar (none where a bound is unknown)."""

    def above(reading: dict[str, Any]) -> float | None:
        high = reading.get("high_ms")
        return None if high is None or math.isinf(high) else high - reading["latency_ms"]

    def below(reading: dict[str, Any]) -> float | None:
        low = reading.get("low_ms")
        return None if low is None else reading["latency_ms"] - low

    return {
        "type": "scatter",
        "mode": "markers",
        "name": "readings",
        "x": [reading["judged_at_s"] for reading in readings],
        "y": [reading["latency_ms"] for reading in readings],
        "marker": {
            "symbol": "diamond",
            "size": 8,
            "color": [_VERDICT_COLORS.get(str(reading.get("verdict")), "#7f7f7f") for reading in readings],
        },
        "error_y": {
            "type": "data",
            "symmetric": False,
            "array": [above(reading) for reading in readings],
            "arrayminus": [below(reading) for reading in readings],
            "thickness": 1,
            "width": 3,
        },
        "text": [
            f"reading {int(reading['index']) + 1} ({reading.get('phase')}): {reading.get('verdict')} at "
            f"{_level_text(float(reading['level']), unit)}"
            for reading in readings
        ],
        "hovertemplate": "%{text}: %{y:,.2f} ms<extra></extra>",
    }


def target_response_time_chart(capacity: Mapping[str, Any]) -> Figure:
    """The steering over the run's time axis (zoomed with the run's other charts): the level on
    its own axis, the percentile of the level's window and over the held window each second,
    each reading with its interval, against T and its ±BAND band; the seconds T held shaded, the
    moment it converged and what broke first marked."""
    history = capacity.get("history") or []
    readings = [reading for reading in capacity.get("readings") or [] if reading.get("latency_ms") is not None]
    target = float(capacity["target_ms"])
    percentile = _percentile(capacity)
    unit = str(capacity.get("level_unit") or "")
    level_title = f"level ({_LEVEL_HEADINGS.get(unit, 'level')})"
    band = f"{BAND * 100:g} %"
    seconds = [float(entry["second"]) for entry in history]
    start, end = (seconds[0] - 1.0, seconds[-1]) if seconds else (0.0, 1.0)
    flat: dict[str, Any] = {"type": "scatter", "mode": "lines", "x": [start, end], "hoverinfo": "skip"}
    window = [entry.get("latency_ms") for entry in history]
    held_window = [entry.get("held_window_ms") for entry in history]
    data = [
        # The band is the area between its two edges (the second fills down to the first).
        {**flat, "name": f"T − {band}", "y": [target * (1 - BAND)] * 2, "line": {"width": 0}, "showlegend": False},
        {
            **flat,
            "name": f"±{band} of T",
            "y": [target * (1 + BAND)] * 2,
            "line": {"width": 0},
            "fill": "tonexty",
            "fillcolor": "rgba(44, 160, 44, 0.18)",
        },
        {
            **flat,
            "name": f"T: {percentile} {target:g} ms",
            "y": [target, target],
            "line": {"color": "#2ca02c", "dash": "dash", "width": 1.5},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{percentile} of the level's window",
            "x": seconds,
            "y": window,
            "line": {"color": "#1f77b4", "width": 1},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{percentile} over the last {HELD_WINDOW_S} s",
            "x": seconds,
            "y": held_window,
            "line": {"color": "#ff7f0e", "width": 2.5},
        },
        _readings_trace(readings, unit),
        {
            "type": "scatter",
            "mode": "lines",
            "name": level_title,
            "x": seconds,
            "y": [entry.get("level") for entry in history],
            "yaxis": "y2",
            "line": {"shape": "hv", "color": "#7f7f7f", "width": 2},
            "text": [entry.get("phase") for entry in history],
            "hovertemplate": "level %{y:,.4g} (%{text})<extra></extra>",
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
            "fillcolor": color,
            "opacity": opacity,
            "line": {"width": 0},
        }
        for key, color, opacity in (("held", "#2ca02c", 0.12), ("starved", "#7f7f7f", 0.2))
        for begin, finish in _spans(int(entry["second"]) for entry in history if entry.get(key))
    ]
    moments = []
    if capacity.get("converged_after_s"):
        moments.append((float(capacity["converged_after_s"]), "converged", "#7f7f7f"))
    moments += [(second, label, "#1f77b4") for second, label in broke_first_marks(capacity)]
    lines, annotations = moment_lines(moments)
    timed = [
        value
        for value in (*window, *held_window, *(reading["latency_ms"] for reading in readings))
        if value is not None and math.isfinite(value)
    ]
    latency_axis: dict[str, Any] = {"title": {"text": "ms"}, "rangemode": "tozero"}
    if max(timed, default=0.0) > _CUT_AT_TIMES_T * target:
        latency_axis = {
            "title": {"text": f"ms (cut at {_CUT_AT_TIMES_T:g} × T; autoscale shows all)"},
            "range": [0, _CUT_AT_TIMES_T * target],
        }
    # tickmode auto: plotly would otherwise sync the level's ticks to the latency's (39.5, 32.9...).
    level_axis = {
        "title": {"text": level_title},
        "overlaying": "y",
        "side": "right",
        "rangemode": "tozero",
        "showgrid": False,
        "tickmode": "auto",
    }
    return {
        "data": data,
        "layout": chart_layout(
            f"Target response time: the level and its {percentile} against T = {target:g} ms (shaded: seconds T held)",
            height=420,
            legend={"orientation": "h", "y": -0.2},
            yaxis=latency_axis,
            yaxis2=level_axis,
            shapes=[*shapes, *lines],
            annotations=annotations,
        ),
    }
