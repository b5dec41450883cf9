"""The dashboard's JSON endpoints, the live stream of a run, and its controls.

Everything is read from, and asked through, the store:

- ``GET /api/runs`` lists runs (the runs page's filters); ``GET /api/runs/{run}`` is a run as its
  page draws it: the summary exactly as ``horde show RUN --json`` prints it, the steps table, the
  monitors' tables and diagnosis, and the report's figures (a chart per monitor among them).
- ``GET /api/runs/{run}/events`` streams a run as server-sent events: one ``update`` with the
  whole state first, then one each time the run's process stores new seconds or monitor samples (looked for every
  ``POLL_INTERVAL_S``), carrying only the new points of each chart (see
  :class:`~horde.web.run_view.FigureDeltas`); an ``end`` event when the run has ended.
- ``POST /api/runs/{run}/control`` queues ``{"stop": true}`` or a re-target (``{"vus": N}`` or
  ``{"rate_per_s": R}``, optional ``ramp_s`` and ``scenarios``) with ``Store.request_control``; the
  run's own process applies it within a second and answers through the store. The endpoint
  waits up to ``ANSWER_WAIT_S`` for that answer (202 when it has not come yet;
  ``GET /api/load-requests/{id}`` reads it later).
- ``GET /api/compare?run=A&run=B`` and ``GET /api/trend?key=K``: ``horde compare``'s verdicts
  and ``horde trend``'s points.
"""

from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import AsyncIterator
from typing import Any, Final

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from horde.results.compare import ComparisonRule, RunComparison, compare_runs, trend
from horde.errors import InvalidInput
from horde.report.charts import monitor_charts, run_charts
from horde.report.capacity_view import broke_first_marks, capacity_charts
from horde.report.monitors_view import monitors_view, stored_findings
from horde.report.series import monitor_series, run_series
from horde.report.study_view import CHART_ID, study_panel
from horde.results.stored_run import RunResults, load_run
from horde.store import MonitorSample, RunRecord, Store, pid_alive
from horde.web.dashboard import Dashboard, dashboard_of, run_filter_of
from horde.web.run_view import FigureDeltas, RunView, run_header, run_state
from horde.web.store_reads import RunRow

#: How often a live stream looks for new seconds (a run stores one a second).
POLL_INTERVAL_S: Final = 0.5
#: How long the control endpoint waits for the run's answer (it answers about once a second).
ANSWER_WAIT_S: Final = 5.0
#: A stream with nothing to say sends a comment this often, so proxies keep it open.
KEEPALIVE_S: Final = 10.0
#: After this long without a new second, a run of this host whose process is gone is marked aborted.
SILENCE_CHECK_S: Final = 5.0
#: A live page's latency distribution is redrawn once per this many of the run's seconds: it is
#: the costly part of a second to compute and to send (see RunView).
DISTRIBUTION_EVERY_S: Final = 10
#: The most runs one listing returns.
MAX_LISTED: Final = 500


def query_lists(request: Request) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        found.setdefault(key, []).append(value)
    return found


def listed_run(row: RunRow) -> dict[str, Any]:
    """A runs-list row, JSON-ready, with the headline figures of its stored summary: no p95
    where no request got a response (the summary's 0 is no measurement), and how many of its
    thresholds failed (None: it judged none)."""
    summary = row.summary or {}
    verdicts = summary.get("thresholds")
    failed = [verdict for verdict in verdicts or [] if isinstance(verdict, dict) and not verdict.get("passed")]
    measured = summary.get("responses") != 0
    return {
        "run_id": row.run_id,
        "plan_name": row.plan_name,
        "status": row.status,
        "started_at": row.started_at.isoformat(),
        "ended_at": row.ended_at.isoformat() if row.ended_at else None,
        "tags": row.tags,
        "host": row.host,
        "duration_s": summary.get("duration_s"),
        "requests": summary.get("requests"),
        "rps": summary.get("rps"),
        "p95_ms": summary.get("latency_ms", {}).get("p95") if measured else None,
        "error_percent": summary.get("error_percent") if summary.get("requests") != 0 else None,
        "thresholds_failed": len(failed) if isinstance(verdicts, list) and verdicts else None,
    }


def list_limit(request: Request, default: int = 100) -> int:
    text = request.query_params.get("limit") or str(default)
    try:
        limit = int(text)
    except ValueError:
        raise InvalidInput(f"limit={text!r} is not a number", hint="limit=100") from None
    if not 1 <= limit <= MAX_LISTED:
        raise InvalidInput(f"limit must be between 1 and {MAX_LISTED} (got {limit})")
    return limit


def runs_list(request: Request) -> Response:
    dashboard = dashboard_of(request)
    rows = dashboard.reader.find_runs(run_filter_of(query_lists(request)), limit=list_limit(request))
    return JSONResponse({"runs": [listed_run(row) for row in rows]})


def finished_state(store: Store, ref: str) -> dict[str, Any]:
    """A run as its page draws it, read whole from the store (``horde show``'s summary, the
    report's figures)."""
    results = load_run(store, ref)
    monitors = monitor_series(results.record.plan, results.monitor_samples)
    findings = stored_findings(results.record.plan, results.summary, results.monitor_samples)
    state = run_state(
        results.record,
        results.record.status,
        results.summary,
        results.snapshots[-1] if results.snapshots else None,
        monitors_view(monitors, findings, results.summary.get("monitors")),
    )
    state["figures"] = {
        **run_charts(run_series(results)),
        **capacity_charts(results.summary.get("capacity")),
        **monitor_charts(monitors, findings, broke_first_marks(results.summary.get("capacity"))),
    }
    if results.record.tags.get("scale_study"):
        # A run of a scalability study: the study it belongs to, its model and chart beside it.
        state["scale_study"], state["figures"][CHART_ID] = study_panel(store, results.record.tags)
    return state


def run_detail(request: Request) -> Response:
    return JSONResponse(_jsonable(finished_state(dashboard_of(request).store, request.path_params["run"])))


async def run_events(request: Request) -> Response:
    dashboard = dashboard_of(request)
    record = await anyio.to_thread.run_sync(dashboard.store.get_run, request.path_params["run"])
    return StreamingResponse(
        _stream(dashboard, record),
        media_type="text/event-stream",
        # no-transform and X-Accel-Buffering: proxies must pass each event on at once.
        headers={"cache-control": "no-cache, no-transform", "x-accel-buffering": "no"},
    )


async def _stream(dashboard: Dashboard, record: RunRecord) -> AsyncIterator[str]:
    run_id = record.run_id
    view = RunView(record, distribution_every_s=DISTRIBUTION_EVERY_S)
    deltas = FigureDeltas()
    first = True
    last_event = last_news = time.monotonic()
    # Tell EventSource to come back soon if the connection drops (the default is 3 s).
    yield "retry: 2000\n\n"
    while not dashboard.closing.is_set():
        # Status first: when it reads ended, the snapshots read next include the last one.
        status = await anyio.to_thread.run_sync(dashboard.reader.run_status, run_id) or "aborted"
        new = await anyio.to_thread.run_sync(dashboard.reader.snapshots_after, run_id, view.last_second)
        sampled = (
            await anyio.to_thread.run_sync(dashboard.reader.monitor_samples_after, run_id, view.monitors_read_after)
            if view.monitors.watching
            else {}
        )
        if new or first or _news(view, sampled):
            await anyio.to_thread.run_sync(view.add_monitor_samples, sampled)
            await anyio.to_thread.run_sync(view.add, new)
            state = view.state(status)
            state["changes"] = deltas.changes(view.figures())
            yield _event("update", state, event_id=str(view.last_second))
            first = False
            last_event = last_news = time.monotonic()
        if status != "running":
            yield _event("end", {"status": status})
            return
        now = time.monotonic()
        if now - last_news > SILENCE_CHECK_S:
            last_news = now
            await anyio.to_thread.run_sync(_mark_if_abandoned, dashboard, record)
        if now - last_event > KEEPALIVE_S:
            last_event = now
            yield ": keep-alive\n\n"
        await anyio.sleep(POLL_INTERVAL_S)


def _news(view: RunView, sampled: dict[str, list[MonitorSample]]) -> bool:
    """Whether ``sampled`` holds a sample the view has not taken yet."""
    return any(
        sample.second > view.monitors.last_seconds.get(name, -1) for name, found in sampled.items() for sample in found
    )


def _mark_if_abandoned(dashboard: Dashboard, record: RunRecord) -> None:
    """A run whose process died stays ``running`` until the store is opened again on its host;
    opening it marks the run aborted (``Store.open``), which ends the stream."""
    if record.host == socket.gethostname() and not pid_alive(int(record.pid)):
        Store.open(dashboard.store_url).close()


def _event(name: str, data: dict[str, Any], *, event_id: str | None = None) -> str:
    lines = [f"event: {name}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    # Compact JSON has no newline, so the data fits the one line an event field allows.
    lines.append("data: " + json.dumps(_jsonable(data), separators=(",", ":"), allow_nan=False))
    return "\n".join(lines) + "\n\n"


def _jsonable(value: Any) -> Any:
    """``value`` with non-finite floats as null (JSON has no NaN; a browser's parser rejects it)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return value


def load_request_of(body: Any) -> dict[str, Any]:
    """The store's load request for a control's JSON body, checked.

    >>> load_request_of({"vus": 20, "ramp_s": 5})
    {'vus': 20, 'ramp_s': 5.0}
    >>> load_request_of({"stop": True})
    {'stop': True}
    """
    if not isinstance(body, dict):
        raise InvalidInput(
            "a control is a JSON object", hint='{"stop": true}, {"vus": 50, "ramp_s": 10} or {"rate_per_s": 200}'
        )
    unknown = set(body) - {"stop", "vus", "rate_per_s", "ramp_s", "scenarios"}
    if unknown:
        raise InvalidInput(
            f"unknown control field(s): {', '.join(sorted(unknown))}", hint="stop, vus, rate_per_s, ramp_s, scenarios"
        )
    if body.get("stop") is True:
        if len(body) > 1:
            raise InvalidInput("stop goes alone", hint='{"stop": true}')
        return {"stop": True}
    levels = [key for key in ("vus", "rate_per_s") if body.get(key) is not None]
    if len(levels) != 1:
        raise InvalidInput("give exactly one of vus and rate_per_s, or stop", hint='{"vus": 50} or {"rate_per_s": 200}')
    level = body[levels[0]]
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not math.isfinite(level) or level < 0:
        raise InvalidInput(f"{levels[0]} must be a number, 0 or more (got {level!r})")
    if levels[0] == "vus" and level != int(level):
        raise InvalidInput(f"vus must be a whole number (got {level!r})")
    request: dict[str, Any] = {levels[0]: int(level) if levels[0] == "vus" else float(level)}
    ramp = body.get("ramp_s", 0)
    if isinstance(ramp, bool) or not isinstance(ramp, (int, float)) or not math.isfinite(ramp) or ramp < 0:
        raise InvalidInput(f"ramp_s must be a number of seconds, 0 or more (got {ramp!r})")
    request["ramp_s"] = float(ramp)
    scenarios = body.get("scenarios")
    if scenarios:
        if not isinstance(scenarios, list) or not all(isinstance(name, str) and name for name in scenarios):
            raise InvalidInput("scenarios must be a list of scenario names")
        request["scenarios"] = scenarios
    return request


async def run_control(request: Request) -> Response:
    dashboard = dashboard_of(request)
    try:
        body = await request.json()
    except ValueError:
        raise InvalidInput("the body is not JSON", hint='{"stop": true}') from None
    control = load_request_of(body)
    record = await anyio.to_thread.run_sync(dashboard.store.get_run, request.path_params["run"])
    if record.status != "running":
        return JSONResponse({"error": f"run {record.run_id} is not running (it is {record.status})"}, status_code=409)
    request_id = await anyio.to_thread.run_sync(dashboard.store.request_control, record.run_id, control)
    deadline = time.monotonic() + ANSWER_WAIT_S
    answer = await anyio.to_thread.run_sync(dashboard.store.control_answer, request_id)
    while answer is None and time.monotonic() < deadline and not dashboard.closing.is_set():
        await anyio.sleep(0.2)
        answer = await anyio.to_thread.run_sync(dashboard.store.control_answer, request_id)
    return JSONResponse(_answer(request_id, answer, record), status_code=200 if answer is not None else 202)


def control_answer(request: Request) -> Response:
    request_id = int(request.path_params["request_id"])
    answer = dashboard_of(request).store.control_answer(request_id)
    return JSONResponse(
        {
            "request_id": request_id,
            "answer": answer,
            "applied": None if answer is None else answer.startswith("applied"),
        }
    )


def _answer(request_id: int, answer: str | None, record: RunRecord) -> dict[str, Any]:
    found: dict[str, Any] = {
        "request_id": request_id,
        "answer": answer,
        "applied": None if answer is None else answer.startswith("applied"),
    }
    if answer is None:
        found["message"] = (
            f"queued: run {record.run_id}'s process (pid {record.pid} on {record.host}) answers once a "
            "second while it runs; it has not answered yet"
        )
    return found


def comparison_of(request: Request) -> tuple[list[RunResults], list[RunComparison], ComparisonRule]:
    """The runs named by ``run=`` (two or more; the first is the baseline) and each other run
    compared with it, by the rule of ``alpha``, ``min_change`` (%), ``min_change_ms``."""
    refs = [ref.strip() for ref in request.query_params.getlist("run") if ref.strip()]
    if len(refs) < 2:
        raise InvalidInput(
            "a comparison needs at least two runs", hint="tick two or more runs in the runs list, or ?run=A&run=B"
        )
    try:
        rule = ComparisonRule(
            alpha=float(request.query_params.get("alpha") or 0.01),
            min_relative_change=float(request.query_params.get("min_change") or 5.0) / 100.0,
            min_absolute_change_ms=float(request.query_params.get("min_change_ms") or 0.1),
        )
    except ValueError as error:
        raise InvalidInput(f"bad comparison rule: {error}", hint="alpha=0.01&min_change=5&min_change_ms=0.1") from None
    store = dashboard_of(request).store
    runs = [load_run(store, ref) for ref in refs]
    return runs, [compare_runs(runs[0], candidate, rule) for candidate in runs[1:]], rule


def comparison(request: Request) -> Response:
    runs, comparisons, _ = comparison_of(request)
    return JSONResponse(
        _jsonable(
            {
                "runs": [run_header(results.record) for results in runs],
                "comparisons": [item.to_dict() for item in comparisons],
            }
        )
    )


def trend_points(request: Request) -> Response:
    key = (request.query_params.get("key") or "").strip()
    if not key:
        raise InvalidInput("the trend needs a tag key", hint="/api/trend?key=build")
    points = trend(
        dashboard_of(request).store,
        key,
        tag_value=request.query_params.get("value") or None,
        limit=list_limit(request, default=20),
    )
    return JSONResponse(
        _jsonable(
            [
                {
                    "run_id": point.run_id,
                    "started_at": point.started_at.isoformat(),
                    "status": point.status,
                    "tag_value": point.tag_value,
                    "steps": point.steps,
                }
                for point in points
            ]
        )
    )
