"""The production profile as an HTML page (``horde profile --html FILE``), in the report's style.

The page is rendered by the report's machinery (:func:`horde.report.page.render`: the shell's
styles, the inlined plotly.js, the figures drawn from JSON, its number filters) from its template
beside the report's (``report/templates/profile.html.j2``), so that it works offline from disk
like a run report: the rate over the log's span, the shares by count and by time side by side, the
endpoints' table, sessions and transitions. It shows what :meth:`Profile.to_dict` holds (names
and figures), never a value from the log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from horde import __version__
from horde.profile.plan_writer import WrittenPlan
from horde.profile.profile import Profile
from horde.report.page import render

#: Endpoints drawn in the shares chart (the table lists them all).
CHART_ENDPOINTS: Final = 15
#: Beyond this many minutes the rate is drawn per hour (a week per minute is 10,080 points).
MINUTES_DRAWN: Final = 10_080

Figure = dict[str, Any]


def rate_chart(data: dict[str, Any]) -> Figure:
    per_minute = data["rate"]["per_minute"]
    if len(per_minute) > MINUTES_DRAWN:
        hours: dict[str, int] = {}
        for at, count in per_minute:
            hours[at[:13] + ":00:00Z"] = hours.get(at[:13] + ":00:00Z", 0) + count
        x, y, unit = list(hours), [count / 3600.0 for count in hours.values()], "hour"
    else:
        x, y, unit = [at for at, _ in per_minute], [count / 60.0 for _, count in per_minute], "minute"
    return {
        "data": [{"type": "scatter", "mode": "lines", "name": f"requests/s (per {unit})", "x": x, "y": y,
                  "line": {"shape": "hv"}}],
        "layout": {"title": {"text": f"Rate over the log (mean of each {unit})", "x": 0.01, "xanchor": "left"},
                   "height": 380, "margin": {"l": 64, "r": 32, "t": 48, "b": 48},
                   "xaxis": {"type": "date", "title": {"text": "time (UTC)"}},
                   "yaxis": {"title": {"text": "requests/s"}, "rangemode": "tozero"},
                   "paper_bgcolor": "white", "plot_bgcolor": "#fafafa"},
    }


def shares_chart(data: dict[str, Any]) -> Figure:
    """The largest endpoints' shares by count and by time, side by side."""
    rows = data["endpoints"][:CHART_ENDPOINTS]
    names = [row["endpoint"] for row in reversed(rows)]
    traces = [{"type": "bar", "orientation": "h", "name": "share by count", "y": names,
               "x": [100.0 * row["share_by_count"] for row in reversed(rows)]}]
    if data["overall"] is not None:
        traces.append({"type": "bar", "orientation": "h", "name": "share by time", "y": names,
                       "x": [100.0 * (row["share_by_time"] or 0.0) for row in reversed(rows)]})
    return {
        "data": traces,
        "layout": {"title": {"text": "Shares of the traffic: by count and by time (count × response time)", "x": 0.01,
                             "xanchor": "left"},
                   "barmode": "group", "height": max(320, 60 + 44 * len(rows)),
                   "margin": {"l": 320, "r": 32, "t": 48, "b": 48}, "legend": {"orientation": "h", "y": -0.12},
                   "xaxis": {"title": {"text": "% of the log"}, "rangemode": "tozero"},
                   "yaxis": {"automargin": True}, "paper_bgcolor": "white", "plot_bgcolor": "#fafafa"},
    }


def render_page(profile: Profile, plan: WrittenPlan | None = None) -> str:
    data = profile.to_dict()
    return render(
        "profile.html.j2",
        title="Horde production profile — " + ", ".join(Path(name).name for name in profile.files),
        version=__version__,
        profile=data,
        plan=plan.to_dict() if plan is not None else None,
        figures={"rate-chart": rate_chart(data), "shares-chart": shares_chart(data)},
    )

