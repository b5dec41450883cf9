"""The production profile as an HTML page (``horde profile --html FILE``), in the report's style.

The page is rendered by the report's machinery (:func:`horde.report.page.render`: the shell's
styles, the inlined plotly.js, the figures drawn from JSON, its number filters) from its template
beside the report's (``report/templates/profile.html.j2``), so that it works offline from disk
like a run report: the rate over the log's span, the shares by count and by time side by side, the
endpoints' table, sessions and transitions. With a plan written (``--plan``), its judgments as
the plan's comments and the summary state them, from :meth:`WrittenPlan.to_dict`: what was left
out with its shares of the requests and of the time; the sizing with its inputs (the peak's rate,
the share kept, the headroom; Little's law, VUs = rate × (mean time + think time)); the client
kinds found, each one's weight, pace, session length and top endpoints, and how well they
separate (the silhouette, in words); and what the user must supply
(:mod:`horde.profile.supply`). It shows what :meth:`Profile.to_dict` and the plan hold (names and
figures), never a value from the log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from horde import __version__
from horde.profile.kinds import MAX_KINDS, MIN_CENTRE_DISTANCE, MIN_SILHOUETTE
from horde.profile.plan_writer import WrittenPlan
from horde.profile.profile import Profile
from horde.report.page import render

#: Endpoints drawn in the shares chart (the table lists them all).
CHART_ENDPOINTS: Final = 15
#: Beyond this many minutes the rate is drawn per hour (a week per minute is 10,080 points).
MINUTES_DRAWN: Final = 10_080

#: Endpoints named per client kind (its largest shares of its requests).
KIND_TOP_ENDPOINTS: Final = 3
#: What a mean silhouette says of the kinds (from 1: apart, to 0: on the border; below, nearer
#: another group), read as Kaufman and Rousseeuw's scale reads it, with Horde's own threshold
#: for a split told as kinds (:data:`horde.profile.kinds.MIN_SILHOUETTE`).
SILHOUETTE_WORDS: Final = (
    (0.7, "clearly apart: each session is far nearer the sessions of its own kind than those of the next"),
    (MIN_SILHOUETTE, "apart: most sessions are nearer their own kind than the next, some near the border"),
    (0.25, f"weakly apart: the groups could be the split's own making, not told as kinds (under {MIN_SILHOUETTE:g})"),
    (float("-inf"), f"not apart: the sessions show no groups (under {MIN_SILHOUETTE:g})"),
)

Figure = dict[str, Any]


def silhouette_words(score: float) -> str:
    """What a mean silhouette says, in words.

    >>> silhouette_words(0.9).split(":")[0], silhouette_words(0.3).split(":")[0]
    ('clearly apart', 'weakly apart')
    """
    return next(words for floor, words in SILHOUETTE_WORDS if score >= floor)


def judged(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan's judgments as the page shows them (from :meth:`WrittenPlan.to_dict`): the
    left-out totals, the headroom as a factor, the model, the kinds found with the silhouette in
    words, and each kind's top endpoints."""
    sizing = plan["sizing"]
    left_out = plan["left_out"]
    found = sizing.get("kinds_found")
    timed = plan["covered_time_share"] is not None
    return {
        "left_out_count": sum(row["share_by_count"] for row in left_out),
        "left_out_time": sum(row["share_by_time"] or 0.0 for row in left_out) if timed else None,
        "headroom_factor": round(1.0 + sizing["headroom_percent"] / 100.0, 6),
        "users": "users" in sizing,
        "kinds_found": found,
        "silhouette_words": silhouette_words(found["silhouette"]) if found and found["silhouette"] is not None else "",
        # No silhouette: too few sessions were grouped (find_kinds tries none under 2 per kind),
        # or every split's groups lay too near one another to be kinds.
        "no_split": (
            ""
            if not found or found["silhouette"] is not None
            else "too few sessions with a second request to group"
            if found["sessions"] < 2 * MAX_KINDS
            else f"every split's groups lay under {MIN_CENTRE_DISTANCE:g} apart (in shares of the mix and of the pace's "
            "range): one kind's sessions differing by chance"
        ),
        "kinds": [
            {**row, "top": sorted(row["mix"].items(), key=lambda item: (-item[1], item[0]))[:KIND_TOP_ENDPOINTS]}
            for row in sizing.get("kinds", [])
        ],
    }


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
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"requests/s (per {unit})",
                "x": x,
                "y": y,
                "line": {"shape": "hv"},
            }
        ],
        "layout": {
            "title": {"text": f"Rate over the log (mean of each {unit})", "x": 0.01, "xanchor": "left"},
            "height": 380,
            "margin": {"l": 64, "r": 32, "t": 48, "b": 48},
            "xaxis": {"type": "date", "title": {"text": "time (UTC)"}},
            "yaxis": {"title": {"text": "requests/s"}, "rangemode": "tozero"},
            "paper_bgcolor": "white",
            "plot_bgcolor": "#fafafa",
        },
    }


def shares_chart(data: dict[str, Any]) -> Figure:
    """The largest endpoints' shares by count and by time, side by side."""
    rows = data["endpoints"][:CHART_ENDPOINTS]
    names = [row["endpoint"] for row in reversed(rows)]
    traces = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "share by count",
            "y": names,
            "x": [100.0 * row["share_by_count"] for row in reversed(rows)],
        }
    ]
    if data["overall"] is not None:
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": "share by time",
                "y": names,
                "x": [100.0 * (row["share_by_time"] or 0.0) for row in reversed(rows)],
            }
        )
    return {
        "data": traces,
        "layout": {
            "title": {
                "text": "Shares of the traffic: by count and by time (count × response time)",
                "x": 0.01,
                "xanchor": "left",
            },
            "barmode": "group",
            "height": max(320, 60 + 44 * len(rows)),
            "margin": {"l": 320, "r": 32, "t": 48, "b": 48},
            "legend": {"orientation": "h", "y": -0.12},
            "xaxis": {"title": {"text": "% of the log"}, "rangemode": "tozero"},
            "yaxis": {"automargin": True},
            "paper_bgcolor": "white",
            "plot_bgcolor": "#fafafa",
        },
    }


def render_page(profile: Profile, plan: WrittenPlan | None = None) -> str:
    data = profile.to_dict()
    plan_data = plan.to_dict() if plan is not None else None
    return render(
        "profile.html.j2",
        title="Horde production profile — " + ", ".join(Path(name).name for name in profile.files),
        version=__version__,
        profile=data,
        plan=plan_data,
        judged=judged(plan_data) if plan_data is not None else None,
        figures={"rate-chart": rate_chart(data), "shares-chart": shares_chart(data)},
    )
