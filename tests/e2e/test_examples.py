"""Every example runs: the quickstart and the game showcase, through the real `horde` command
against the built-in target, with their results checked action by action; the monitored example
through its own script (the target, a PostgreSQL and its load), its diagnosis in its report; the
game database through its own script (a primary, a streaming standby, the seed's tables), the
mix the database counted and the HOT share in its report."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, Callable

from conftest import HORDE_BIN, HordeCli, _postgres_bindir, _skip_or_fail
from horde.plan import plan_to_json
from horde.plan.loader import load_plan
from report_pages import readable

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_summary(horde_cli: HordeCli, *args: str) -> dict[str, Any]:
    summary_path = horde_cli.tmp_path / "summary.json"
    done = horde_cli.run("run", *args, "--summary-json", str(summary_path), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    return summary


def test_the_game_plan_reads_the_same_in_yaml_and_python() -> None:
    assert plan_to_json(load_plan(EXAMPLES / "game" / "plan.yaml")) == plan_to_json(
        load_plan(EXAMPLES / "game" / "plan_builder.py")
    )


def test_the_game_example_plays_every_action(horde_cli: HordeCli, target_process: Callable[..., int]) -> None:
    port = target_process()
    players, devices, ramp_up, duration = 12, 3, 1, 3
    summary = run_summary(
        horde_cli,
        str(EXAMPLES / "game"),
        "--base-url",
        f"http://127.0.0.1:{port}",
        "-p",
        f"players={players}",
        "-p",
        f"devices={devices}",
        "-p",
        f"ramp_up={ramp_up}",
        "-p",
        f"duration={duration}",
    )
    steps = summary["steps"]
    # Every player registered and logged in exactly once (setup), and every action was played.
    assert steps["register"]["requests"] == players
    assert steps["login"]["requests"] == players
    for action in ("city", "buildings", "collect", "resources", "construct", "telemetry"):
        assert steps[action]["requests"] > 0, action
    assert steps["build"]["kind"] == "group"
    assert steps["build"]["requests"] == steps["buildings"]["requests"]
    # Nothing failed: 409s of register and construct are expected by the plan's checks.
    assert summary["errors"] == 0, summary["errors_by_kind"]
    # The weighted mix: city (40) is played more than resources (10).
    assert steps["city"]["requests"] > steps["resources"]["requests"]
    # Devices write once a second each, whatever the response time: 3 devices x 4 s of stages.
    telemetry = steps["telemetry"]["requests"]
    assert devices * (ramp_up + duration) - devices <= telemetry <= devices * (ramp_up + duration) + devices
    # The stored run keeps the parameters it ran with.
    shown = horde_cli.run("show", summary["run_id"], "--json")
    assert json.loads(shown.stdout)["steps"]["city"]["requests"] == steps["city"]["requests"]


def test_the_quickstart_example_runs(horde_cli: HordeCli, target_process: Callable[..., int]) -> None:
    port = target_process()
    summary = run_summary(
        horde_cli,
        str(EXAMPLES / "quickstart"),
        "--base-url",
        f"http://127.0.0.1:{port}",
        "--duration",
        "3s",
        "--ramp-up",
        "1s",
    )
    assert summary["errors"] == 0
    assert set(summary["steps"]) == {"home", "item"}
    assert summary["steps"]["item"]["latency_ms"]["p50"] >= 5.0  # /delay/5


def test_the_monitored_example_shows_the_diagnosis_in_its_report(horde_cli: HordeCli) -> None:
    bindir = _postgres_bindir()
    if bindir is None:
        _skip_or_fail("no PostgreSQL binaries (initdb, pg_ctl, pgbench); install postgresql")
    report = horde_cli.tmp_path / "report.html"
    # 12 s: the dead-tuple rule's 10 s window, and a little more.
    env = {**horde_cli.env, "DURATION": "12", "REPORT": str(report), "HORDE": str(HORDE_BIN), "PG_BINDIR": str(bindir)}
    done = subprocess.run(
        [str(EXAMPLES / "monitored" / "run.sh")],
        env=env,
        cwd=horde_cli.tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    assert "diagnosis: pg: connections at max_connections: 12 of 12 from second" in done.stdout
    assert "diagnosis: pg: table public.items: dead tuples grew from" in done.stdout
    html = readable(report.read_text())
    assert 'id="diagnosis"' in html and 'data-rule="dead_tuples" data-monitor="pg"' in html
    assert 'id="chart-monitor-pg"' in html and 'id="chart-monitor-host"' in html


def test_the_game_db_example_drives_the_seed_mix_and_reports_the_database_side(horde_cli: HordeCli) -> None:
    bindir = _postgres_bindir()
    if bindir is None:
        _skip_or_fail("no PostgreSQL binaries (initdb, pg_ctl, pg_basebackup); install postgresql")
    report = horde_cli.tmp_path / "report.html"
    # Lean: the smallest fill and 8 s of load; the long read (a third of the run) is too short
    # here for the feedback rule's 5 s, so it is off.
    env = {
        **horde_cli.env,
        "DURATION": "8",
        "SCALE": "1",
        "LONG_READ": "0",
        "REPORT": str(report),
        "HORDE": str(HORDE_BIN),
        "PG_BINDIR": str(bindir),
    }
    done = subprocess.run(
        [str(EXAMPLES / "game-db" / "run.sh")],
        env=env,
        cwd=horde_cli.tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    shown = json.loads(horde_cli.run("show", "last", "--json").stdout)
    steps = shown["steps"]
    assert shown["errors"] == 0, shown["errors_by_kind"]
    counts = {
        kind: sum(entry["requests"] for name, entry in steps.items() if name.startswith(kind + "_"))
        for kind in ("select", "insert", "update", "delete")
    }
    total = sum(counts.values())
    for kind, weight in {"select": 83.0, "insert": 3.0, "update": 11.6, "delete": 1.6}.items():
        assert abs(100 * counts[kind] / total - weight) < 1.5, counts
    html = readable(report.read_text())
    # The rows each statement returned or changed, beside the steps' figures.
    assert all(steps[name].get("rows", 0) > 0 for name in steps if name.startswith(("select_", "update_"))), steps
    assert '<th>rows</th>' in html and 'data-field="rows"' in html
    assert 'id="chart-monitor-primary"' in html and 'id="chart-monitor-standby"' in html
    for figure in ("statements.select_per_s", "hot_update_percent", "dead_tuples", "replication_lag_s"):
        assert figure in html, figure
    # Both servers were read every second (a standby without pg_stat_statements loaded is a gap).
    assert "gaps" not in done.stdout, done.stdout[-3000:]


def test_the_gateway_example_runs_over_kcp(horde_cli: HordeCli, target_process: Callable[..., int]) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        kcp_port = probe.getsockname()[1]
    target_process("--kcp-port", str(kcp_port))
    summary = run_summary(
        horde_cli,
        str(EXAMPLES / "gateway" / "kcp.yaml"),
        "--base-url",
        f"kcp://127.0.0.1:{kcp_port}",
        "-p",
        "robots=4",
        "-p",
        "duration=2",
    )
    steps = summary["steps"]
    # KCP resends what the 10 % loss takes: every ping is answered, every robot joined its room.
    assert steps["rtt"]["requests"] > 20 and steps["rtt"]["errors"] == 0, steps["rtt"]
    assert steps["joined"]["requests"] == 4 and steps["joined"]["errors"] == 0
    assert steps["rtt"]["latency_ms"]["p50"] >= 40.0, "20 ms each way"
    assert steps["move"]["messages"]["sent"] >= 4 * 10, steps["move"]["messages"]


def test_the_gateway_example_compares_tcp_and_kcp_through_the_link(horde_cli: HordeCli) -> None:
    import os
    import shutil

    if os.geteuid() != 0 or shutil.which("ip") is None or not Path("/dev/net/tun").exists():
        import pytest

        pytest.skip("link.sh needs root, /dev/net/tun and ip (the emulated link)")
    done = subprocess.run(
        [str(EXAMPLES / "gateway" / "link.sh"), "-p", "robots=3", "-p", "duration=2"],
        env={**horde_cli.env, "HORDE": str(HORDE_BIN)},
        cwd=horde_cli.tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Both runs, then the comparison, then the link's own account of what it dropped.
    assert "gateway-tcp" in done.stdout and "gateway-kcp" in done.stdout and " against " in done.stdout
    assert re.search(r"link down: out \d+ packets \(\d+ dropped\)", done.stdout), done.stdout[-2000:]
