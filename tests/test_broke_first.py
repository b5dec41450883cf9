"""What broke first: the limits the monitors saw crossed, beside the moment the load gave way.

Known timelines first (every kind of limit, the order, the sentence), then a real stepped
find-max against the built-in target (2 workers × 10 ms: 200 req/s) with this machine watched:
the block's first crossing and load moment are checked against the run's own stored samples and
snapshots, and the sentence is shown by the terminal, `horde show`, the report and the dashboard.
"""

from __future__ import annotations

import json
from typing import Any


from conftest import HordeCli
from horde.control.broke_first import what_broke_first
from horde.control.measure import measure
from horde.monitors.crossings import limit_crossings
from horde.plan import HostMonitor, PostgresMonitor, PrometheusMonitor
from horde.report import render_run_report
from horde.results.stored_run import load_run
from horde.store import MonitorSample, Store
from horde.web.api import finished_state


def timeline(name: str, figures: list[dict[str, float]]) -> list[MonitorSample]:
    return [MonitorSample(name, second, float(second), 0.0, values) for second, values in enumerate(figures, 1)]


def test_every_limit_is_timed_from_its_first_second_past_it() -> None:
    pg = PostgresMonitor(name="pg", dsn="postgresql://app@127.0.0.1/game", diagnosis={"xmin_age_limit": 500})
    node = PrometheusMonitor(
        name="web", url="http://10.0.0.7:9100/metrics", node_exporter=True, diagnosis={"nic_percent": 80}
    )
    samples = {
        "pg": timeline(
            "pg",
            [
                {"connections.total": 10, "connections.max": 20},
                {"connections.total": 19, "connections.max": 20},
                {"connections.total": 20, "connections.max": 20, "replication.s1.xmin_age": 900},
                {"connections.total": 20, "connections.max": 20, "replication.s1.xmin_age": 1400},
            ],
        ),
        "web": timeline(
            "web",
            [
                {"net.eth0.link_percent": 50, "cpu.busy_percent": 10},
                {"net.eth0.link_percent": 85},
                {"net.eth0.link_percent": 95},
                {"net.eth0.link_percent": 70},
            ],
        ),
    }
    findings = [
        {
            "monitor": "pg",
            "rule": "dead_tuples",
            "subject": "public.items",
            "second": 1,
            "metric": "tables.public.items.dead_tuples",
            "message": "...",
        },
        {
            "monitor": "web",
            "rule": "host_cpu",
            "subject": "cpu",
            "second": 9,
            "metric": "cpu.busy_percent",
            "message": "...",
        },
    ]
    crossings = limit_crossings([pg, node], samples, findings)
    assert [crossing.phrase for crossing in crossings] == [
        "pg table public.items: dead tuples outrunning autovacuum from second 1",
        # The rule's share (95 % of 20: 19) is already the limit, as the diagnosis judges it.
        "pg connections at 20 (max_connections) from second 2",
        "web interface eth0 at 95 % of its link from second 2",
        "pg standby s1 holding back vacuum from second 3 (its xmin 1,400 transactions old at the run's peak)",
    ]
    # A rule judged second by second is timed from its samples, not its finding (that came later).
    assert all(crossing.rule != "host_cpu" for crossing in crossings)


def test_the_sentence_runs_in_time_order() -> None:
    crossings = limit_crossings(
        [HostMonitor(name="db")], {"db": timeline("db", [{"cpu.busy_percent": v} for v in (50, 50, 97, 99)])}, []
    )
    capacity = {
        "method": "find_max",
        "percentile": 95,
        "level_unit": "rate_per_s",
        "first_saturated_step": {
            "level": 800.0,
            "saturated_reason": "throughput_flat",
            "latency_ms": 61.25,
            "started_s": 5,
            "judged_at_s": 8,
            "seconds": 3,
        },
    }
    block = what_broke_first(capacity, [], None, crossings, ["db"])
    assert block["sentence"] == (
        "db host CPU 99 % from second 3; throughput stopped following the load from second 5 "
        "(level 800 arrivals/s, p95 61.2 ms)"
    )
    assert block["lead_s"] == 2 and block["first"]["metric"] == "cpu.busy_percent"
    later = what_broke_first(
        {**capacity, "first_saturated_step": {**capacity["first_saturated_step"], "started_s": 2}},
        [],
        None,
        crossings,
        ["db"],
    )
    assert later["sentence"].startswith("throughput stopped following the load from second 2") and later["lead_s"] == -1
    assert what_broke_first({"method": "find_max"}, [], None, [], ["db"])["sentence"] == (
        "no monitored resource crossed its limit (monitors db); no step saturated"
    )


def test_a_find_max_run_names_what_broke_first_everywhere_its_answer_is_shown(
    horde_cli: HordeCli, target_process: Any
) -> None:
    port = target_process("--workers", "2", "--service-ms", "10")
    plan = horde_cli.tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "name": "knee",
                "target": {"base_url": f"http://127.0.0.1:{port}"},
                "scenarios": [
                    {
                        "name": "s",
                        "steps": [{"name": "home", "method": "GET", "path": "/"}],
                        "workload": {"type": "open", "max_vus": 100, "stages": [{"duration_s": 1, "rate_per_s": 1}]},
                    }
                ],
                "steer": {
                    "type": "find_max",
                    "start": 100,
                    "step": 150,
                    "step_duration_s": 3,
                    "refine": False,
                    "latency_limit_ms": 30,
                },
                # A CPU limit this machine passes as soon as it sends load: a real crossing, timed by the samples.
                "monitors": [{"name": "gen", "type": "host", "diagnosis": {"cpu_percent": 1}}],
            }
        )
    )
    result = horde_cli.run("run", str(plan), "--workers", "1", "--summary-json", "summary.json", timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((horde_cli.tmp_path / "summary.json").read_text())
    capacity = summary["capacity"]
    broke = capacity["what_broke_first"]
    with Store.open(horde_cli.store_url) as store:
        samples = store.monitor_samples(summary["run_id"])["gen"]
        snapshots = store.snapshots(summary["run_id"])
        results = load_run(store, summary["run_id"])
        state = finished_state(store, summary["run_id"])
    # The first crossing: the first sample past 1 % busy, at its peak until it fell back.
    first = next(sample for sample in samples if (sample.values or {}).get("cpu.busy_percent", 0) > 1)
    assert broke["first"]["second"] == first.second and broke["first"]["rule"] == "host_cpu"
    # The load side: the first saturated step (250/s against 200/s), from its first second whose p95 passed 30 ms.
    step = capacity["first_saturated_step"]
    assert step["level"] == 250 and step["saturated_reason"] == "latency_limit", capacity["steps"]
    crossed = next(
        snapshot["second"]
        for snapshot in snapshots
        if step["started_s"] <= snapshot["second"] and (measure([snapshot], from_send=True).latency_ms(95) or 0) > 30
    )
    assert broke["load"] == {"second": crossed, "phrase": f"p95 crossed 30 ms at second {crossed}"}
    assert broke["sentence"] == f"{broke['first']['phrase']}; p95 crossed 30 ms at second {crossed}"
    # Usually seconds ahead; the same second when the monitor's first busy sample comes late
    # (its first reading has no earlier one to difference), which is still "first".
    assert broke["lead_s"] == crossed - first.second >= 0
    # Shown wherever the capacity answer is: terminal, horde show, report, dashboard.
    assert f"what broke first: {broke['sentence']}" in result.stdout
    assert f"what broke first: {broke['sentence']}" in horde_cli.run("show", summary["run_id"]).stdout
    assert ["what broke first", broke["sentence"]] in [list(fact) for fact in state["capacity"]["facts"]]
    html = render_run_report(results)
    assert f'<th class="name">what broke first</th><td class="name">{broke["sentence"]}</td>' in html
    marks = [shape for shape in state["figures"]["chart-monitor-gen"]["layout"]["shapes"] if shape["type"] == "line"]
    assert {mark["x0"] for mark in marks} >= {float(first.second), float(crossed)}
