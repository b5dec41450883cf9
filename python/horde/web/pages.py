"""The dashboard's HTML pages: the runs list, a run, a comparison, a trend.

Pages are rendered on the server from the store, except a run's panels, which its script fills
from ``/api/runs/{run}`` (a finished run) or from the live stream (a running one), so that the
same code draws both. Charts are the report's (``horde.report.charts``), drawn by plotly.js's basic
bundle vendored in ``horde/report/vendor/`` and served as ``/static/plotly-basic.min.js``.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from horde.results.compare import TrendPoint, trend
from horde.errors import InvalidInput
from horde.report.charts import Figure, comparison_charts
from horde.report.series import run_series
from horde.results.stored_run import ALL_REQUESTS, RunResults
from horde.store import FINAL_STATUSES
from horde.web.api import comparison_of, list_limit, listed_run, query_lists
from horde.web.dashboard import dashboard_of, render, run_filter_of
from horde.web.run_view import run_header

STATUSES: Final = ("running", *sorted(FINAL_STATUSES))


def runs_page(request: Request) -> Response:
    dashboard = dashboard_of(request)
    query = query_lists(request)
    problem = None
    rows: list[dict[str, Any]] = []
    try:
        rows = [listed_run(row) for row in dashboard.reader.find_runs(run_filter_of(query), limit=list_limit(request))]
    except InvalidInput as error:
        problem = f"{error.message}" + (f" ({error.hint})" if error.hint else "")
    return HTMLResponse(
        render(
            "runs.html.j2",
            title="Horde runs",
            rows=rows,
            problem=problem,
            statuses=STATUSES,
            plans=dashboard.reader.plan_names(),
            store=dashboard.store.display_url,
            chosen={name: (values[-1] if values else "") for name, values in query.items() if name != "tag"},
            tags=[tag for tag in query.get("tag", []) if tag.strip()],
        )
    )


def run_page(request: Request) -> Response:
    dashboard = dashboard_of(request)
    ref = request.path_params["run"]
    record = dashboard.store.get_run(ref)
    if record.run_id != ref:
        # `last` or a prefix: the page's address names the run itself, so it can be shared.
        return RedirectResponse(request.url_for("run", run=record.run_id), status_code=303)
    return HTMLResponse(
        render(
            "run.html.j2",
            title=f"Horde run {record.run_id} — {record.plan_name}",
            run=run_header(record),
            all_requests=ALL_REQUESTS,
        )
    )


def compare_page(request: Request) -> Response:
    runs, comparisons, rule = comparison_of(request)
    labels = [_label(results) for results in runs]
    return HTMLResponse(
        render(
            "compare.html.j2",
            title=f"Horde comparison of {len(runs)} runs",
            rule=rule,
            comparisons=comparisons,
            runs=[
                run_header(results.record) | {"label": label, "duration_s": results.summary["duration_s"]}
                for results, label in zip(runs, labels)
            ],
            figures=comparison_charts(labels, [run_series(results) for results in runs]),
        )
    )


def trend_page(request: Request) -> Response:
    key = (request.query_params.get("key") or "").strip()
    value = (request.query_params.get("value") or "").strip() or None
    step = (request.query_params.get("step") or "").strip() or ALL_REQUESTS
    points = (
        trend(dashboard_of(request).store, key, tag_value=value, limit=list_limit(request, default=20)) if key else []
    )
    steps = list(dict.fromkeys(name for point in points for name in point.steps))
    return HTMLResponse(
        render(
            "trend.html.j2",
            title=f"Horde trend of {key}" if key else "Horde trend",
            key=key,
            value=value or "",
            step=step,
            steps=steps,
            points=points,
            figures=trend_charts(points, key, step) if points else {},
        )
    )


def trend_charts(points: list[TrendPoint], key: str, step: str) -> dict[str, Figure]:
    """p95, req/s and errors of ``step`` across the runs, oldest first, one point per run."""
    labels = [f"{point.tag_value} ({point.run_id})" for point in points]
    figures: dict[str, Figure] = {}
    for chart_id, field, title, unit in (
        ("chart-trend-p95", "p95_ms", "p95 latency", "ms"),
        ("chart-trend-rps", "rps", "Requests per second", "req/s"),
        ("chart-trend-errors", "error_percent", "Errors", "% of requests"),
    ):
        values = [point.steps.get(step, {}).get(field) for point in points]
        figures[chart_id] = {
            "data": [{"type": "scatter", "mode": "lines+markers", "name": step, "x": labels, "y": values}],
            "layout": {
                "title": {"text": f"{title}: {step}, by {key}", "x": 0.01, "xanchor": "left"},
                "height": 320,
                "margin": {"l": 64, "r": 24, "t": 48, "b": 96},
                "xaxis": {"type": "category", "title": {"text": key}},
                "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
                "paper_bgcolor": "white",
                "plot_bgcolor": "#fafafa",
            },
        }
    return figures


def _label(results: RunResults) -> str:
    tags = " ".join(f"{key}={value}" for key, value in results.record.tags.items())
    return f"{results.run_id} ({tags})" if tags else results.run_id
