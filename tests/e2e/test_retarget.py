"""Live re-targeting: the Python API (Run.set_level) and `horde retarget` from another process
move a running load, and the snapshots show the new level from the next second on."""

from __future__ import annotations

import json
import textwrap
import time
from typing import Any

import pytest

from conftest import HordeCli
from horde.errors import ExitCode, InvalidInput
from horde.plan import plan_from_dict
from horde.engine.run import Run
from horde.store import Store


def plan_for(port: int, workload: dict[str, Any], scenarios: int = 1) -> Any:
    return plan_from_dict(
        {
            "version": 1,
            "target": {"base_url": f"http://127.0.0.1:{port}"},
            "scenarios": [
                {
                    "name": f"s{index}",
                    "steps": [{"name": "get", "method": "GET", "path": "/"}],
                    "workload": workload,
                    "weight": index + 1,
                }
                for index in range(scenarios)
            ],
        }
    )


def requests_of(snapshot: dict[str, Any]) -> int:
    return sum(step["requests"] for step in snapshot["steps"])


def test_open_rate_moves_at_once_and_keeps_arrivals_exact(builtin_target: Any) -> None:
    plan = plan_for(
        builtin_target.port,
        {"type": "open", "start_rate_per_s": 100, "stages": [{"duration_s": 6, "rate_per_s": 100}], "max_vus": 50},
    )
    seen: dict[int, dict[str, Any]] = {}
    with Run.start(plan, workers=2) as run:
        for snapshot in run:
            seen[snapshot["second"]] = snapshot
            if snapshot["second"] == 2:
                assert run.set_level(rate_per_s=300) == {"s0": 300.0}
    # Seconds 1-2 at 100/s; from the move on (just after second 2 ended) 300/s.
    assert [requests_of(seen[s]) for s in (1, 2)] == [100, 100]
    for second in (4, 5, 6):
        assert abs(requests_of(seen[second]) - 300) <= 3, requests_of(seen[second])
        assert seen[second]["target_rate_per_s"] == pytest.approx(300.0)


def test_closed_vus_spread_by_weight_with_a_ramp(builtin_target: Any) -> None:
    plan = plan_for(
        builtin_target.port, {"type": "closed", "start_vus": 3, "stages": [{"duration_s": 7, "vus": 3}]}, scenarios=2
    )
    seen: dict[int, dict[str, Any]] = {}
    with Run.start(plan, workers=2) as run:
        for snapshot in run:
            seen[snapshot["second"]] = snapshot
            if snapshot["second"] == 1:
                # Weights 1 and 2: 9 VUs are 3 + 6, reached over 2 s.
                assert run.set_level(vus=9, ramp_s=2) == {"s0": 3.0, "s1": 6.0}
    assert seen[1]["target_vus"] == 6
    assert 6 < seen[2]["target_vus"] < 18
    assert [seen[s]["target_vus"] for s in (4, 5, 6)] == [9, 9, 9]
    assert seen[5]["active_vus"] == 9


def test_set_load_refuses_what_the_run_cannot_do(builtin_target: Any) -> None:
    plan = plan_for(builtin_target.port, {"type": "closed", "start_vus": 1, "stages": [{"duration_s": 2, "vus": 1}]})
    with Run.start(plan, workers=1) as run:
        with pytest.raises(InvalidInput, match="no open scenario"):
            run.set_level(rate_per_s=10)
        with pytest.raises(InvalidInput, match="no scenario is named 'nope'"):
            run.set_level(vus=2, scenarios=["nope"])
        with pytest.raises(InvalidInput, match="either vus or rate_per_s"):
            run.set_level()
        with pytest.raises(InvalidInput, match="between 0 and"):
            run.set_level(vus=10**9)
        run.stop()
        for _ in run:
            pass


def test_retarget_from_another_process(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = horde_cli.tmp_path / "plan.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        target: {{base_url: "http://127.0.0.1:{builtin_target.port}"}}
        scenarios:
          - name: api
            steps: [{{name: get, method: GET, path: /delay/10}}]
            workload: {{type: closed, start_vus: 2, stages: [{{duration_s: 8, vus: 2}}]}}
        """)
    )
    out = horde_cli.tmp_path / "summary.json"
    running = horde_cli.popen("run", str(plan), "--summary-json", str(out))
    try:
        deadline = time.monotonic() + 15
        while True:
            with Store.open(horde_cli.store_url) as store:
                records = store.list_runs(limit=1)
                if records and store.snapshots(records[0].run_id):
                    break
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.2)
        applied = horde_cli.run("retarget", "last", "--vus", "5")
        assert applied.returncode == ExitCode.OK, applied.stderr
        assert "applied: api → 5" in applied.stdout
        refused = horde_cli.run("retarget", "last", "--rate", "5")
        assert refused.returncode == ExitCode.INVALID_INPUT and "refused" in refused.stdout
        running.communicate(timeout=30)
    finally:
        running.kill()
    assert running.returncode == ExitCode.OK
    run_id = json.loads(out.read_text())["run_id"]
    with Store.open(horde_cli.store_url) as store:
        snapshots = store.snapshots(run_id)
    assert max(snapshot["active_vus"] for snapshot in snapshots) == 5
    assert snapshots[-2]["target_vus"] == 5
    # A finished run cannot be re-targeted; a run whose process is gone does not answer.
    finished = horde_cli.run("retarget", run_id, "--vus", "3")
    assert finished.returncode == ExitCode.INVALID_INPUT and "not running" in finished.stderr


def test_retarget_a_run_that_does_not_answer(horde_cli: HordeCli) -> None:
    with Store.open(horde_cli.store_url) as store:
        # A run recorded as running by this (live) process, which never polls for requests.
        run_id = store.create_run(plan={}, plan_name="silent", parameters={}, tags={})
    result = horde_cli.run("retarget", run_id, "--vus", "3", "--wait", "500ms")
    assert result.returncode == ExitCode.RUN_UNRESPONSIVE, result.stderr
    assert "did not answer" in result.stderr
