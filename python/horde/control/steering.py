"""Load that steers itself: find-max (the knee, in ``horde.control.find_max``) and target response
time (the highest level that holds a latency percentile at T, in
``horde.control.target_response_time``): which one a plan asks for, and the plan the engine runs
for it.

A steering reads each snapshot as it arrives and moves the run's level through
:meth:`horde.engine.run.Run.set_level`: a VU count for closed scenarios, an arrival rate for open ones,
spread over the steered scenarios by their ``weight``. It never opens a socket; everything it
decides comes from the same per-second snapshots the store keeps, so its answer can be checked
against the stored run.
"""

from __future__ import annotations

import math

from horde.control.find_max import MAX_SEARCH_STEPS, MAX_STEPS, MAX_STRETCH, REFINE_SHARE, SIGHT_MAX_S, FindMaxSteering, first_level
from horde.control.target_response_time import TargetResponseTimeSteering, initial_level
from horde.plan import ClosedModel, ClosedStage, OpenModel, OpenStage, Plan
from horde.plan.control import FindMax, TargetResponseTime
from horde.plan.overrides import spread_rate, spread_vus
from horde.control.steered_level import LevelSetter, steered_model, steered_scenarios

__all__ = ["FindMaxSteering", "LevelSetter", "Steering", "TargetResponseTimeSteering", "planned_length_s",
           "prepare_plan", "steered_model", "steered_scenarios", "steering_for"]


def planned_length_s(plan: Plan) -> float:
    """How long the steering may run at most: the engine's stages last this long."""
    steer = plan.steer
    assert steer is not None
    if isinstance(steer, TargetResponseTime):
        return steer.duration_s
    # Each step may stretch to make up for starved seconds, and a recovery lasts at most two steps.
    step_s = math.ceil(steer.step_length_s) * (MAX_STRETCH + 2)
    if steer.step is None:
        return SIGHT_MAX_S + MAX_SEARCH_STEPS * step_s
    climb = MAX_STEPS
    if steer.limit is not None:
        start = steer.start if steer.start is not None else steer.step
        climb = min(MAX_STEPS, math.floor((steer.limit - start) / steer.step + 1e-9) + 1)
    refine = (round(1 / REFINE_SHARE) + 2) if steer.refine else 0  # recovery + finer steps
    return float((climb + refine) * step_s)


def prepare_plan(plan: Plan) -> Plan:
    """The plan the engine runs: each steered scenario holds its share of the starting level
    for as long as the steering may need; the steering then moves it while the run goes. Other
    scenarios keep their own stages (a background load, such as devices while users are
    steered)."""

    steer = plan.steer
    assert steer is not None
    names = steered_scenarios(plan)
    length = planned_length_s(plan)
    chosen = [s for s in plan.scenarios if s.name in names]
    weights = [s.weight for s in chosen]
    scenarios = []
    if isinstance(steer, TargetResponseTime) and steer.by == "pace":
        return _paced_plan(plan, names, length)
    start = initial_level(plan) if isinstance(steer, TargetResponseTime) else first_level(plan)
    if steered_model(plan) == "closed":
        levels: list[float] = [float(v) for v in spread_vus(max(1, round(start)), weights)]
    else:
        levels = spread_rate(start, weights)
    share = {scenario.name: level for scenario, level in zip(chosen, levels)}
    for scenario in plan.scenarios:
        if scenario.name not in share:
            scenarios.append(scenario)
            continue
        level = share[scenario.name]
        workload: ClosedModel | OpenModel
        if isinstance(scenario.workload, ClosedModel):
            workload = ClosedModel(start_vus=int(level), stages=[ClosedStage(duration_s=length, vus=int(level))])
        else:
            workload = OpenModel(
                start_rate_per_s=level,
                stages=[OpenStage(duration_s=length, rate_per_s=level)],
                max_vus=scenario.workload.max_vus,
                arrivals=scenario.workload.arrivals,
            )
        scenarios.append(scenario.model_copy(update={"workload": workload}))
    return plan.model_copy(update={"scenarios": scenarios})


def _paced_plan(plan: Plan, names: list[str], length: float) -> Plan:
    """Steering by pace: each steered scenario keeps its own stages (its population, ramp
    included), its last VU count held until the steering's length ends; the steering moves
    their pace."""
    scenarios = []
    for scenario in plan.scenarios:
        workload = scenario.workload
        if scenario.name not in names or not isinstance(workload, ClosedModel):
            scenarios.append(scenario)
            continue
        planned = sum(stage.duration_s for stage in workload.stages)
        stages = list(workload.stages)
        if planned < length:
            stages.append(ClosedStage(duration_s=length - planned, vus=stages[-1].vus))
        scenarios.append(scenario.model_copy(update={"workload": workload.model_copy(update={"stages": stages})}))
    return plan.model_copy(update={"scenarios": scenarios})


Steering = FindMaxSteering | TargetResponseTimeSteering


def steering_for(plan: Plan) -> Steering | None:
    if plan.steer is None:
        return None
    if isinstance(plan.steer, FindMax):
        return FindMaxSteering(plan)
    return TargetResponseTimeSteering(plan)
