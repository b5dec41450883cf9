"""Load that steers itself: find-max (the knee, in ``horde.control.find_max``) and target response
time (hold a latency percentile at T by moving the level).

A steering reads each snapshot as it arrives and moves the run's level through
:meth:`horde.engine.run.Run.set_level`: a VU count for closed scenarios, an arrival rate for open ones,
spread over the steered scenarios by their ``weight``. It never opens a socket; everything it
decides comes from the same per-second snapshots the store keeps, so its answer can be checked
against the stored run.

Target response time judges latency from each request's actual send (the target's part; an
open model also keeps what users felt, from the intended start) over a window of at least 2 s,
widened at low rates until the percentile has enough samples (``samples_needed``; four times
that once latency has passed T, where a short window's noise would move the level to and fro);
seconds in
which the generator was starved are set aside, and a window with a saturated generator second
starts again. It moves the level by the square root of T / latency (bounded: up by at most 25 %
far below T and 15 % near it, down by at most 20 %), leaves it alone within 5 % of T. A move up
that overshoots T becomes a ceiling: later moves up stop half way to it, so a target whose
latency is a cliff (flat, then a queue without bound, as a deterministic server at capacity) is
closed in on by bisection instead of being jumped over again and again; after an overshoot it
goes back a little under the last good level and waits for the queue to drain before judging
again.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any

from horde.control.find_max import MAX_SEARCH_STEPS, MAX_STEPS, MAX_STRETCH, REFINE_SHARE, SIGHT_MAX_S, FindMaxSteering, first_level
from horde.control.measure import measure
from horde.engine.snapshot import Snapshot
from horde.plan import ClosedModel, ClosedStage, OpenModel, OpenStage, Plan
from horde.plan.control import FindMax, TargetResponseTime
from horde.plan.overrides import spread_rate, spread_vus
from horde.control.steered_level import LevelSetter, move, samples_needed, steered_model, steered_scenarios
from horde.results.summary import GENERATOR_SATURATED, GENERATOR_STARVED, generator_state

__all__ = ["FindMaxSteering", "LevelSetter", "Steering", "TargetResponseTimeSteering", "planned_length_s",
           "prepare_plan", "steered_model", "steered_scenarios", "steering_for"]

#: Target response time: the window each decision measures, in seconds; it restarts at each
#: move, so a decision always sees whole seconds at the current level. At low rates it widens,
#: up to TRT_MAX_WINDOW_S, until the percentile has enough samples.
TRT_WINDOW_S = 2
TRT_MAX_WINDOW_S = 10
#: Target response time: once latency has passed T (the level that gives T is bracketed), a
#: decision needs this many times the samples a percentile needs: there a short window's noise
#: would move the level to and fro around T (a 2 s p95 of an M/M/4 queue at 70 % load varies
#: by ±15 %).
TRT_HOLD_SAMPLES = 4
#: Target response time: latency's elasticity to the level is read only across levels this far
#: apart (a factor): across closer ones each window's noise swamps the difference.
TRT_ELASTICITY_SPAN = 1.1
#: Target response time: the most a decision may raise or lower the level, as a factor. Up is
#: slower than down, and slower still near the target: overshooting into overload builds queues
#: that take long to drain. Far below the target (latency under two thirds of it) latency says little
#: about the distance to saturation, so the level climbs at the faster pace.
TRT_MAX_UP_FAR = 1.25
TRT_MAX_UP_NEAR = 1.15
TRT_MAX_DOWN = 0.8
#: Target response time: latency rising less than this (in log terms) per unit of log level is flat.
TRT_FLAT_ELASTICITY = 0.1
#: Target response time: within this relative distance of the target, the level is left alone.
TRT_DEADBAND = 0.05
#: Target response time: a second "holds" the target when its window is within this share of T.
#: Once the level that gives T is bracketed, this band is also the dead band: a window's
#: percentile is an estimate (a p95 from 800 samples of an M/M/4 queue at 70 % load varies by
#: about ±8 %), and a level moved on every estimate off by 5 % hunts around T on noise alone.
TRT_HELD_SHARE = 0.10
#: Target response time: a change of latency between two windows counts as latency's response
#: to the level only beyond this many standard errors of the two windows' percentiles together;
#: within it the latency is flat for all the windows can tell.
TRT_NOISE_SE = 2.0
#: Target response time: latency's elasticity to the level near T, as read across the bracket
#: (the windows just under and just over T), is kept within these bounds (at the upper one or
#: beyond, latency is a cliff, and moves up bisect under it instead); without a bracket it is
#: taken as TRT_DEFAULT_ELASTICITY. A move near T goes half the way, in log terms, to the
#: level the elasticity predicts gives T: a move by the square root of T / latency alone would
#: overcorrect where latency rises as the fifth power of the rate (a queue near its knee) and
#: swing the level to and fro around T.
TRT_ELASTICITY_BOUNDS = (1.0, 8.0)
TRT_DEFAULT_ELASTICITY = 2.0


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
    start = steer.start if isinstance(steer, TargetResponseTime) else first_level(plan)
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


class TargetResponseTimeSteering:
    """Holds a latency percentile at T by moving the level, and reports the highest rate that
    held it."""

    def __init__(self, plan: Plan) -> None:
        assert isinstance(plan.steer, TargetResponseTime)
        self.steer: TargetResponseTime = plan.steer
        self.model = steered_model(plan)
        self.scenarios = steered_scenarios(plan)
        self.level = float(self.steer.start)
        self._window: deque[Snapshot] = deque(maxlen=TRT_MAX_WINDOW_S)
        self.needed = samples_needed(self.steer.percentile)
        self.set_aside_s = 0
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
        # The level, latency and latency's standard error (in log terms) of the last
        # decision's window: with this one, latency's elasticity to the level.
        self._previous_point: tuple[float, float, float] | None = None
        # The latest decision windows under and over T (beyond the held band), as (level,
        # latency): across them, latency's elasticity near T.
        self._under: tuple[float, float] | None = None
        self._over: tuple[float, float] | None = None
        # Once latency has passed T: decisions wait for more samples (see TRT_HOLD_SAMPLES).
        self._holding = False
        # The first decision's window, at the lowest level the climb starts from: across the
        # climb's whole span, latency's elasticity is read above each window's noise.
        self._anchor: tuple[float, float, float] | None = None
        self._holding_since: int | None = None

    def observe(self, snapshot: Snapshot, run: LevelSetter, *, cpu_limit_percent: float) -> None:
        if snapshot["final"]:
            return
        state = generator_state(snapshot, cpu_limit_percent)
        generator_saturated = state == GENERATOR_SATURATED
        if state == GENERATOR_STARVED:
            # The machine did not run the generator: its sends bunched up, so this second says
            # more of the machine than of the target. Set aside, without losing the window.
            self.set_aside_s += 1
            self.history.append({
                "second": int(snapshot["second"]), "level": self.level, "latency_ms": None, "ok_rps": None,
                "held": False, "generator_saturated": False, "starved": True, "window_full": False, "samples": 0,
            })
            return
        self._window.append(snapshot)
        figures, full = self._window_figures()
        latency = figures.latency_ms(self.steer.percentile)
        held = (
            latency is not None and full
            and abs(latency - self.steer.target_ms) <= TRT_HELD_SHARE * self.steer.target_ms
        )
        self.history.append({
            "second": int(snapshot["second"]), "level": self.level, "latency_ms": latency,
            "ok_rps": figures.ok_rps, "held": held, "generator_saturated": generator_saturated,
            "starved": False, "window_full": full, "samples": figures.samples,
        })
        if generator_saturated:
            # This second's latency is (partly) the generator's own: steering on it would move
            # the target's load for the generator's trouble. Start the window again.
            self._window.clear()
            return
        # A decision only once the last move shows in a whole window with enough samples.
        if not full or latency is None:
            return
        ratio = self.steer.target_ms / max(latency, 1e-3)
        error = self._log_error(figures)
        previous, self._previous_latency = self._previous_latency, latency
        point, self._previous_point = self._previous_point, (self.level, latency, error)
        if self._anchor is None or self.level < self._anchor[0]:
            self._anchor = self._previous_point
        over = ratio < 1 / (1 + TRT_HELD_SHARE)
        if over and not self._draining:
            self._over = (self.level, latency)  # (while draining, latency is the queue's, not the level's)
        elif ratio > 1 + TRT_HELD_SHARE:
            self._under = (self.level, latency)
        if over and not self._holding:
            self._holding = True
            self._holding_since = int(snapshot["second"])
        if not over:
            self._last_good = self.level
            self._draining = False
        elif self._draining and (previous is None or latency <= previous):
            return  # still draining what the overshoot queued (first window, or getting better)
        if abs(math.log(ratio)) < math.log1p(TRT_DEADBAND) or (self._holding and held):
            return
        if ratio < 1 and self._moved_up:
            self.ceiling = min(self.ceiling, self.level)  # this move up went past the target
        if over and self._moved_up and self._last_good is not None and self._last_good < self.level:
            self._draining = True
            # A closed model builds no queue beyond its VUs: back to the last good level itself
            # (5 % under it would be whole VUs under it, and the next climb an overshoot again).
            back = self._last_good if self.model == "closed" else 0.95 * self._last_good
            self._move(run, max(self.steer.min, back))
            self._previous_latency = None  # windows at the new level are compared among themselves
            return
        factor = self._factor(ratio, latency, self._previous_point[2], point)
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
            if ratio > 1 and level >= self.ceiling:
                return  # one VU more is the level that overshot: as close under it as whole VUs go
            level = min(self.steer.max, max(self.steer.min, max(1.0, level)))
        if level == self.level:
            return
        self._move(run, level)

    def _steady(self, held: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The windows that held T once the level holding it was bracketed (latency had passed
        T once), as one answer: the median of their rates, levels and latencies. Near a smooth
        target's knee each window's percentile and rate are noisy; the highest of them would be
        a lucky window, their median is where the level holds."""
        settled = [entry for entry in held if self._holding_since is not None and entry["second"] >= self._holding_since]
        if not settled:
            return None
        return {key: statistics.median(entry[key] for entry in settled) for key in ("level", "ok_rps", "latency_ms")}

    def _factor(self, ratio: float, latency: float, error: float, point: tuple[float, float, float] | None) -> float:
        """How much to multiply the level by. Below the target, latency's elasticity to the
        level (read off this window and the previous one at another level, and, while climbing,
        the first one) says how far the level that gives T is: latency that did not rise beyond
        the windows' noise (a smooth target far from its knee, or a cliff not reached yet)
        climbs at the far pace; otherwise half the way there, in log terms. Once T is
        bracketed, half the way to the level the bracket's elasticity predicts (on a cliff,
        where that elasticity is no guide, moves up stay under the ceiling: see
        :meth:`observe`). Without an estimate, the square root of T / latency."""
        low_bound, high_bound = TRT_ELASTICITY_BOUNDS
        if self._holding:
            bracket = self._bracket_elasticity()
            if ratio < 1 or (bracket is not None and bracket < high_bound):
                elasticity = min(high_bound, max(low_bound, bracket if bracket is not None else TRT_DEFAULT_ELASTICITY))
                return min(TRT_MAX_UP_NEAR, max(TRT_MAX_DOWN, float(ratio ** (1 / (2 * elasticity)))))
        if point is None:
            # The first decision: a probe, so that the next window reads latency's elasticity.
            if ratio > 1 + TRT_DEADBAND:
                return TRT_MAX_UP_FAR if ratio > 1.5 else TRT_MAX_UP_NEAR
            return max(TRT_MAX_DOWN, math.sqrt(ratio))
        if ratio > 1 + TRT_HELD_SHARE and latency > 0:
            # The steeper reading that stands above the windows' noise says how near the knee is.
            readings = []
            for level, then, then_error in (point,) if self._holding else (point, self._anchor or point):
                span = math.log(self.level / level) if level > 0 else 0.0
                if span >= math.log(TRT_ELASTICITY_SPAN) and then > 0:
                    change = math.log(latency / then)
                    noise = TRT_NOISE_SE * math.hypot(error, then_error)
                    readings.append(change / span if change > max(noise, TRT_FLAT_ELASTICITY * span) else 0.0)
            if readings:
                elasticity = max(readings)
                if elasticity == 0.0:
                    return TRT_MAX_UP_FAR  # flat beyond noise: the knee is not near
                predicted = ratio ** (1 / elasticity)  # the level that gives T, as a multiple of this one
                up = TRT_MAX_UP_FAR if predicted > 1.5 else TRT_MAX_UP_NEAR
                return min(up, max(1.0, math.sqrt(predicted)))
        up = TRT_MAX_UP_FAR if ratio > 1.5 else TRT_MAX_UP_NEAR
        return min(up, max(TRT_MAX_DOWN, math.sqrt(ratio)))

    def _bracket_elasticity(self) -> float | None:
        """Latency's elasticity to the level across the latest windows under and over T; None
        without such a pair."""
        if self._under is None or self._over is None:
            return None
        (low, fast), (high, slow) = self._under, self._over
        if high <= low * 1.001 or slow <= fast:
            return None  # the queue an overshoot built still draining: no reading
        return math.log(slow / fast) / math.log(high / low)

    def _log_error(self, figures: Any) -> float:
        """The standard error of the window's percentile, in log terms: half the log distance
        between the percentiles one binomial standard error of rank either side of it."""
        share = self.steer.percentile / 100
        step = math.sqrt(share * (1 - share) / max(figures.samples, 1))
        low = figures.latency_ms(100 * max(share - step, 0.0))
        high = figures.latency_ms(100 * min(share + step, 1.0))
        if not low or not high or low <= 0:
            return 0.0
        return math.log(high / low) / 2

    def _window_figures(self) -> tuple[Any, bool]:
        """The figures of the shortest recent part of the window that holds TRT_WINDOW_S seconds
        and enough samples for the percentile (latency from the send), and whether it does; the
        whole window, not yet full, otherwise. A window of TRT_MAX_WINDOW_S counts as full."""
        seconds = list(self._window)
        figures = measure(seconds[-TRT_WINDOW_S:], steps=self.steer.steps or None, from_send=True)
        size = min(len(seconds), TRT_WINDOW_S)

        needed = self.needed * (TRT_HOLD_SAMPLES if self._holding else 1)
        while figures.samples < needed and size < len(seconds):
            size += 1
            figures = measure(seconds[-size:], steps=self.steer.steps or None, from_send=True)
        full = size >= TRT_WINDOW_S and (figures.samples >= needed or size >= TRT_MAX_WINDOW_S)
        return figures, full

    def status(self) -> dict[str, Any]:
        """Where the steering stands, for the live view."""
        last = self.history[-1] if self.history else None
        return {
            "method": "target_response_time", "phase": "hold", "level": self.level,
            "level_unit": "vus" if self.model == "closed" else "rate_per_s", "target_ms": self.steer.target_ms,
            "latency_ms": last["latency_ms"] if last else None, "held": bool(last and last["held"]),
            "set_aside_s": self.set_aside_s,
        }

    def _move(self, run: LevelSetter, level: float) -> None:
        if self.model == "closed":
            level = float(max(1, round(level)))
        self._moved_up = level > self.level
        self.level = move(run, self.model, self.scenarios, level)
        # The window restarts: what it held was measured at the old level.
        self._window.clear()

    def result(self) -> dict[str, Any]:
        """The rate that held the target (latency within ±10 % of T): the median of the windows
        that held it once it was bracketed (before that, or when it never was bracketed, the
        highest; when it never held, the highest rate at or under T + 10 %), and how long the
        latency was held within ±10 % of T."""
        held = [entry for entry in self.history if entry["held"]]
        under = [
            entry for entry in self.history
            if entry["window_full"] and entry["latency_ms"] is not None and not entry["generator_saturated"]
            and entry["latency_ms"] <= (1 + TRT_HELD_SHARE) * self.steer.target_ms
        ]
        longest = current = 0
        for entry in self.history:
            if entry.get("starved"):
                continue  # set aside: neither holds nor breaks a streak
            current = current + 1 if entry["held"] else 0
            longest = max(longest, current)
        first_held = held[0]["second"] if held else None
        # The highest rate that held; on a tie (a saturated target serves the same rate at
        # several levels) the latest, which is the settled one.
        # Seconds that held T come first: on a saturated target a lower level serves the same
        # rate at a lower latency, and the level that holds T is the answer asked for.
        best = self._steady(held) or max(reversed(held or under), key=lambda entry: entry["ok_rps"], default=None)
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
            "latency_basis": "from_send",
            "samples_needed": self.needed,
            "set_aside_s": self.set_aside_s,
            "notes": [f"{self.set_aside_s} s set aside: generator starved (its timers late with little CPU used)"]
            if self.set_aside_s else [],
            "history": self.history,
        }


Steering = FindMaxSteering | TargetResponseTimeSteering


def steering_for(plan: Plan) -> Steering | None:
    if plan.steer is None:
        return None
    if isinstance(plan.steer, FindMax):
        return FindMaxSteering(plan)
    return TargetResponseTimeSteering(plan)
