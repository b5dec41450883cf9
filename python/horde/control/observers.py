"""The run loop's observers: each takes every snapshot of a run in turn, may stop the run, may add
to what the live view and the exporter are shown, and at the end adds its block to the summary.

The conductor's loop (:func:`horde.control.conductor.conduct`) is a loop over these, in this
order: the store writer (secrets redacted first), the control queue (re-targets and stops asked
through the store), thresholds, autostop, the steering or the capacity question, the monitors,
and the cluster's spread. What the loop shares with them is a :class:`RunState`; what they fold
the summary from once the run has ended is an :class:`Ending`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Union, cast

from horde.cluster.coordinator import ClusterRun
from horde.control.autostop import AutostopWatch, Firing
from horde.control.capacity import CapacityQuestion, capacity_block
from horde.control.steering import Steering
from horde.control.thresholds import Verdict, judge, verdicts_to_json
from horde.control.watching import RunMonitors
from horde.engine.run import Run
from horde.engine.snapshot import Snapshot
from horde.errors import HordeError
from horde.plan import Plan
from horde.plan.redaction import redact_values
from horde.results.summary import SummaryBlocks
from horde.results.summary_blocks import CapacityBlock
from horde.store import MonitorSample, Store

#: A run on this process's engine, or over a cluster's generators (the same surface).
EngineRun = Union[Run, ClusterRun]


class Sink(Protocol):
    """What the conductor tells whoever watches the run: the live view, the Prometheus exporter, a
    test. (The store is written by an observer of its own.)"""

    def update(self, snapshot: Snapshot) -> None: ...
    def note_stopping(self) -> None: ...
    def note(self, message: str) -> None: ...


class Sinks:
    """Several sinks as one: the terminal's live view and the Prometheus exporter"""

    def __init__(self, *sinks: Sink) -> None:
        self.sinks = sinks

    def update(self, snapshot: Snapshot) -> None:
        for sink in self.sinks:
            sink.update(snapshot)

    def note_stopping(self) -> None:
        for sink in self.sinks:
            sink.note_stopping()

    def note(self, message: str) -> None:
        for sink in self.sinks:
            sink.note(message)


class QuietSink:
    """A sink that shows nothing (a run conducted without a view)."""

    def update(self, snapshot: Snapshot) -> None:
        pass

    def note_stopping(self) -> None:
        pass

    def note(self, message: str) -> None:
        pass


@dataclass
class RunState:
    """What the loop and its observers share while the run goes."""

    engine_run: EngineRun
    store: Store
    run_id: str
    sink: Sink
    #: The generator's CPU at which it counts as saturated (the workers' share of the machine).
    cpu_limit_percent: float
    #: The autostop condition that ended the run (a latency or error rule, or a monitor's).
    firing: Firing | None = None
    #: A stop asked through the store (the dashboard): the run ends as Ctrl-C ends it.
    stop_asked: bool = False
    #: The steering had its answer and stopped the run.
    stopped_by_steering: bool = False

    def fire(self, firing: Firing) -> None:
        """Ends the run for an autostop condition (the first one only)."""
        if self.firing is None:
            self.firing = firing
            self.sink.note(firing.message)
            self.engine_run.stop()


@dataclass
class Ending:
    """What the observers fold the summary from once the run has ended."""

    status: str
    #: The run's seconds as the store holds them (what ``horde show`` reads again).
    stored: Sequence[Snapshot]
    monitor_samples: dict[str, list[MonitorSample]]
    firing: Firing | None
    stopped_by_steering: bool


class RunObserver(Protocol):
    """One stage of the run loop (see the module)."""

    def poll(self, state: RunState) -> None:
        """Each pass of the loop, with or without a snapshot."""

    def observe(self, snapshot: Snapshot, state: RunState) -> None:
        """Each snapshot, in the loop's order of observers."""

    def shown(self, snapshot: Snapshot) -> Snapshot:
        """The snapshot the sinks get, with what this observer adds to it."""

    def blocks(self, summary: Mapping[str, Any], ending: Ending) -> SummaryBlocks:
        """The summary's blocks this observer owns (added in the loop's order)."""


class Observer:
    """An observer that does nothing at any stage: the observers below override what they do."""

    def poll(self, state: RunState) -> None:
        pass

    def observe(self, snapshot: Snapshot, state: RunState) -> None:
        pass

    def shown(self, snapshot: Snapshot) -> Snapshot:
        return snapshot

    def blocks(self, summary: Mapping[str, Any], ending: Ending) -> SummaryBlocks:
        return {}


class StoreWriter(Observer):
    """Stores each snapshot, the plan's secret values first replaced in its error details."""

    def __init__(self, secrets: frozenset[str]) -> None:
        self.secrets = secrets

    def observe(self, snapshot: Snapshot, state: RunState) -> None:
        redact_error_details(snapshot, self.secrets)
        state.store.add_snapshot(state.run_id, snapshot)


def redact_error_details(snapshot: Snapshot, secrets: frozenset[str]) -> None:
    """The error details' messages with the plan's secret values replaced (its feeders' too),
    before the store or a sink sees them: a message quotes what the target answered (a body
    prefix, a failed check's finding, a SQL error naming a parameter's value), which may hold a
    credential the plan sent. The checks' words are the plan's, a parameter's value among them."""
    if not secrets:
        return
    for step in snapshot["steps"]:
        if "error_details" in step:
            step["error_details"] = redact_values(step["error_details"], secrets)
        if "checks" in step:
            step["checks"] = redact_values(step["checks"], secrets)


class ControlQueue(Observer):
    """Applies the re-targets (and stops) asked from elsewhere (``horde retarget``, the
    dashboard), once a second, while the run is not stopping; a steered run refuses
    re-targets (it moves its level itself)."""

    def __init__(self, *, steered: bool) -> None:
        self.steered = steered

    def observe(self, snapshot: Snapshot, state: RunState) -> None:
        if state.engine_run.stop_requested:
            return
        for request_id, request in state.store.pending_controls(state.run_id):
            state.store.answer_control(request_id, self._answer(request, state))

    def _answer(self, request: dict[str, Any], state: RunState) -> str:
        engine_run, sink = state.engine_run, state.sink
        if request.get("stop"):
            state.stop_asked = True
            engine_run.stop()
            sink.note_stopping()
            answer = "applied: stopping (no new iterations; in-flight requests finish)"
        elif self.steered:
            answer = "refused: this run's load is steered (find-max or target response time); it moves the level itself"
        else:
            try:
                levels = engine_run.set_level(
                    vus=request.get("vus"),
                    rate_per_s=request.get("rate_per_s"),
                    scenarios=request.get("scenarios"),
                    ramp_s=float(request.get("ramp_s", 0.0)),
                )
            except HordeError as error:
                answer = f"refused: {error.message}"
            else:
                answer = "applied: " + ", ".join(f"{name} → {level:g}" for name, level in levels.items())
        sink.note(f"re-target: {answer}")
        return answer


class Thresholds(Observer):
    """The plan's thresholds, judged at the end on the stored seconds (and monitor samples)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.verdicts: list[Verdict] = []

    def blocks(self, summary: Mapping[str, Any], ending: Ending) -> SummaryBlocks:
        if not self.plan.thresholds:
            return {}
        self.verdicts = judge(self.plan.thresholds, ending.stored, ending.monitor_samples)
        return {"thresholds": verdicts_to_json(self.verdicts)}


class Autostop(Observer):
    """The plan's autostop rules on each second; the summary's ``autostop`` block says which
    condition ended the run (a monitor's included)."""

    def __init__(self, plan: Plan, cpu_limit_percent: float) -> None:
        self.watch = AutostopWatch(plan.autostop, cpu_limit_percent=cpu_limit_percent)

    def observe(self, snapshot: Snapshot, state: RunState) -> None:
        if state.engine_run.stop_requested or state.firing is not None:
            return
        firing = self.watch.observe(snapshot)
        if firing is not None:
            state.fire(firing)

    def blocks(self, summary: Mapping[str, Any], ending: Ending) -> SummaryBlocks:
        return {"autostop": ending.firing.to_json()} if ending.firing is not None else {}


class Capacity(Observer):
    """The steering (find-max or target response time) moving the level on each second, and the
    summary's ``capacity`` block: its answer, or, on a plain run asked a capacity question, the
    run's own throughput as the figure."""

    def __init__(self, steering: Steering | None, question: CapacityQuestion | None) -> None:
        self.steering = steering
        self.question = question

    def observe(self, snapshot: Snapshot, state: RunState) -> None:
        steering = self.steering
        if steering is None or state.engine_run.stop_requested or state.firing is not None:
            return
        steering.observe(snapshot, state.engine_run, cpu_limit_percent=state.cpu_limit_percent)
        if steering.done:
            state.stopped_by_steering = True
            state.sink.note("steering done: stopping the run")
            state.engine_run.stop()

    def shown(self, snapshot: Snapshot) -> Snapshot:
        if self.steering is None:
            return snapshot
        # The sinks show where the steering stands (phase, step, level, last verdict).
        shown = snapshot.copy()
        shown["steering"] = self.steering.status()
        return shown

    def blocks(self, summary: Mapping[str, Any], ending: Ending) -> SummaryBlocks:
        if self.steering is not None:
            found = self.steering.result()
            found["stopped_by_steering"] = ending.stopped_by_steering
            return {"capacity": capacity_block(found, self.question)}
        if self.question is None or not self.question.asks_anything:
            return {}
        messages = summary.get("messages") or {}
        max_messages = float(messages.get("sent_per_s", 0.0)) + float(messages.get("received_per_s", 0.0))
        return {
            "capacity": capacity_block(
                {
                    "method": "measured_run",
                    "max_rps": summary["rps"],
                    "max_messages_per_s": round(max_messages, 3) or None,
                    "latency_ms_at_max": summary["latency_ms"]["p95"],
                    "percentile": 95,
                    "saturation_reason": None,
                },
                self.question,
            )
        }


class Monitors(Observer):
    """The run's monitors: their samples taken each pass (stored, diagnosed, their autostop
    conditions judged), their latest figures shown, and at the end the ``monitors`` block and,
    for a steered run, what broke first beside the capacity answer."""

    def __init__(self, monitors: RunMonitors, *, steered: bool) -> None:
        self.monitors = monitors
        self.steered = steered

    def poll(self, state: RunState) -> None:
        firing = self.monitors.take(state.store, state.run_id, state.sink)
        if firing is not None and not state.engine_run.stop_requested:
            state.fire(firing)

    def shown(self, snapshot: Snapshot) -> Snapshot:
        return self.monitors.annotate(snapshot)

    def blocks(self, summary: Mapping[str, Any], ending: Ending) -> SummaryBlocks:
        block = self.monitors.block(ending.monitor_samples)
        if block is None:
            return {}
        blocks: SummaryBlocks = {"monitors": block}
        if self.steered and "capacity" in summary:
            # The monitors as evidence beside the knee: which limit was crossed first, and when.
            # The summary holds the capacity block the Capacity observer folded in before this one.
            capacity = cast(CapacityBlock, dict(summary["capacity"]))
            capacity["what_broke_first"] = self.monitors.what_broke_first(
                capacity, ending.stored, ending.monitor_samples, block
            )
            blocks["capacity"] = capacity
        return blocks


class Spread(Observer):
    """A cluster run's ``cluster`` block: how the load was spread over its generators."""

    def __init__(self, engine_run: EngineRun) -> None:
        self.engine_run = engine_run

    def blocks(self, summary: Mapping[str, Any], ending: Ending) -> SummaryBlocks:
        spread = self.engine_run.spread_block()
        return {"cluster": spread} if spread is not None else {}
