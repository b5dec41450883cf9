"""The dashboard in a real headless browser (Debian's chromium, driven over the DevTools
protocol by tests/cdp.py) against a real `horde run` in a subprocess.

The live run's page must show its request counter rising, draw every panel with data, raise no
console error, and its Stop button must end the run as `interrupted` in the store (the run's
own process applies it); once ended, its steps table carries `horde show --json`'s numbers. A
dashboard listening beyond loopback answers only with its token. Screenshots are kept in
test-artifacts/ at the repository root.

Skipped when chromium is missing, unless HORDE_REQUIRE_BROWSER=1 (CI), which fails instead.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdp import Browser, chromium_or_skip
from conftest import HordeCli
from horde.errors import ExitCode
from horde.results.stored_run import ALL_REQUESTS
from horde.store import Store
from horde.web import DashboardServer, InsecureBind, create_app
from live_runs import first_stored_second
from recorded_runs import get, plan_dict

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHARTS = ("chart-throughput", "chart-latency", "chart-distribution", "chart-errors", "chart-load", "chart-generator")
#: Longer than the test needs: the run is stopped from the page, never by its end.
RUN_SECONDS = 90
#: The live run's thresholds: its 5 ms step passes, its 404 step's errors fail.
LIVE_THRESHOLDS = [{"condition": "p95 < 1000ms", "step": "item"}, {"condition": "errors < 1%", "step": "missing"}]
VERDICTS = (
    "Array.from(document.querySelectorAll('#thresholds li')).map(item => [item.dataset.verdict, item.textContent])"
)

REQUESTS_SHOWN = "Number((document.querySelector('#headline [data-field=requests] b') || {}).textContent || 0)"
CHARTS_DRAWN = """(() => %s.map(id => {
  const element = document.getElementById(id);
  return [id, !!element.querySelector('.main-svg'),
          Math.max(0, ...(element.data || []).map(trace => (trace.x || []).length))];
}))()""" % json.dumps(list(CHARTS))
ANSWER = "document.getElementById('control-answer').className && document.getElementById('control-answer').textContent"
STEPS_TABLE = """(() => Object.fromEntries(Array.from(document.querySelectorAll('#steps tbody tr')).map(row =>
  [row.dataset.step, Object.fromEntries(Array.from(row.querySelectorAll('td[data-field]')).map(
    cell => [cell.dataset.field, cell.textContent]))])))()"""


@pytest.fixture
def live_run(horde_cli: HordeCli, builtin_target: Any) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`horde run` of a two-step plan (one step answers 404) in a subprocess, once its first
    second is stored: (process, run id). The process is always ended."""
    chromium_or_skip()  # before any load is sent
    plan = horde_cli.tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                **plan_dict(
                    builtin_target.port,
                    [get("item", "/delay/5"), get("missing", "/status/404")],
                    vus=2,
                    duration_s=RUN_SECONDS,
                    name="live",
                ),
                "thresholds": LIVE_THRESHOLDS,
            }
        )
    )
    process = horde_cli.popen("run", str(plan), "--workers", "1", "--tag", "ui=browser")
    try:
        yield process, first_stored_second(horde_cli, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        process.communicate(timeout=20)


def test_a_live_run_updates_draws_and_stops_from_the_page(
    live_run: tuple[subprocess.Popen[str], str], horde_cli: HordeCli, tmp_path: Path
) -> None:
    process, run_id = live_run
    with DashboardServer(horde_cli.store_url) as server, Browser(tmp_path / "profile") as browser:
        browser.open(f"{server.url}runs/{run_id}")
        first = browser.wait_for(f"{REQUESTS_SHOWN} > 0 && {REQUESTS_SHOWN}", timeout_s=20, what="a request count")
        later = browser.wait_for(
            f"{REQUESTS_SHOWN} > {first} && {REQUESTS_SHOWN}", timeout_s=20, what="the request count to rise"
        )
        assert later > first
        browser.wait_for(
            f"{CHARTS_DRAWN}.every(([id, drawn, points]) => drawn && points >= 2)",
            timeout_s=20,
            what="every panel drawn with two seconds or more",
        )
        assert browser.evaluate("document.getElementById('status').textContent") == "running"
        steps = browser.evaluate(STEPS_TABLE)
        assert list(steps) == ["item", "missing", ALL_REQUESTS]
        assert browser.evaluate("document.getElementById('controls').hidden") is False
        # Each threshold in words, where it stands on the seconds so far; no verdict yet.
        browser.wait_for(
            f"{VERDICTS}.length === 2 && {VERDICTS}[1][0] === 'failing'",
            timeout_s=15,
            what="the thresholds judged so far",
        )
        verdicts = browser.evaluate(VERDICTS)
        assert verdicts[0][0] == "passing" and verdicts[0][1].startswith("✓ p95 < 1000ms [step item] — passing: ")
        assert verdicts[1][1] == "✗ errors < 1% [step missing] — failing: 100 % so far, not < 1 %", verdicts
        assert browser.evaluate("document.getElementById('verdict').hidden") is True
        ARTIFACTS.mkdir(exist_ok=True)
        browser.screenshot(ARTIFACTS / "dashboard-live.png")
        assert (ARTIFACTS / "dashboard-live.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        # Set the load: 3 VUs at once; the run's process answers through the store.
        browser.evaluate("document.getElementById('vus').value = '3'; document.getElementById('apply').click()")
        answer = browser.wait_for(ANSWER, timeout_s=15, what="the run's answer to the new load")
        assert answer == "applied: s → 3", answer
        browser.wait_for(
            "document.getElementById('progress').textContent.includes('3 VUs active')",
            timeout_s=15,
            what="the third VU to show",
        )

        browser.evaluate(
            "document.getElementById('control-answer').className = ''; document.getElementById('stop').click()"
        )
        answer = browser.wait_for(ANSWER, timeout_s=15, what="the run's answer to Stop")
        assert answer.startswith("applied: stopping"), answer
        assert process.wait(timeout=30) == ExitCode.INTERRUPTED
        browser.wait_for(
            "document.getElementById('status').textContent === 'interrupted'",
            timeout_s=15,
            what="the page to show the run ended",
        )
        with Store.open(horde_cli.store_url) as store:
            assert store.get_run(run_id).status == "interrupted"

        # Ended: the table holds the numbers of `horde show --json` (read by the real command).
        shown = horde_cli.run("show", run_id, "--json")
        assert shown.returncode == 0, shown.stderr
        summary = json.loads(shown.stdout)
        browser.wait_for(
            f"{STEPS_TABLE}[{json.dumps(ALL_REQUESTS)}].requests === {json.dumps(str(summary['requests']))}",
            timeout_s=10,
            what="the final table",
        )
        rows = browser.evaluate(STEPS_TABLE)
        assert list(rows) == [*summary["steps"], ALL_REQUESTS]
        for name, row in rows.items():
            figures = summary if name == ALL_REQUESTS else summary["steps"][name]
            for field in ("requests", "errors", "error_percent", "rps"):
                assert float(row[field]) == figures[field], (name, field)
            for field in ("p50", "p90", "p95", "p99", "max"):
                assert float(row[field]) == figures["latency_ms"][field], (name, field)
        # Why requests failed, as `horde show` says it: the 404's status line, counted.
        details = browser.evaluate(
            "Array.from(document.querySelectorAll('#error-details li[data-kind]')).map("
            "item => [item.dataset.kind, item.textContent])"
        )
        expected = [
            [detail["kind"], f"{detail['kind']}: {detail['message']} — {detail['count']}"]
            for detail in summary["error_details"]
        ]
        assert details == expected and any(kind == "status_404" for kind, _ in details), (details, expected)
        # Interrupted, judged on the whole stored run: the failed threshold is marked beside the status.
        assert [verdict["passed"] for verdict in summary["thresholds"]] == [True, False]
        browser.wait_for(
            "document.getElementById('verdict').dataset.verdict === 'failed'",
            timeout_s=10,
            what="the failed threshold marked",
        )
        assert browser.evaluate("document.getElementById('verdict').textContent") == "✗ 1 of 2 thresholds failed"
        assert [verdict for verdict, _ in browser.evaluate(VERDICTS)] == ["passed", "failed"]
        browser.screenshot(ARTIFACTS / "dashboard-ended.png")

        browser.open(server.url)
        browser.wait_for(
            f"document.querySelector('tr[data-run=\"{run_id}\"]')?.dataset.status === 'interrupted'",
            timeout_s=10,
            what="the runs list to show the run interrupted",
        )
        assert browser.errors() == []


def test_a_dashboard_beyond_loopback_answers_only_with_its_token(horde_cli: HordeCli, tmp_path: Path) -> None:
    chromium_or_skip()
    with pytest.raises(InsecureBind):
        create_app(horde_cli.store_url, token=None, host="0.0.0.0")
    with (
        DashboardServer(horde_cli.store_url, host="0.0.0.0", port=0) as server,
        Browser(tmp_path / "profile") as browser,
    ):
        assert server.token and f"?token={server.token}" in server.url
        browser.open(f"http://127.0.0.1:{server.port}/")
        assert "needs its token" in browser.evaluate("document.body.innerText")
        browser.open(server.url)
        # Redirected to the page without the token in the address; a cookie carries it on.
        browser.wait_for(
            "document.querySelector('h1') && document.querySelector('h1').textContent === 'Runs'",
            timeout_s=10,
            what="the runs page",
        )
        assert "token" not in browser.evaluate("location.href")
        browser.open(f"http://127.0.0.1:{server.port}/trend")
        assert browser.evaluate("document.querySelector('h1').textContent").startswith("Trend")


def test_a_find_max_run_shows_its_steps_table_and_knee_charts(
    horde_cli: HordeCli, builtin_target: Any, tmp_path: Path
) -> None:
    from recorded_runs import record_run
    from test_find_max import search

    chromium_or_skip()
    run_id = record_run(horde_cli.store_url, plan_dict(builtin_target.port, [get("home", "/")], vus=1, duration_s=1.0))
    capacity = search(400, service_ms=10)[0].result()
    with Store.open(horde_cli.store_url) as store:
        record = store.get_run(run_id)
        store.finish_run(run_id, status="finished", summary={**record.summary, "capacity": capacity})
    with DashboardServer(horde_cli.store_url) as server, Browser(tmp_path / "profile") as browser:
        browser.open(f"{server.url}runs/{run_id}")
        rows = browser.wait_for(
            "document.querySelectorAll('[data-section=capacity-steps] tbody tr').length",
            timeout_s=15,
            what="the capacity steps table",
        )
        assert rows == len(capacity["steps"])
        drawn = browser.wait_for(
            "['chart-capacity-throughput', 'chart-capacity-latency'].every(id => "
            "document.getElementById(id) && document.getElementById(id).querySelector('.main-svg'))",
            timeout_s=15,
            what="the knee's two charts",
        )
        assert drawn is True
        facts = browser.evaluate("document.querySelector('[data-section=capacity]').innerText")
        assert "max sustainable req/s" in facts and "{" not in facts, facts
        verdicts = browser.evaluate(
            "Array.from(document.querySelectorAll('[data-section=capacity-steps] tbody tr')).map(row => row.className)"
        )
        assert verdicts == ["passed" if step["saturated_reason"] is None else "failed" for step in capacity["steps"]]
        browser.screenshot(ARTIFACTS / "dashboard-find-max.png")
        assert browser.errors() == []


#: The target-response-time chart zoomed to seconds 10..60: the run's charts over time follow.
TARGET_ZOOM = (
    "Plotly.relayout(document.getElementById('chart-capacity-target'), {'xaxis.range': [10, 60]}).then(() => true)"
)
TARGET_FOLLOWED = (
    "['chart-throughput', 'chart-latency', 'chart-load'].every(id => "
    "JSON.stringify(document.getElementById(id).layout.xaxis.range) === '[10,60]')"
)


def test_a_target_response_time_run_shows_its_answer_readings_and_linked_chart(
    horde_cli: HordeCli, builtin_target: Any, tmp_path: Path
) -> None:
    from recorded_runs import record_run
    from test_report import target_response_time_answer

    chromium_or_skip()
    run_id = record_run(horde_cli.store_url, plan_dict(builtin_target.port, [get("home", "/")], vus=1, duration_s=1.0))
    capacity = target_response_time_answer("held")
    with Store.open(horde_cli.store_url) as store:
        record = store.get_run(run_id)
        store.finish_run(run_id, status="finished", summary={**record.summary, "capacity": capacity})
    with DashboardServer(horde_cli.store_url) as server, Browser(tmp_path / "profile") as browser:
        browser.open(f"{server.url}runs/{run_id}")
        rows = browser.wait_for(
            "document.querySelectorAll('[data-section=capacity-readings] tbody tr').length",
            timeout_s=15,
            what="the readings table",
        )
        assert rows == len(capacity["readings"])
        browser.wait_for(
            "document.getElementById('chart-capacity-target') && "
            "document.getElementById('chart-capacity-target').querySelector('.main-svg')",
            timeout_s=15,
            what="the target response time chart",
        )
        names = browser.evaluate("document.getElementById('chart-capacity-target').data.map(trace => trace.name)")
        assert {"T: p95 40 ms", "±10 % of T", "level (VUs)", "p95 over the last 30 s"} <= set(names), names
        facts = browser.evaluate(
            "Array.from(document.querySelectorAll('[data-section=capacity] tr'))"
            ".map(row => [row.cells[0].textContent, row.cells[1].textContent])"
        )
        assert facts[0] == ["answer", capacity["sentence"]], facts
        assert not any("max sustainable" in label or "knee" in label for label, _ in facts), facts
        verdicts = browser.evaluate(
            "Array.from(document.querySelectorAll('[data-section=capacity-readings] tbody tr'))"
            ".map(row => row.className)"
        )
        assert verdicts == [
            "passed" if reading["verdict"] in ("under", "at") else "failed" for reading in capacity["readings"]
        ]
        # On the run's time axis: zooming it zooms the run's other charts.
        assert browser.evaluate(TARGET_ZOOM) is True
        browser.wait_for(TARGET_FOLLOWED, timeout_s=10, what="the run's charts to follow the zoom")
        browser.screenshot(ARTIFACTS / "dashboard-target-response-time.png")
        assert browser.errors() == []


MESSAGE_CHARTS = ("chart-messages", "chart-message-losses", "chart-rtt")


def test_a_message_run_draws_its_message_charts(horde_cli: HordeCli, tmp_path: Path) -> None:
    """A real UDP run against the built-in gateway (10 % loss each way): its page draws the
    traffic, losses and round-trip charts beside the HTTP ones, zoomed with them."""
    from horde.engine.target import start
    from recorded_runs import record_run

    chromium_or_skip()
    gateway = start(port=0, udp_port=0)
    try:
        plan = plan_dict(
            0,
            [
                {
                    "type": "ping",
                    "name": "rtt",
                    "reply_seq": "pong (\\d+)",
                    "timeout_ms": 200,
                    "think_time": {"type": "constant", "duration_ms": 20},
                }
            ],
            vus=2,
            duration_s=2.5,
            name="udp",
        )
        plan["target"] = {"base_url": f"udp://127.0.0.1:{gateway.udp_port}"}
        plan["scenarios"][0]["network"] = {"loss_percent": 10, "seed": 5}
        plan["graceful_stop_s"] = 0.5
        run_id = record_run(horde_cli.store_url, plan)
    finally:
        gateway.stop()
    drawn = CHARTS_DRAWN.replace(json.dumps(list(CHARTS)), json.dumps([*CHARTS, *MESSAGE_CHARTS]))
    with DashboardServer(horde_cli.store_url) as server, Browser(tmp_path / "profile") as browser:
        browser.open(f"{server.url}runs/{run_id}")
        browser.wait_for(
            f"{drawn}.every(([id, drawn, points]) => drawn && points >= 2)",
            timeout_s=20,
            what="every chart, the message ones included, drawn with two seconds or more",
        )
        names = browser.evaluate(
            "Object.fromEntries(%s.map(id => [id, document.getElementById(id).data.map(t => t.name)]))"
            % json.dumps(list(MESSAGE_CHARTS))
        )
        assert names == {
            "chart-messages": ["messages sent/s", "messages received/s", "datagrams out/s", "datagrams in/s"],
            "chart-message-losses": ["lost replies/s", "late replies/s", "KCP resends/s"],
            "chart-rtt": ["p50", "p90", "p95", "p99", "max"],
        }, names
        assert browser.evaluate("document.getElementById('chart-rtt').layout.meta") == "time-axis"
        browser.screenshot(ARTIFACTS / "dashboard-messages.png")
        assert browser.errors() == []


#: What the page shows of the latency where no request got a response.
LATENCY_SHOWN = (
    "[...document.querySelectorAll('#headline :is([data-field=p50], [data-field=p95], "
    "[data-field=p99]) b, #steps td:is([data-field^=p], [data-field=max])')]"
    ".map(cell => cell.textContent)"
)


def test_a_run_where_nothing_answered_shows_no_latency_marks_its_failed_thresholds_and_draws_postgres_charts(
    horde_cli: HordeCli, tmp_path: Path
) -> None:
    """A run against a port nothing listens on (every request refused), stored with a postgres
    monitor's samples and its thresholds' verdicts: no latency where none was measured, the
    failure marked beside the status, the conditions in words, each postgres chart drawn."""
    from horde.monitors import monitors_block
    from recorded_runs import record_run
    from test_dashboard import with_verdicts
    from test_report_monitors import PG_CHARTS, pg_samples

    chromium_or_skip()
    silent = record_run(horde_cli.store_url, plan_dict(9, [get("home", "/")], vus=1, duration_s=1.0, name="silent"))
    run_id = with_verdicts(
        horde_cli.store_url,
        silent,
        {
            "thresholds": ["p95 < 200ms", {"condition": "requests >= 1"}],
            "monitors": [{"name": "pg", "type": "postgres", "dsn": "postgresql://app@db/game"}],
        },
    )
    with Store.open(horde_cli.store_url) as store:
        samples = pg_samples()
        store.add_monitor_samples(run_id, samples)
        record = store.get_run(run_id)
        block = monitors_block({"pg": "postgres"}, set(), {"pg": samples}, [], [])
        store.finish_run(run_id, status="finished", summary={**record.summary, "monitors": block})
    drawn = f"{json.dumps(list(PG_CHARTS))}.every(id => document.getElementById(id)?.querySelector('.main-svg'))"
    with DashboardServer(horde_cli.store_url) as server, Browser(tmp_path / "profile") as browser:
        browser.open(f"{server.url}runs/{run_id}")
        browser.wait_for(drawn, timeout_s=20, what="every postgres chart placed and drawn")
        assert browser.evaluate("document.getElementById('status').textContent") == "finished"
        assert browser.evaluate("document.getElementById('verdict').textContent") == "✗ 1 of 2 thresholds failed"
        verdicts = browser.evaluate(VERDICTS)
        assert verdicts[0] == [
            "failed",
            "✗ p95 < 200ms — failed: no response was measured: none of the "
            f"{record.summary['requests']:,} requests in scope got one (refused "
            f"{record.summary['requests']:,})",
        ], verdicts
        assert verdicts[1][0] == "passed" and "{" not in json.dumps(verdicts)
        assert set(browser.evaluate(LATENCY_SHOWN)) == {"—"}
        # The charts in the order the figures give them, after the monitor's first.
        order = browser.evaluate("[...document.querySelectorAll('#monitor-charts .chart')].map(chart => chart.id)")
        assert order == list(PG_CHARTS)
        browser.screenshot(ARTIFACTS / "dashboard-postgres-verdicts.png")
        assert browser.errors() == []
