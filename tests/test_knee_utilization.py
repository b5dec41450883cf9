"""Why find-max's knee is where it is, by the utilization law U = X·S: the arithmetic against
hand-computed answers, and real find-max runs on loopback. A target whose CPU saturates is
named; a target bound by its workers' service time (a sleep, little CPU) is not, and the answer
says no monitored resource explains the knee.

The CPU watched is the target process's own, served as a one-CPU node_exporter (its
``node_cpu_seconds_total``: user is the time the process's threads ran or waited to run, idle
the rest of the wall clock), so the figures are the target's and not the shared machine's, and
a busy machine that gives the target less than a CPU does not hide that it wants all of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import HordeCli, free_tcp_port, wait_for_port
from horde.control.broke_first import EXPLAINS_PERCENT, fit_demand, utilizations, why_the_knee
from horde.report import render_run_report
from horde.results.stored_run import load_run
from horde.store import MonitorSample, Store
from horde.web.api import finished_state
from markupsafe import escape


def _step(level: float, rps: float, judged_at_s: int, reason: str | None = None) -> dict[str, Any]:
    return {"level": level, "ok_rps": rps, "judged_at_s": judged_at_s, "seconds": 2, "saturated_reason": reason}


def _samples(monitor: str, figures: dict[int, dict[str, float]]) -> list[MonitorSample]:
    return [MonitorSample(monitor, second, float(second), 0.0, values) for second, values in figures.items()]


def test_the_fit_is_the_least_squares_line_of_the_utilization_law() -> None:
    # Through (100, 30), (200, 52), (300, 68): slope 0.19, intercept 50 - 0.19 * 200 = 12.
    demand = fit_demand([(100.0, 30.0), (200.0, 52.0), (300.0, 68.0)])
    assert demand is not None
    assert (demand.per_rps_percent, demand.idle_percent) == (pytest.approx(0.19), pytest.approx(12.0))
    assert demand.at(400.0) == pytest.approx(88.0)
    # A line that would start below 0 is the bare law through the origin: Σxu / Σx² = 0.45.
    through = fit_demand([(100.0, 40.0), (200.0, 90.0)])
    assert through is not None and through.idle_percent == 0.0
    assert through.per_rps_percent == pytest.approx((100 * 40 + 200 * 90) / (100**2 + 200**2))
    assert fit_demand([(0.0, 5.0)]) is None


def test_connections_are_a_utilization_of_max_connections() -> None:
    assert utilizations({"connections.total": 45.0, "connections.max": 60.0}) == {
        "connections": ("connections of max_connections", 75.0)
    }
    assert utilizations({"net.eth0.link_percent": 12.0, "cpu.user_percent": 50.0}) == {
        "net.eth0.link_percent": ("eth0 link", 12.0)
    }


def test_candidates_are_ranked_by_what_the_law_predicts_at_the_knee() -> None:
    """Steps at 100 and 200 req/s below a knee at 400: the database's connections go 20 -> 40 %
    of max (0.2 % a req/s: 80 % at 400), its CPU 10 -> 15 % (0.05 % over 5 %: 25 %)."""
    capacity = {
        "method": "find_max",
        "level_at_max": 400,
        "steps": [
            _step(100, 100.0, 3),
            _step(200, 200.0, 6),
            _step(400, 400.0, 9),
            _step(500, 410.0, 12, "latency_limit"),
        ],
    }
    db = {
        2: {"connections.total": 20.0, "connections.max": 100.0},
        3: {"connections.total": 20.0, "connections.max": 100.0},
        5: {"connections.total": 40.0, "connections.max": 100.0},
        6: {"connections.total": 40.0, "connections.max": 100.0},
        8: {"connections.total": 78.0, "connections.max": 100.0},
        9: {"connections.total": 82.0, "connections.max": 100.0},
    }
    host = {2: {"cpu.busy_percent": 10.0}, 3: {"cpu.busy_percent": 10.0}, 5: {"cpu.busy_percent": 15.0}}
    why = why_the_knee(capacity, {"db": _samples("db", db), "dbhost": _samples("dbhost", host)})
    assert why is not None
    ranked = [(c["resource"], c["predicted_percent"], c["measured_percent"]) for c in why["candidates"]]
    assert ranked == [("db connections of max_connections", 80.0, 80.0), ("dbhost CPU", 25.0, None)]
    assert why["explained_by"] == "db connections of max_connections" and EXPLAINS_PERCENT == 80.0
    assert why["candidates"][0]["demand_ms"] == pytest.approx(2.0)  # 0.2 % of the resource per req/s
    assert why["sentence"].startswith(
        "db connections of max_connections explains the knee: by the utilization law 80 % at the knee's 400 req/s ("
    )


def test_nothing_near_saturation_is_said_so() -> None:
    capacity = {"method": "find_max", "level_at_max": 200, "steps": [_step(100, 100.0, 3), _step(200, 200.0, 6)]}
    why = why_the_knee(capacity, {"h": _samples("h", {2: {"cpu.busy_percent": 4.0}, 3: {"cpu.busy_percent": 6.0}})})
    assert why is not None and why["explained_by"] is None
    # 5 % at 100 req/s through the origin: 10 % at 200.
    assert why["candidates"][0]["predicted_percent"] == 10.0
    assert why["sentence"].startswith(
        "no monitored resource explains the knee: the busiest, h CPU, by the utilization law 10 % at the knee's 200 req/s"
    )
    alone = why_the_knee({**capacity, "level_at_max": 100}, {"h": []})
    assert alone is not None and alone["sentence"].startswith("no monitored resource explains the knee (no step below")
    assert why_the_knee({"method": "target_response_time"}, {}) is None


def test_the_knee_may_lie_up_to_its_bracket_above_the_last_good_step() -> None:
    """25 % at 50 req/s and 45 % at 100: 0.4 % a req/s over 5 %. The last good step, 150 req/s,
    is at 65 %; with the first saturated step 50 req/s above it (a bracket of 33.3 %), the knee
    may lie at 200 req/s, where the CPU is at 85 %: it explains the knee."""
    steps = [_step(50, 50.0, 3), _step(100, 100.0, 6), _step(150, 150.0, 9), _step(200, 170.0, 12, "latency_limit")]
    cpu = {2: 25.0, 3: 25.0, 5: 45.0, 6: 45.0}
    samples = {"t": _samples("t", {second: {"cpu.busy_percent": value} for second, value in cpu.items()})}
    capacity: dict[str, Any] = {"method": "find_max", "level_at_max": 150, "steps": steps}
    unbracketed = why_the_knee(capacity, samples)
    assert unbracketed is not None and unbracketed["explained_by"] is None
    assert unbracketed["candidates"][0]["predicted_percent"] == pytest.approx(65.0)
    why = why_the_knee({**capacity, "bracket_percent": 100.0 / 3.0}, samples)
    assert why is not None and why["explained_by"] == "t CPU"
    assert why["candidates"][0]["predicted_top_percent"] == pytest.approx(85.0)
    assert "65 % at the knee's 150 req/s and 85 % at 200 req/s, where the knee may lie" in why["sentence"]


# --- real find-max runs ------------------------------------------------------------------------

#: A target that spends 4 ms of CPU on each request, one request at a time (Python's lock): it
#: saturates its one CPU at about 200 req/s.
_CPU_BOUND = """
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        begun = time.thread_time()
        while time.thread_time() - begun < 0.004:
            pass
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def _process_cpu_s(pid: int) -> float:
    """The seconds the process's threads ran or waited for a CPU (schedstat: run and run-queue
    time, nanoseconds); a thread gone since is no longer counted, so the caller keeps the most."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                ran, waited, _ = stat.read().split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += int(ran) + int(waited)
    return total / 1e9


@pytest.fixture
def process_cpu_exporter() -> Iterator[Callable[[int], str]]:
    """Serves a process's CPU as a one-CPU node_exporter's; call it with the pid, get the URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(pid: int) -> str:
        begun, cpu_begun = time.monotonic(), _process_cpu_s(pid)
        used, idle = [0.0], [0.0]

        class Exporter(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                # Counters never go back (a thread ends; several threads run or wait at once).
                used[0] = max(used[0], _process_cpu_s(pid) - cpu_begun)
                idle[0] = max(idle[0], time.monotonic() - begun - used[0])
                body = (
                    f'node_cpu_seconds_total{{cpu="0",mode="user"}} {used[0]}\n'
                    f'node_cpu_seconds_total{{cpu="0",mode="idle"}} {idle[0]}\n'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}/metrics"

    try:
        yield start
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def _find_max(
    horde_cli: HordeCli, port: int, exporter: str, *, start: int, step: int, limit_ms: float
) -> dict[str, Any]:
    workload = {"type": "open", "max_vus": 100, "stages": [{"duration_s": 1, "rate_per_s": 1}]}
    scenario = {"name": "s", "steps": [{"name": "home", "method": "GET", "path": "/"}], "workload": workload}
    steer = {"type": "find_max", "start": start, "step": step, "step_duration_s": 2, "refine": False}
    monitor = {"name": "target", "type": "prometheus", "url": exporter, "node_exporter": True}
    target = {"base_url": f"http://127.0.0.1:{port}"}
    plan = horde_cli.tmp_path / "plan.json"
    body = {"version": 1, "target": target, "scenarios": [scenario], "steer": {**steer, "latency_limit_ms": limit_ms}}
    plan.write_text(json.dumps({**body, "monitors": [monitor]}))
    result = horde_cli.run("run", str(plan), "--workers", "1", "--summary-json", "summary.json", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    summary: dict[str, Any] = json.loads((horde_cli.tmp_path / "summary.json").read_text())
    summary["stdout"] = result.stdout
    return summary


def test_a_target_whose_cpu_saturates_is_named(horde_cli: HordeCli, process_cpu_exporter: Callable[[int], str]) -> None:
    port = free_tcp_port()
    target = subprocess.Popen([sys.executable, "-c", _CPU_BOUND, str(port)])
    try:
        wait_for_port(port)
        summary = _find_max(horde_cli, port, process_cpu_exporter(target.pid), start=40, step=40, limit_ms=200)
    finally:
        target.terminate()
        target.wait(timeout=10)
    why = summary["capacity"]["what_broke_first"]["why_the_knee"]
    assert why["explained_by"] == "target CPU", why
    first = why["candidates"][0]
    # 4 ms of CPU a request and Python's own work: about 4-6 ms of the one CPU per request.
    assert 3.0 <= first["demand_ms"] <= 8.0 and first["reach_percent"] >= EXPLAINS_PERCENT, first
    # Shown beside what broke first: the terminal, the report and the dashboard.
    assert f"why the knee is there: {why['sentence']}" in " ".join(summary["stdout"].split())
    with Store.open(horde_cli.store_url) as store:
        html = render_run_report(load_run(store, summary["run_id"]))
        state = finished_state(store, summary["run_id"])
    assert f'<th class="name">why the knee is there</th><td class="name">{escape(why["sentence"])}</td>' in html
    assert ["why the knee is there", why["sentence"]] in [list(fact) for fact in state["capacity"]["facts"]]


def test_a_sleep_bound_target_is_explained_by_no_monitored_resource(
    horde_cli: HordeCli, target_process: Any, process_cpu_exporter: Callable[[int], str]
) -> None:
    """Two workers of 10 ms each: 200 req/s at most, a sleep's worth of CPU."""
    port = target_process("--workers", "2", "--service-ms", "10")
    pid = next(int(line.split()[0]) for line in _listening_pids(port))
    summary = _find_max(horde_cli, port, process_cpu_exporter(pid), start=50, step=50, limit_ms=30)
    why = summary["capacity"]["what_broke_first"]["why_the_knee"]
    assert why["explained_by"] is None and why["sentence"].startswith("no monitored resource explains the knee"), why


def _listening_pids(port: int) -> list[str]:
    """The pid of the process listening on ``port`` (``ss -ltnp``)."""
    out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    return [part.split("pid=")[1].split(",")[0] for part in out.split() if "pid=" in part]
