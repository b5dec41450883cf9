"""The steering rules on simulated targets whose answers are known exactly, one snapshot a
second, without sockets: find-max's knee and reasons, the plan each steering prepares, plus
compact profiles, conditions and capacity arithmetic (target response time's own tests are in
test_target_response_time.py)."""

from __future__ import annotations

from typing import Any

import pytest

from horde._engine import histogram_from_values
from horde.control.capacity import CapacityQuestion, capacity_block
from horde.errors import InvalidInput, PlanInvalid
from horde.plan import plan_from_dict
from horde.plan.control import parse_condition
from horde.plan.profiles import lower_profile
from horde.control.find_max import MAX_STRETCH
from horde.control.steering import FindMaxSteering, steering_for

CPU_LIMIT = 180.0


def plan_with(workload: dict[str, Any], steer: dict[str, Any], scenarios: int = 1) -> Any:
    return plan_from_dict(
        {
            "version": 1,
            "target": {"base_url": "http://127.0.0.1:9"},
            "scenarios": [
                {
                    "name": f"s{i}",
                    "steps": [{"name": "get", "method": "GET", "path": "/"}],
                    "workload": workload,
                    "weight": i + 1,
                }
                for i in range(scenarios)
            ],
            "steer": steer,
        }
    )


OPEN = {"type": "open", "stages": [{"duration_s": 1, "rate_per_s": 1}], "max_vus": 1000}
CLOSED = {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}


class SimulatedTarget:
    """A target of fixed capacity: below it every request takes `service_ms`; above it the
    open model's excess queues (latency grows each second by the backlog), and a closed model's
    requests wait their turn (latency = VUs / capacity)."""

    def __init__(self, capacity_rps: float, service_ms: float, model: str) -> None:
        self.capacity, self.service_ms, self.model = capacity_rps, service_ms, model
        self.level = 0.0
        self.backlog = 0.0
        self.second = 0
        self.moves: list[tuple[int, float]] = []

    def set_level(
        self,
        *,
        vus: int | None = None,
        rate_per_s: float | None = None,
        scenarios: list[str] | None = None,
        ramp_s: float = 0.0,
    ) -> dict[str, float]:
        self.level = float(vus if vus is not None else rate_per_s or 0.0)
        self.moves.append((self.second, self.level))
        return {"s0": self.level}

    def snapshot(self) -> dict[str, Any]:
        self.second += 1
        if self.model == "open":
            served = min(self.level + self.backlog, self.capacity)
            self.backlog = max(0.0, self.backlog + self.level - self.capacity)
            latency_ms = self.service_ms + 1000.0 * self.backlog / self.capacity
        else:
            served = min(self.level * 1000.0 / self.service_ms, self.capacity)
            latency_ms = max(self.service_ms, 1000.0 * self.level / self.capacity)
        count = max(1, round(served))
        return {
            "second": self.second,
            "elapsed_s": float(self.second),
            "interval_s": 1.0,
            "final": False,
            "steps": [
                {
                    "scenario": "s0",
                    "step": "get",
                    "kind": "request",
                    "requests": count,
                    "ok": count,
                    "errors": {},
                    "bytes_sent": 0,
                    "bytes_received": 0,
                    "histogram": histogram_from_values([round(latency_ms * 1000)] * count),
                }
            ],
            "iterations": count,
            "dropped_arrivals": 0,
            "cpu_percent": 10.0,
            "timer_lateness_p99_ms": 0.5,
        }


def drive(steering: Any, target: SimulatedTarget, seconds: int) -> None:
    target.level = getattr(steering, "level", None) or steering.steer.start
    for _ in range(seconds):
        steering.observe(target.snapshot(), target, cpu_limit_percent=CPU_LIMIT)
        if steering.done:
            return


def test_find_max_open_knee_within_a_refined_step() -> None:
    plan = plan_with(OPEN, {"type": "find_max", "start": 100, "step": 100, "step_duration_s": 4})
    steering = FindMaxSteering(plan)
    target = SimulatedTarget(capacity_rps=470, service_ms=20, model="open")
    drive(steering, target, 200)
    result = steering.result()
    assert steering.done and result["ended_because"] == "saturated"
    # Coarse steps 100..400 hold, 500 saturates; refining from 400 in steps of 25: 425, 450 hold,
    # 475 saturates: the knee is 450 (the true 470 lies within one refined step above it).
    assert result["level_at_max"] == 450 and result["max_rps"] == pytest.approx(450)
    assert result["first_saturated_step"]["level"] == 500
    assert result["saturation_reason"] in ("throughput_flat", "latency_rising")
    # After the saturated step it backed off to half the last good level before refining.
    levels = [level for _, level in target.moves]
    assert levels[:5] == [200, 300, 400, 500, 200]


def test_find_max_closed_model_reads_saturation_from_flat_throughput() -> None:
    plan = plan_with(CLOSED, {"type": "find_max", "start": 4, "step": 4, "step_duration_s": 4})
    steering = FindMaxSteering(plan)
    # 500 req/s at 20 ms: 10 VUs reach it; more VUs only queue.
    drive(steering, SimulatedTarget(capacity_rps=500, service_ms=20, model="closed"), 200)
    result = steering.result()
    assert result["level_unit"] == "vus"
    assert result["first_saturated_step"]["level"] == 12
    assert result["first_saturated_step"]["saturated_reason"] == "throughput_flat"
    # Refined from 8 by one VU at a time: 9, 10 and 11 serve the full 500 (at 11 latency rises
    # only 10 %, within the rule), and the refinement ends after its three steps.
    assert result["level_at_max"] in (10, 11)
    assert result["max_rps"] == pytest.approx(500)


def test_find_max_limits_and_error_and_latency_rules() -> None:
    never = plan_with(OPEN, {"type": "find_max", "start": 100, "step": 100, "step_duration_s": 3, "limit": 300})
    steering = FindMaxSteering(never)
    drive(steering, SimulatedTarget(capacity_rps=10_000, service_ms=5, model="open"), 100)
    assert steering.result()["ended_because"] == "limit_reached"
    assert steering.result()["saturation_reason"] is None and steering.result()["max_rps"] == pytest.approx(300)
    # Each step may stretch to three times its length (starved seconds, few samples) and a
    # recovery lasts at most two steps: the engine's stages are sized for the worst case.
    assert FindMaxSteering(never).planned_length_s == (3 + 6) * 3 * (MAX_STRETCH + 2)

    slo = plan_with(
        OPEN,
        {"type": "find_max", "start": 100, "step": 100, "step_duration_s": 3, "latency_limit_ms": 15, "refine": False},
    )
    steering = FindMaxSteering(slo)
    drive(steering, SimulatedTarget(capacity_rps=10_000, service_ms=20, model="open"), 100)
    assert steering.result()["saturation_reason"] == "latency_limit" and steering.result()["max_rps"] is None


def test_find_max_stops_when_the_generator_is_saturated() -> None:
    plan = plan_with(OPEN, {"type": "find_max", "start": 100, "step": 100, "step_duration_s": 4})
    steering = FindMaxSteering(plan)
    target = SimulatedTarget(capacity_rps=10_000, service_ms=5, model="open")
    target.level = 100
    for second in range(20):
        snapshot = target.snapshot()
        if second >= 8:
            # Busy and late: the generator used its CPU and fell behind.
            snapshot["timer_lateness_p99_ms"], snapshot["cpu_percent"] = 40.0, 170.0
        steering.observe(snapshot, target, cpu_limit_percent=CPU_LIMIT)
        if steering.done:
            break
    assert steering.done and steering.result()["ended_because"] == "generator_saturated"
    assert steering.result()["level_at_max"] == 200


def test_prepared_plan_holds_the_start_level_spread_by_weight() -> None:
    plan = plan_with(
        OPEN, {"type": "find_max", "start": 90, "step": 30, "step_duration_s": 10, "limit": 300}, scenarios=2
    )
    steering = steering_for(plan)
    assert steering is not None
    prepared = steering.prepared_plan()
    workloads = [scenario.workload for scenario in prepared.scenarios]
    assert [w.start_rate_per_s for w in workloads] == [30.0, 60.0]
    assert all(w.stages[0].duration_s == steering.planned_length_s for w in workloads)
    assert prepared.steer == plan.steer


def test_steering_names_and_models_are_checked() -> None:
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(
            {
                "version": 1,
                "target": {"base_url": "http://127.0.0.1:9"},
                "scenarios": [
                    {"name": "a", "steps": [{"name": "get", "method": "GET", "path": "/"}], "workload": CLOSED},
                    {"name": "b", "steps": [{"name": "get", "method": "GET", "path": "/"}], "workload": OPEN},
                ],
                "steer": {
                    "type": "target_response_time",
                    "target_ms": 50,
                    "start": 5,
                    "steps": ["nope"],
                    "min": 9,
                    "max": 3,
                },
            }
        )
    where = {problem.location: problem.message for problem in caught.value.problems}
    assert "no step or group is named 'nope'" in where["steer.steps[0]"]
    assert "above max" in where["steer.min"]
    assert "mix closed and open" in where["steer.scenarios"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("line(0, 100, 1m)", (0.0, [(60.0, 100.0)])),
        ("const(5, 10s) const(5, 5s)", (5.0, [(10.0, 5.0), (5.0, 5.0)])),
        ("line(10, 20, 2s) line(50, 60, 2s)", (10.0, [(2.0, 20.0), (0.001, 50.0), (1.999, 60.0)])),
        ("step(30, 10, 10, 1s)", (30.0, [(1.0, 30.0), (0.001, 20.0), (0.999, 20.0), (0.001, 10.0), (0.999, 10.0)])),
    ],
)
def test_compact_profiles_lower_to_stages(text: str, expected: Any) -> None:
    assert lower_profile(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("line(1, 2)", "takes 3 values"),
        ("ramp(1, 2, 3s)", "not a profile segment"),
        ("const(1, 0s)", "lasts no time"),
        ("step(0, 10, 0, 1s)", "step must be above 0"),
        ("line(1, 2, 3x)", "not a duration"),
        ("const(-1, 3s)", "0 or more"),
        ("line(1, 2, 3) more", "cannot read"),
        ("step(0, 100000, 1, 1s)", "more than 2000"),
    ],
)
def test_bad_profiles_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        lower_profile(text)


def test_profiles_in_plans_are_checked_where_they_are_written() -> None:
    plan = plan_with(
        {"type": "open", "profile": "step(10, 30, 10, 5s)", "max_vus": 9}, {"type": "find_max", "start": 1, "step": 1}
    )
    assert [stage.rate_per_s for stage in plan.scenarios[0].workload.stages] == [10, 20, 20, 30, 30]
    with pytest.raises(PlanInvalid) as caught:
        plan_with({"type": "closed", "profile": "line(0, 2.5, 5s)"}, {"type": "find_max", "start": 1, "step": 1})
    [problem] = caught.value.problems
    assert problem.location == "scenarios[0].workload.profile" and "whole number" in problem.message


@pytest.mark.parametrize(
    ("text", "metric", "value"),
    [
        ("p95 < 200ms", "p95", 200.0),
        ("P99.9<=1.5s", "p99.9", 1500.0),
        ("mean < 250us", "mean", 0.25),
        ("errors < 1%", "errors", 1.0),
        ("errors.status_503 < 0.5%", "errors.status_503", 0.5),
        ("rps >= 100/s", "rps", 100.0),
    ],
)
def test_conditions_parse_to_canonical_units(text: str, metric: str, value: float) -> None:
    condition = parse_condition(text)
    assert (condition.metric, condition.value) == (metric, value)


@pytest.mark.parametrize(
    "text", ["p95 << 2", "p101 < 2ms", "errors < 120%", "latency < 3ms", "requests > 5/s", "p95 < 2 parsecs"]
)
def test_bad_conditions_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_condition(text)


def test_capacity_arithmetic_and_its_refusals() -> None:
    block = capacity_block({"max_rps": 450_000.0}, CapacityQuestion(per_user_rate=43))
    assert block["users_supported"] == 10_465  # the gateway report's 450,000 / 43
    block = capacity_block({"max_rps": 1000.0}, CapacityQuestion(peak_rps=4000, headroom_percent=0))
    assert block["instances_needed"] == 4
    assert "instances_needed" not in capacity_block({"max_rps": None}, CapacityQuestion(peak_rps=4000))
    for bad in (
        {"per_user_rate": 0},
        {"headroom_percent": 100},
        {"peak_users": 5},
        {"peak_users": 5, "per_user_rate": 1, "peak_rps": 3},
    ):
        with pytest.raises(InvalidInput):
            CapacityQuestion(**bad)
