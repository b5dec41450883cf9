"""What a steering moves and reads: the steered scenarios and their model (a VU count, an
arrival rate, or the pace of a fixed population), the handle that moves their level, and how many samples a percentile needs
before it is worth judging.
"""

from __future__ import annotations

import math
from typing import Protocol

from horde.plan import ClosedModel, ClosedStage, OpenModel, OpenStage, Plan
from horde.plan.overrides import spread_rate, spread_vus


#: A percentile is judged only over enough samples that this many lie beyond it: with fewer,
#: "the p95" of 38 requests is the second-largest value, one slow request moves it.
MIN_TAIL_SAMPLES = 10


class LevelSetter(Protocol):
    """What a steering needs of a run (``horde.engine.run.Run`` has it)."""

    def set_level(
        self,
        *,
        vus: int | None = ...,
        rate_per_s: float | None = ...,
        scenarios: list[str] | None = ...,
        ramp_s: float = ...,
    ) -> dict[str, float]: ...

    def set_pace(self, factor: float, *, scenarios: list[str] | None = ...) -> dict[str, float]: ...


def steered_scenarios(plan: Plan) -> list[str]:
    """The names of the scenarios whose level the plan's steering moves."""
    assert plan.steer is not None
    return list(plan.steer.scenarios) or [scenario.name for scenario in plan.scenarios]


def steered_model(plan: Plan) -> str:
    """``closed`` (the level is a VU count) or ``open`` (an arrival rate)."""
    names = steered_scenarios(plan)
    return next(s.workload.type for s in plan.scenarios if s.name in names)


def samples_needed(percentile: float) -> int:
    """How many latencies a percentile needs to be judged (:data:`MIN_TAIL_SAMPLES` beyond it).

    >>> samples_needed(95), samples_needed(99), samples_needed(50), samples_needed(100)
    (200, 1000, 20, 1000)
    """
    tail = max(1.0 - percentile / 100.0, 0.01)  # the max (p100) is judged as p99 would be
    return math.ceil(MIN_TAIL_SAMPLES / tail - 1e-9)


def move(run: LevelSetter, model: str, scenarios: list[str], level: float) -> float:
    """Moves the steered scenarios to ``level`` (whole VUs, at least one, for a closed model; a
    factor on their think times and pacing for ``pace``); returns the level set."""
    if model == "pace":
        run.set_pace(level, scenarios=scenarios)
    elif model == "closed":
        level = float(max(1, round(level)))
        run.set_level(vus=int(level), scenarios=scenarios)
    else:
        run.set_level(rate_per_s=level, scenarios=scenarios)
    return level


def held_level_plan(plan: Plan, start: float, length_s: float) -> Plan:
    """The plan the engine runs for a steering that moves VUs or a rate: each steered scenario
    holds its share (by ``weight``) of ``start`` for ``length_s``, and the steering moves it
    while the run goes. Other scenarios keep their own stages (a background load, such as
    devices while users are steered)."""
    names = steered_scenarios(plan)
    chosen = [s for s in plan.scenarios if s.name in names]
    weights = [s.weight for s in chosen]
    if steered_model(plan) == "closed":
        levels: list[float] = [float(v) for v in spread_vus(max(1, round(start)), weights)]
    else:
        levels = spread_rate(start, weights)
    share = {scenario.name: level for scenario, level in zip(chosen, levels)}
    scenarios = []
    for scenario in plan.scenarios:
        if scenario.name not in share:
            scenarios.append(scenario)
            continue
        level = share[scenario.name]
        workload: ClosedModel | OpenModel
        if isinstance(scenario.workload, ClosedModel):
            workload = ClosedModel(start_vus=int(level), stages=[ClosedStage(duration_s=length_s, vus=int(level))])
        else:
            workload = OpenModel(
                start_rate_per_s=level,
                stages=[OpenStage(duration_s=length_s, rate_per_s=level)],
                max_vus=scenario.workload.max_vus,
                arrivals=scenario.workload.arrivals,
            )
        scenarios.append(scenario.model_copy(update={"workload": workload}))
    return plan.model_copy(update={"scenarios": scenarios})
