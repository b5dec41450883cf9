"""Find-max: the highest level a target serves before it saturates (the knee), found in few
steps and right on a noisy machine.

Two methods, chosen by the plan's ``steer.step``:

- **search** (no ``step``, the default): a sighting shot at a few arrivals a second measures one
  request's latency and starts at what one VU would send (an open model; a closed one starts at
  one VU); each step multiplies the level by ``growth`` until one saturates; then bisection
  between the last good and the first saturated level, helped by what the saturated step
  served (past its capacity an open-model target serves its maximum), closes in until the two
  are within ``precision_percent``. The steps taken grow with the logarithm of the answer.
- **stepped ramp** (``step`` given): ``start``, ``start + step``... until a step saturates, then
  (``refine``) a finer climb in quarter steps from the last good one: the seed's method.

A step is judged on its seconds after it settled (the first quarter is skipped: queues and
connection pools move to the new level then), with latency from each request's actual send (the
target's part; what users felt, timed from the intended start, is kept beside it). A step is
saturated when:

- errors pass ``error_limit_percent`` (``errors``);
- the generator itself used its CPU and fell behind for most of the step
  (``generator_saturated``): the knee would be the generator's, so the search stops there;
- the percentile passes ``latency_limit_ms``, if given (``latency_limit``);
- an open model dropped more than 1 % of its arrivals (``dropped_arrivals``);
- throughput stopped following the load (``throughput_flat``): an open model completed fewer
  iterations than arrived (by more than half the precision), or, for VUs and a stepped ramp,
  successful responses under 90 % of what the level should give while latency rose 10 %;
- a stepped ramp only: the percentile at 3x the first step's (``latency_rising``).

Seconds in which the generator was starved (its timers late while it used little CPU: the
machine did not run it) are set aside: the step runs longer to make up for them, at most three
times its length, and the summary says how many were set aside. A percentile is judged over
enough samples (``samples_needed``): at low rates a step also runs longer for them. A search
step whose completions fall just short of its arrivals is measured again on its later seconds
(a queue with random service times takes seconds to settle near capacity).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from horde.control.measure import Figures, measure
from horde.engine.snapshot import Snapshot
from horde.plan import Plan
from horde.plan.control import FindMax
from horde.control.steered_level import (
    LevelSetter,
    held_level_plan,
    move,
    samples_needed,
    steered_model,
    steered_scenarios,
)
from horde.results.summary import GENERATOR_SATURATED, GENERATOR_STARVED, generator_state
from horde.results.summary_blocks import CapacityBlock

#: The share of a step skipped before it is judged.
SETTLE_SHARE = 0.25
#: A step may run this many times its length to make up for starved seconds and few samples.
MAX_STRETCH = 3
#: VUs and stepped ramps: throughput under this share of what the level should give is "not following".
FLAT_SHARE = 0.9
#: ... with latency this much above the first step's (by Little's law a closed model's latency
#: must rise once its throughput stops following).
RISE_WITH_FLAT = 1.1
#: Stepped ramp: latency this many times the first step's is saturation whatever the throughput.
RISE_ALONE = 3.0
#: Dropped arrivals above this share of arrivals (percent) is saturation.
DROPPED_LIMIT_PERCENT = 1.0
#: An open-model search: completions short of arrivals by more than this share (or half the
#: precision, if larger) is saturation. Counting noise over a step is well under 1 %.
FOLLOW_TOLERANCE = 0.015
#: A search's step that serves under this share of its arrivals after two judged seconds ends
#: at once: every further second only grows the queue the next step must wait out.
CLEARLY_SATURATED = 0.8
#: An open-model step whose completions fall short of its arrivals by between the tolerance and
#: this many times it is borderline: near capacity a queue with random service times takes
#: seconds to settle (an M/M/4 queue at 96 % load: about 6 s), and while it fills, completions
#: lag arrivals at a level it can hold. Such a step runs on (at most MAX_STRETCH times its
#: length) and is judged on its later half.
BORDERLINE = 3.0
#: A saturated open-model step serving under this share of its level is clearly past capacity:
#: its queue never empties, so it served the capacity. Just past capacity a queue with random
#: service times still empties now and then, and the servers idle: such a step serves less.
OVERLOADED = 0.9
#: What overloaded steps served, this far under the best good step's rate (beyond their noise),
#: is a collapse past the knee: it then says nothing of where the knee is.
COLLAPSE = 0.1
#: The most steps any find-max takes; a search rarely needs a tenth of them (its run is sized
#: for MAX_SEARCH_STEPS).
MAX_STEPS = 200
MAX_SEARCH_STEPS = 40
#: Stepped ramp: the refining climb's step, as a share of the plan's step.
REFINE_SHARE = 0.25
#: Search, open model: the sighting shot's arrival rate, and its length (at least MIN_S and
#: MIN_RESPONSES responses, at most MAX_S).
SIGHT_RATE_PER_S = 5.0
SIGHT_MIN_S = 2
SIGHT_MIN_RESPONSES = 10
SIGHT_MAX_S = 10
#: Search: a first step already saturated divides the level by this, at most MAX_DESCENTS times.
DESCENT = 4.0
MAX_DESCENTS = 4
#: After a saturated step, the level falls to this share of the last good one while the target
#: drains its queue (a search probes near capacity next, where a queue left over would spoil it).
RECOVER_SHARE_SEARCH = 0.1
RECOVER_SHARE_STEPPED = 0.5
#: Recovery ends when a second's latency is back within this factor of the first good step's.
CALM = 1.5


def first_level(plan: Plan) -> float:
    """The level a find-max run starts at: ``start``, or ``step`` for a stepped ramp without
    one, or one VU (closed) or the sighting shot's rate (open) for a search."""
    steer = plan.steer
    assert isinstance(steer, FindMax)
    start = steer.start if steer.start is not None else steer.step
    if start is not None:
        return start
    return 1.0 if steered_model(plan) == "closed" else SIGHT_RATE_PER_S


def messages_per_second(seconds: list[Snapshot]) -> float:
    """Messages the request steps sent and received a second over these seconds (a group's
    messages are its steps').

    >>> counts = {"sent": 40, "received": 160, "datagrams_sent": 0, "datagrams_received": 0, "late": 0}
    >>> messages_per_second([{"interval_s": 1.0, "steps": [{"kind": "request", "messages": counts}]},
    ...                      {"interval_s": 1.0, "steps": [{"kind": "request"}]}])
    100.0
    """
    total = 0
    for snapshot in seconds:
        for entry in snapshot["steps"]:
            counts = entry.get("messages")
            if counts and entry.get("kind", "request") == "request":
                total += int(counts["sent"]) + int(counts["received"])
    elapsed = sum(float(snapshot["interval_s"]) for snapshot in seconds)
    return total / elapsed if elapsed > 0 else 0.0


@dataclass
class StepResult:
    """One find-max step, judged on its settled seconds."""

    index: int
    level: float
    seconds: int
    rps: float
    ok_rps: float
    #: The percentile of latency from each request's actual send: what the step is judged on.
    latency_ms: float | None
    error_percent: float
    dropped_percent: float
    saturated_reason: str | None = None
    phase: str = "climb"
    #: The percentile as users felt it (open model: from each arrival's intended start).
    felt_latency_ms: float | None = None
    #: Latencies the percentile was read from, and how many lie beyond it.
    samples: int = 0
    tail_samples: int = 0
    #: Seconds of the step set aside because the generator was starved.
    set_aside_s: int = 0
    #: Completed iterations per second (an open model's arrivals, once served).
    iterations_per_s: float = 0.0
    #: The second the step's judgement came in (from the run's start).
    judged_at_s: int = 0
    #: The step's first second at its level (what broke first is timed from it).
    started_s: int = 0
    #: Judged on its later half after a borderline first judgement (see BORDERLINE).
    remeasured: bool = False
    #: The standard error of ``iterations_per_s`` (from its seconds' spread): 0 for a target
    #: that completes the same number each second, about √rate/√seconds for random service.
    iterations_per_s_error: float = 0.0
    #: Message steps (tcp://, udp://, kcp://): messages a second, sent and received together
    #: (the gateway's packets in and out); 0 for HTTP and SQL.
    messages_per_s: float = 0.0

    @property
    def verdict(self) -> str:
        return "good" if self.saturated_reason is None else self.saturated_reason


@dataclass
class _Phase:
    name: str  # "sight", "climb", "search", "recover", "refine", "done"
    level: float
    started: int  # the first snapshot second of this level
    seconds: list[Snapshot] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    #: Judged on its later half: it ran on because its first judgement was borderline.
    remeasured: bool = False


class FindMaxSteering:
    """Finds the knee by a search or a stepped ramp (see the module's description)."""

    def __init__(self, plan: Plan) -> None:
        assert isinstance(plan.steer, FindMax)
        self.steer: FindMax = plan.steer
        self._plan = plan
        self.model = steered_model(plan)
        self.scenarios = steered_scenarios(plan)
        # Iterations in snapshots are the whole run's: they measure arrivals served only when
        # every scenario is steered.
        self._iterations_are_ours = len(self.scenarios) == len(plan.scenarios)
        self.searching = self.steer.searching
        self.step_s = max(2, math.ceil(self.steer.step_length_s))
        self.settle_s = max(1, math.ceil(self.step_s * SETTLE_SHARE))
        self.needed = samples_needed(self.steer.percentile)
        self.steps: list[StepResult] = []
        self.baseline_ms: float | None = None
        self.first_saturated: StepResult | None = None
        self.done_reason: str | None = None
        self.done_at_s: int | None = None
        self.sight: dict[str, Any] | None = None
        self.set_aside_s = 0
        self._good: StepResult | None = None  # the highest level judged good
        self._bad: StepResult | None = None  # the lowest level judged saturated
        # The judged seconds of open-model steps saturated by throughput: past its capacity a
        # target serves its capacity, so together they measure it (see _hint).
        self._overloaded: list[Snapshot] = []
        self._tried: set[float] = set()
        self._descents = 0
        self._pending: tuple[float, str] = (0.0, "climb")  # where a recovery goes next
        self._refine_step = (self.steer.step or 0.0) * REFINE_SHARE
        self._refine_left = 0
        start = first_level(plan)
        sighting = self.steer.start is None and self.steer.step is None and self.model == "open"
        self._phase = _Phase("sight" if sighting else "climb", self._level(start), started=1)

    # -- what the engine starts with, and what the views show --------------------------------

    @property
    def planned_length_s(self) -> float:
        """How long the search may run at most: the prepared plan's stages last this long.
        Each step may stretch to make up for starved seconds, and a recovery lasts at most two
        steps."""
        steer = self.steer
        step_s = math.ceil(steer.step_length_s) * (MAX_STRETCH + 2)
        if steer.step is None:
            return SIGHT_MAX_S + MAX_SEARCH_STEPS * step_s
        climb = MAX_STEPS
        if steer.limit is not None:
            start = steer.start if steer.start is not None else steer.step
            climb = min(MAX_STEPS, math.floor((steer.limit - start) / steer.step + 1e-9) + 1)
        refine = (round(1 / REFINE_SHARE) + 2) if steer.refine else 0  # recovery + finer steps
        return float((climb + refine) * step_s)

    def prepared_plan(self) -> Plan:
        """The plan the engine runs: the steered scenarios at the first level for as long as
        the search may need."""
        return held_level_plan(self._plan, first_level(self._plan), self.planned_length_s)

    @property
    def initial_level(self) -> float:
        """The level the run starts at (the prepared plan holds it until the first move)."""
        return self._phase.level

    @property
    def done(self) -> bool:
        return self._phase.name == "done"

    def status(self) -> dict[str, Any]:
        """Where the search stands, for the live view: phase, step, level, last verdict."""
        last = self.steps[-1] if self.steps else None
        return {
            "method": "find_max",
            "search": self.searching,
            "phase": self._phase.name,
            "step": len(self.steps) + (0 if self._phase.name in ("sight", "recover", "done") else 1),
            "level": self._phase.level,
            "level_unit": self._unit,
            "good_level": self._good.level if self._good else None,
            "saturated_level": self._bad.level if self._bad else None,
            "last": None
            if last is None
            else {
                "level": last.level,
                "verdict": last.verdict,
                "ok_rps": round(last.ok_rps, 3),
                "latency_ms": last.latency_ms,
            },
            "set_aside_s": self.set_aside_s,
        }

    @property
    def _unit(self) -> str:
        return "vus" if self.model == "closed" else "rate_per_s"

    # -- one second at a time ----------------------------------------------------------------

    def observe(self, snapshot: Snapshot, run: LevelSetter, *, cpu_limit_percent: float) -> None:
        """Takes one snapshot; moves the level when a step ends."""
        if snapshot["final"] or self.done:
            return
        phase = self._phase
        if snapshot["second"] < phase.started:
            return  # a second that began before the level moved
        second = int(snapshot["second"])
        state = generator_state(snapshot, cpu_limit_percent)
        phase.seconds.append(snapshot)
        phase.states.append(state)
        if phase.name == "sight":
            self._observe_sight(run, second)
            return
        if phase.name == "recover":
            self._observe_recovery(run, second)
            return
        if state == GENERATOR_STARVED and len(phase.seconds) > self.settle_s:
            self.set_aside_s += 1
        judged = self._judged_seconds(phase)
        elapsed = len(phase.seconds)
        if elapsed < self.step_s:
            if not (self.searching and self._clearly_saturated(phase, judged)):
                return
        elif elapsed < MAX_STRETCH * self.step_s:
            figures = measure(judged, from_send=True)
            if len(judged) < self.step_s - self.settle_s or figures.samples < self.needed:
                return  # starved seconds or too few samples: the step runs on (bounded)
            if self._borderline(phase, judged):
                phase.remeasured = True
                return  # a queue still settling, or a level just past capacity: measure again
        result = self._judge(phase, judged, second, cpu_limit_percent)
        self.steps.append(result)
        if result.saturated_reason is None:
            if self.baseline_ms is None:
                self.baseline_ms = result.latency_ms
            if self._good is None or result.level >= self._good.level:
                self._good = result
        else:
            if self.first_saturated is None:
                self.first_saturated = result
            if self._bad is None or result.level <= self._bad.level:
                self._bad = result
            if (
                self.model == "open"
                and result.saturated_reason in ("throughput_flat", "dropped_arrivals")
                and result.ok_rps < OVERLOADED * result.level
            ):
                self._overloaded.extend(self._judged_seconds(phase))
        if result.saturated_reason in ("generator_saturated", "no_responses"):
            self._finish(result.saturated_reason, second)
        elif len(self.steps) >= MAX_STEPS:
            self._finish("step_budget_spent", second)
        elif self.searching:
            self._next_search_level(run, result, second)
        elif result.saturated_reason is None:
            self._after_good_stepped(run, result, second)
        else:
            self._after_saturated_stepped(run, second)

    def _judged_seconds(self, phase: _Phase) -> list[Snapshot]:
        """The step's seconds after it settled (its later half once re-measured), without those
        the generator was starved in."""
        settle = max(self.settle_s, len(phase.seconds) // 2) if phase.remeasured else self.settle_s
        settled = list(zip(phase.seconds, phase.states))[settle:]
        return [snapshot for snapshot, state in settled if state != GENERATOR_STARVED]

    def _tolerance(self) -> float:
        return max(FOLLOW_TOLERANCE, self.steer.precision_percent / 200.0)

    def _borderline(self, phase: _Phase, judged: list[Snapshot]) -> bool:
        """Whether an open-model search step's completions fall short of its arrivals by more
        than the tolerance but less than BORDERLINE times it (see there), or by no more than
        twice their own noise (a target with random service times completes a varying number
        each second)."""
        if (
            not self.searching
            or self.model != "open"
            or not self._iterations_are_ours
            or not judged
            or phase.level <= 0
        ):
            return False
        served, error = per_second_mean(judged, "iterations")
        shortfall = 1.0 - served / phase.level
        tolerance = self._tolerance()
        return shortfall > tolerance and (shortfall < BORDERLINE * tolerance or shortfall <= 2 * error / phase.level)

    def _clearly_saturated(self, phase: _Phase, judged: list[Snapshot]) -> bool:
        if self.model != "open" or not self._iterations_are_ours or len(judged) < 2:
            return False
        served, _ = per_second_mean(judged, "iterations")
        return served < CLEARLY_SATURATED * phase.level

    # -- the sighting shot and recovery ------------------------------------------------------

    def _observe_sight(self, run: LevelSetter, second: int) -> None:
        seconds = self._phase.seconds[1:]  # the first second opens connections
        figures = measure(seconds, from_send=True)
        long_enough = len(seconds) >= SIGHT_MIN_S and figures.samples >= SIGHT_MIN_RESPONSES
        if not long_enough and len(self._phase.seconds) < SIGHT_MAX_S:
            return
        median = figures.latency_ms(50)
        if median is None or figures.requests == 0:
            self._finish("no_responses", second)
            return
        iterations = sum(int(snapshot["iterations"]) for snapshot in seconds)
        per_iteration = figures.requests / iterations if iterations and self._iterations_are_ours else 1.0
        # One VU sends an iteration every (median × requests per iteration): the seed's
        # x = 1000 / t, the least a target that serves even one request at a time can take.
        one_vu = 1000.0 / (max(median, 0.001) * max(per_iteration, 1.0))
        start = _nice_floor(one_vu)
        if self.steer.limit is not None:
            start = min(start, self.steer.limit)
        self.sight = {
            "seconds": len(self._phase.seconds),
            "rate_per_s": SIGHT_RATE_PER_S,
            "p50_ms": round(median, 3),
            "requests_per_iteration": round(per_iteration, 3),
            "one_vu_rate_per_s": round(one_vu, 3),
            "start": start,
        }
        self._set(run, start, "climb", second)

    def _observe_recovery(self, run: LevelSetter, second: int) -> None:
        phase = self._phase
        latency = measure(phase.seconds[-1:], from_send=True).latency_ms(self.steer.percentile)
        if self.baseline_ms is not None:
            calm = latency is not None and latency <= CALM * self.baseline_ms
        else:
            # No good step yet to compare with: calm once latency stops falling.
            previous = (
                measure(phase.seconds[-2:-1], from_send=True).latency_ms(self.steer.percentile)
                if len(phase.seconds) >= 2
                else None
            )
            calm = latency is not None and previous is not None and latency >= 0.9 * previous
        if calm or len(phase.seconds) >= 2 * self.step_s:
            level, name = self._pending
            self._set(run, level, name, second)

    def _recover_then(self, run: LevelSetter, level: float, name: str, second: int, share: float) -> None:
        """Drops the level while the target drains what the saturated step queued, then moves to
        ``level``."""
        base = self._good.level if self._good is not None else level
        self._pending = (level, name)
        self._set(run, max(base * share, 1.0 if self.model == "closed" else base * share), "recover", second)

    # -- judging a step ----------------------------------------------------------------------

    def _judge(self, phase: _Phase, judged: list[Snapshot], second: int, cpu_limit_percent: float) -> StepResult:
        if not judged:
            judged = phase.seconds[self.settle_s :] or phase.seconds  # every second starved: judge them all
        figures = measure(judged, from_send=True)
        latency = figures.latency_ms(self.steer.percentile)
        felt = measure(judged).latency_ms(self.steer.percentile)
        iterations = sum(int(snapshot["iterations"]) for snapshot in judged)
        tail = 1.0 - self.steer.percentile / 100.0
        result = StepResult(
            index=len(self.steps),
            level=phase.level,
            seconds=len(judged),
            rps=figures.rps,
            ok_rps=figures.ok_rps,
            latency_ms=latency,
            error_percent=figures.error_percent(),
            dropped_percent=figures.dropped_percent,
            phase=phase.name,
            felt_latency_ms=felt,
            samples=figures.samples,
            tail_samples=math.floor(figures.samples * tail + 1e-9),
            set_aside_s=sum(state == GENERATOR_STARVED for state in phase.states[self.settle_s :]),
            iterations_per_s=iterations / figures.seconds if figures.seconds else 0.0,
            judged_at_s=second,
            started_s=phase.started,
            remeasured=phase.remeasured,
            iterations_per_s_error=per_second_mean(judged, "iterations")[1],
            messages_per_s=messages_per_second(judged),
        )
        states = [generator_state(snapshot, cpu_limit_percent) for snapshot in judged]
        result.saturated_reason = self._saturation(result, figures, states)
        return result

    def _saturation(self, result: StepResult, figures: Figures, states: list[str]) -> str | None:
        steer = self.steer
        if figures.requests == 0:
            return "no_responses"
        if result.error_percent > steer.error_limit_percent:
            return "errors"
        if sum(state == GENERATOR_SATURATED for state in states) * 2 > len(states):
            return "generator_saturated"
        if (
            steer.latency_limit_ms is not None
            and result.latency_ms is not None
            and result.latency_ms > steer.latency_limit_ms
        ):
            return "latency_limit"
        if self.model == "open" and result.dropped_percent > DROPPED_LIMIT_PERCENT:
            return "dropped_arrivals"
        if self.model == "open" and self._iterations_are_ours and result.level > 0:
            # Short of arrivals by more than the tolerance and than twice the completions' noise.
            shortfall = 1.0 - result.iterations_per_s / result.level
            if shortfall > self._tolerance() and shortfall > 2 * result.iterations_per_s_error / result.level:
                return "throughput_flat"
        baseline = self.baseline_ms
        if baseline is None or result.latency_ms is None or baseline <= 0:
            return None
        expected = self._expected_rps(result.level)
        if (
            expected is not None
            and result.ok_rps < FLAT_SHARE * expected
            and result.latency_ms > RISE_WITH_FLAT * baseline
        ):
            return "throughput_flat"
        if not self.searching and result.latency_ms > RISE_ALONE * baseline:
            return "latency_rising"
        return None

    def _expected_rps(self, level: float) -> float | None:
        """The successful responses a level should give, scaled from the last good step (the
        offered rate itself for an open model whose iterations are one request)."""
        good = self._good
        if good is None or good.level <= 0:
            return None
        return good.ok_rps * level / good.level

    # -- the next level ----------------------------------------------------------------------

    def _next_search_level(self, run: LevelSetter, result: StepResult, second: int) -> None:
        good, bad, limit = self._good, self._bad, self.steer.limit
        if bad is None:
            assert good is not None
            if limit is not None and good.level >= limit - 1e-9:
                self._finish("limit_reached", second)
                return
            level = good.level * self.steer.growth
            if self.model == "closed":
                level = max(good.level + 1, math.floor(level))
            self._set(run, min(level, limit) if limit is not None else level, "climb", second)
            return
        if good is None:
            self._descents += 1
            lowest = 1.0 if self.model == "closed" else 0.01
            if self._descents > MAX_DESCENTS or bad.level <= lowest:
                self._finish("saturated_at_start", second)
                return
            self._recover_then(run, max(lowest, bad.level / DESCENT), "climb", second, RECOVER_SHARE_SEARCH)
            return
        if self._converged(good, bad):
            self._finish("found", second)
            return
        level = self._probe(good.level, bad.level)
        if result.saturated_reason is not None:
            self._recover_then(run, level, "search", second, RECOVER_SHARE_SEARCH)
        else:
            self._set(run, level, "search", second)

    def _converged(self, good_step: StepResult, bad_step: StepResult) -> bool:
        """Whether the knee is known to the precision: the last good and first saturated levels
        that close, or the good step served (nearly) what saturated steps could serve at most."""
        good, bad, precision = good_step.level, bad_step.level, self.steer.precision_percent / 100.0
        if self.model == "closed" and bad - good <= 1:
            return True
        hint = self._hint()
        if hint is not None and good_step.ok_rps >= (1.0 - precision) * hint:
            # ... if that is known well enough: within half the precision (two standard errors).
            _, error = per_second_mean(self._overloaded, "ok")
            if 2 * error <= precision / 2 * hint:
                return True
        return bad - good <= precision * good + 1e-9

    def _hint(self) -> float | None:
        """What saturated open-model steps served per second, together, when it tells where the
        knee is: at least what the best good step served (a target whose throughput collapses
        past its knee serves less, and then says nothing of where the knee is)."""
        good = self._good
        if not self._overloaded or good is None:
            return None
        served, error = per_second_mean(self._overloaded, "ok")
        # Both rates are measured over a few seconds: a noisy target's may differ by their errors
        # and more (a good step just after a recovery may complete a burst); a collapse is more.
        slack = 2 * (error + good.iterations_per_s_error)
        return served if served + slack >= (1.0 - COLLAPSE) * good.ok_rps else None

    def _probe(self, good: float, bad: float) -> float:
        """The next level between the last good and the first saturated one: just under and
        just over what saturated steps served, when that lies between them (an open model past
        capacity serves its capacity), else the middle."""
        half = self.steer.precision_percent / 200.0
        hint = self._hint()
        if hint is not None:
            for candidate in (hint * (1 - half), hint * (1 + half)):
                candidate = self._level(candidate)
                if good < candidate < bad and candidate not in self._tried:
                    return candidate
        middle = (good + bad) / 2
        if self.model == "closed":
            middle = float(math.floor(middle))
            if middle <= good:
                middle = good + 1
        return middle

    def _after_good_stepped(self, run: LevelSetter, result: StepResult, second: int) -> None:
        steer = self.steer
        assert steer.step is not None
        if self._phase.name == "refine":
            self._refine_left -= 1
            if self._refine_left <= 0:
                self._finish("refined", second)
                return
            self._set(run, result.level + self._refine_step, "refine", second)
            return
        following = result.level + steer.step
        if steer.limit is not None and following > steer.limit + 1e-9:
            self._finish("limit_reached", second)
            return
        self._set(run, following, "climb", second)

    def _after_saturated_stepped(self, run: LevelSetter, second: int) -> None:
        good = self._good
        refinable = self.steer.refine and self._phase.name == "climb" and good is not None
        if self.model == "closed":
            refinable = refinable and self._refine_step >= 1
        if not refinable or good is None:
            self._finish("saturated", second)
            return
        self._refine_left = round(1 / REFINE_SHARE) - 1
        self._recover_then(run, good.level + self._refine_step, "refine", second, RECOVER_SHARE_STEPPED)

    def _level(self, level: float) -> float:
        return float(max(1, round(level))) if self.model == "closed" else level

    def _set(self, run: LevelSetter, level: float, phase: str, second: int) -> None:
        level = move(run, self.model, self.scenarios, level)
        if phase not in ("recover", "sight"):
            self._tried.add(level)
        self._phase = _Phase(phase, level, started=second + 1)

    def _finish(self, reason: str, second: int) -> None:
        self.done_reason = reason
        self.done_at_s = second
        self._phase = _Phase("done", self._phase.level, started=10**12)

    # -- the answer --------------------------------------------------------------------------

    def result(self) -> CapacityBlock:
        """The capacity block's find-max part."""
        knee = self._good
        first = self.first_saturated
        notes = []
        if self.set_aside_s:
            notes.append(f"{self.set_aside_s} s set aside: generator starved (its timers late with little CPU used)")
        thin = [step for step in self.steps if step.samples < self.needed]
        if thin:
            notes.append(
                f"{len(thin)} step(s) judged on fewer than {self.needed} samples (p{self.steer.percentile:g} "
                f"needs {self.needed} for {self.needed - math.floor(self.needed * (1 - self.steer.percentile / 100))} "
                "below it and 10 beyond): widen --step-duration for a firmer answer"
            )
        # How far above the answer the knee may lie: the first saturated level, or what a
        # saturated step served, whichever is closer.
        # A knee's served rate above what overloaded steps served together is noise (a target
        # with random service times completes ±√rate a second): no level serves more than the
        # capacity those steps measured, over more seconds.
        hint = self._hint()
        max_rps = None if knee is None else min(knee.ok_rps, hint) if hint is not None else knee.ok_rps
        bracket = None
        if knee is not None and self._bad is not None and knee.level > 0 and knee.ok_rps > 0:
            above = [100.0 * (self._bad.level - knee.level) / knee.level]
            if hint is not None:
                above.append(100.0 * max(0.0, hint - knee.ok_rps) / knee.ok_rps)
            bracket = round(max(0.0, min(above)), 2)
        return {
            "method": "find_max",
            "search": "bisection" if self.searching else "stepped",
            "level_unit": self._unit,
            "percentile": self.steer.percentile,
            "latency_basis": "from_send",
            "max_rps": round(max_rps, 3) if max_rps is not None else None,
            # A gateway's capacity is in messages: what the knee's level moved a second.
            "max_messages_per_s": round(knee.messages_per_s, 3) if knee and knee.messages_per_s else None,
            "overloaded_rps": round(hint, 3) if hint is not None else None,
            "latency_ms_at_max": round(knee.latency_ms, 3) if knee and knee.latency_ms is not None else None,
            "felt_latency_ms_at_max": round(knee.felt_latency_ms, 3)
            if knee and knee.felt_latency_ms is not None
            else None,
            "level_at_max": knee.level if knee else None,
            "first_saturated_level": self._bad.level if self._bad else None,
            "bracket_percent": bracket,
            "precision_percent": self.steer.precision_percent if self.searching else None,
            "saturation_reason": first.saturated_reason if first else None,
            "first_saturated_step": asdict(first) if first else None,
            "ended_because": self.done_reason or "run_ended",
            "answer_after_s": self.done_at_s,
            "set_aside_s": self.set_aside_s,
            "samples_needed": self.needed,
            "sight": self.sight,
            "notes": notes,
            "steps": [asdict(step) for step in self.steps],
        }


def per_second_mean(seconds: list[Snapshot], what: str) -> tuple[float, float]:
    """The rate of ``iterations`` or ``ok`` (successful requests) over ``seconds``, and its
    standard error from the spread of the per-second rates (0 with fewer than two seconds).

    >>> second = lambda n, ok: {"interval_s": 1.0, "iterations": n, "steps": [{"kind": "request", "ok": ok}]}
    >>> per_second_mean([second(390, 390), second(410, 410)], "ok")
    (400.0, 10.0)
    """
    rates, total, span = [], 0.0, 0.0
    for snapshot in seconds:
        interval = float(snapshot["interval_s"])
        if what == "iterations":
            count = float(snapshot["iterations"])
        else:
            count = float(
                sum(int(entry["ok"]) for entry in snapshot["steps"] if entry.get("kind", "request") == "request")
            )
        total, span = total + count, span + interval
        if interval > 0:
            rates.append(count / interval)
    mean = total / span if span > 0 else 0.0
    error = statistics.stdev(rates) / math.sqrt(len(rates)) if len(rates) >= 2 else 0.0
    return mean, error


def _nice_floor(value: float) -> float:
    """A round number at or under ``value`` (1, 2 or 5 times a power of ten; at least 1), or
    just over it: a measured 99.9 is 100.

    >>> _nice_floor(97.3), _nice_floor(99.93), _nice_floor(1234), _nice_floor(0.4), _nice_floor(20)
    (50.0, 100.0, 1000.0, 1.0, 20.0)
    """
    value *= 1.01
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value) + 1e-12)
    return float(max(m * power for m in (1, 2, 5) if m * power <= value + 1e-9))
