"""Live re-pacing (Run.set_pace): the same VUs go faster or slower, their pacing and think times
divided by the factor, while the VU count stays where it was."""

from __future__ import annotations

import math
from typing import Any

import pytest

from horde.engine.run import Run
from horde.errors import InvalidInput
from horde.plan import Plan, plan_from_dict

#: Each scenario's VUs, and the pause the plan gives them (pacing for one, a think step for the
#: other): 5 VUs at one iteration per 200 ms are 25 requests a second, 50 at twice the pace.
VUS = 5
PAUSE_S = 0.2


def two_scenario_plan(port: int, seconds: float) -> Plan:
    workload = {"type": "closed", "start_vus": VUS, "stages": [{"duration_s": seconds, "vus": VUS}]}
    get = {"name": "get", "method": "GET", "path": "/"}
    think = {"type": "think", "think_time": {"type": "constant", "duration_ms": PAUSE_S * 1000}}
    return plan_from_dict(
        {
            "version": 1,
            "graceful_stop_s": 2,
            "target": {"base_url": f"http://127.0.0.1:{port}"},
            "scenarios": [
                {"name": "paced", "pacing_s": PAUSE_S, "steps": [get], "workload": workload},
                {"name": "thinking", "steps": [get, think], "workload": workload},
            ],
        }
    )


def requests_of(snapshot: dict[str, Any], scenario: str) -> int:
    return sum(step["requests"] for step in snapshot["steps"] if step["scenario"] == scenario)


def test_twice_the_pace_doubles_the_rate_with_the_same_vus(builtin_target: Any) -> None:
    plan = two_scenario_plan(builtin_target.port, seconds=7)
    seen: dict[int, dict[str, Any]] = {}
    with Run.start(plan, workers=2) as run:
        for snapshot in run:
            seen[snapshot["second"]] = snapshot
            if snapshot["second"] == 2:
                assert run.set_pace(2.0) == {"paced": 2.0, "thinking": 2.0}
    # Seconds 1-2 at the plan's pace; the change lands just after second 2 ends, second 3 holds
    # the pauses that were already waiting, and seconds 4-6 are all at the new pace.
    for scenario in ("paced", "thinking"):
        before = sum(requests_of(seen[second], scenario) for second in (1, 2)) / 2
        after = sum(requests_of(seen[second], scenario) for second in (4, 5, 6)) / 3
        assert before == pytest.approx(VUS / PAUSE_S, rel=0.2), (scenario, before)
        assert 1.7 <= after / before <= 2.3, (scenario, before, after)
    # The population did not move: the same VUs went faster.
    for second in range(1, 7):
        assert seen[second]["active_vus"] == 2 * VUS, (second, seen[second]["active_vus"])
        assert seen[second]["target_vus"] == 2 * VUS


def test_a_pace_goes_to_the_named_scenarios_and_bad_ones_are_refused(builtin_target: Any) -> None:
    plan = two_scenario_plan(builtin_target.port, seconds=2)
    with Run.start(plan, workers=1) as run:
        assert run.set_pace(0.5, scenarios=["paced"]) == {"paced": 0.5}
        assert run.set_pace(1) == {"paced": 1.0, "thinking": 1.0}
        refusal = r"a pace factor must be between 0\.001 and 1000"
        for bad in (0.0, -2.0, 1000.5, 0.0001, math.nan, math.inf):
            with pytest.raises(InvalidInput, match=refusal):
                run.set_pace(bad)
        with pytest.raises(InvalidInput, match="no scenario is named 'nope'") as refused:
            run.set_pace(2.0, scenarios=["paced", "nope"])
        assert refused.value.hint == "name one of: paced, thinking"
        run.stop()
        for _ in run:
            pass


def test_target_response_time_steers_the_pace_of_a_fixed_population(horde_cli: Any, target_process: Any) -> None:
    # The seed's way: 40 players online the whole run (their connections and logins), their
    # think time steered so that p95 holds T, against an M/M/4 queue (four workers, exponential
    # service of 10 ms on average). The rate that holds T is the target's, however the load is
    # made: it matches what an open model at that rate measures from the same target.
    import json
    import textwrap

    from horde.control.measure import measure
    from horde.store import Store

    port = target_process("--workers", "4", "--service-ms", "10", "--service-times", "exponential")
    plan = horde_cli.tmp_path / "plan.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: paced-players
        target: {{base_url: "http://127.0.0.1:{port}"}}
        scenarios:
          - name: players
            steps:
              - {{name: get, method: GET, path: /, think_time: {{type: exponential, mean_ms: 400}}}}
            workload: {{type: closed, start_vus: 40, stages: [{{duration_s: 1, vus: 40}}]}}
        steer: {{type: target_response_time, target_ms: 40, by: pace, duration_s: 80}}
        """)
    )
    out = horde_cli.tmp_path / "summary.json"
    result = horde_cli.run("run", str(plan), "--summary-json", str(out), timeout=200)
    assert result.returncode == 0, result.stderr
    summary = json.loads(out.read_text())
    capacity = summary["capacity"]
    assert capacity["level_unit"] == "pace" and capacity["outcome"] in ("held", "kept_crossing"), capacity["sentence"]
    assert capacity["converged_after_s"] is not None and capacity["converged_after_s"] <= 60, capacity["readings"]
    with Store.open(horde_cli.store_url) as store:
        seconds = [s for s in store.snapshots(summary["run_id"]) if not s["final"]]
    assert {s["active_vus"] for s in seconds[2:]} == {40}  # the population never moved
    # The rate the steered pace gave, over its last 20 s, held at a fixed open rate: p95 near T.
    last = seconds[-20:]
    rate = measure(last).ok_rps
    check = horde_cli.tmp_path / "check.json"
    fixed = horde_cli.run(
        "run",
        "--url",
        f"http://127.0.0.1:{port}/",
        "--rate",
        f"{rate:.1f}",
        "--max-vus",
        "500",
        "--duration",
        "20s",
        "--summary-json",
        str(check),
        timeout=60,
    )
    assert fixed.returncode == 0, fixed.stderr
    with Store.open(horde_cli.store_url) as store:
        open_seconds = [s for s in store.snapshots(json.loads(check.read_text())["run_id"]) if not s["final"]][3:]
    assert 30.0 <= measure(open_seconds, from_send=True).latency_ms(95) <= 50.0, rate
