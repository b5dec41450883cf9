"""The web dashboard (`horde ui`), without a browser (tests/test_dashboard_browser.py has one).

Routes are driven with Starlette's TestClient, the live stream through a real server: runs list
and its filters; a run's JSON carries `horde show --json`'s summary and the report's figures,
the same whether built in one pass or second by second as a live run arrives; tokens and the
loopback rule; the live stream sends each new second a writer stores; controls are queued in the
store and the answer of the run's process (simulated here) comes back; comparison and trend;
and all of it on PostgreSQL too.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from horde.cli import app as cli_app
from horde.cli import main
from horde.cli.web import register
from horde.errors import ExitCode
from horde.report.charts import run_charts
from horde.report.series import run_series
from horde.results.stored_run import ALL_REQUESTS, load_run
from horde.store import Store
from horde.web import DashboardServer, InsecureBind, create_app
from horde.web import api as api_module
from horde.web.run_view import FigureDeltas, RunView
from horde.web.store_reads import StoreReader
from recorded_runs import get, plan_dict, record_run
from synthetic import entry

register(cli_app)

BASE_URL = "http://127.0.0.1:8089"
HOSTILE = 'x</script><b>"y"&'
RUN_CHARTS = (
    "chart-throughput",
    "chart-latency",
    "chart-distribution",
    "chart-errors",
    "chart-load",
    "chart-generator",
)


class Stored:
    """The runs recorded once for this module's tests."""

    def __init__(self, url: str, alpha: str, beta: str, hostile: str) -> None:
        self.url, self.alpha, self.beta, self.hostile = url, alpha, beta, hostile


@pytest.fixture(scope="module")
def stored(builtin_target: Any, tmp_path_factory: pytest.TempPathFactory) -> Stored:
    """Two real 2 s runs (alpha: a 2 ms step and a failing one; beta: 4 ms), tagged by build,
    then a finished run with a hostile plan name and no seconds."""
    url = f"sqlite:///{tmp_path_factory.mktemp('dashboard') / 'runs.sqlite'}"
    port = builtin_target.port
    alpha = record_run(
        url,
        plan_dict(port, [get("item", "/delay/2"), get("missing", "/status/404")], vus=2, duration_s=2.0, name="alpha"),
        tags={"build": "1", "team": "a"},
    )
    beta = record_run(
        url,
        plan_dict(port, [get("item", "/delay/4")], vus=2, duration_s=2.0, name="beta"),
        tags={"build": "2", "team": "a"},
    )
    with Store.open(url) as store:
        hostile = store.create_run(
            plan={"version": 1, "name": HOSTILE}, plan_name=HOSTILE, parameters={}, tags={"team": HOSTILE}
        )
        store.finish_run(hostile, status="failed", summary=None)
    return Stored(url, alpha, beta, hostile)


@pytest.fixture
def client(stored: Stored) -> Iterator[TestClient]:
    with TestClient(create_app(stored.url, token=None), base_url=BASE_URL) as test_client:
        yield test_client


def show_json(run_id: str, store_url: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`horde show RUN --json`, run in-process."""
    capsys.readouterr()
    assert main(["show", run_id, "--json", "--store", store_url]) == ExitCode.OK
    shown: dict[str, Any] = json.loads(capsys.readouterr().out)
    return shown


def second(number: int, entries: list[dict[str, Any]], *, final: bool = False) -> dict[str, Any]:
    """A whole snapshot around step entries (synthetic.entry)."""
    return {
        "second": number,
        "elapsed_s": float(number),
        "interval_s": 1.0,
        "timestamp": 1_700_000_000.0 + number,
        "final": final,
        "steps": entries,
        "active_vus": 2,
        "peak_vus": 2,
        "busy_vus": 1,
        "iterations": 3,
        "dropped_arrivals": 0,
        "connections_opened": 1,
        "target_vus": 2,
        "target_rate_per_s": None,
        "cpu_percent": 5.0,
        "timer_lateness_p99_ms": 0.5,
    }


# -- the runs list ----------------------------------------------------------------------------------


def test_runs_are_listed_newest_first_and_filtered(client: TestClient, stored: Stored) -> None:
    listed = client.get("/api/runs").json()["runs"]
    assert [run["run_id"] for run in listed] == [stored.hostile, stored.beta, stored.alpha]
    alpha = listed[2]
    assert (
        alpha["plan_name"] == "alpha" and alpha["status"] == "finished" and alpha["tags"] == {"build": "1", "team": "a"}
    )

    def ids(query: str) -> list[str]:
        response = client.get(f"/api/runs?{query}")
        assert response.status_code == 200, response.text
        return [run["run_id"] for run in response.json()["runs"]]

    assert ids("plan=ALP") == [stored.alpha]
    assert ids("status=failed") == [stored.hostile]
    assert ids("tag=build=2") == [stored.beta]
    assert ids("tag=build") == [stored.beta, stored.alpha]
    assert ids("tag=team=a&tag=build=1") == [stored.alpha]
    assert ids("tag=nope") == []
    assert ids("from=2000-01-01&to=2999-12-31") == [stored.hostile, stored.beta, stored.alpha]
    assert ids("to=2000-01-01") == []
    assert ids("limit=1") == [stored.hostile]
    bad = client.get("/api/runs?from=yesterday")
    assert bad.status_code == 400 and "not a date" in bad.json()["error"]


def test_runs_page_lists_runs_with_user_text_escaped(client: TestClient, stored: Stored) -> None:
    page = client.get("/", headers={"accept": "text/html"})
    assert page.status_code == 200
    for run_id in (stored.alpha, stored.beta, stored.hostile):
        assert f'href="/runs/{run_id}"' in page.text
    assert HOSTILE not in page.text and "x&lt;/script&gt;&lt;b&gt;&#34;y&#34;&amp;" in page.text
    filtered = client.get("/?status=finished&plan=beta")
    assert stored.beta in filtered.text and stored.alpha not in filtered.text
    problem = client.get("/?from=nonsense")
    assert problem.status_code == 200 and 'id="problem"' in problem.text


# -- a run -----------------------------------------------------------------------------------------


def test_run_json_has_the_numbers_of_horde_show_and_the_reports_figures(
    client: TestClient, stored: Stored, capsys: pytest.CaptureFixture[str]
) -> None:
    for run_id in (stored.alpha, stored.beta):
        state = client.get(f"/api/runs/{run_id}").json()
        shown = show_json(run_id, stored.url, capsys)
        assert state["summary"] == shown
        rows = {row["name"]: row for row in state["steps"]}
        assert list(rows) == [*shown["steps"], ALL_REQUESTS]
        for name, row in rows.items():
            figures = shown if name == ALL_REQUESTS else shown["steps"][name]
            for field in ("requests", "errors", "error_percent", "rps"):
                assert row[field] == figures[field], (name, field)
            for field in ("p50", "p90", "p95", "p99", "max"):
                assert row[field] == figures["latency_ms"][field], (name, field)
        with Store.open(stored.url) as store:
            expected = run_charts(run_series(load_run(store, run_id)))
        assert state["figures"] == json.loads(json.dumps(expected))
        assert state["run"]["status"] == "finished" and state["last_second"] > 0


def test_run_page_names_the_run_and_follows_last(client: TestClient, stored: Stored) -> None:
    page = client.get(f"/runs/{stored.alpha}")
    assert page.status_code == 200
    assert f'data-run-id="{stored.alpha}"' in page.text and 'data-status="finished"' in page.text
    assert '<script src="/static/plotly-basic.min.js">' in page.text and "cdn" not in page.text.lower()
    latest = client.get("/runs/last", follow_redirects=False)
    assert latest.status_code == 303 and latest.headers["location"].endswith(f"/runs/{stored.hostile}")
    missing = client.get("/runs/nothing-like-this")
    assert missing.status_code == 404 and "no run matches" in missing.text
    assert client.get("/api/runs/nothing-like-this").status_code == 404
    plotly = client.get("/static/plotly-basic.min.js", headers={"accept-encoding": "identity"})
    assert plotly.status_code == 200 and plotly.content.startswith(b"/**\n* plotly.js (basic - minified)")
    assert client.get("/static/run.js").status_code == 200


def test_the_chart_code_is_served_once_then_from_the_browser_cache(client: TestClient) -> None:
    """plotly.js (1.19 MB) is cached a day and revalidated by its ETag: a browser that holds it
    gets a 304 with no body; one that takes gzip gets 395 KB that unpack to the same file."""
    vendored = (Path(__file__).resolve().parents[1] / "python/horde/report/vendor/plotly-basic.min.js").read_bytes()
    for path in ("/static/plotly-basic.min.js", "/static/linked_axes.js"):
        first = client.get(path, headers={"accept-encoding": "gzip"})
        assert first.status_code == 200 and "max-age=86400" in first.headers["cache-control"]
        etag = first.headers["etag"]
        again = client.get(path, headers={"if-none-match": etag, "accept-encoding": "gzip"})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
        stale = client.get(path, headers={"if-none-match": '"an-older-install"', "accept-encoding": "gzip"})
        assert stale.status_code == 200 and stale.content == first.content
    raw = client.get("/static/plotly-basic.min.js", headers={"accept-encoding": "identity"})
    packed = client.get("/static/plotly-basic.min.js", headers={"accept-encoding": "gzip"})
    assert raw.content == vendored and "content-encoding" not in raw.headers
    # httpx unpacks the body; the bytes on the wire are the gzip member's length.
    assert packed.headers["content-encoding"] == "gzip" and packed.content == vendored
    assert int(packed.headers["content-length"]) < 450_000


def test_a_target_response_time_run_shows_its_answer_readings_and_chart(stored: Stored, tmp_path: Path) -> None:
    """The run's JSON carries the answer as the report words it (the sentence first, no
    maximum), its readings as the table, and the chart over the run's time axis."""
    from horde.report.capacity_view import capacity_charts
    from test_report import target_response_time_answer

    capacity = target_response_time_answer("held")
    url = f"sqlite:///{tmp_path / 'steered.sqlite'}"
    with Store.open(stored.url) as source_store:
        source = load_run(source_store, stored.alpha)
    with Store.open(url) as store:
        run_id = store.create_run(plan=source.record.plan, plan_name="steered", parameters={}, tags={})
        for snapshot in source.snapshots:
            store.add_snapshot(run_id, snapshot)
        store.finish_run(run_id, status="finished", summary={**source.summary, "run_id": run_id, "capacity": capacity})
    with TestClient(create_app(url, token=None), base_url=BASE_URL) as steered:
        state = steered.get(f"/api/runs/{run_id}").json()
    view = state["capacity"]
    assert view["facts"][0] == ["answer", capacity["sentence"]] and view["facts"][1] == ["outcome", "T held"]
    assert "max sustainable" not in json.dumps(view) and "knee" not in json.dumps(view)
    assert view["table"] == "capacity-readings" and view["columns"][3] == "level (VUs)"
    assert [row["reading"] for row in view["steps"]] == [reading["index"] + 1 for reading in capacity["readings"]]
    assert view["passed"] == [reading["verdict"] in ("under", "at") for reading in capacity["readings"]]
    assert view["charts"] == ["chart-capacity-target"] and "±10 %" in view["chart_note"]
    figure = state["figures"]["chart-capacity-target"]
    assert figure == json.loads(json.dumps(capacity_charts(capacity)["chart-capacity-target"]))
    assert figure["layout"]["meta"] == "time-axis"
    assert set(state["figures"]) == {*RUN_CHARTS, "chart-capacity-target"}


def test_a_view_built_second_by_second_equals_the_whole_run(stored: Stored) -> None:
    with Store.open(stored.url) as store:
        for run_id in (stored.alpha, stored.beta):
            results = load_run(store, run_id)
            for batch, every in ((1, 1), (2, 1), (len(results.snapshots), 1), (1, 10)):
                # every=10: the distribution waits for the tenth second, or the final one.
                view = RunView(results.record, distribution_every_s=every)
                for start in range(0, len(results.snapshots), batch):
                    view.add(results.snapshots[start : start + batch])
                assert view.figures() == run_charts(run_series(results)), batch
                assert view.summary("finished") == results.summary


def test_a_message_runs_view_draws_its_message_charts_as_the_whole_run(tmp_path: Path) -> None:
    """A UDP run's seconds (a ping step, a stream step): the view, fed second by second, draws
    the report's message charts; the stream's frames count, its latency is no round trip."""

    def ping(number: int, latencies_us: list[int], lost: int) -> dict[str, Any]:
        made = entry("rtt", latencies_us + [0] * lost, scenario="s", errors={"lost": lost} if lost else None)
        made["histogram"] = entry("rtt", latencies_us)["histogram"]  # lost pings are counted, never timed
        made["messages"] = {
            "sent": len(latencies_us) + lost,
            "received": len(latencies_us),
            "datagrams_sent": 10 * number,
            "datagrams_received": 9 * number,
            "late": 1,
            "retransmitted": 0,
        }
        return made

    move = entry("move", [1_000_000], scenario="s")
    move["messages"] = {
        "sent": 50,
        "received": 50,
        "datagrams_sent": 50,
        "datagrams_received": 50,
        "late": 0,
        "retransmitted": 0,
    }
    snapshots = [
        second(1, [ping(1, [40_000, 41_000], 1), move]),
        second(2, [ping(2, [42_000], 0)]),
        second(3, [ping(3, [43_000, 44_000], 2)], final=True),
    ]
    plan = {
        "version": 1,
        "target": {"base_url": "udp://127.0.0.1:7000"},
        "scenarios": [{"name": "s", "steps": [{"type": "ping", "name": "rtt"}, {"type": "stream", "name": "move"}]}],
    }
    with Store.open(f"sqlite:///{tmp_path / 'runs.sqlite'}") as store:
        run_id = store.create_run(plan=plan, plan_name="udp", parameters={"workers": 1}, tags={})
        for snapshot in snapshots:
            store.add_snapshot(run_id, snapshot)
        store.finish_run(run_id, status="finished", summary=None)
        results = load_run(store, run_id)
    view = RunView(results.record)
    for snapshot in results.snapshots:
        view.add([snapshot])
    figures = view.figures()
    assert figures == run_charts(run_series(results))
    traces = {
        trace["name"]: trace
        for chart in ("chart-messages", "chart-message-losses", "chart-rtt")
        for trace in figures[chart]["data"]
    }
    assert traces["messages sent/s"]["y"] == [53.0, 1.0, 4.0] and traces["datagrams in/s"]["y"] == [59.0, 18.0, 27.0]
    assert traces["lost replies/s"]["y"] == [1.0, 0.0, 2.0] and traces["late replies/s"]["y"] == [1.0, 1.0, 1.0]
    assert traces["max"]["y"] == pytest.approx([41.0, 42.0, 44.0], rel=1e-3), "the stream's second is not a round trip"
    assert [trace["x"] for trace in figures["chart-messages"]["data"]][0] == [1.0, 2.0, 3.0]


def test_a_step_name_a_later_scenario_shares_is_renamed_as_in_the_whole_run(tmp_path: Path) -> None:
    """Seconds 1-2 have s/home only ("home"); second 3 brings t/home: both become scenario/step."""
    snapshots = [
        second(1, [entry("home", [1000, 2000], scenario="s")]),
        second(2, [entry("home", [1500], scenario="s", errors={"status_500": 1})]),
        second(3, [entry("home", [3000], scenario="s"), entry("home", [9000, 9100], scenario="t")]),
        second(4, [entry("home", [900], scenario="t")], final=True),
    ]
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    with Store.open(url) as store:
        run_id = store.create_run(plan={"version": 1}, plan_name="names", parameters={"workers": 1}, tags={})
        for snapshot in snapshots:
            store.add_snapshot(run_id, snapshot)
        store.finish_run(run_id, status="finished", summary=None)
        results = load_run(store, run_id)
        reader = StoreReader(url)
        try:
            assert reader.snapshots_after(run_id, 0) == store.snapshots(run_id)
            assert reader.snapshots_after(run_id, 2) == store.snapshots(run_id)[2:]
            assert reader.snapshots_after(run_id, 4) == []
        finally:
            reader.close()
    view = RunView(results.record)
    deltas = FigureDeltas()
    browser: dict[str, dict[str, Any]] = {}
    for snapshot in results.snapshots:
        view.add([snapshot])
        apply_changes(browser, deltas.changes(view.figures()))
    whole = run_charts(run_series(results))
    assert [button["label"] for button in whole["chart-latency"]["layout"]["updatemenus"][0]["buttons"]] == [
        ALL_REQUESTS,
        "s/home",
        "t/home",
    ]
    assert view.figures() == whole
    assert browser == json.loads(json.dumps(whole))
    assert view.summary("finished") == results.summary


def apply_changes(browser: dict[str, dict[str, Any]], changes: dict[str, dict[str, Any]]) -> None:
    """What static/charts.js does with the stream's changes, on plain figure dicts."""
    changes = json.loads(json.dumps(changes))
    for chart_id, change in changes.items():
        if "replace" in change:
            browser[chart_id] = change["replace"]
            continue
        figure = browser[chart_id]
        extend = change.get("extend", {"indices": [], "x": [], "y": []})
        for index, xs, ys in zip(extend["indices"], extend["x"], extend["y"]):
            figure["data"][index]["x"] += xs
            figure["data"][index]["y"] += ys
        for trace in change.get("restyle", []):
            figure["data"][trace["index"]]["x"] = trace["x"]
            figure["data"][trace["index"]]["y"] = trace["y"]
        for key, value in change.get("relayout", {}).items():
            if value is None:
                figure["layout"].pop(key, None)
            else:
                figure["layout"][key] = value


def test_figure_changes_rebuild_the_figures_of_a_recorded_run(stored: Stored) -> None:
    with Store.open(stored.url) as store:
        results = load_run(store, stored.alpha)
    view = RunView(results.record)
    deltas = FigureDeltas()
    browser: dict[str, dict[str, Any]] = {}
    kinds_seen: set[str] = set()
    for snapshot in results.snapshots:
        view.add([snapshot])
        changes = deltas.changes(view.figures())
        kinds_seen.update(kind for change in changes.values() for kind in change)
        apply_changes(browser, changes)
    assert browser == json.loads(json.dumps(run_charts(run_series(results))))
    # After the first second, the charts over time only grow: new points, not whole charts.
    assert "extend" in kinds_seen and "restyle" in kinds_seen
    assert deltas.changes(view.figures()) == {}


# -- access ----------------------------------------------------------------------------------------


def test_a_token_is_required_on_every_request(stored: Stored) -> None:
    token = "s3cret-token"
    with TestClient(create_app(stored.url, token=token), base_url=BASE_URL) as anonymous:
        assert anonymous.get("/api/runs").status_code == 401
        assert anonymous.get("/", headers={"accept": "text/html"}).status_code == 401
        assert anonymous.get("/static/run.js").status_code == 401
        assert anonymous.get(f"/api/runs/{stored.alpha}/events").status_code == 401
        assert anonymous.get("/api/runs?token=wrong").status_code == 401
        assert anonymous.get("/api/runs", headers={"authorization": f"Bearer {token}"}).status_code == 200
        assert anonymous.get("/api/runs", headers={"x-horde-token": token}).status_code == 200
        assert anonymous.get(f"/api/runs?token={token}").status_code == 200
    with TestClient(create_app(stored.url, token=token), base_url=BASE_URL) as browser:
        # The token in the address: redirected to the same page without it, a cookie carries it on.
        first = browser.get(f"/?status=finished&token={token}", headers={"accept": "text/html"}, follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/?status=finished"
        assert "HttpOnly" in first.headers["set-cookie"] and "SameSite=Strict" in first.headers["set-cookie"]
        assert browser.get("/?status=finished", headers={"accept": "text/html"}).status_code == 200
        assert browser.get("/api/runs").status_code == 200


def test_without_a_token_only_loopback_names_are_answered(stored: Stored) -> None:
    app = create_app(stored.url, token=None)
    with TestClient(app, base_url=BASE_URL) as local:
        assert local.get("/api/runs").status_code == 200
        # DNS rebinding: another site's name pointed at 127.0.0.1 still sends its own Host.
        assert local.get("/api/runs", headers={"host": "attacker.example:8089"}).status_code == 403
    with TestClient(app, base_url="http://localhost:8089") as by_name:
        assert by_name.get("/api/runs").status_code == 200
    with TestClient(app, base_url="http://192.0.2.7:8089") as from_afar:
        assert from_afar.get("/api/runs").status_code == 403


def test_a_bind_beyond_loopback_without_a_token_is_refused(stored: Stored, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InsecureBind) as refused:
        create_app(stored.url, token=None, host="0.0.0.0")
    assert refused.value.exit_code == ExitCode.INVALID_INPUT and refused.value.hint
    create_app(stored.url, token="t", host="0.0.0.0")  # with a token it is fine
    generated = DashboardServer(stored.url, host="0.0.0.0", port=0)
    assert generated.token and len(generated.token) >= 32
    assert DashboardServer(stored.url).token is None
    capsys.readouterr()
    assert (
        main(["ui", "--host", "0.0.0.0", "--token", "", "--port", "0", "--store", stored.url]) == ExitCode.INVALID_INPUT
    )
    assert "token is empty" in capsys.readouterr().err


def test_a_served_dashboard_beyond_loopback_prints_its_token_and_demands_it(stored: Stored) -> None:
    with DashboardServer(stored.url, host="0.0.0.0", port=0) as server:
        assert server.token is not None and server.url.endswith(f"/?token={server.token}")
        assert server.url.startswith(f"http://127.0.0.1:{server.port}/")
        with httpx.Client(timeout=10, trust_env=False) as http:
            assert http.get(f"http://127.0.0.1:{server.port}/api/runs").status_code == 401
            assert (
                http.get(f"http://127.0.0.1:{server.port}/api/runs", params={"token": server.token}).status_code == 200
            )


# -- live ------------------------------------------------------------------------------------------


def read_event(lines: Iterator[str]) -> tuple[str, dict[str, Any]]:
    """The next event of a server-sent event stream (comments and `retry` skipped)."""
    name, data = "message", ""
    for line in lines:
        if not line:
            if data:
                return name, json.loads(data)
            continue
        if line.startswith(":") or line.startswith("retry:"):
            continue
        field, _, value = line.partition(":")
        if field == "event":
            name = value.strip()
        elif field == "data":
            data += value.strip()
    raise AssertionError("the stream ended")


def running_copy(source_url: str, source_id: str, store: Store, seconds: int) -> tuple[str, list[dict[str, Any]]]:
    """A new `running` run (of this process) in ``store`` holding the first ``seconds`` seconds
    of a recorded run; returns its id and the seconds still to write."""
    with Store.open(source_url) as source_store:
        source = source_store.get_run(source_id)
        snapshots = source_store.snapshots(source_id)
    run_id = store.create_run(plan=source.plan, plan_name=source.plan_name, parameters=source.parameters, tags={})
    for snapshot in snapshots[:seconds]:
        store.add_snapshot(run_id, snapshot)
    return run_id, snapshots[seconds:]


@pytest.fixture
def live_url(tmp_path: Path) -> str:
    """A store of its own for runs a test keeps running (the recorded ones' listing stays as is)."""
    return f"sqlite:///{tmp_path / 'live.sqlite'}"


def test_the_live_stream_sends_each_new_second_then_the_end(stored: Stored, live_url: str) -> None:
    with Store.open(live_url) as store, DashboardServer(live_url) as server:
        run_id, rest = running_copy(stored.url, stored.alpha, store, 1)
        assert len(rest) >= 2
        url = f"http://127.0.0.1:{server.port}/api/runs/{run_id}/events"
        with httpx.Client(timeout=10, trust_env=False) as http, http.stream("GET", url) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            name, first = read_event(lines)
            assert name == "update" and first["last_second"] == 1 and first["run"]["status"] == "running"
            assert set(first["changes"]) == set(RUN_CHARTS)
            assert all("replace" in change for change in first["changes"].values())
            requests_before = first["summary"]["requests"]
            for snapshot in rest:
                store.add_snapshot(run_id, snapshot)
                name, update = read_event(lines)
                assert name == "update" and update["last_second"] == snapshot["second"]
                assert update["summary"]["requests"] >= requests_before
                requests_before = update["summary"]["requests"]
                assert all("replace" not in change for change in update["changes"].values())
            whole = load_run(store, run_id)
            assert update["summary"] == whole.summary
            store.finish_run(run_id, status="interrupted", summary=None)
            assert read_event(lines) == ("end", {"status": "interrupted"})


# -- thresholds and verdicts ------------------------------------------------------------------------

#: Conditions as a plan writes them: text, or a mapping with a scope.
THRESHOLDS = ["p95 < 200ms", {"condition": "errors < 1%", "step": "missing"}, {"condition": "requests >= 1"}]


def with_verdicts(store_url: str, run_id: str, plan: dict[str, Any]) -> str:
    """A copy of a stored run whose plan has ``plan``'s thresholds, and whose summary has their
    verdicts as `horde run` judges and stores them."""
    from horde.control.thresholds import judge, verdicts_to_json
    from horde.plan.control import Threshold

    with Store.open(store_url) as store:
        source = load_run(store, run_id)
        copy_id = store.create_run(plan={**source.record.plan, **plan}, plan_name="judged", parameters={}, tags={})
        for snapshot in source.snapshots:
            store.add_snapshot(copy_id, snapshot)
        verdicts = judge([Threshold.model_validate(item) for item in plan["thresholds"]], source.snapshots)
        store.finish_run(
            copy_id,
            status="finished",
            summary={**source.summary, "run_id": copy_id, "thresholds": verdicts_to_json(verdicts)},
        )
    return copy_id


def test_thresholds_read_as_conditions_with_their_verdicts_and_a_failure_is_marked(
    client: TestClient, stored: Stored
) -> None:
    judged = with_verdicts(stored.url, stored.alpha, {"thresholds": THRESHOLDS})
    state = client.get(f"/api/runs/{judged}").json()
    rows = {row["condition"]: row for row in state["thresholds"]}
    assert list(rows) == ["p95 < 200ms", "errors < 1% [step missing]", "requests >= 1"]
    assert rows["p95 < 200ms"]["verdict"] == "passed" and rows["p95 < 200ms"]["detail"].endswith(" ms")
    # Every request of step missing answers 404: an error, so the threshold failed.
    assert rows["errors < 1% [step missing]"] == {
        "condition": "errors < 1% [step missing]",
        "verdict": "failed",
        "detail": "100 %, not < 1 %",
    }
    assert state["thresholds_failed"] == 1
    listed = {run["run_id"]: run for run in client.get("/api/runs").json()["runs"]}
    assert listed[judged]["thresholds_failed"] == 1 and listed[stored.alpha]["thresholds_failed"] is None
    assert "1 threshold failed" in client.get("/").text


def test_a_running_runs_thresholds_are_judged_on_its_seconds_so_far(stored: Stored, live_url: str) -> None:
    from horde.control.thresholds import judge
    from horde.plan.control import Threshold

    with Store.open(stored.url) as store:
        results = load_run(store, stored.alpha)
    view = RunView(dataclasses.replace(results.record, plan={**results.record.plan, "thresholds": THRESHOLDS}))
    assert [row["verdict"] for row in view.state("running")["thresholds"]] == ["pending"] * 3
    for snapshot in results.snapshots:
        view.add([snapshot])
    rows = view.state("running")["thresholds"]
    whole = judge([Threshold.model_validate(item) for item in THRESHOLDS], results.snapshots)
    # The verdicts so far of every second are the whole run's, read as they stand.
    assert [row["verdict"] for row in rows] == ["passing" if verdict.passed else "failing" for verdict in whole]
    assert rows[1]["detail"] == "100 % so far, not < 1 %" and rows[2]["detail"].endswith(" so far")
    assert not any("{" in row["condition"] for row in rows)


def test_a_run_where_nothing_answered_shows_no_latency(client: TestClient, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'silent.sqlite'}"
    # Port 9 (discard) on loopback: nothing listens, every request is refused.
    silent = record_run(url, plan_dict(9, [get("home", "/")], vus=1, duration_s=1.0, name="silent"))
    judged = with_verdicts(url, silent, {"thresholds": ["p95 < 200ms"]})
    with TestClient(create_app(url, token=None), base_url=BASE_URL) as local:
        state = local.get(f"/api/runs/{judged}").json()
        listed = {run["run_id"]: run for run in local.get("/api/runs").json()["runs"]}
        page = local.get("/").text
    assert state["summary"]["requests"] > 0 and state["summary"]["responses"] == 0
    assert state["summary"]["latency_ms"]["p95"] == 0.0  # the summary's; the page shows none
    assert all(row["responses"] == 0 for row in state["steps"])
    [verdict] = state["thresholds"]
    assert verdict["verdict"] == "failed" and verdict["detail"].startswith("no response was measured")
    assert listed[judged]["p95_ms"] is None and listed[judged]["thresholds_failed"] == 1
    row = page[page.index(f'data-run="{judged}"') :]
    cells = re.findall(r"<td>([^<]*)</td>", row[: row.index("</tr>")])
    assert cells[3:5] == ["—", "100"]  # p95 ms: none; errors %: every request


# -- controls --------------------------------------------------------------------------------------


class AnsweringRun:
    """The running run's side of the controls, as conductor._answer_controls does it."""

    def __init__(self, store_url: str, run_id: str, *, answer: str) -> None:
        self.store_url, self.run_id, self.answer = store_url, run_id, answer
        self.received: list[dict[str, Any]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._answer, daemon=True)

    def __enter__(self) -> AnsweringRun:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=10)

    def _answer(self) -> None:
        with Store.open(self.store_url) as store:
            deadline = time.monotonic() + 20
            while not self._done.is_set() and time.monotonic() < deadline:
                for request_id, request in store.pending_controls(self.run_id):
                    self.received.append(request)
                    store.answer_control(request_id, self.answer)
                time.sleep(0.1)


@pytest.fixture
def live_client(live_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(live_url, token=None), base_url=BASE_URL) as test_client:
        yield test_client


def test_controls_are_queued_in_the_store_and_the_runs_answer_comes_back(
    live_client: TestClient, stored: Stored, live_url: str
) -> None:
    client = live_client
    with Store.open(live_url) as store:
        run_id, _ = running_copy(stored.url, stored.beta, store, 1)
    with AnsweringRun(live_url, run_id, answer="applied: s → 20") as run:
        response = client.post(f"/api/runs/{run_id}/control", json={"vus": 20, "ramp_s": 5})
        assert response.status_code == 200, response.text
        assert response.json()["answer"] == "applied: s → 20" and response.json()["applied"] is True
        stop = client.post(f"/api/runs/{run_id}/control", json={"stop": True})
        assert stop.status_code == 200 and stop.json()["applied"] is True
        answer = client.get(f"/api/load-requests/{stop.json()['request_id']}").json()
        assert answer["answer"] == "applied: s → 20"
    assert run.received == [{"vus": 20, "ramp_s": 5.0}, {"stop": True}]
    with AnsweringRun(live_url, run_id, answer="refused: no open scenario to set a rate on") as run:
        refused = client.post(f"/api/runs/{run_id}/control", json={"rate_per_s": 50.5, "scenarios": ["s"]})
        assert refused.status_code == 200 and refused.json()["applied"] is False
    assert run.received == [{"rate_per_s": 50.5, "ramp_s": 0.0, "scenarios": ["s"]}]
    with Store.open(live_url) as store:
        store.finish_run(run_id, status="interrupted", summary=None)


def test_controls_that_cannot_be_applied_are_refused(
    client: TestClient, live_client: TestClient, stored: Stored, live_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished = client.post(f"/api/runs/{stored.alpha}/control", json={"stop": True})
    assert finished.status_code == 409 and "not running" in finished.json()["error"]
    client = live_client
    with Store.open(live_url) as store:
        run_id, _ = running_copy(stored.url, stored.beta, store, 1)
    control = f"/api/runs/{run_id}/control"
    for body in (
        {},
        {"vus": -1},
        {"vus": 1.5},
        {"vus": 3, "rate_per_s": 2},
        {"stop": True, "vus": 3},
        {"vus": 3, "ramp_s": "soon"},
        {"speed": 3},
        [1],
    ):
        response = client.post(control, json=body)
        assert response.status_code == 400, body
        assert response.json()["error"]
    assert client.post(control, content=b"vus=3", headers={"content-type": "text/plain"}).status_code == 415
    cross_site = client.post(control, json={"stop": True}, headers={"origin": "http://attacker.example"})
    assert cross_site.status_code == 403
    # Nobody answers: the request stays queued and the endpoint says so.
    monkeypatch.setattr(api_module, "ANSWER_WAIT_S", 0.3)
    queued = client.post(control, json={"vus": 4}, headers={"origin": BASE_URL})
    assert queued.status_code == 202 and queued.json()["answer"] is None and "queued" in queued.json()["message"]
    with Store.open(live_url) as store:
        assert [request for _, request in store.pending_controls(run_id)] == [{"vus": 4, "ramp_s": 0.0}]
        store.finish_run(run_id, status="aborted", summary=None)


# -- comparison and trend --------------------------------------------------------------------------


def test_compare_gives_compare_runs_verdicts_and_overlaid_charts(client: TestClient, stored: Stored) -> None:
    api = client.get(f"/api/compare?run={stored.alpha}&run={stored.beta}")
    assert api.status_code == 200, api.text
    with Store.open(stored.url) as store:
        from horde.results.compare import compare_runs

        expected = compare_runs(load_run(store, stored.alpha), load_run(store, stored.beta)).to_dict()
    comparison = api.json()["comparisons"][0]
    assert comparison == json.loads(json.dumps(expected))
    verdicts = {step["name"]: step["verdict"] for step in comparison["steps"]}
    assert verdicts["item"] == "slower"  # /delay/4 against /delay/2
    page = client.get(f"/compare?run={stored.alpha}&run={stored.beta}")
    assert page.status_code == 200
    assert 'data-step="item" data-verdict="slower"' in page.text
    for chart_id in ("chart-throughput", "chart-p95", "chart-distribution", "chart-load"):
        assert f'id="{chart_id}"' in page.text
    assert client.get(f"/compare?run={stored.alpha}").status_code == 400


def test_trend_follows_runs_sharing_a_tag(client: TestClient, stored: Stored) -> None:
    points = client.get("/api/trend?key=build").json()
    assert [(point["run_id"], point["tag_value"]) for point in points] == [(stored.alpha, "1"), (stored.beta, "2")]
    page = client.get("/trend?key=build&step=item")
    assert page.status_code == 200 and 'id="chart-trend-p95"' in page.text
    assert f'data-run="{stored.alpha}"' in page.text
    assert 'id="no-trend"' in client.get("/trend?key=absent").text
    assert client.get("/api/trend").status_code == 400


# -- PostgreSQL: the shared team center ----------------------------------------------------------


@pytest.mark.postgres
def test_the_dashboard_works_on_a_postgresql_store(
    postgres_database: str, builtin_target: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = record_run(
        postgres_database,
        plan_dict(builtin_target.port, [get("item", "/delay/2")], vus=2, duration_s=1.5, name="pg"),
        tags={"build": "7"},
    )
    with TestClient(create_app(postgres_database, token=None), base_url=BASE_URL) as client:
        assert [run["run_id"] for run in client.get("/api/runs?tag=build=7&plan=pg").json()["runs"]] == [run_id]
        state = client.get(f"/api/runs/{run_id}").json()
        assert state["summary"] == show_json(run_id, postgres_database, capsys)
        with Store.open(postgres_database) as store:
            live_id, rest = running_copy(postgres_database, run_id, store, 1)
            view = RunView(store.get_run(live_id))
            reader = StoreReader(postgres_database)
            try:
                view.add(reader.snapshots_after(live_id, 0))
                for snapshot in rest:
                    store.add_snapshot(live_id, snapshot)
                new = reader.snapshots_after(live_id, view.last_second)
                assert new == store.snapshots(live_id)[1:]
                view.add(new)
            finally:
                reader.close()
            assert view.summary("running") == load_run(store, live_id).summary
        with AnsweringRun(postgres_database, live_id, answer="applied: stopping") as run:
            response = client.post(f"/api/runs/{live_id}/control", json={"stop": True})
            assert response.status_code == 200 and response.json()["answer"] == "applied: stopping"
        assert run.received == [{"stop": True}]
