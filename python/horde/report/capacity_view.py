"""A capacity answer as a capacity lab shows it: the answer's facts in words (with what broke
first, when the run was monitored), the table of find-max's steps (level, verdict, throughput,
latency), and the load–throughput and load–latency curves with the knee marked. The report and
the dashboard both draw these, from the summary's ``capacity`` block.
"""

from __future__ import annotations

from typing import Any

Figure = dict[str, Any]

#: The step table's columns: (heading, key in a step, digits).
STEP_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("step", "index", 0), ("phase", "phase", 0), ("level", "level", 3), ("verdict", "verdict", 0),
    ("req/s", "rps", 1), ("ok req/s", "ok_rps", 1), ("latency ms (from send)", "latency_ms", 2),
    ("latency ms (as felt)", "felt_latency_ms", 2), ("samples", "samples", 0), ("seconds", "seconds", 0),
    ("set aside s", "set_aside_s", 0), ("errors %", "error_percent", 2), ("dropped %", "dropped_percent", 2),
)

#: The answer's facts worth a line, in order: (label, key).
_FACTS: tuple[tuple[str, str], ...] = (
    ("method", "method"), ("search", "search"), ("max sustainable req/s", "max_rps"),
    ("served when overloaded req/s", "overloaded_rps"), ("level at the knee", "level_at_max"),
    ("latency ms at the knee (from send)", "latency_ms_at_max"),
    ("latency ms at the knee (as felt)", "felt_latency_ms_at_max"), ("first saturated level", "first_saturated_level"),
    ("knee within %", "bracket_percent"), ("saturation", "saturation_reason"), ("ended because", "ended_because"),
    ("answer after s", "answer_after_s"), ("seconds set aside", "set_aside_s"), ("target ms", "target_ms"),
    ("held s", "held_s"), ("held longest s", "held_longest_s"), ("first held at s", "settled_after_s"),
    ("users supported", "users_supported"), ("instances needed", "instances_needed"),
)


def capacity_facts(capacity: dict[str, Any]) -> list[tuple[str, Any]]:
    """The answer in labelled figures (the steps go to :func:`capacity_steps`, notes last)."""
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
    named = {key for _, key in _FACTS} | {"percentile", "sight", "notes", "steps", "history", "first_saturated_step",
                                          "level_unit", "latency_basis", "samples_needed", "precision_percent",
                                          "overshoot_level", "latency_ms_while_held", "stopped_by_steering"}
    facts.extend((key, value) for key, value in capacity.items()
                 if key not in named and value is not None and not isinstance(value, (dict, list)))
    broke = capacity.get("what_broke_first")
    if broke:
        # Next to the knee: the monitors' evidence, in the order things gave way.
        after = max((index for index, (label, _) in enumerate(facts)
                     if label in ("level at the knee", "latency ms at the knee (as felt)", "first saturated level", "saturation")),
                    default=len(facts) - 1)
        facts[after + 1:after + 1] = [("what broke first", broke["sentence"]),
                                      *(("also crossed", crossing["phrase"]) for crossing in broke.get("crossings", [])[1:])]
    sight = capacity.get("sight")
    if sight:
        facts.append(("sighting shot", f"{sight['rate_per_s']:g}/s for {sight['seconds']} s: p50 {sight['p50_ms']:g} ms, "
                                       f"one VU ≈ {sight['one_vu_rate_per_s']:,.1f}/s, start {sight['start']:g}"))
    for note in capacity.get("notes") or []:
        facts.append(("note", note))
    return facts


def capacity_steps(capacity: dict[str, Any]) -> list[dict[str, Any]]:
    """Find-max's steps as table rows (heading → value), in the order they ran."""
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


def capacity_charts(capacity: dict[str, Any] | None) -> dict[str, Figure]:
    """Load–throughput and load–latency of find-max's steps, the knee marked; none without steps."""
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
        return {"type": "scatter", "mode": "markers", "name": name, "x": [step["level"] for step in chosen],
                "y": [step.get(key) for step in chosen], "marker": {"size": 9, "color": color, "symbol": symbol},
                "text": [step.get("saturated_reason") or "good" for step in chosen]}

    def curve(key: str, name: str, dash: str) -> dict[str, Any]:
        return {"type": "scatter", "mode": "lines", "name": name, "x": [step["level"] for step in ordered],
                "y": [step.get(key) for step in ordered], "line": {"color": "#7f7f7f", "dash": dash}, "hoverinfo": "skip"}

    def knee_marker(key: str) -> list[dict[str, Any]]:
        if knee is None:
            return []
        return [{"type": "scatter", "mode": "markers+text", "name": "knee", "x": [knee["level"]], "y": [knee.get(key)],
                 "text": ["knee"], "textposition": "top center",
                 "marker": {"size": 16, "color": "rgba(0,0,0,0)", "line": {"width": 2, "color": "#1f77b4"}}}]

    percentile = f"p{capacity.get('percentile', 95):g}"
    layout = {"height": 380, "margin": {"l": 64, "r": 32, "t": 48, "b": 48}, "legend": {"orientation": "h", "y": -0.2},
              "hovermode": "closest", "paper_bgcolor": "white", "plot_bgcolor": "#fafafa",
              "xaxis": {"title": {"text": f"load ({unit})"}, "rangemode": "tozero"}}
    throughput = [curve("ok_rps", "successful req/s", "dot"),
                  points("good", good, "ok_rps", "#2ca02c", "circle"),
                  points("saturated", saturated, "ok_rps", "#d62728", "x"), *knee_marker("ok_rps")]
    if capacity.get("level_unit") != "vus":
        top = max(step["level"] for step in ordered)
        throughput.insert(0, {"type": "scatter", "mode": "lines", "name": "offered", "x": [0, top], "y": [0, top],
                              "line": {"color": "#c7c7c7"}, "hoverinfo": "skip"})
    latency = [curve("latency_ms", f"{percentile} from send", "dot"),
               points("good", good, "latency_ms", "#2ca02c", "circle"),
               points("saturated", saturated, "latency_ms", "#d62728", "x"),
               {"type": "scatter", "mode": "lines", "name": f"{percentile} as felt", "x": [step["level"] for step in ordered],
                "y": [step.get("felt_latency_ms") for step in ordered], "line": {"color": "#9467bd", "dash": "dash"}},
               *knee_marker("latency_ms")]
    return {
        "chart-capacity-throughput": {"data": throughput, "layout": {
            **layout, "title": {"text": "Load and throughput, by find-max step", "x": 0.01, "xanchor": "left"},
            "yaxis": {"title": {"text": "successful req/s"}, "rangemode": "tozero"}}},
        "chart-capacity-latency": {"data": latency, "layout": {
            **layout, "title": {"text": f"Load and latency ({percentile}), by find-max step", "x": 0.01, "xanchor": "left"},
            "yaxis": {"title": {"text": "ms (log scale)"}, "type": "log"}}},
    }


def broke_first_marks(capacity: dict[str, Any] | None) -> list[tuple[float, str]]:
    """The moments of what broke first, to mark on the charts over the run's time axis: the
    first limit a monitor saw crossed, and when the load side gave way."""
    broke = (capacity or {}).get("what_broke_first") or {}
    marks = []
    if broke.get("first"):
        marks.append((float(broke["first"]["second"]), f"first limit: {broke['first']['monitor']} {broke['first']['rule']}"))
    if broke.get("load"):
        marks.append((float(broke["load"]["second"]), "load gave way"))
    return marks


def capacity_view(capacity: dict[str, Any] | None) -> dict[str, Any] | None:
    """The capacity block as the dashboard draws it: facts, step rows, step headings."""
    if not capacity:
        return None
    return {"facts": capacity_facts(capacity), "steps": capacity_steps(capacity),
            "columns": [heading for heading, _, _ in STEP_COLUMNS]}
