"""Little's law on every run: the arithmetic against hand-computed answers, and real runs on
loopback, where a pool smaller than the concurrency raises the gap and a clean run does not."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from cdp import Browser, chromium_or_skip
from conftest import HordeCli
from horde.engine import histogram
from horde.engine.run import Run, checked_plan_json
from horde.engine.snapshot import Snapshot
from horde.plan import plan_from_dict
from horde.report import render_run_report
from horde.results.littles_law import littles_law_warning, mean_think_ms, plan_shape
from horde.results.stored_run import load_run
from horde.results.summary import summarise
from horde.store import Store
from horde.web import DashboardServer
from horde.web.api import finished_state


def _second(second: int, *, vus: int, latencies_ms: list[float], name: str = "get", **extra: Any) -> Snapshot:
    """One steady second of a closed run: ``vus`` VUs, one response per latency given."""
    return {
        "second": second,
        "elapsed_s": float(second),
        "interval_s": 1.0,
        "timestamp": 0.0,
        "final": False,
        "steps": [
            {
                "scenario": "s",
                "step": name,
                "kind": "request",
                "requests": len(latencies_ms),
                "ok": len(latencies_ms),
                "errors": {},
                "bytes_sent": 0,
                "bytes_received": 0,
                "histogram": histogram.from_values(int(ms * 1000) for ms in latencies_ms),
            }
        ],
        "active_vus": vus,
        "peak_vus": vus,
        "busy_vus": vus,
        "iterations": len(latencies_ms),
        "dropped_arrivals": 0,
        "connections_opened": 0,
        "target_vus": vus,
        "target_rate_per_s": None,
        "cpu_percent": 5.0,
        "timer_lateness_p99_ms": 0.5,
        "timer_lateness_max_ms": 1.0,
        "run_delay_ms": 0.0,
        "steal_percent": 0.0,
        **extra,  # type: ignore[typeddict-item]
    }


def _plan(step: dict[str, Any], *, connections: Any = "per_vu", pacing_s: float | None = None) -> dict[str, Any]:
    scenario: dict[str, Any] = {"name": "s", "workload": {"type": "closed", "stages": [{"duration_s": 60, "vus": 10}]}}
    scenario["steps"] = [{"type": "http", "name": "get", **step}]
    if pacing_s:
        scenario["pacing_s"] = pacing_s
    return {"target": {"base_url": "http://127.0.0.1:1", "connections": connections}, "scenarios": [scenario]}


def test_think_time_means_are_the_distributions() -> None:
    """The uniform's midpoint; the exponential's mean; a normal cut at 0 has E[max(0, X)]
    (for mean 0: σ/√(2π))."""
    assert mean_think_ms({"type": "constant", "duration_ms": 7}) == 7.0
    assert mean_think_ms({"type": "exponential", "mean_ms": 40}) == 40.0
    assert mean_think_ms({"type": "normal", "mean_ms": 0, "stddev_ms": 25.0662827}) == pytest.approx(10.0, rel=1e-6)
    assert mean_think_ms({"type": "normal", "mean_ms": 500, "stddev_ms": 1}) == pytest.approx(500.0)


def test_a_closed_run_whose_time_is_all_accounted_is_consistent() -> None:
    """10 VUs; each second 80 responses of 100 ms and 80 think times of 25 ms: 8 + 2 = 10 VUs."""
    plan = _plan({"think_time": {"type": "constant", "duration_ms": 25}})
    seconds = [_second(n, vus=10, latencies_ms=[100.0] * 80) for n in range(1, 7)]
    block = summarise(seconds, run_id="r", status="finished", workers=1, plan=plan)["littles_law"]
    # Second 1 is the first at the level: 5 steady seconds.
    assert (block["seconds"], block["measured"], block["consistent"]) == (5, 10.0, True)
    assert block["expected"] == pytest.approx(10.0, rel=1e-3)
    assert block["think_time_ms"] == 25.0


def test_unaccounted_time_is_a_gap_named_by_the_generator() -> None:
    """The same 10 VUs completing only 60 a second (the think times ran late): 6 + 1.5 = 7.5
    accounted for, a 25 % gap, which the late timers explain."""
    plan = _plan({"think_time": {"type": "constant", "duration_ms": 25}})
    seconds = [
        _second(n, vus=10, latencies_ms=[100.0] * 60, timer_lateness_p99_ms=30.0, cpu_percent=2.0) for n in range(1, 7)
    ]
    summary = summarise(seconds, run_id="r", status="finished", workers=1, plan=plan)
    block = summary["littles_law"]
    assert (block["expected"], block["gap_percent"], block["consistent"]) == (pytest.approx(7.5, rel=1e-3), 25.0, False)
    # 2.5 VU-seconds a second over 60 think times: 41.7 ms each.
    assert block["overrun_ms_per_pause"] == pytest.approx(41.667, abs=0.001)
    assert "think times and pacing waits lasting 41.7 ms longer each than planned" in block["why"]
    assert "they ran up to 30 ms late at p99" in block["why"]
    assert (littles_law_warning(summary) or "").startswith(
        "Little's law: 10 VUs, the figures account for 7.5 (25 % gap)"
    )


def test_a_gap_within_the_timers_resolution_is_not_known() -> None:
    """10 VUs, 800 responses a second of 1 ms, each followed by a think time of 10 ms: 8.8
    accounted for, 1.2 VUs (12 %) in no figure, 1.5 ms a think time: more than the timers
    resolve. With think times of 5 ms, 1,470 a second: 8.82 accounted for (a 12 % gap), 0.8 ms a
    think time: within it."""
    plan = _plan({"think_time": {"type": "constant", "duration_ms": 10}})
    late = [_second(n, vus=10, latencies_ms=[1.0] * 800) for n in range(1, 7)]
    block = summarise(late, run_id="r", status="finished", workers=1, plan=plan)["littles_law"]
    assert (block["consistent"], block["overrun_ms_per_pause"]) == (False, pytest.approx(1.5, abs=0.01)), block
    close = [_second(n, vus=10, latencies_ms=[1.0] * 1470) for n in range(1, 7)]
    shorter = _plan({"think_time": {"type": "constant", "duration_ms": 5}})
    block = summarise(close, run_id="r", status="finished", workers=1, plan=shorter)["littles_law"]
    assert block["overrun_ms_per_pause"] == pytest.approx(1180 / 1470, abs=0.001)
    assert block["consistent"] is None and "within the 1 ms the engine's timers resolve" in block["why"], block


def test_a_pool_bounds_what_the_target_held() -> None:
    """10 VUs on a pool of 2: 100 responses a second of 100 ms is 10 in flight by the latency,
    at most 2 at the target; 8 of 10 (80 %) waited for a connection."""
    seconds = [_second(n, vus=10, latencies_ms=[100.0] * 100) for n in range(1, 7)]
    block = summarise(seconds, run_id="r", status="finished", workers=1, plan=_plan({}, connections={"pool": 2}))[
        "littles_law"
    ]
    assert (block["in_flight"], block["expected"], block["gap_percent"]) == (
        pytest.approx(10.0, rel=1e-3),
        pytest.approx(2.0, rel=1e-3),
        pytest.approx(80.0, abs=0.1),
    )
    assert block["consistent"] is False and block["why"].startswith("a connection pool smaller than the concurrency")


def test_pacing_accounts_for_the_wait() -> None:
    """10 VUs paced at 2 s with 50 ms requests: 5 iterations a second, each holding its VU 2 s."""
    seconds = [_second(n, vus=10, latencies_ms=[50.0] * 5) for n in range(1, 7)]
    block = summarise(seconds, run_id="r", status="finished", workers=1, plan=_plan({}, pacing_s=2.0))["littles_law"]
    assert (block["expected"], block["consistent"]) == (10.0, True)


def test_not_known_where_the_figures_do_not_allow_it() -> None:
    """A ramp (the level moves every second), a plan not read, a think step inside a choice."""
    ramp = [_second(n, vus=n, latencies_ms=[100.0] * 10 * n) for n in range(1, 8)]
    block = summarise(ramp, run_id="r", status="finished", workers=1, plan=_plan({}))["littles_law"]
    assert block["consistent"] is None and "0 second(s) at a steady level" in block["why"]
    steady = [_second(n, vus=10, latencies_ms=[100.0] * 100) for n in range(1, 7)]
    assert summarise(steady, run_id="r", status="finished", workers=1)["littles_law"]["consistent"] is None
    plan = _plan({})
    plan["scenarios"][0]["steps"].append(
        {
            "type": "choice",
            "branches": [
                {"weight": 1, "steps": [{"type": "think", "think_time": {"type": "constant", "duration_ms": 9}}]}
            ],
        }
    )
    assert plan_shape(plan).unknowable == "scenario s has a think step inside a choice, loop or if"
    assert summarise(steady, run_id="r", status="finished", workers=1, plan=plan)["littles_law"]["consistent"] is None


def _open_plan() -> dict[str, Any]:
    workload = {"type": "open", "max_vus": 100, "stages": [{"duration_s": 60, "rate_per_s": 200}]}
    steps = [{"type": "http", "name": "get"}]
    return {
        "target": {"base_url": "http://127.0.0.1:1"},
        "scenarios": [{"name": "s", "workload": workload, "steps": steps}],
    }


def _open_second(second: int, busy: int, latencies_ms: list[float]) -> Snapshot:
    return _second(
        second, vus=busy, latencies_ms=latencies_ms, target_vus=None, target_rate_per_s=200.0, active_vus=100
    )


def test_an_open_model_is_judged_on_its_busy_vus_where_they_hold_still() -> None:
    """200 arrivals a second of 50 ms: 10 in flight. The queue then builds (busy 10 -> 40 -> 99)
    and holds at max_vus, 200 a second of 495 ms: 99 in flight. The seconds whose readings moved
    are set aside; the others are consistent."""
    seconds = [_open_second(n, 10, [50.0] * 200) for n in range(1, 5)]
    seconds += [_open_second(5, 40, [60.0] * 200), _open_second(6, 99, [300.0] * 120)]
    seconds += [_open_second(n, 99, [495.0] * 200) for n in range(7, 10)]
    block = summarise(seconds, run_id="r", status="finished", workers=1, plan=_open_plan())["littles_law"]
    # Seconds 2-4 (10 in flight) and 7-9 (99): 6 seconds, 54.5 VUs on average both ways.
    assert (block["seconds"], block["measured"], block["consistent"]) == (6, 54.5, True), block
    assert block["expected"] == pytest.approx(54.5, rel=1e-3)


def test_a_gap_within_a_reading_of_one_vu_is_not_known() -> None:
    """150 a second of 11 ms is 1.65 in flight; uniform arrivals read at the same phase each
    second read 2 every time: 18 % over, and less than the one VU a reading resolves."""
    seconds = [_open_second(n, 2, [11.0] * 150) for n in range(1, 8)]
    block = summarise(seconds, run_id="r", status="finished", workers=1, plan=_open_plan())["littles_law"]
    assert block["consistent"] is None and block["gap_percent"] == pytest.approx(17.5, abs=0.1), block
    assert block["why"].startswith("not known: 2.00 VUs in flight on average")


def _real_run(port: int, connections: Any, *, think_ms: float | None = None) -> dict[str, Any]:
    """20 VUs for 4 s against the built-in target's 10 ms delay."""
    step: dict[str, Any] = {"name": "get", "method": "GET", "path": "/delay/10"}
    if think_ms:
        step["think_time"] = {"type": "constant", "duration_ms": think_ms}
    plan = plan_from_dict(
        {
            "version": 1,
            "target": {"base_url": f"http://127.0.0.1:{port}", "connections": connections},
            "scenarios": [
                {
                    "name": "s",
                    "steps": [step],
                    "workload": {"type": "closed", "start_vus": 20, "stages": [{"duration_s": 4, "vus": 20}]},
                }
            ],
        }
    )
    with Run.start(plan, workers=1) as run:
        snapshots = list(run)
    return summarise(snapshots, run_id="r", status="finished", workers=1, plan=json.loads(checked_plan_json(plan)))


@pytest.mark.parametrize("think_ms", [None, 100.0])
def test_a_clean_real_run_is_consistent(builtin_target: Any, think_ms: float | None) -> None:
    block = _real_run(builtin_target.port, "per_vu", think_ms=think_ms)["littles_law"]
    assert block["consistent"] is True, block
    assert block["seconds"] >= 3 and abs(block["gap_percent"]) <= 10.0


def test_a_real_pool_smaller_than_the_concurrency_raises_the_gap(builtin_target: Any) -> None:
    """20 VUs on 4 pooled connections: at most 4 of the ~20 requests in flight reach the target."""
    summary = _real_run(builtin_target.port, {"pool": 4})
    block = summary["littles_law"]
    assert block["consistent"] is False, block
    assert block["gap_percent"] > 50.0 and block["pool_connections"] == 4
    assert "pool" in (littles_law_warning(summary) or "")


@pytest.mark.parametrize("connections", ["per_vu", {"pool": 2}])
def test_an_open_model_on_a_pool_smaller_than_its_concurrency_raises_the_gap(
    builtin_target: Any, connections: Any
) -> None:
    """300 arrivals a second of 10 ms: about 3 in flight, never inconsistent on their own
    connections (with so few, a reading's whole VU may leave it not known). On 2
    pooled connections the target serves 200 a second; the rest queue in the pool until all 40
    VUs are busy, of which at most 2 are at the target."""
    workload = {
        "type": "open",
        "max_vus": 40,
        "start_rate_per_s": 300,
        "stages": [{"duration_s": 5, "rate_per_s": 300}],
    }
    step = {"name": "get", "method": "GET", "path": "/delay/10"}
    target = {"base_url": f"http://127.0.0.1:{builtin_target.port}", "connections": connections}
    plan = plan_from_dict(
        {"version": 1, "target": target, "scenarios": [{"name": "s", "steps": [step], "workload": workload}]}
    )
    with Run.start(plan, workers=1) as run:
        snapshots = list(run)
    summary = summarise(snapshots, run_id="r", status="finished", workers=1, plan=json.loads(checked_plan_json(plan)))
    block = summary["littles_law"]
    if connections == "per_vu":
        assert block["consistent"] is not False, block
    else:
        assert block["consistent"] is False and block["measured"] > 30 and block["expected"] <= 2.0, block
        assert block["why"].startswith("a connection pool smaller than the concurrency"), block


def _run_pooled(horde_cli: HordeCli, port: int) -> tuple[dict[str, Any], str]:
    """``horde run`` of 10 VUs on a pool of 2 for 4 s: its summary and its console output."""
    plan = horde_cli.tmp_path / "plan.json"
    step = {"name": "get", "method": "GET", "path": "/delay/10"}
    workload = {"type": "closed", "start_vus": 10, "stages": [{"duration_s": 4, "vus": 10}]}
    target = {"base_url": f"http://127.0.0.1:{port}", "connections": {"pool": 2}}
    scenario = {"name": "s", "steps": [step], "workload": workload}
    plan.write_text(json.dumps({"version": 1, "name": "pooled", "target": target, "scenarios": [scenario]}))
    result = horde_cli.run("run", str(plan), "--workers", "1", "--summary-json", "summary.json", timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((horde_cli.tmp_path / "summary.json").read_text()), result.stdout


def test_the_gap_is_shown_on_the_console_in_horde_show_the_report_and_the_dashboard(
    horde_cli: HordeCli, builtin_target: Any
) -> None:
    summary, stdout = _run_pooled(horde_cli, builtin_target.port)
    warning = littles_law_warning(summary)
    assert summary["littles_law"]["consistent"] is False and warning is not None, summary["littles_law"]
    # The console wraps long lines: compare without the line breaks.
    assert warning in " ".join(stdout.split()), stdout
    shown = horde_cli.run("show", summary["run_id"]).stdout
    assert warning in " ".join(shown.split())
    with Store.open(horde_cli.store_url) as store:
        results = load_run(store, summary["run_id"])
        state = finished_state(store, summary["run_id"])
    assert results.summary["littles_law"] == summary["littles_law"]
    assert state["littles_law"] == warning
    html = render_run_report(results)
    assert '<div class="warning" id="littles-law-warning">' in html and "a connection pool smaller" in html


def test_the_dashboards_run_page_shows_the_gap(horde_cli: HordeCli, builtin_target: Any, tmp_path: Path) -> None:
    chromium_or_skip()
    summary, _ = _run_pooled(horde_cli, builtin_target.port)
    with DashboardServer(horde_cli.store_url) as server, Browser(tmp_path / "profile") as browser:
        browser.open(f"{server.url}runs/{summary['run_id']}")
        shown = browser.wait_for(
            "(w => w && !w.hidden && w.textContent)(document.getElementById('littles-law-warning'))",
            timeout_s=15,
            what="the Little's-law warning",
        )
        assert shown == f"Figures inconsistent by Little's law. {littles_law_warning(summary)}"
        assert browser.errors() == []


def test_a_starved_generator_raises_the_gap(horde_cli: HordeCli, builtin_target: Any) -> None:
    """The generator's process stopped 40 ms of every 100 (SIGSTOP, SIGCONT: the machine does not
    run it, as a starved generator): its VUs' think times last longer than planned, and no figure
    holds that time."""
    plan = horde_cli.tmp_path / "plan.json"
    step = {"name": "get", "method": "GET", "path": "/", "think_time": {"type": "constant", "duration_ms": 20}}
    workload = {"type": "closed", "start_vus": 20, "stages": [{"duration_s": 4, "vus": 20}]}
    target = {"base_url": f"http://127.0.0.1:{builtin_target.port}"}
    plan.write_text(
        json.dumps(
            {"version": 1, "target": target, "scenarios": [{"name": "s", "steps": [step], "workload": workload}]}
        )
    )
    process = horde_cli.popen("run", str(plan), "--workers", "1", "--summary-json", "summary.json")
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.06)
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGSTOP)
        time.sleep(0.04)
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, out + err
    block = json.loads((horde_cli.tmp_path / "summary.json").read_text())["littles_law"]
    assert block["consistent"] is False and block["gap_percent"] > 20.0, block
    assert "the generator's timers" in block["why"] and block["overrun_ms_per_pause"] > 1.0, block
