"""A scalability study shown: the measured throughput at each instance count, the scalability
model's curve with its prediction band, where throughput peaks, and the instances for the asked
peak. :func:`scalability_chart` is the one owner of that chart: the study's report
(``horde scale --report``) and the dashboard's view of a study's runs both draw it.

>>> forecast = {"refusal": None, "unit": "instances", "points": [[1, 100.0], [2, 180.0], [3, 240.0]],
...             "left_out": [], "peak_n": 5.2, "confidence": 0.9,
...             "curve": [{"n": float(n), "throughput": 100.0 * n / (1 + 0.1 * (n - 1) + 0.03 * n * (n - 1)),
...                        "low": None, "high": None, "refusal": None} for n in range(1, 13)]}
>>> [trace["name"] for trace in scalability_chart(forecast)["data"]]
['measured', 'scalability model']
>>> scalability_chart(forecast)["layout"]["shapes"][0]["x0"]
5.2
"""

from __future__ import annotations

from typing import Any, Final

from horde import __version__
from horde.control.scale import forecast_block, per_one, stored_study
from horde.report.charts import Figure, chart_layout
from horde.report.page import render
from horde.store import Store

#: The chart's element id, in the report and on the dashboard.
CHART_ID: Final = "chart-scalability"


def scalability_chart(forecast: dict[str, Any]) -> Figure:
    """The study's forecast block (``control.scale.forecast_block``) as a plotly figure: the
    measured points (those left out of the fit apart), the fitted curve in its prediction band,
    a line at the peak N, and the asked peak's throughput need with its answer (or, for a users
    study, a line at the users supported with its answer)."""
    unit = forecast.get("unit", "instances")
    left_out = forecast.get("left_out", [])
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": "measured",
            "x": [n for n, _ in forecast["points"]],
            "y": [x for _, x in forecast["points"]],
            "marker": {"size": 9, "color": "#1f77b4"},
        }
    ]
    if left_out:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "left out of the fit",
                "x": [row[unit] for row in left_out],
                "y": [row["throughput_rps"] for row in left_out],
                "marker": {"size": 9, "symbol": "x", "color": "#999"},
            }
        )
    curve = forecast.get("curve") or []
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    if curve and not forecast.get("refusal"):
        counts = [point["n"] for point in curve]
        if all(point["low"] is not None for point in curve):
            band = f"{forecast.get('confidence', 0.9) * 100:.0f} % prediction interval"
            data.append(_band_edge(counts, [point["high"] for point in curve], band, fill=False))
            data.append(_band_edge(counts, [point["low"] for point in curve], band, fill=True))
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "scalability model",
                "x": counts,
                "y": [point["throughput"] for point in curve],
                "line": {"color": "#ff7f0e"},
            }
        )
        if forecast.get("peak_n") is not None and forecast["peak_n"] <= counts[-1]:
            shapes.append(_vertical(forecast["peak_n"], "#d62728"))
            annotations.append(_label(forecast["peak_n"], 1.0, f"peak at {forecast['peak_n']:.1f}", "left"))
    peak = forecast.get("peak")
    if peak:
        need = peak["peak_rps"] / (1 - peak["headroom_percent"] / 100)
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": need,
                "y1": need,
                "line": {"color": "#2ca02c", "dash": "dash"},
            }
        )
        annotations.append(
            {"xref": "paper", "x": 0.01, "yref": "y", "y": need, "text": peak["answer"], "showarrow": False,
             "xanchor": "left", "yanchor": "bottom", "font": {"size": 11, "color": "#2ca02c"}}
        )  # fmt: skip
        if peak.get("instances_needed") is not None:
            shapes.append(_vertical(peak["instances_needed"], "#2ca02c"))
    users = forecast.get("users")
    if users:
        # Users supported: where the curve crosses N × the per-user rate; the line shows the rate asked.
        rate = users["per_user_rate"]
        counts = [point["n"] for point in curve] or [n for n, _ in forecast["points"]]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{rate:,.4g} req/s per user",
                "x": counts,
                "y": [n * rate for n in counts],
                "line": {"color": "#2ca02c", "dash": "dash"},
            }
        )
        if users.get("users_supported") is not None:
            shapes.append(_vertical(users["users_supported"], "#2ca02c"))
        annotations.append(
            {"xref": "paper", "x": 0.01, "yref": "paper", "y": 1.0, "text": users["answer"], "showarrow": False,
             "xanchor": "left", "yanchor": "bottom", "font": {"size": 11, "color": "#2ca02c"}}
        )  # fmt: skip
    title = f"Throughput by {unit[:-1]} count: measured and the scalability model"
    if forecast.get("refusal"):
        title = f"Throughput by {unit[:-1]} count (no model: see the forecast's refusal)"
    return {
        "data": data,
        "layout": chart_layout(
            title,
            xaxis={"title": {"text": unit}, "rangemode": "tozero"},
            yaxis={"title": {"text": "requests/s"}, "rangemode": "tozero"},
            hovermode="closest",
            shapes=shapes,
            annotations=annotations,
        ),
    }


def _band_edge(x: list[float], y: list[float | None], name: str, *, fill: bool) -> dict[str, Any]:
    # The band is the area between the high edge (drawn first) and the low one filled up to it.
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": x,
        "y": y,
        "line": {"width": 0, "color": "rgba(255,127,14,0.25)"},
        "fill": "tonexty" if fill else "none",
        "fillcolor": "rgba(255,127,14,0.32)",
        "showlegend": fill,
        "legendgroup": "band",
        "hoverinfo": "skip",
    }


def _vertical(x: float, color: str) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "x",
        "x0": x,
        "x1": x,
        "yref": "paper",
        "y0": 0,
        "y1": 1,
        "line": {"color": color, "dash": "dot"},
    }


def _label(x: float, y: float, text: str, side: str) -> dict[str, Any]:
    return {"xref": "x", "x": x, "yref": "paper", "y": y, "text": text, "showarrow": False, "xanchor": side}


def render_study_report(study: dict[str, Any]) -> str:
    """The HTML of a scalability study's report: its rows, the model, the chart."""
    return render(
        "study.html.j2",
        title=f"Horde scalability study {study['study_id']}",
        version=__version__,
        study=study,
        forecast=study["forecast"],
        chart_id=CHART_ID,
        figures={CHART_ID: scalability_chart(study["forecast"])},
        unit=study.get("unit", "instances"),
        per_key=per_one(study.get("unit", "instances")),
        runs=study["rows"],  # the footer speaks of the stored runs
    )


#: The tags `horde scale --peak-rps` stores with each run of its study: the asked peak and headroom.
PEAK_TAG: Final = "scale_peak_rps"
HEADROOM_TAG: Final = "scale_headroom"
#: The tag a users study's runs may carry: the rate each user asks, req/s, that the dashboard answers.
PER_USER_RATE_TAG: Final = "scale_per_user_rate"


def study_panel(store: Store, tags: dict[str, str]) -> tuple[dict[str, Any], Figure]:
    """The study a run belongs to (its ``scale_study`` tag), as the dashboard shows it beside
    the run: the study read back from the store, the model's answer (for the peak an instances
    study was asked, or the per-user rate a users study's runs are tagged with, when they were)
    in a sentence, and the chart."""
    study = stored_study(store, tags["scale_study"])
    users = study["unit"] == "users"
    peak, headroom = _number(tags.get(PEAK_TAG)), _number(tags.get(HEADROOM_TAG))
    rate = _number(tags.get(PER_USER_RATE_TAG))
    if users or peak is not None and peak <= 0:
        peak = None
    if not users or rate is not None and not rate > 0:
        rate = None
    if headroom is None or not 0 <= headroom < 100:
        headroom = 20.0
    forecast = forecast_block(study, peak_rps=peak, headroom_percent=headroom, per_user_rate=rate)
    if forecast["refusal"]:
        answer = f"No forecast: {forecast['refusal']}"
    elif forecast.get("peak"):
        answer = forecast["peak"]["answer"]
    elif forecast.get("users"):
        answer = forecast["users"]["answer"]
    else:
        peak_n = forecast["peak_n"]
        unit = forecast["unit"]
        where = "the fitted curve has no peak" if peak_n is None else f"throughput peaks at {peak_n:.1f} {unit}"
        answer = f"σ {forecast['sigma']:.4f}, κ {forecast['kappa']:.6f}: {where}"
    panel = {
        "study_id": study["study_id"],
        "answer": answer,
        "runs": [{"count": row[study["unit"]], "run_id": row["run_id"]} for row in study["rows"]],
    }
    return panel, scalability_chart(forecast)


def _number(tag: str | None) -> float | None:
    # A tag edited by hand to something else than a number is read as not asked.
    try:
        return float(tag) if tag else None
    except ValueError:
        return None
