"""Running a plan: the only module that drives the native engine.

A run is a handle: start it, iterate its snapshots (one a second), stop it when you like::

    with Run.start(plan) as run:
        for snapshot in run:
            print(snapshot["second"], sum(step["requests"] for step in snapshot["steps"]))

Iteration ends after the final snapshot. Leaving the ``with`` block early stops the run
gracefully (no new iterations, in-flight requests get the plan's ``graceful_stop_s``).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any

from horde import _engine
from horde.errors import EngineFault, PlanInvalid, Problem
from horde.plan import Plan, plan_to_json

#: How long one wait for a snapshot may block; short, so Ctrl-C is handled promptly.
POLL_INTERVAL_S = 0.2

Snapshot = dict[str, Any]


def engine_problems(plan_json: str) -> list[Problem]:
    """The engine's own check of a plan (the second line of defence after pydantic)."""
    return [Problem(location=path, message=message) for path, message in _engine.validate_plan(plan_json)]


def checked_plan_json(plan: Plan) -> str:
    """The plan's JSON once the engine has accepted it too; PlanInvalid otherwise."""
    plan_json = plan_to_json(plan)
    problems = engine_problems(plan_json)
    if problems:
        raise PlanInvalid(problems, source="the engine's check")
    return plan_json


class Run:
    """A plan running in the engine."""

    def __init__(self, handle: Any, plan_json: str) -> None:
        self._handle = handle
        self.plan_json = plan_json
        self.stop_requested = False

    @classmethod
    def start(cls, plan: Plan, *, workers: int | None = None) -> Run:
        """Checks the plan on the engine's side too, then starts it; returns at once."""
        plan_json = checked_plan_json(plan)
        try:
            handle = _engine.start_run(plan_json, workers)
        except ValueError as error:
            raise PlanInvalid([Problem(location="", message=str(error))]) from error
        except RuntimeError as error:
            raise EngineFault(f"the engine could not start: {error}") from error
        return cls(handle, plan_json)

    @property
    def planned_duration_s(self) -> float:
        """When the stages end, in seconds from the start (the grace period comes after)."""
        return float(self._handle.planned_duration_s)

    @property
    def finished(self) -> bool:
        return bool(self._handle.finished)

    def poll(self, timeout_s: float = POLL_INTERVAL_S) -> Snapshot | None:
        """The next snapshot, or None if none came within ``timeout_s``."""
        snapshot: Snapshot | None = self._handle.poll(timeout_s)
        return snapshot

    def stop(self) -> None:
        """Stops new iterations; in-flight requests get the plan's grace period."""
        self.stop_requested = True
        self._handle.stop()

    def __iter__(self) -> Iterator[Snapshot]:
        while not self.finished:
            snapshot = self.poll()
            if snapshot is not None:
                yield snapshot

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self.finished:
            self.stop()
