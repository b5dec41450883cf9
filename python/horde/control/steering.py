"""Load that steers itself: find-max (the knee, in ``horde.control.find_max``) and target response
time (the highest level that holds a latency percentile at T, in
``horde.control.target_response_time``): the surface both offer the run loop, and which one a
plan asks for.

A steering reads each snapshot as it arrives and moves the run's level through
:meth:`horde.engine.run.Run.set_level`: a VU count for closed scenarios, an arrival rate for open ones,
spread over the steered scenarios by their ``weight`` (or, by pace, through
:meth:`~horde.engine.run.Run.set_pace`). It never opens a socket; everything it decides comes
from the same per-second snapshots the store keeps, so its answer can be checked against the
stored run. Each steering owns what the engine starts with: its planned length, its starting
level and the plan prepared to hold it.
"""

from __future__ import annotations

from typing import Any, Protocol

from horde.control.find_max import FindMaxSteering
from horde.control.steered_level import LevelSetter
from horde.control.target_response_time import TargetResponseTimeSteering
from horde.engine.snapshot import Snapshot
from horde.plan import Plan
from horde.plan.control import FindMax
from horde.results.summary_blocks import CapacityBlock

__all__ = ["FindMaxSteering", "LevelSetter", "Steering", "TargetResponseTimeSteering", "steering_for"]


class Steering(Protocol):
    """What the run loop asks of a steering."""

    @property
    def planned_length_s(self) -> float:
        """How long the run may last at most: the prepared plan's stages last this long."""

    @property
    def initial_level(self) -> float: ...

    @property
    def done(self) -> bool: ...

    def prepared_plan(self) -> Plan: ...

    def observe(self, snapshot: Snapshot, run: LevelSetter, *, cpu_limit_percent: float) -> None: ...

    def status(self) -> dict[str, Any]: ...

    def result(self) -> CapacityBlock: ...


def steering_for(plan: Plan) -> Steering | None:
    """The steering the plan's ``steer`` block asks for; None for a plan without one."""
    if plan.steer is None:
        return None
    if isinstance(plan.steer, FindMax):
        return FindMaxSteering(plan)
    return TargetResponseTimeSteering(plan)
