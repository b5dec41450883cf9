"""Load that steers itself: find-max (a stepped ramp that stops at saturation and reports the
knee) and target response time (hold a latency percentile at T by moving the level).

A steering reads each snapshot as it arrives and moves the run's level through
:meth:`horde.run.Run.set_load`: a VU count for closed scenarios, an arrival rate for open ones,
spread over the steered scenarios by their ``weight``. It never opens a socket; everything it
decides comes from the same per-second snapshots the store keeps, so its answer can be checked
against the stored run.

Find-max judges each step on the seconds after it settled (the first quarter of the step is
skipped: queues and connection pools move to the new level then). A step is saturated when:

- errors pass ``error_limit_percent`` (``errors``);
- the latency percentile passes ``latency_limit_ms``, if given (``latency_limit``);
- the generator itself was saturated for most of the step (``generator_saturated``): the knee
  would be the generator's, not the target's, so the search stops there;
- an open model dropped more than 1 % of its arrivals (``dropped_arrivals``): every VU was
  busy, requests pile up in the target;
- throughput stopped following the load while latency rose (``throughput_flat``): successful
  responses per second under 90 % of what the level should give (the offered rate, or for VUs
  the previous step's throughput scaled by the VU count) with the percentile 10 % above the
  first step's;
- latency rose sharply (``latency_rising``): the percentile at 3x the first step's; in an open
  model just past capacity a queue grows in the target while throughput still looks right.

Target response time moves the level by the square root of T / latency over a 2 s window
(bounded: up by at most 25 % far below T and 15 % near it, down by at most 20 %), leaves it
alone within 5 % of T, and ignores seconds where the generator itself was late. A move up that
overshoots T becomes a ceiling: later moves up stop half way to it, so a target whose latency
is a cliff (flat, then a queue without bound, as a deterministic server at capacity) is closed
in on by bisection instead of being jumped over again and again; after an overshoot it goes
back a little under the last good level and waits for the queue to drain before judging again.

After the first saturated step, find-max goes back to half the last good level until latency
is back near the first step's (a queue in the target must drain, or it would spoil the next
step), then climbs again from the last good level in quarter steps. The knee is the last good
step of that finer climb: ``max_rps`` is its successful responses per second.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from horde.measure import Figures, measure
from horde.plan import ClosedModel, ClosedStage, OpenModel, OpenStage, Plan
from horde.plan_control import FindMax, TargetResponseTime
from horde.summary import is_generator_saturated

Snapshot = dict[str, Any]

#: Find-max: the share of a step skipped before it is judged.
SETTLE_SHARE = 0.25
#: Find-max: throughput under this share of what the level should give is "not following".
FLAT_SHARE = 0.9
#: Find-max: latency this much above the first step's counts as rising (with flat throughput;
#: by Little's law a closed model's latency must rise once its throughput stops following).
RISE_WITH_FLAT = 1.1
#: Find-max: latency this many times the first step's is saturation whatever the throughput.
RISE_ALONE = 3.0
#: Find-max: dropped arrivals above this share of arrivals (percent) is saturation.
DROPPED_LIMIT_PERCENT = 1.0
#: Find-max: the most steps a climb may take when the plan sets no limit.
MAX_STEPS = 200
#: Find-max: the refining climb's step, as a share of the plan's step.
REFINE_SHARE = 0.25

#: Target response time: the window each decision measures, in seconds; it restarts at each
#: move, so a decision always sees whole seconds at the current level.
TRT_WINDOW_S = 2
#: Target response time: the most a decision may raise or lower the level, as a factor. Up is
#: slower than down, and slower still near the target: overshooting into overload builds queues
#: that take long to drain. Far below the target (latency under two thirds of it) latency says little
#: about the distance to saturation, so the level climbs at the faster pace.
TRT_MAX_UP_FAR = 1.25
TRT_MAX_UP_NEAR = 1.15
TRT_MAX_DOWN = 0.8
#: Target response time: within this relative distance of the target, the level is left alone.
TRT_DEADBAND = 0.05
#: Target response time: a second "holds" the target when its window is within this share of T.
TRT_HELD_SHARE = 0.10


class LoadSetter(Protocol):
    """What a steering needs of a run (``horde.run.Run`` has it)."""

    def set_load(self, *, vus: int | None = ..., rate_per_s: float | None = ...,
                 scenarios: list[str] | None = ..., ramp_s: float = ...) -> dict[str, float]: ...


def steered_scenarios(plan: Plan) -> list[str]:
    """The names of the scenarios whose level the plan's steering moves."""
    assert plan.steer is not None
    return list(plan.steer.scenarios) or [scenario.name for scenario in plan.scenarios]


def steered_model(plan: Plan) -> str:
    """``closed`` (the level is a VU count) or ``open`` (an arrival rate)."""
    names = steered_scenarios(plan)
    return next(s.workload.type for s in plan.scenarios if s.name in names)


def planned_length_s(plan: Plan) -> float:
    """How long the steering may run at most: the engine's stages last this long."""
    steer = plan.steer
    assert steer is not None
    if isinstance(steer, TargetResponseTime):
        return steer.duration_s
    climb = MAX_STEPS
    if steer.limit is not None:
        climb = min(MAX_STEPS, math.floor((steer.limit - steer.start) / steer.step + 1e-9) + 1)
    refine = (round(1 / REFINE_SHARE) + 2) if steer.refine else 0  # recovery + finer steps
    return (climb + refine) * steer.step_duration_s


def prepare_plan(plan: Plan) -> Plan:
    """The plan the engine runs: each steered scenario holds its share of the starting level
    for as long as the steering may need; the steering then moves it while the run goes. Other
    scenarios keep their own stages (a background load, such as devices while users are
    steered)."""
    from horde.overrides import spread_rate, spread_vus

    steer = plan.steer
    assert steer is not None
    names = steered_scenarios(plan)
    length = planned_length_s(plan)
    chosen = [s for s in plan.scenarios if s.name in names]
    weights = [s.weight for s in chosen]
    scenarios = []
    if steered_model(plan) == "closed":
        levels: list[float] = [float(v) for v in spread_vus(max(1, round(steer.start)), weights)]
    else:
        levels = spread_rate(steer.start, weights)
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


@dataclass
class StepResult:
    """One find-max step, judged on its settled seconds."""

    index: int
    level: float
    seconds: int
    rps: float
    ok_rps: float
    latency_ms: float | None
    error_percent: float
    dropped_percent: float
    saturated_reason: str | None = None
    phase: str = "climb"


@dataclass
class _Phase:
    name: str  # "climb", "recover", "refine", "done"
    level: float
    started: int  # the first snapshot second of this level
    seconds: list[Snapshot] = field(default_factory=list)


class FindMaxSteering:
    """Climbs in steps until saturation, refines, and reports the knee."""

    def __init__(self, plan: Plan) -> None:
        assert isinstance(plan.steer, FindMax)
        self.steer: FindMax = plan.steer
        self.model = steered_model(plan)
        self.scenarios = steered_scenarios(plan)
        self.steps: list[StepResult] = []
        self.baseline_ms: float | None = None
        self.first_saturated: StepResult | None = None
        self.done_reason: str | None = None
        self.notes: list[str] = []
        self._phase = _Phase("climb", self.steer.start, started=1)
        self._refine_step = self.steer.step * REFINE_SHARE
        self._refine_left = 0
        self._last_good: StepResult | None = None

    @property
    def done(self) -> bool:
        return self._phase.name == "done"

    def _set(self, run: LoadSetter, level: float, phase: str, second: int) -> None:
        level = float(max(1, round(level))) if self.model == "closed" else level
        if self.model == "closed":
            run.set_load(vus=int(level), scenarios=self.scenarios)
        else:
            run.set_load(rate_per_s=level, scenarios=self.scenarios)
        self._phase = _Phase(phase, level, started=second + 1)

    def observe(self, snapshot: Snapshot, run: LoadSetter, *, cpu_limit_percent: float) -> None:
        """Takes one snapshot; moves the level when a step ends."""
        if snapshot["final"] or self.done:
            return
        phase = self._phase
        if snapshot["second"] < phase.started:
            return  # a second that began before the level moved
        phase.seconds.append(snapshot)
        second = int(snapshot["second"])
        if phase.name == "recover":
            figures = measure(phase.seconds[-1:])
            latency = figures.latency_ms(self.steer.percentile)
            calm = latency is not None and self.baseline_ms is not None and latency <= 1.5 * self.baseline_ms
            if calm or len(phase.seconds) >= 2 * self.steer.step_duration_s:
                self._next_refine(run, second)
            return
        if len(phase.seconds) < self.steer.step_duration_s:
            return
        result = self._judge(phase, cpu_limit_percent)
        self.steps.append(result)
        if result.saturated_reason is None:
            self._last_good = result
            if self.baseline_ms is None:
                self.baseline_ms = result.latency_ms
            self._after_good(run, result, second)
        else:
            self._after_saturated(run, result, second)

    def _judge(self, phase: _Phase, cpu_limit_percent: float) -> StepResult:
        skip = max(1, math.ceil(len(phase.seconds) * SETTLE_SHARE))
        settled = phase.seconds[skip:]
        figures = measure(settled)
        latency = figures.latency_ms(self.steer.percentile)
        result = StepResult(
            index=len(self.steps), level=phase.level, seconds=len(settled), rps=figures.rps, ok_rps=figures.ok_rps,
            latency_ms=latency, error_percent=figures.error_percent(), dropped_percent=figures.dropped_percent,
            phase=phase.name,
        )
        result.saturated_reason = self._saturation(result, figures, settled, cpu_limit_percent)
        return result

    def _saturation(self, result: StepResult, figures: Figures, settled: list[Snapshot], cpu_limit_percent: float) -> str | None:
        steer = self.steer
        if figures.requests == 0:
            return "no_responses"
        if result.error_percent > steer.error_limit_percent:
            return "errors"
        if steer.latency_limit_ms is not None and result.latency_ms is not None and result.latency_ms > steer.latency_limit_ms:
            return "latency_limit"
        if sum(is_generator_saturated(s, cpu_limit_percent) for s in settled) * 2 > len(settled):
            return "generator_saturated"
        if self.model == "open" and result.dropped_percent > DROPPED_LIMIT_PERCENT:
            return "dropped_arrivals"
        baseline = self.baseline_ms
        if baseline is None or result.latency_ms is None or baseline <= 0:
            return None
        expected = result.level if self.model == "open" else self._closed_expectation(result.level)
        if expected is not None and result.ok_rps < FLAT_SHARE * expected and result.latency_ms > RISE_WITH_FLAT * baseline:
            return "throughput_flat"
        if result.latency_ms > RISE_ALONE * baseline:
            return "latency_rising"
        return None

    def _closed_expectation(self, level: float) -> float | None:
        good = self._last_good
        if good is None or good.level <= 0:
            return None
        return good.ok_rps * level / good.level

    def _after_good(self, run: LoadSetter, result: StepResult, second: int) -> None:
        steer = self.steer
        if self._phase.name == "refine":
            self._refine_left -= 1
            if self._refine_left <= 0:
                self._finish("refined")
                return
            self._set(run, result.level + self._refine_step, "refine", second)
            return
        following = result.level + steer.step
        if steer.limit is not None and following > steer.limit + 1e-9:
            self._finish("limit_reached")
            return
        if len(self.steps) >= MAX_STEPS:
            self._finish("step_budget_spent")
            return
        self._set(run, following, "climb", second)

    def _after_saturated(self, run: LoadSetter, result: StepResult, second: int) -> None:
        if self.first_saturated is None:
            self.first_saturated = result
        if result.saturated_reason in ("generator_saturated", "no_responses"):
            self._finish(result.saturated_reason)
            return
        good = self._last_good
        refinable = self.steer.refine and self._phase.name == "climb" and good is not None
        if self.model == "closed":
            refinable = refinable and self._refine_step >= 1
        if not refinable or good is None:
            self._finish("saturated")
            return
        # Half the last good level until the target has drained what the saturated step queued.
        self._refine_left = round(1 / REFINE_SHARE) - 1
        self._set(run, max(good.level / 2, 1.0 if self.model == "closed" else good.level / 2), "recover", second)

    def _next_refine(self, run: LoadSetter, second: int) -> None:
        assert self._last_good is not None
        self._set(run, self._last_good.level + self._refine_step, "refine", second)

    def _finish(self, reason: str) -> None:
        self.done_reason = reason
        self._phase = _Phase("done", self._phase.level, started=10**12)

    def result(self) -> dict[str, Any]:
        """The capacity block's find-max part."""
        knee = self._last_good
        first = self.first_saturated
        unit = "vus" if self.model == "closed" else "rate_per_s"
        return {
            "method": "find_max",
            "level_unit": unit,
            "percentile": self.steer.percentile,
            "max_rps": round(knee.ok_rps, 3) if knee else None,
            "latency_ms_at_max": round(knee.latency_ms, 3) if knee and knee.latency_ms is not None else None,
            "level_at_max": knee.level if knee else None,
            "saturation_reason": first.saturated_reason if first else None,
            "first_saturated_step": asdict(first) if first else None,
            "ended_because": self.done_reason or "run_ended",
            "steps": [asdict(step) for step in self.steps],
        }


class TargetResponseTimeSteering:
    """Holds a latency percentile at T by moving the level, and reports the highest rate that
    held it."""

    def __init__(self, plan: Plan) -> None:
        assert isinstance(plan.steer, TargetResponseTime)
        self.steer: TargetResponseTime = plan.steer
        self.model = steered_model(plan)
        self.scenarios = steered_scenarios(plan)
        self.level = float(self.steer.start)
        self._window: deque[Snapshot] = deque(maxlen=TRT_WINDOW_S)
        self.history: list[dict[str, Any]] = []
        self.done = False
        # The lowest level whose move up overshot the target: moves up stay below it (halving
        # the distance each time), so a target whose latency is a cliff (flat, then a queue
        # without bound) is approached by bisection rather than jumped over again and again.
        self.ceiling = math.inf
        self._moved_up = False
        # The last level whose whole window held latency at or under T (+10 %): where an
        # overshoot goes back to (a little under it, so the queue it built drains).
        self._last_good: float | None = None
        # After an overshoot: the queue built above the cliff drains for a while and keeps
        # latency high at a good level; moving down again for that would overcorrect.
        self._draining = False
        self._previous_latency: float | None = None

    def observe(self, snapshot: Snapshot, run: LoadSetter, *, cpu_limit_percent: float) -> None:
        if snapshot["final"]:
            return
        self._window.append(snapshot)
        generator_saturated = is_generator_saturated(snapshot, cpu_limit_percent)
        figures = measure(list(self._window), steps=self.steer.steps or None)
        latency = figures.latency_ms(self.steer.percentile)
        held = (
            latency is not None and len(self._window) == TRT_WINDOW_S
            and abs(latency - self.steer.target_ms) <= TRT_HELD_SHARE * self.steer.target_ms
        )
        self.history.append({
            "second": int(snapshot["second"]), "level": self.level, "latency_ms": latency,
            "ok_rps": figures.ok_rps, "held": held, "generator_saturated": generator_saturated,
            "window_full": len(self._window) == TRT_WINDOW_S,
        })
        if generator_saturated:
            # This second's latency is (partly) the generator's own: steering on it would move
            # the target's load for the generator's trouble. Start the window again.
            self._window.clear()
            return
        # A decision only once the last move shows in a whole window.
        if len(self._window) < TRT_WINDOW_S or latency is None:
            return
        ratio = self.steer.target_ms / max(latency, 1e-3)
        previous, self._previous_latency = self._previous_latency, latency
        over = ratio < 1 / (1 + TRT_HELD_SHARE)
        if not over:
            self._last_good = self.level
            self._draining = False
        elif self._draining and (previous is None or latency <= previous):
            return  # still draining what the overshoot queued (first window, or getting better)
        if abs(math.log(ratio)) < math.log1p(TRT_DEADBAND):
            return
        if ratio < 1 and self._moved_up:
            self.ceiling = min(self.ceiling, self.level)  # this move up went past the target
        if over and self._moved_up and self._last_good is not None and self._last_good < self.level:
            self._draining = True
            self._move(run, max(self.steer.min, 0.95 * self._last_good))
            self._previous_latency = None  # windows at the new level are compared among themselves
            return
        up = TRT_MAX_UP_FAR if ratio > 1.5 else TRT_MAX_UP_NEAR
        factor = min(up, max(TRT_MAX_DOWN, math.sqrt(ratio)))
        level = min(self.steer.max, max(self.steer.min, self.level * factor))
        if ratio > 1 and level > self.level and self.ceiling < math.inf:
            level = min(level, (self.level + self.ceiling) / 2)
            if level - self.level < 0.005 * self.level:
                return  # as close under the cliff as it is worth going
        if self.model == "closed":
            # Whole VUs, rounded towards the current level so that a move never overshoots
            # (latency is a step function of the VU count near saturation); one VU at least.
            level = float(math.floor(level) if ratio > 1 else math.ceil(level))
            if level == self.level:
                level = self.level + (1 if ratio > 1 else -1)
            level = min(self.steer.max, max(self.steer.min, max(1.0, level)))
        if level == self.level:
            return
        self._move(run, level)

    def _move(self, run: LoadSetter, level: float) -> None:
        if self.model == "closed":
            level = float(max(1, round(level)))
        self._moved_up = level > self.level
        self.level = level
        # The window restarts: what it held was measured at the old level.
        self._window.clear()
        if self.model == "closed":
            run.set_load(vus=int(level), scenarios=self.scenarios)
        else:
            run.set_load(rate_per_s=level, scenarios=self.scenarios)

    def result(self) -> dict[str, Any]:
        """The highest rate that held the target (latency within ±10 % of T; when it never was,
        at or under T + 10 %), and how long the latency was held within ±10 % of T."""
        held = [entry for entry in self.history if entry["held"]]
        under = [
            entry for entry in self.history
            if entry["window_full"] and entry["latency_ms"] is not None and not entry["generator_saturated"]
            and entry["latency_ms"] <= (1 + TRT_HELD_SHARE) * self.steer.target_ms
        ]
        longest = current = 0
        for entry in self.history:
            current = current + 1 if entry["held"] else 0
            longest = max(longest, current)
        first_held = held[0]["second"] if held else None
        # The highest rate that held; on a tie (a saturated target serves the same rate at
        # several levels) the latest, which is the settled one.
        # Seconds that held T come first: on a saturated target a lower level serves the same
        # rate at a lower latency, and the level that holds T is the answer asked for.
        best = max(reversed(held or under), key=lambda entry: entry["ok_rps"], default=None)
        latencies = [entry["latency_ms"] for entry in held]
        if held:
            reason = None
        elif under:
            # Latency stayed under T at every level that did not overload the target: a cliff.
            reason = "latency_jumps_past_target"
        else:
            reason = "target_never_held"
        return {
            "method": "target_response_time",
            "level_unit": "vus" if self.model == "closed" else "rate_per_s",
            "percentile": self.steer.percentile,
            "target_ms": self.steer.target_ms,
            "max_rps": round(best["ok_rps"], 3) if best else None,
            "latency_ms_at_max": round(best["latency_ms"], 3) if best else None,
            "level_at_max": best["level"] if best else None,
            "held_s": len(held),
            "held_longest_s": longest,
            "settled_after_s": first_held,
            "latency_ms_while_held": {
                "min": round(min(latencies), 3), "max": round(max(latencies), 3),
            } if latencies else None,
            "saturation_reason": reason,
            "overshoot_level": None if self.ceiling == math.inf else self.ceiling,
            "history": self.history,
        }


Steering = FindMaxSteering | TargetResponseTimeSteering


def steering_for(plan: Plan) -> Steering | None:
    if plan.steer is None:
        return None
    if isinstance(plan.steer, FindMax):
        return FindMaxSteering(plan)
    return TargetResponseTimeSteering(plan)
