"""A run cut short: Ctrl-C (SIGINT), SIGTERM and SIGHUP stop it gracefully and keep it; a killed process leaves
it 'running' until the next command that opens the store marks it 'aborted'."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import HordeCli
from horde.errors import ExitCode
from horde.store import Store

GRACE_S = 2


def write_plan(directory: Path, port: int, *, path: str = "/delay/50", grace_s: float = GRACE_S) -> Path:
    plan = directory / "plan.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: long
        target: {{base_url: "http://127.0.0.1:{port}"}}
        scenarios:
          - name: s
            steps: [{{name: slow, method: GET, path: {path}}}]
            workload: {{type: closed, start_vus: 5, stages: [{{duration_s: 20, vus: 5}}]}}
        graceful_stop_s: {grace_s}
        """)
    )
    return plan


def wait_until_running(horde_cli: HordeCli, proc: subprocess.Popen[str], *, snapshots: int = 2) -> str:
    """The id of the run once the store holds it 'running' with enough snapshots (bounded)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if horde_cli.store_path.exists():
            with Store.open(horde_cli.store_url) as store:
                runs = store.list_runs()
                if runs and runs[0].status == "running" and len(store.snapshots(runs[0].run_id)) >= snapshots:
                    return runs[0].run_id
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"no running run with {snapshots} snapshots after 20 s: {proc.communicate()}")


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"horde did not exit within {timeout} s:\n{out}\n{err}") from None


def show_json(horde_cli: HordeCli, run_id: str) -> dict[str, Any]:
    result = horde_cli.run("show", run_id, "--json")
    assert result.returncode == 0, result.stderr
    shown: dict[str, Any] = json.loads(result.stdout)
    return shown


def listed(horde_cli: HordeCli, run_id: str) -> dict[str, Any]:
    """The run as `horde runs --json` lists it."""
    result = horde_cli.run("runs", "--json")
    assert result.returncode == 0, result.stderr
    [entry] = [entry for entry in json.loads(result.stdout) if entry["run_id"] == run_id]
    return dict(entry)


def assert_runs_and_show_agree(horde_cli: HordeCli, run_id: str, status: str) -> dict[str, Any]:
    """`horde runs` (JSON and table) and `horde show` give the run the same status, duration and
    totals (issue 16: an aborted run was listed with 0.0 s and 0 requests)."""
    shown = show_json(horde_cli, run_id)
    entry = listed(horde_cli, run_id)
    assert shown["status"] == entry["status"] == status
    for key in ("duration_s", "requests", "errors", "rps"):
        assert entry[key] == shown[key], (key, entry, shown)
    horde_cli.env["COLUMNS"] = "250"  # wide enough that no column is dropped
    try:
        table = horde_cli.run("runs")
    finally:
        horde_cli.env.pop("COLUMNS")
    [row] = [line for line in table.stdout.splitlines() if run_id in line]
    assert f"{shown['duration_s']:.1f}" in row and f"{shown['requests']:,}" in row and status in row, row
    return shown


@pytest.mark.parametrize(
    ("stop_signal", "code"),
    [(signal.SIGINT, ExitCode.INTERRUPTED), (signal.SIGTERM, ExitCode.TERMINATED), (signal.SIGHUP, ExitCode.HUNG_UP)],
    ids=["ctrl-c", "SIGTERM", "SIGHUP"],
)
def test_a_stop_signal_stops_gracefully_and_keeps_the_run(
    horde_cli: HordeCli, builtin_target: Any, stop_signal: signal.Signals, code: ExitCode
) -> None:
    # Ctrl-C; what a CI cancellation, Kubernetes or `timeout` sends (SIGTERM); a closed terminal
    # (SIGHUP): each drains, summarises, writes out and stores the run, with its own exit code.
    plan = write_plan(horde_cli.tmp_path, builtin_target.port)
    summary_path = horde_cli.tmp_path / "summary.json"
    proc = horde_cli.popen("run", str(plan), "--workers", "1", "--summary-json", str(summary_path))
    try:
        run_id = wait_until_running(horde_cli, proc)
        interrupted_at = time.monotonic()
        proc.send_signal(stop_signal)
        out, err = finish(proc, GRACE_S + 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert time.monotonic() - interrupted_at < GRACE_S + 4
    assert proc.returncode == code, (out, err)
    assert "Traceback" not in err
    assert "stopping: no new iterations" in out
    summary = json.loads(summary_path.read_text())
    assert summary["run_id"] == run_id
    assert summary["status"] == "interrupted"
    assert 2 <= summary["duration_s"] < 10
    assert summary["requests"] > 100 and summary["errors"] == 0  # in-flight requests finished, not cut
    with Store.open(horde_cli.store_url) as store:
        record = store.get_run(run_id)
        snapshots = store.snapshots(run_id)
    assert record.status == "interrupted"
    assert record.ended_at is not None
    assert record.summary == summary
    assert snapshots[-1]["final"]
    assert sum(step["requests"] for s in snapshots for step in s["steps"]) == summary["requests"]
    assert show_json(horde_cli, run_id) == summary
    assert assert_runs_and_show_agree(horde_cli, run_id, "interrupted") == summary


def test_a_second_ctrl_c_stops_waiting_for_the_drain(horde_cli: HordeCli, builtin_target: Any) -> None:
    # Requests of 8 s and a 10 s grace period: only the second Ctrl-C ends it quickly.
    plan = write_plan(horde_cli.tmp_path, builtin_target.port, path="/delay/8000", grace_s=10)
    proc = horde_cli.popen("run", str(plan), "--workers", "1")
    try:
        run_id = wait_until_running(horde_cli, proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        second_at = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = finish(proc, 15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert time.monotonic() - second_at < 3.5, (out, err)
    assert proc.returncode == ExitCode.INTERRUPTED, (out, err)
    assert "Traceback" not in err
    with Store.open(horde_cli.store_url) as store:
        assert store.get_run(run_id).status == "interrupted"


def test_a_killed_run_is_marked_aborted_with_its_snapshots(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = write_plan(horde_cli.tmp_path, builtin_target.port)
    proc = horde_cli.popen("run", str(plan), "--workers", "1")
    try:
        run_id = wait_until_running(horde_cli, proc)
    finally:
        proc.kill()  # SIGKILL: no chance to clean up
        proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    # Read the file directly: opening a Store would already mark the run.
    with sqlite3.connect(horde_cli.store_path) as db:
        [(status, summary)] = db.execute("SELECT status, summary_json FROM runs WHERE run_id = ?", (run_id,)).fetchall()
        [(kept,)] = db.execute("SELECT count(*) FROM snapshots WHERE run_id = ?", (run_id,)).fetchall()
    assert (status, summary) == ("running", None)
    assert kept >= 2

    result = horde_cli.run("runs", "--json")
    assert result.returncode == 0, result.stderr
    [listed] = json.loads(result.stdout)
    assert (listed["run_id"], listed["status"]) == (run_id, "aborted")
    assert listed["ended_at"] is not None
    with Store.open(horde_cli.store_url) as store:
        snapshots = store.snapshots(run_id)
    assert len(snapshots) == kept
    assert not any(s["final"] for s in snapshots)
    # What was kept can still be summarised, and `horde runs` says the same as `horde show`.
    shown = assert_runs_and_show_agree(horde_cli, run_id, "aborted")
    assert shown["requests"] == sum(step["requests"] for s in snapshots for step in s["steps"]) > 0
    assert shown["duration_s"] == snapshots[-1]["elapsed_s"] >= 2
