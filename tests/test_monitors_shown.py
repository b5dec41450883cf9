"""A monitored run shown everywhere a run is shown: one real `horde run` watching this machine
(host source, a diagnosis rule set low enough to fire) and a real node_exporter (a gauge from its
textfile collector) is followed live in the dashboard in headless chromium (a panel per monitor,
the diagnosis appearing while the run goes, zoom shared with the latency chart), scraped from
its Prometheus endpoint, then reported (the HTML report drawn offline, the same diagnosis) and
exported (CSV columns and JSON rows equal to the stored samples)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdp import Browser, chromium_or_skip
from conftest import HordeCli, free_tcp_port
from horde.report import write_report
from horde.results.stored_run import load_run
from horde.store import Store
from horde.web import DashboardServer
from live_runs import first_stored_second
from node_exporter import node_exporter, write_gauge
from test_report_browser import ARTIFACTS, assert_charts_drawn, open_in_browser

GAUGE = "horde_test_queue_depth"
RUN_SECONDS = 8
MONITOR_CHARTS = ("chart-monitor-gen", "chart-monitor-node")
#: The latency chart zoomed to seconds 2..5: every chart over the run's time axis follows.
ZOOM = "Plotly.relayout(document.getElementById('chart-latency'), {'xaxis.range': [2, 5]}).then(() => true)"
FOLLOWED = (
    "['chart-monitor-gen', 'chart-monitor-node', 'chart-throughput'].every(id => "
    "JSON.stringify(document.getElementById(id).layout.xaxis.range) === '[2,5]')"
)
DRAWN = (
    "%s.every(id => { const e = document.getElementById(id); return e && e.querySelector('.main-svg') && "
    "Math.max(0, ...(e.data || []).map(trace => (trace.x || []).length)) >= 2; })" % json.dumps(list(MONITOR_CHARTS))
)
DIAGNOSIS = "document.querySelector('#diagnosis li[data-rule=host_cpu]')?.textContent"


@dataclass
class MonitoredRun:
    horde: HordeCli
    process: subprocess.Popen[str]
    run_id: str
    prometheus_port: int

    def finished(self) -> int:
        self.process.communicate(timeout=60)
        return int(self.process.returncode)


@pytest.fixture(scope="module")
def monitored(builtin_target: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MonitoredRun]:
    """The run, once its first second is stored; it is always ended."""
    textfile = tmp_path_factory.mktemp("textfile")
    write_gauge(textfile, GAUGE, 42)
    horde = HordeCli(tmp_path_factory.mktemp("monitored"))
    with node_exporter(textfile) as url:
        plan = horde.tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "name": "monitored",
                    "target": {"base_url": f"http://127.0.0.1:{builtin_target.port}"},
                    "scenarios": [
                        {
                            "name": "s",
                            "steps": [{"name": "home", "method": "GET", "path": "/delay/2"}],
                            "workload": {
                                "type": "open",
                                "max_vus": 20,
                                "stages": [{"duration_s": RUN_SECONDS, "rate_per_s": 50}],
                            },
                        }
                    ],
                    # A CPU rule this machine meets while it runs the load: a real diagnosis, live and stored.
                    "monitors": [
                        {"name": "gen", "type": "host", "diagnosis": {"cpu_percent": 0.1, "cpu_for_s": 2}},
                        {
                            "name": "node",
                            "type": "prometheus",
                            "url": url,
                            "node_exporter": True,
                            "series": [{"name": GAUGE}],
                        },
                    ],
                }
            )
        )
        port = free_tcp_port()
        process = horde.popen("run", str(plan), "--workers", "1", "--prometheus", str(port))
        try:
            yield MonitoredRun(horde, process, first_stored_second(horde, process), port)
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=20)


def test_the_dashboard_shows_monitors_live_with_the_diagnosis_and_a_shared_zoom(
    monitored: MonitoredRun, tmp_path: Path
) -> None:
    chromium_or_skip()
    with DashboardServer(monitored.horde.store_url) as server, Browser(tmp_path / "profile") as browser:
        browser.open(f"{server.url}runs/{monitored.run_id}")
        browser.wait_for(DRAWN, timeout_s=20, what="a panel per monitor with two seconds or more")
        live = browser.wait_for(DIAGNOSIS, timeout_s=20, what="the diagnosis while the run goes")
        assert live.startswith("gen: CPU busy above 0.1 % for 2 s from second")
        assert browser.evaluate("document.getElementById('status').textContent") == "running"
        scraped = _scrape(monitored.prometheus_port)
        # prometheus-client writes labels in name order and every value as a float.
        assert (
            f'horde_monitor_value{{metric="{GAUGE}",monitor="node",plan="monitored",run="{monitored.run_id}"}} 42.0'
            in scraped
        )
        assert f'horde_monitor_up{{monitor="gen",plan="monitored",run="{monitored.run_id}"}} 1.0' in scraped
        assert 'horde_monitor_value{metric="cpu.busy_percent",monitor="' in scraped

        assert browser.evaluate(ZOOM) is True
        browser.wait_for(FOLLOWED, timeout_s=10, what="the other charts to follow the zoom")
        ARTIFACTS.mkdir(exist_ok=True)
        browser.screenshot(ARTIFACTS / "dashboard-monitors-live.png")

        assert monitored.finished() == 0
        browser.wait_for(
            "document.getElementById('status').textContent === 'finished'",
            timeout_s=15,
            what="the page to show the run ended",
        )
        ended = browser.wait_for(DIAGNOSIS, timeout_s=10, what="the stored diagnosis")
        assert ended == live  # the stored block says what the live view said
        rows = browser.evaluate(
            "Array.from(document.querySelectorAll('[data-section=monitors] tbody tr'))"
            ".map(row => row.cells[0].textContent)"
        )
        assert rows == ["gen", "node"]
        browser.wait_for(DRAWN, timeout_s=10, what="the finished run's panels")
        assert browser.errors() == []


def _scrape(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def test_the_report_draws_each_monitor_with_the_diagnosis_and_zooms_them_with_latency(
    monitored: MonitoredRun, tmp_path: Path
) -> None:
    assert monitored.finished() == 0
    page = ARTIFACTS / "report-monitors.html"
    ARTIFACTS.mkdir(exist_ok=True)
    with Store.open(monitored.horde.store_url) as store:
        results = load_run(store, monitored.run_id)
        write_report([results], page)
    diagnosis = results.summary["monitors"]["diagnosis"]
    assert [finding["rule"] for finding in diagnosis] == ["host_cpu"]
    dom = open_in_browser(page, ARTIFACTS / "report-monitors.png", tmp_path / "report-profile")
    assert_charts_drawn(dom, ("chart-latency", *MONITOR_CHARTS))
    assert (
        f'data-rule="host_cpu" data-monitor="gen" data-second="{diagnosis[0]["second"]}">{diagnosis[0]["message"]}</li>'
        in dom
    )
    with Browser(tmp_path / "profile") as browser:
        browser.open(page.resolve().as_uri())
        browser.wait_for(DRAWN, timeout_s=20, what="the report's monitor charts")
        assert browser.evaluate(ZOOM) is True
        browser.wait_for(FOLLOWED, timeout_s=10, what="the other charts to follow the zoom")
        assert browser.errors() == []


def test_export_gives_the_stored_samples_as_csv_columns_and_json_rows(monitored: MonitoredRun) -> None:
    assert monitored.finished() == 0
    with Store.open(monitored.horde.store_url) as store:
        samples = store.monitor_samples(monitored.run_id)
    exported = monitored.horde.run("export", monitored.run_id, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    document = json.loads(exported.stdout)["monitors"]
    assert document["gen"]["type"] == "host" and document["node"]["type"] == "prometheus"
    for name in ("gen", "node"):
        assert [(row["second"], row["values"]) for row in document[name]["samples"]] == [
            (sample.second, sample.values) for sample in samples[name]
        ]
    table = monitored.horde.run("export", monitored.run_id)
    assert table.returncode == 0, table.stderr
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert f"monitor.node.{GAUGE}" in rows[0] and "monitor.gen.error" in rows[0]
    by_second = {int(row["second"]): row for row in rows}
    for sample in samples["gen"]:
        if sample.second in by_second and sample.values:
            assert float(by_second[sample.second]["monitor.gen.cpu.busy_percent"]) == sample.values["cpu.busy_percent"]
    assert {row[f"monitor.node.{GAUGE}"] for row in rows if row["second"] != str(len(by_second))} <= {"42.0", ""}
