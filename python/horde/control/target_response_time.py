"""Target response time: the highest level whose latency percentile holds at T, found fast from a
cold start and then held there while the system changes.

The steering reads each snapshot and moves one number, the **level**: the steered scenarios'
VUs (closed model), their arrival rate (open model) or, with ``by: pace``, the pace of a fixed
population of VUs (their think times and pacing divided by it; their number, connections and
logins stay the plan's). It never opens a socket: everything it decides comes from the
per-second snapshots the store keeps.

**Readings.** Each level is judged on a *reading*: its seconds after the move settled (one
second skipped; after a move down from a level over T, also the seconds in which the queue
that level built was still draining), less the seconds in which the generator was starved,
with latency from each request's send. A reading's percentile comes with an interval: the
latencies at the ranks two binomial standard errors either side of the percentile's rank
(``CONFIDENCE_Z``). A reading is *under* T when even the interval's top is under T, *over*
when even its bottom is over, and otherwise runs on for more samples; when its time is up
(``READING_MAX_S``) the point estimate decides. So noise far below T, from a few dozen samples
at a low level, is never read as "at T": it is an uncertain reading, and the climb goes on. A
climb reading whose point estimate is well under T (or under it at all, on fewer samples than
the percentile needs) is judged at its shortest span, a *probe*: the next, higher level says
more than more seconds at this one would.

**Phases.**

- *climb*: from ``start`` (one VU, 10 arrivals/s or the plan's pace by default) the level grows
  while readings are under T: by ``GROWTH_FAR`` while latency has not risen with the level
  beyond the readings' noise (a target flat far below T, or far from its knee; the climb's
  readings are then pooled, their histograms merged, so that a few dozen samples at a low level
  do not stop it), by what latency's measured rise with the level (its elasticity) predicts
  gives T otherwise, and by at most ``GROWTH_UNCERTAIN_FLAT`` within ``FAR_MARGIN`` of T. A level
  that starts over T is halved until one is under (*descend*).
- *bisect*: once a level under T and one over it are known, the next level is their geometric
  middle, until the bracket is narrower than ``PRECISION`` (one VU for VUs); holding starts at
  its lower end, or a safety step under it where that end's short reading was near T.
- *hold*: the level is kept where its percentile is within ±10 % of T. A window sure to be over
  T, or under it, moves the level (two seconds in a row: hysteresis against noise), each by the
  share the elasticity near T predicts, damped; a window over the band on a few seconds only
  (a burst, or the start of a slow-down) by a gentle step; and every ``HOLD_CHECK_S`` seconds a
  window more than ``HOLD_RECENTRE`` off T moves the level towards it. Every second over the
  band costs the next ``HELD_WINDOW_S`` seconds' windows, so holding errs under T. A level that
  went over T is a *ceiling* for moves up (they stop half way to it) only for a while: ``CEILING_MEMORY_S``, doubled each time the
  ceiling proves right again, so a target whose latency is a cliff is not pushed over it
  every few seconds, and a level that was over T during a passing spike (autovacuum, a
  standby's long read, a GC) is tried again once it has passed. There is never a permanent
  ceiling.

**The answer** (:meth:`TargetResponseTimeSteering.result`) is one of: T *held* (the rate and
level that held it, for how many of the seconds after convergence, and the percentile over
those seconds, from their merged histograms); or, when it was not held, which case it was:
*unreachable* (even the lowest level was over T), *not reached* (at the highest level the plan,
the open model's VUs or the generator allowed, latency stayed under T), a *cliff* (latency
jumps from well under T to over it between two adjacent levels: the highest level under T is
given, but T cannot be held), the system *kept crossing* T, or the run ended before the
steering converged.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from horde.control.find_max import messages_per_second
from horde.control.measure import Figures, measure
from horde.control.steered_level import (
    LevelSetter,
    held_level_plan,
    move,
    samples_needed,
    steered_model,
    steered_scenarios,
)
from horde.engine import histogram
from horde.engine.snapshot import Snapshot
from horde.plan import ClosedModel, ClosedStage, Plan
from horde.plan.control import TargetResponseTime
from horde.results.summary import GENERATOR_SATURATED, GENERATOR_STARVED, generator_state
from horde.results.summary_blocks import CapacityBlock

#: A reading's percentile "holds" T within this share of it, either side.
BAND = 0.10
#: The bracket (a level under T, one over it) is closed once its levels are this close (a
#: share of the lower one); VUs close at one VU apart. Coarser than find-max's 3 %: near T a
#: few seconds' percentile varies by ±10 % (a queue's tail comes in bursts), more than a 5 %
#: step of the level moves it, so holding, with its longer windows, refines the level.
PRECISION = 0.10
#: How many binomial standard errors of rank either side of the percentile bound its interval
#: where a reading's seconds are too few batches to read its spread from (see _batch_interval).
CONFIDENCE_Z = 2.0
#: Seconds skipped after each move: the second the move happened in, and one for connections
#: and queues to move to the new level.
SETTLE_S = 1
#: A reading's shortest and longest span in seconds while climbing and bisecting.
READING_MIN_S = 2
READING_MAX_S = 5
#: ... and while bisecting, where the levels are near the knee (a queue moved up needs a moment
#: to build, and its tail comes in bursts).
BISECT_MIN_S = 3
BISECT_MAX_S = 5
#: Holding: the window is the current level's seconds, the last HOLD_WINDOW_S of them, judged
#: each second once HOLD_MIN_S are in. Near its knee a queue's tail comes in bursts (busy
#: periods): an M/M/4 queue's p95 over 3 s varies by ±15 % at a fixed level, over 20 s by ±5 %.
HOLD_MIN_S = 3
HOLD_UP_MIN_S = 10
HOLD_WINDOW_S = 60
#: Holding: every this many seconds at one level, a window whose estimate is out of the band
#: moves the level even when its interval is not sure (and a reading is recorded).
HOLD_CHECK_S = 20
#: Holding: from a window this long on, the dead zone around T narrows from ±BAND/2 to ±BAND/5.
HOLD_FINE_S = 20
#: Holding: the last seconds looked at on their own, so that a sudden slow-down moves the level
#: down without waiting for the long window.
HOLD_RECENT_S = 5
#: A second holds T when the percentile over the this many seconds that end with it is within
#: ±BAND of T (see bench/README.md for why 30 s: a fixed, right level's shorter windows leave the
#: band by the queue's own bursts).
HELD_WINDOW_S = 30
#: Holding: after this many moves up in a row, sure each time to be under T, the level that
#: gives T is far (the system got faster, or a passing slow-down had pushed the level down):
#: the climb starts again from here, with its short readings, rather than in small steps...
RECLIMB_AFTER = 2
#: ... from under RECLIMB_BELOW of the highest level read at or under T while holding; nearer
#: it (short climb readings of a queue near its knee read low, and holding's own steps are the
#: ones to take there) only after RECLIMB_AFTER_NEAR moves up in a row: a system that got faster
#: than it ever was while holding.
RECLIMB_BELOW = 0.8
RECLIMB_AFTER_NEAR = 4
#: ... and its growth is at most this a step below that level (T is likely near it).
RECLIMB_GROWTH = 1.25
#: A reading whose interval's bottom is this many times T is over at its first judged second:
#: no point queueing longer to learn more.
CLEARLY_OVER = 2.0
#: Climb: the growth while latency has not risen with the level beyond noise, and its bounds
#: when the elasticity predicts the level that gives T (a share of the way there, in log terms,
#: as a smooth target's latency rises faster than its local elasticity says).
GROWTH_FAR = 2.0
GROWTH_MIN = 1.1
GROWTH_SHARE = 0.75
#: Climb: the growth after an uncertain reading whose point estimate is under T (a probe: the
#: next reading, at a higher level, has more samples and says more).
GROWTH_UNCERTAIN_FLAT = 1.5
GROWTH_UNCERTAIN = 1.2
#: Climb: while latency has not risen with the level, the growth is GROWTH_FAR as long as the
#: reading is at least this share under T (a knee is then at least a doubling away or it
#: shows as a rise first), GROWTH_UNCERTAIN_FLAT nearer T.
FAR_MARGIN = 0.2
#: Climb: a reading whose point estimate is this share under T is judged at its shortest span,
#: however wide its interval (a probe).
PROBE_MARGIN = 0.1
#: Latency's rise across two readings counts as a response to the level only beyond this many
#: standard errors of the two together and more than FLAT_ELASTICITY per unit of log level.
NOISE_SE = 2.0
FLAT_ELASTICITY = 0.1
#: Hold: a move goes HOLD_SHARE of the way (in log terms) to the level that would give T were
#: latency to rise as the HOLD_ELASTICITY power of the level (a queue near its knee: 1.5 to 3),
#: and at most HOLD_MAX_UP up or HOLD_MAX_DOWN down.
HOLD_ELASTICITY = 2.0
HOLD_SHARE = 0.7
HOLD_MAX_UP = 1.25
HOLD_MAX_DOWN = 0.7
#: Hold: a move of a rate or a pace smaller than this share is no move (its effect is below
#: what any window can tell apart).
MIN_STEP = 0.01
#: Hold: every HOLD_CHECK_S seconds a window whose estimate is more than this share off T
#: moves the level (by HOLD_SHARE of the way): a level 4 % off the one that gives T reads
#: ±6 % off T, and its 20 s windows then leave the band a third of the time more often.
HOLD_RECENTRE = BAND / 2
#: Hold: a move down on the last HOLD_RECENT_S seconds alone (a burst, or the start of a
#: slow-down) is at most this step; the new level's own window, sure over T, moves further.
HOLD_RECENT_DOWN = 0.95
#: Hold: how long a level found over T caps moves up, at first and at most (seconds).
CEILING_MEMORY_S = (15, 120)
#: After a move down from a level over T, seconds are skipped while the queue drains (a second's
#: percentile over T and still falling), at most this many.
DRAIN_MAX_S = 5
#: Holding: a level read within this many seconds is expected to give what it gave then.
MEASURED_MEMORY_S = 60
#: An open model (or a pace) whose reading was over RECOVER_OVER times T queued work: the level
#: goes to RECOVER_SHARE of the highest level under T until a second's percentile is back under
#: T (or stops falling), at most RECOVER_MAX_S seconds, before the next level is read.
RECOVER_OVER = 1.5
RECOVER_SHARE = 0.5
RECOVER_MAX_S = 8
#: A reading with more errors than this (percent) is over T whatever its latency: fast
#: failures are not a level that holds.
ERROR_LIMIT_PERCENT = 5.0
#: An open model that drops more than this share of its arrivals (percent) has run out of VUs:
#: its level is not what the target gets.
DROPPED_LIMIT_PERCENT = 1.0
#: The answer: T counts as held when the held seconds are at least this share of the seconds
#: after convergence.
HELD_SHARE_FOR_ANSWER = 0.5
#: What, rather than latency, can keep a level from holding: the generator itself, an open
#: model out of VUs.
LIMITS = ("generator_saturated", "dropped_arrivals")
#: The default start of each kind of level.
DEFAULT_START = {"closed": 1.0, "open": 10.0, "pace": 1.0}


@dataclass
class Reading:
    """One level judged: its percentile with an interval, and what that says of T."""

    index: int
    phase: str
    level: float
    started_s: int
    judged_at_s: int
    seconds: int
    samples: int
    latency_ms: float | None
    low_ms: float | None
    high_ms: float | None
    ok_rps: float
    error_percent: float
    dropped_percent: float
    #: ``under``, ``over`` or ``at`` T (within the band), or ``limit`` (the generator, or an
    #: open model's VUs, not the target, set what was measured).
    verdict: str
    #: Why: ``confident`` (the interval says so), ``estimate`` (the time was up: the point
    #: estimate says so), ``errors``, ``generator_saturated``, ``dropped_arrivals``, ``no_responses``.
    basis: str
    held: bool = False


@dataclass
class _Ceiling:
    level: float
    until_s: int
    memory_s: int


@dataclass
class _Level:
    """The level being read: since when, and its seconds so far."""

    level: float
    phase: str
    started_s: int
    draining: bool = False
    seconds: list[Snapshot] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    drained: int = 0
    drain_latency_ms: float | None = None


class TargetResponseTimeSteering:
    """Finds and holds the highest level whose percentile is at or under T (see the module)."""

    def __init__(self, plan: Plan) -> None:
        assert isinstance(plan.steer, TargetResponseTime)
        self.steer: TargetResponseTime = plan.steer
        self._plan = plan
        self.model = "pace" if self.steer.by == "pace" else steered_model(plan)
        self.scenarios = steered_scenarios(plan)
        self.target = float(self.steer.target_ms)
        self.needed = samples_needed(self.steer.percentile)
        self.level = self.initial_level = initial_level(plan)
        #: The run lasts this long (the prepared plan's stages): T is held until it ends.
        self.planned_length_s = float(self.steer.duration_s)
        self.readings: list[Reading] = []
        self.history: list[dict[str, Any]] = []
        self.set_aside_s = 0
        self.converged_at_s: int | None = None
        self._current = _Level(self.level, "climb", started_s=1 + SETTLE_S)
        self._under: Reading | None = None  # the highest level read under T (bracket, climb)
        self._over: Reading | None = None  # the lowest level read over T (bracket)
        self._ceiling: _Ceiling | None = None
        self._streak = 0  # hold: seconds in a row sure to be over T (+) or under it (-)
        # Each second's histogram (the steered steps, from the send), successful responses and
        # messages a second, once converged: the answer is read over the held seconds (their
        # histograms merged, never percentiles averaged).
        self._seconds_held: dict[int, tuple[bytes, float, float]] = {}
        self._trail: deque[bytes] = deque(maxlen=HELD_WINDOW_S)
        self._limit: str | None = None  # what stopped the climb short of T: max, generator, max_vus
        self._last_over_ms: float | None = None  # the percentile of the reading just judged over T
        self._pending: tuple[float, str] = (self.level, "climb")  # where a recovery goes next
        self._ups = 0  # holding: moves up in a row
        # Holding: each level's latest window percentile and when (in seconds of history).
        self._measured: dict[float, tuple[float, int]] = {}
        self._climb_from = 0  # the first reading of the current climb
        self._climb_blobs: dict[int, bytes] = {}  # each climb reading's merged histogram, by index

    # -- the steering's surface --------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Target response time holds until the run's duration ends."""
        return False

    def prepared_plan(self) -> Plan:
        """The plan the engine runs: the steered scenarios at the starting level for the
        steering's duration; by pace, each keeps its own stages (its population, ramp included),
        its last VU count held until the duration ends, and the steering moves its pace."""
        if self.model != "pace":
            return held_level_plan(self._plan, self.initial_level, self.planned_length_s)
        scenarios = []
        for scenario in self._plan.scenarios:
            workload = scenario.workload
            if scenario.name not in self.scenarios or not isinstance(workload, ClosedModel):
                scenarios.append(scenario)
                continue
            planned = sum(stage.duration_s for stage in workload.stages)
            stages = list(workload.stages)
            if planned < self.planned_length_s:
                stages.append(ClosedStage(duration_s=self.planned_length_s - planned, vus=stages[-1].vus))
            scenarios.append(scenario.model_copy(update={"workload": workload.model_copy(update={"stages": stages})}))
        return self._plan.model_copy(update={"scenarios": scenarios})

    @property
    def level_unit(self) -> str:
        return {"closed": "vus", "open": "rate_per_s", "pace": "pace"}[self.model]

    def status(self) -> dict[str, Any]:
        """Where the steering stands, for the live view."""
        last = self.readings[-1] if self.readings else None
        now = self.history[-1] if self.history else {}
        # Holding, the percentile over the last HELD_WINDOW_S (what "held" is judged on); searching, the
        # current level's reading so far.
        latency = now.get("held_window_ms") if now.get("held_window_ms") is not None else now.get("latency_ms")
        return {
            "method": "target_response_time",
            "phase": self._current.phase,
            "level": self.level,
            "level_unit": self.level_unit,
            "target_ms": self.target,
            "percentile": self.steer.percentile,
            "latency_ms": latency,
            "held": bool(now.get("held")),
            "last": None
            if last is None
            else {"level": last.level, "verdict": last.verdict, "latency_ms": last.latency_ms},
            "set_aside_s": self.set_aside_s,
        }

    def observe(self, snapshot: Snapshot, run: LevelSetter, *, cpu_limit_percent: float) -> None:
        """Takes one snapshot; moves the level when a reading is judged."""
        if snapshot["final"]:
            return
        second = int(snapshot["second"])
        current = self._current
        state = generator_state(snapshot, cpu_limit_percent)
        entry: dict[str, Any] = {
            "second": second,
            "level": self.level,
            "phase": current.phase,
            "latency_ms": None,
            "held": False,
            "counted": False,
            "starved": state == GENERATOR_STARVED,
            "generator_saturated": state == GENERATOR_SATURATED,
        }
        self.history.append(entry)
        if state == GENERATOR_STARVED:
            if second >= current.started_s:
                self.set_aside_s += 1  # the machine did not run the generator: its sends bunched up
            return
        # This second on its own (the steered steps, from the send), measured once for all below.
        own = measure([snapshot], steps=self.steer.steps or None, from_send=True)
        settling = second < current.started_s  # the move's own second, or the one it settles in
        recovering = current.phase == "recover"
        draining = not settling and not recovering and current.draining and self._still_draining(own, current)
        if self.converged_at_s == second and (settling or recovering or draining):
            # Converged once the held level is what the target gets: the move to it settled
            # and the queue the search's last level over T built has drained.
            self.converged_at_s += 1
        self._note_held(snapshot, own, entry)
        if settling or draining:
            return
        if recovering:
            self._observe_recovery(own, current, run, second)
            return
        current.seconds.append(snapshot)
        current.states.append(state)
        entry["counted"] = True
        if current.phase == "hold":
            self._observe_hold(current, entry, run, second)
            return
        figures = measure(current.seconds, steps=self.steer.steps or None, from_send=True)
        entry["latency_ms"] = figures.latency_ms(self.steer.percentile)
        reading = self._read(current, figures, second)
        if reading is None:
            return
        self.readings.append(reading)
        if current.phase == "climb" and figures.histogram:
            self._climb_blobs[reading.index] = figures.histogram
        self._decide(reading, run, second)

    def _note_held(self, snapshot: Snapshot, own: Figures, entry: dict[str, Any]) -> None:
        """Once converged, whether this second holds T: the percentile over the HELD_WINDOW_S
        seconds that end with it (every second but starved ones, moves and drains included:
        what users got; the seconds since convergence only) within ±BAND of T. Its histogram and
        rate are kept for the answer."""
        if self.converged_at_s is None or int(snapshot["second"]) < self.converged_at_s:
            return
        self._trail.append(own.histogram)  # seconds since convergence only: what the search did is not held
        blobs = [blob for blob in self._trail if blob]
        latency = None
        if blobs:
            merged = histogram.merge(blobs) if len(blobs) > 1 else blobs[0]
            latency = histogram.stats(merged, (self.steer.percentile,)).percentile(self.steer.percentile)
        entry["held_window_ms"] = _rounded(latency)
        entry["held"] = (
            latency is not None
            and abs(latency - self.target) <= BAND * self.target
            and own.error_percent() <= ERROR_LIMIT_PERCENT
        )
        self._seconds_held[int(snapshot["second"])] = (
            own.histogram,
            own.ok / max(own.seconds, 1e-9),
            messages_per_second([snapshot]),
        )

    def _observe_hold(self, current: _Level, entry: dict[str, Any], run: LevelSetter, second: int) -> None:
        """Holding: the percentile over the current level's seconds (the last HOLD_WINDOW_S of
        them), each second once HOLD_MIN_S are in. The level moves when the window is sure to be
        off T (its interval wholly over T, or under it, with the estimate outside ±BAND/2, two
        seconds in a row; or its last HOLD_RECENT_S seconds sure to be over the band), or every
        HOLD_CHECK_S seconds when the estimate is outside the band; a limit (the generator,
        dropped arrivals, errors, no responses) moves it down at once."""
        window = current.seconds[-HOLD_WINDOW_S:]
        figures = measure(window, steps=self.steer.steps or None, from_send=True)
        latency = figures.latency_ms(self.steer.percentile)
        entry["latency_ms"] = latency
        counted = len(current.seconds)
        if counted < HOLD_MIN_S:
            return
        within = latency is not None and abs(latency - self.target) <= BAND * self.target
        limit = self._limit_of(current, figures, len(window))
        if limit is not None:
            self._record(current, figures, second, "limit" if limit in LIMITS else "over", limit, len(window))
            self._streak = 0
            if limit in LIMITS:
                self._limit = limit
            self._remember_ceiling(current.level, second)
            self._set(
                run,
                self._down(current.level, 0.8 if limit in LIMITS else 0.5),
                "hold",
                second,
                drain=limit not in LIMITS,
            )
            return
        assert latency is not None
        low, high = self._batch_interval(window, latency)
        # The dead zone narrows as the window grows: a long window's estimate is close enough
        # to move the level by a little towards the band's middle.
        dead = BAND / 2 if len(window) < HOLD_FINE_S else BAND / 5
        # Over the band on HOLD_RECENT_S seconds or more counts as sure: every second spent
        # there costs the next HELD_WINDOW_S seconds' windows, and the target's safety first.
        sure_over = low > self.target and latency > self.target * (1 + dead)
        # ... as a burst (a gentle step) where its interval is not yet sure.
        burst = not sure_over and len(window) >= HOLD_RECENT_S and latency > self.target * (1 + BAND)
        sure_over = sure_over or burst
        recent = window[-HOLD_RECENT_S:]
        if not sure_over and len(window) > HOLD_RECENT_S:
            # A sudden slow-down shows in the last seconds before the long window's percentile.
            figures_recent = measure(recent, steps=self.steer.steps or None, from_send=True)
            recent_ms = figures_recent.latency_ms(self.steer.percentile)
            if recent_ms is not None and recent_ms > self.target * (1 + BAND):
                recent_low, _ = self._batch_interval(recent, recent_ms)
                if recent_low > self.target * (1 + BAND):
                    sure_over, burst, latency, figures = True, True, recent_ms, figures_recent
        # Short windows read a queue's tail low (its bursts are rare): a move up waits for a
        # longer one than a move down, which protects the target, needs.
        sure_under = high < self.target and latency < self.target * (1 - dead) and counted >= HOLD_UP_MIN_S
        self._streak = (max(self._streak, 0) + 1) if sure_over else (min(self._streak, 0) - 1) if sure_under else 0
        full = len(window) >= HOLD_CHECK_S
        periodic = full and counted % HOLD_CHECK_S == 0
        over = latency > self.target
        level = None
        off = abs(math.log(latency / self.target)) > HOLD_RECENTRE
        if abs(self._streak) >= 2 or (periodic and off):
            basis = "estimate" if abs(self._streak) < 2 else "confident"
            self._streak = 0
            level = self._holding_level(current.level, latency, second)
            if level is not None and burst:
                level = max(level, self._down(current.level, HOLD_RECENT_DOWN))
        if level is None:
            # Staying: a reading now and then, for the answer and the report's table.
            if periodic:
                self._record(
                    current, figures, second, "at" if within else "over" if over else "under", "estimate", len(window)
                )
            return
        self._record(current, figures, second, "over" if over else "under", basis, len(window))
        # A burst's queue drains at the level just under it: no recovery far below.
        self._last_over_ms = latency if over and not burst else None
        # Moves up from clearly under the band (not from within it) count towards a new climb.
        self._ups = self._ups + 1 if latency < self.target * (1 - BAND) else 0
        if over:
            self._set(run, level, "hold", second, drain=True)
        elif self._ups >= RECLIMB_AFTER_NEAR or (
            self._ups >= RECLIMB_AFTER and level < RECLIMB_BELOW * self._highest_good_level()
        ):
            self._ups = 0
            self._reclimb(run, level, second)
        elif level != current.level:
            self._set(run, level, "hold", second)

    def _highest_good_level(self) -> float:
        """The highest level a holding window read at or under T (0 when none has)."""
        return max((r.level for r in self.readings if r.phase == "hold" and r.verdict in ("under", "at")), default=0.0)

    def _reclimb(self, run: LevelSetter, level: float, second: int) -> None:
        """Back to climbing from ``level``: what was read above it (the bracket's top, the climb's
        readings) belongs to the system as it was; the level just read under T stays the
        bracket's bottom."""
        self._over = None
        self._climb_from = len(self.readings) - 1
        self._set(run, level, "climb", second)

    def _observe_recovery(self, own: Figures, current: _Level, run: LevelSetter, second: int) -> None:
        """Recovering from an overload: calm once a second's percentile is back under T (or
        has stopped falling), within RECOVER_MAX_S; then on to the level that was asked for."""
        latency = own.latency_ms(self.steer.percentile)
        previous, current.drain_latency_ms = current.drain_latency_ms, latency
        current.drained += 1
        calm = latency is None or latency <= self.target or (previous is not None and latency >= 0.9 * previous)
        if calm or current.drained >= RECOVER_MAX_S:
            level, phase = self._pending
            self._last_over_ms = None
            self._set(run, level, phase, second)

    def _still_draining(self, own: Figures, current: _Level) -> bool:
        """Whether this second still shows the queue an over-T level built: its percentile over
        T and falling (a level that is itself over T does not fall), within DRAIN_MAX_S."""
        latency = own.latency_ms(self.steer.percentile)
        previous, current.drain_latency_ms = current.drain_latency_ms, latency
        current.draining = (
            latency is not None
            and latency > self.target * (1 + BAND)
            and current.drained < DRAIN_MAX_S
            and (previous is None or latency < previous)
        )
        if current.draining:
            current.drained += 1
            self.history[-1]["phase"] = "drain"
        return current.draining

    def _read(self, current: _Level, figures: Figures, second: int) -> Reading | None:
        """The reading of the current level once it can be judged; None while it runs on."""
        counted = len(current.seconds)
        bisecting = current.phase == "bisect"
        shortest, longest = (BISECT_MIN_S, BISECT_MAX_S) if bisecting else (READING_MIN_S, READING_MAX_S)
        needed = self.needed
        latency = figures.latency_ms(self.steer.percentile)
        low, high = self._batch_interval(current.seconds, latency) if latency is not None else (None, None)
        saturated = sum(state == GENERATOR_SATURATED for state in current.states)
        verdict: str | None = None
        basis = ""
        if figures.requests == 0 or latency is None:
            if counted >= longest:
                verdict, basis = "over", "no_responses"
        elif figures.error_percent() > ERROR_LIMIT_PERCENT and counted >= shortest:
            verdict, basis = "over", "errors"
        elif low is not None and low > CLEARLY_OVER * self.target:
            verdict, basis = "over", "confident"
        elif counted >= shortest and 2 * saturated > counted:
            verdict, basis = "limit", "generator_saturated"
        elif (
            counted >= shortest
            and self.model == "open"
            and figures.dropped_percent > DROPPED_LIMIT_PERCENT
            and (high is None or high <= self.target * (1 + BAND))
        ):
            verdict, basis = "limit", "dropped_arrivals"
        elif counted >= shortest:
            assert low is not None and high is not None
            enough = figures.samples >= needed
            if high < self.target:
                verdict, basis = "under", "confident"
            elif low > self.target and enough:
                verdict, basis = "over", "confident"
            elif current.phase == "climb" and latency < self.target * (1 - (PROBE_MARGIN if enough else 0.0)):
                # A probe: its point estimate is well under T (or under it at all, on fewer
                # samples than a percentile needs: a level this low gains little from waiting),
                # so the next, higher level (more samples, nearer the knee) says more than more
                # seconds here would. A probe that was wrong is caught above it: the bracket's
                # bottom is read again by the bisection's longer readings and by holding.
                verdict, basis = "under", "estimate"
            elif counted >= longest:
                # The time is up, the interval still straddles T: the point estimate decides.
                # A short reading never says "at T": a few dozen samples far below T would park
                # the level there, and a queue moved up reads low until it has built (holding
                # judges T over longer windows). Under T, the climb goes on by a probe's step;
                # over it on enough samples (or, bisecting, past the band), the level brackets T
                # from above. Fewer samples than the percentile needs (a low level) never say
                # "over" short of CLEARLY_OVER: the p95 of 40 requests is their second slowest.
                basis = "estimate"
                over = (enough and latency > self.target) or (
                    current.phase == "bisect" and latency > self.target * (1 + BAND)
                )
                verdict = "over" if over else "under"
        if verdict is None:
            return None
        return Reading(
            index=len(self.readings),
            phase=current.phase,
            level=current.level,
            started_s=current.started_s,
            judged_at_s=second,
            seconds=counted,
            samples=figures.samples,
            latency_ms=_rounded(latency),
            low_ms=_rounded(low),
            high_ms=_rounded(high),
            ok_rps=round(figures.ok_rps, 3),
            error_percent=round(figures.error_percent(), 3),
            dropped_percent=round(figures.dropped_percent, 3),
            verdict=verdict,
            basis=basis,
        )

    def _batch_interval(self, seconds: list[Snapshot], latency: float) -> tuple[float, float]:
        """The interval of a reading's percentile from its own spread: its seconds grouped into
        batches of at least half the samples a percentile needs, the standard error of the
        percentile's logarithm from the batches' (batch means), widened by Student's t for
        their number. Near a knee a queue's tail comes in bursts (an M/M/4 queue at 85 % load
        has a p95 of 58 ms, and single seconds read anything from 29 to 125 ms): independent
        samples would make a few seconds look sure. With fewer than two batches (a low rate,
        far from any knee, where requests barely wait for one another): the binomial interval."""
        batches: list[float] = []
        group: list[Snapshot] = []
        for snapshot in seconds:
            group.append(snapshot)
            figures = measure(group, steps=self.steer.steps or None, from_send=True)
            if figures.samples >= self.needed / 2:
                value = figures.latency_ms(self.steer.percentile)
                if value:
                    batches.append(math.log(value))
                group = []
        if len(batches) < 2:
            low, high = self._interval(measure(seconds, steps=self.steer.steps or None, from_send=True))
            return (low or 0.0, high or math.inf)
        error = statistics.stdev(batches) / math.sqrt(len(batches))
        spread = math.exp(_student_t(len(batches) - 1) * error)
        return latency / spread, latency * spread

    def _interval(self, figures: Figures) -> tuple[float | None, float | None]:
        """The latencies at the ranks CONFIDENCE_Z binomial standard errors either side of the
        percentile's: the interval the percentile lies in, were these samples independent."""
        if not figures.samples:
            return None, None
        share = self.steer.percentile / 100
        spread = CONFIDENCE_Z * math.sqrt(share * (1 - share) / figures.samples)
        low = figures.latency_ms(100 * max(share - spread, 0.0))
        high = figures.latency_ms(100 * min(share + spread, 1.0))
        return low, high

    # -- deciding ----------------------------------------------------------------------------

    def _decide(self, reading: Reading, run: LevelSetter, second: int) -> None:
        phase = self._current.phase
        self._last_over_ms = reading.latency_ms if reading.verdict == "over" else None
        if reading.latency_ms is not None:
            self._measured[reading.level] = (reading.latency_ms, len(self.history))
        if reading.verdict in ("under", "at") and (
            self._under is None or reading.level >= self._under.level or phase == "hold"
        ):
            self._under = reading
        if reading.verdict == "over" and reading.basis != "no_responses" or reading.verdict == "limit":
            if self._over is None or reading.level <= self._over.level or phase == "hold":
                self._over = reading
            if self.converged_at_s is not None:
                self._remember_ceiling(reading.level, second)
        if reading.verdict == "at":
            self._hold(run, reading.level, second)
        elif reading.verdict == "limit":
            self._limit = reading.basis
            self._remember_ceiling(reading.level, second)
            below = (
                self._under.level
                if self._under is not None and self._under.level < reading.level
                else self._down(reading.level, 0.8)
            )
            self._hold(run, below, second)
        elif reading.verdict == "under":
            if reading.level >= self.steer.max:
                self._limit = "max"
                self._hold(run, reading.level, second)
            elif self._over is not None and self._over.level > reading.level:
                self._bisect(run, second)
            else:
                self._climb(reading, run, second)
        elif reading.level <= self.steer.min:
            self._hold(run, reading.level, second)  # the lowest level is over T: held there, read on
        elif self._under is not None and self._under.level < reading.level:
            self._bisect(run, second)
        else:
            self._set(run, self._down(reading.level, 0.5), "descend", second, drain=True)

    def _climb(self, reading: Reading, run: LevelSetter, second: int) -> None:
        assert reading.latency_ms is not None
        elasticity = self._climb_elasticity(reading)
        latency = reading.latency_ms
        if elasticity is None:
            latency = self._pooled_latency(reading) or latency
        ratio = self.target / max(latency, 1e-6)
        if elasticity is None:
            # Latency has not risen with the level beyond its readings' noise.
            growth = (
                GROWTH_FAR
                if ratio >= 1 / (1 - FAR_MARGIN)
                else GROWTH_UNCERTAIN_FLAT
                if ratio > 1 + BAND
                else GROWTH_UNCERTAIN
            )
        elif reading.basis == "estimate" and ratio <= 1 + BAND:
            growth = GROWTH_UNCERTAIN
        else:
            growth = min(GROWTH_FAR, max(GROWTH_MIN, ratio ** (GROWTH_SHARE / elasticity)))
            if ratio < 1 / (1 - FAR_MARGIN):
                # Within FAR_MARGIN of T, an elasticity read far below the knee says little of
                # the rise ahead: past a queue's knee latency grows without bound.
                growth = min(growth, GROWTH_UNCERTAIN_FLAT)
        if self.converged_at_s is not None and reading.level < self._highest_good_level() * (1 + PRECISION):
            growth = min(growth, RECLIMB_GROWTH)  # back towards levels held: T is likely near
        level = min(self.steer.max, self._up(reading.level, growth))
        ceiling = self._ceiling
        if ceiling is not None and reading.level >= ceiling.level * 0.999:
            self._ceiling = None  # the level that was over T is under it now
        elif ceiling is not None:
            level = min(level, ceiling.level)  # a climb again tries the last level over T, not past it
        self._set(run, level, "climb", second)

    def _pooled_latency(self, reading: Reading) -> float | None:
        """Where latency has not risen with the level: the percentile of this climb's readings
        under T merged (a few dozen samples a reading at low levels put a p95 anywhere from
        the service time to T; a few hundred pin it), unless this reading is above it by more
        than its own noise (a rise the readings alone were too few to show)."""
        blobs = [
            self._climb_blobs[r.index]
            for r in self.readings[self._climb_from :]
            if r.verdict == "under" and r.index in self._climb_blobs
        ]
        if len(blobs) < 2 or reading.latency_ms is None:
            return None
        merged = histogram.merge(blobs)
        pooled = histogram.stats(merged, (self.steer.percentile,)).percentile(self.steer.percentile)
        if pooled is None or math.log(reading.latency_ms / pooled) > NOISE_SE * _log_error(reading):
            return None
        return pooled

    def _climb_elasticity(self, reading: Reading) -> float | None:
        """Latency's elasticity to the level across this reading and the earlier climb readings
        (the steepest that stands above their noise), or None where latency has not risen
        beyond noise: a flat curve, far from its knee."""
        steepest: float | None = None
        for earlier in self.readings[self._climb_from : -1]:
            if earlier.verdict not in ("under", "at") or earlier.level >= reading.level or not earlier.latency_ms:
                continue
            span = math.log(reading.level / earlier.level)
            if span < math.log(1.1):
                continue
            change = math.log(max(reading.latency_ms or 0.0, 1e-6) / earlier.latency_ms)
            noise = NOISE_SE * math.hypot(_log_error(reading), _log_error(earlier))
            if change > max(noise, FLAT_ELASTICITY * span):
                slope = change / span
                steepest = slope if steepest is None else max(steepest, slope)
        return steepest

    def _bisect(self, run: LevelSetter, second: int) -> None:
        under, over = self._under, self._over
        assert under is not None and over is not None
        if self._closed_bracket(under.level, over.level):
            # Hold at the end whose latency is within the band and nearer T (a step function of
            # VUs: 20 VUs at -19 %, 21 at +6 %), else at the end under T.
            within = [
                r for r in (under, over) if r.latency_ms and abs(r.latency_ms - self.target) <= BAND * self.target
            ]
            chosen = min(within, key=lambda r: abs(math.log(r.latency_ms / self.target))) if within else under  # type: ignore[operator]
            level = chosen.level
            if (
                self.model != "closed"
                and chosen.basis != "confident"
                and chosen.latency_ms is not None
                and chosen.latency_ms > self.target * (1 - BAND / 2)
            ):
                # A short reading near T is as likely over it as under: holding starts a safety
                # step lower, where a burst does not cost the held window its next seconds, and
                # holding's longer windows move it up when it is under T.
                level = max(chosen.level * (1 - PRECISION / 2), self.steer.min)
                if chosen is over:
                    level = max(level, under.level)
            self._hold(run, level, second)
            return
        # The geometric middle: latency read over T past a knee is a queue's (its size says
        # how long the level was there, not how far past T it is), and a short reading under
        # T near a knee reads low, so neither end's latency places T within the bracket.
        level = math.sqrt(under.level * over.level)
        if self.model == "closed":
            level = float(min(over.level - 1, max(under.level + 1, round(level))))
        self._set(run, level, "bisect", second, drain=True)

    def _closed_bracket(self, low: float, high: float) -> bool:
        if self.model == "closed":
            return high - low <= 1
        return high <= low * (1 + PRECISION)

    def _limit_of(self, current: _Level, figures: Figures, seconds: int) -> str | None:
        """What, rather than latency, says the level cannot hold: no responses, errors, the
        generator itself, or an open model out of VUs; None otherwise."""
        states = current.states[-seconds:]
        if figures.requests == 0 or figures.latency_ms(self.steer.percentile) is None:
            return "no_responses"
        if figures.error_percent() > ERROR_LIMIT_PERCENT:
            return "errors"
        if 2 * sum(state == GENERATOR_SATURATED for state in states) > len(states):
            return "generator_saturated"
        if self.model == "open" and figures.dropped_percent > DROPPED_LIMIT_PERCENT:
            return "dropped_arrivals"
        return None

    def _record(
        self, current: _Level, figures: Figures, second: int, verdict: str, basis: str, seconds: int
    ) -> Reading:
        """A holding window as a reading (for the answer and the report's table)."""
        latency = figures.latency_ms(self.steer.percentile)
        low, high = self._batch_interval(current.seconds[-seconds:], latency) if latency is not None else (None, None)
        reading = Reading(
            index=len(self.readings),
            phase="hold",
            level=current.level,
            started_s=second - seconds + 1,
            judged_at_s=second,
            seconds=seconds,
            samples=figures.samples,
            latency_ms=_rounded(latency),
            low_ms=_rounded(low),
            high_ms=_rounded(high),
            ok_rps=round(figures.ok_rps, 3),
            error_percent=round(figures.error_percent(), 3),
            dropped_percent=round(figures.dropped_percent, 3),
            verdict=verdict,
            basis=basis,
            held=latency is not None and abs(latency - self.target) <= BAND * self.target and verdict != "limit",
        )
        self.readings.append(reading)
        if latency is not None:
            self._measured[current.level] = (latency, len(self.history))
        if verdict in ("under", "at"):
            self._under = reading
        elif verdict in ("over", "limit"):
            self._over = reading
        return reading

    def _holding_level(self, level: float, latency: float, second: int) -> float | None:
        """Where a held level moves, from its window's percentile: HOLD_SHARE of the way (in
        log terms) to the level the elasticity near T predicts gives T, bounded; moves up stop
        half way to a ceiling still remembered. None when it should stay."""
        # One elasticity for every target: read off two noisy windows near T it swings from flat
        # to a cliff, and a move sized on it from a crawl to a leap.
        factor = (self.target / latency) ** (HOLD_SHARE / HOLD_ELASTICITY)
        if latency > self.target:
            self._remember_ceiling(level, second)
            moved = max(self.steer.min, self._down(level, max(HOLD_MAX_DOWN, min(0.98, factor))))
            return moved if self._nearer(level, moved, latency) else None
        if level >= self.steer.max:
            self._limit = "max"
            return None
        moved = min(self.steer.max, self._up(level, min(HOLD_MAX_UP, max(1.02, factor))))
        ceiling = self._ceiling
        if ceiling is not None and level >= ceiling.level * 0.999:
            self._ceiling = None  # the level that was over T holds now: what made it so has passed
        elif ceiling is not None and second < ceiling.until_s:
            # Under a level known to be over T, bisect towards it: faster back than the
            # elasticity's small steps, and never onto it.
            moved = min(self.steer.max, (level + ceiling.level) / 2)
            if self.model == "closed":
                moved = float(math.floor(moved))
            if moved <= level or moved < level * (1 + MIN_STEP):
                return None  # one VU under it, or a step too small to tell from noise
        elif ceiling is not None:
            # Forgotten: tried again (what it was read to give then is forgotten with it), but
            # not passed at once.
            moved = min(moved, ceiling.level)
            return moved if self._nearer(level, moved, latency, lately=False) else None
        return moved if self._nearer(level, moved, latency) else None

    def _nearer(self, level: float, moved: float, latency: float, *, lately: bool = True) -> bool:
        """Whether ``moved`` is expected nearer T than ``level`` (latency rising as the
        HOLD_ELASTICITY power of the level): one VU of twenty moves p95 by about a tenth, so a
        window 2 % under T that asked for one more VU would land 8 % over it. With ``lately``,
        a level read in the last MEASURED_MEMORY_S seconds is expected to give what it gave."""
        measured = self._measured.get(moved) if lately else None
        if measured is not None and measured[1] >= len(self.history) - MEASURED_MEMORY_S:
            expected = measured[0]  # that level was read lately: what it gave, not a model of it
            if moved > level and expected > self.target * (1 + BAND):
                return False  # up to a level lately over the band: under T is what was asked
        else:
            expected = latency * (moved / level) ** HOLD_ELASTICITY
        if moved < level and latency > self.target * (1 + BAND) and expected <= self.target * (1 + BAND):
            return True  # from over the band to within it or under: under T is what was asked
        return abs(math.log(expected / self.target)) < abs(math.log(latency / self.target))

    def _remember_ceiling(self, level: float, second: int) -> None:
        """A level over T caps moves up for a while: CEILING_MEMORY_S at first, twice as long
        each time a level at or above it is over T again (a cliff is not pushed over every few
        seconds), at first again when a lower level is over T (the system got slower)."""
        first, longest = CEILING_MEMORY_S
        ceiling = self._ceiling
        if ceiling is not None and level >= ceiling.level * (1 - PRECISION):
            self._ceiling = _Ceiling(
                level=min(level, ceiling.level),
                until_s=second + min(longest, 2 * ceiling.memory_s),
                memory_s=min(longest, 2 * ceiling.memory_s),
            )
        else:
            self._ceiling = _Ceiling(level=level, until_s=second + first, memory_s=first)

    # -- moving ------------------------------------------------------------------------------

    def _up(self, level: float, factor: float) -> float:
        moved = level * factor
        return float(max(level + 1, math.ceil(moved))) if self.model == "closed" else moved

    def _down(self, level: float, factor: float) -> float:
        moved = level * factor
        if self.model == "closed":
            return float(max(self.steer.min, 1.0, min(level - 1, math.floor(moved))))
        return max(self.steer.min, moved)

    def _hold(self, run: LevelSetter, level: float, second: int) -> None:
        if self.converged_at_s is None:
            self.converged_at_s = second + 1
            if self._over is not None and self._over.level > level:
                self._remember_ceiling(self._over.level, second)  # the bracket's top, as found
        self._set(run, level, "hold", second, drain=level < self.level)

    def _set(
        self, run: LevelSetter, level: float, phase: str, second: int, *, drain: bool = False, moved: bool = True
    ) -> None:
        level = min(self.steer.max, max(self.steer.min, level))
        overloaded = self._last_over_ms is not None and self._last_over_ms > RECOVER_OVER * self.target
        if drain and overloaded and self.model != "closed" and moved:
            # An arrival rate (or a pace) past the target's capacity queued work that only a
            # level well under it drains: there first, then to the level asked for.
            base = min(level, self._under.level) if self._under is not None else level
            self._pending = (level, phase)
            self.level = move(run, self.model, self.scenarios, max(self.steer.min, base * RECOVER_SHARE))
            self._current = _Level(self.level, "recover", started_s=second + 1)
            return
        if moved and level != self.level:
            self.level = move(run, self.model, self.scenarios, level)
            self._current = _Level(
                self.level, phase, started_s=second + 1 + SETTLE_S, draining=drain and self.model != "closed"
            )
        else:
            self._current = _Level(self.level, phase, started_s=second + 1)

    # -- the answer --------------------------------------------------------------------------

    def result(self) -> CapacityBlock:
        """The capacity block's target-response-time part (see the module's last paragraph)."""
        tracked = [
            entry
            for entry in self.history
            if self.converged_at_s is not None and entry["second"] >= self.converged_at_s and not entry["starved"]
        ]
        held_entries = [entry for entry in tracked if entry["held"] and entry["second"] in self._seconds_held]
        held_s = len(held_entries)
        tracked_s = len(tracked)
        outcome, limit = self._outcome(held_s, tracked_s)
        answer: CapacityBlock = {
            "method": "target_response_time",
            "by": self.steer.by,
            "level_unit": self.level_unit,
            "percentile": self.steer.percentile,
            "target_ms": self.target,
            "outcome": outcome,
            "limit": limit,
            "latency_basis": "from_send",
            "samples_needed": self.needed,
            "converged_after_s": self.converged_at_s,
            "held_s": held_s,
            "held_window_s": HELD_WINDOW_S,
            "tracked_s": tracked_s,
            "held_percent": round(100.0 * held_s / tracked_s, 1) if tracked_s else None,
            "set_aside_s": self.set_aside_s,
            "max_rps": None,
            "level_at_max": None,
            "latency_ms_at_max": None,
        }
        if outcome == "held":
            blobs = [self._seconds_held[entry["second"]][0] for entry in held_entries]
            blobs = [blob for blob in blobs if blob]
            merged = histogram.merge(blobs) if len(blobs) > 1 else blobs[0]
            answer["max_rps"] = round(
                statistics.fmean(self._seconds_held[entry["second"]][1] for entry in held_entries), 3
            )
            # Message steps (tcp://, udp://, kcp://): the messages a second at that level, sent
            # and received, which a gateway's capacity is counted in.
            messages = statistics.fmean(self._seconds_held[entry["second"]][2] for entry in held_entries)
            answer["max_messages_per_s"] = round(messages, 3) or None
            answer["level_at_max"] = statistics.median_low(entry["level"] for entry in held_entries)
            answer["latency_ms_at_max"] = _rounded(
                histogram.stats(merged, (self.steer.percentile,)).percentile(self.steer.percentile)
            )
        highest = self._highest_under()
        answer["highest_under_target"] = (
            None
            if highest is None
            else {
                "level": highest.level,
                "ok_rps": highest.ok_rps,
                "latency_ms": highest.latency_ms,
                "second": highest.judged_at_s,
            }
        )
        if outcome == "cliff" and highest is not None:
            # The highest level under T is the answer to "the most load with the percentile at
            # or under T", though T itself cannot be held: the sentence says so.
            answer.update(
                {"max_rps": highest.ok_rps, "level_at_max": highest.level, "latency_ms_at_max": highest.latency_ms}
            )
        lowest_over = self._lowest_over_above(highest.level if highest else 0.0)
        answer["lowest_over_target"] = (
            None
            if lowest_over is None
            else {
                "level": lowest_over.level,
                "ok_rps": lowest_over.ok_rps,
                "latency_ms": lowest_over.latency_ms,
                "second": lowest_over.judged_at_s,
            }
        )
        answer["sentence"] = self._sentence(answer)
        notes = []
        if self.set_aside_s:
            notes.append(f"{self.set_aside_s} s set aside: generator starved (its timers late with little CPU used)")
        answer["notes"] = notes
        answer["readings"] = [asdict(reading) for reading in self.readings]
        answer["history"] = self.history
        return answer

    def _outcome(self, held_s: int, tracked_s: int) -> tuple[str, str | None]:
        """Which case the run was, from the seconds after convergence (the percentile over the
        HELD_WINDOW_S ending each: held, under the band or over it) and the readings' bracket."""
        if self.converged_at_s is None:
            judged = [r for r in self.readings if r.verdict != "limit"]
            if judged and all(r.verdict == "over" for r in judged) and min(r.level for r in judged) <= self.steer.min:
                return "unreachable", None
            return "not_converged", None
        if tracked_s and held_s >= HELD_SHARE_FOR_ANSWER * tracked_s:
            return "held", None
        after = [
            entry
            for entry in self.history
            if entry["second"] >= self.converged_at_s
            and not entry["starved"]
            and entry.get("held_window_ms") is not None
        ]
        if not after:
            return "not_converged", None
        under_s = sum(entry["held_window_ms"] < self.target * (1 - BAND) for entry in after)
        over_s = sum(entry["held_window_ms"] > self.target * (1 + BAND) for entry in after)
        if 2 * over_s > len(after) and all(entry["level"] <= self.steer.min for entry in after):
            return "unreachable", None
        late_over = [r for r in self.readings if r.judged_at_s >= self.converged_at_s and r.verdict == "over"]
        if self._limit is not None and 2 * under_s >= len(after) and not late_over:
            return "not_reached", self._limit
        highest = self._highest_under()
        lowest_over = self._lowest_over_above(highest.level) if highest is not None else None
        # A cliff: the levels found over T after convergence were all past the highest level
        # under it (tries of the cliff's edge, a window each time), never a level under it.
        if (
            highest is not None
            and lowest_over is not None
            and self._is_cliff(highest, lowest_over)
            and all(r.level > highest.level for r in late_over)
        ):
            return "cliff", None
        return "kept_crossing", None

    def _is_cliff(self, under: Reading, over: Reading) -> bool:
        """Whether latency jumps past T between two adjacent levels: one VU apart, from under
        the band to over it (no VU count holds T); or, for a rate or a pace, within PRECISION,
        from under the band to CLEARLY_OVER times T (a queue without bound, not a knee's rise
        that a noisy window exaggerates)."""
        if under.latency_ms is None or over.latency_ms is None or under.latency_ms >= self.target * (1 - BAND):
            return False
        if self.model == "closed":
            return over.level - under.level <= 1 and over.latency_ms > self.target * (1 + BAND)
        return over.level <= under.level * (1 + PRECISION) and over.latency_ms >= CLEARLY_OVER * self.target

    def _highest_under(self) -> Reading | None:
        under = [
            r
            for r in self.readings
            if r.verdict in ("under", "at") and r.latency_ms is not None and r.latency_ms <= self.target * (1 + BAND)
        ]
        return max(under, key=lambda r: (r.level, r.judged_at_s), default=None)

    def _lowest_over_above(self, level: float) -> Reading | None:
        over = [r for r in self.readings if r.verdict == "over" and r.level > level]
        return min(over, key=lambda r: (r.level, -r.judged_at_s), default=None)

    def _sentence(self, answer: CapacityBlock) -> str:
        """The answer in one sentence, as the summary, report and dashboard print it."""
        percentile = f"p{self.steer.percentile:g}"
        target = f"{percentile} {self.target:g} ms"
        highest = answer["highest_under_target"]
        outcome = answer["outcome"]
        if outcome == "held" and answer["level_at_max"] is not None:
            return (
                f"T held: {target} at {answer['max_rps']:,.1f} req/s (level {_level_text(answer['level_at_max'], self.level_unit)}) "
                f"for {answer['held_s']} of {answer['tracked_s']} s after convergence (from second {self.converged_at_s}); "
                f"the {percentile} over the held seconds was {answer['latency_ms_at_max']:,.2f} ms"
            )
        under = (
            ""
            if highest is None
            else (
                f"; the highest level under T was {_level_text(highest['level'], self.level_unit)} "
                f"({highest['ok_rps']:,.1f} req/s, {percentile} {highest['latency_ms']:,.2f} ms)"
            )
        )
        if outcome == "unreachable":
            lowest = min((r for r in self.readings if r.latency_ms is not None), key=lambda r: r.level, default=None)
            at = (
                ""
                if lowest is None
                else f": at level {_level_text(lowest.level, self.level_unit)} the {percentile} was {lowest.latency_ms:,.2f} ms"
            )
            return f"T unreachable: even the lowest level is over {target}{at}"
        if outcome == "not_reached":
            why = {
                "max": "the plan's max level",
                "generator_saturated": "the generator's own CPU",
                "dropped_arrivals": "the open model's max_vus (arrivals dropped)",
            }.get(answer["limit"] or "", str(answer["limit"]))
            return f"T not reached: at the highest level allowed ({why}) latency stayed under {target}{under}"
        over = answer["lowest_over_target"]
        if outcome == "cliff" and over is not None:  # a cliff is judged between a level under T and one over
            return (
                f"T cannot be held: latency jumps past {target} between adjacent levels{under}; "
                f"level {_level_text(over['level'], self.level_unit)} gave {over['latency_ms']:,.2f} ms"
            )
        if outcome == "kept_crossing":
            return (
                f"T not held: the system kept crossing {target} (held {answer['held_s']} of {answer['tracked_s']} s "
                f"after convergence){under}"
            )
        return f"T not found: the run ended before the steering converged{under}"


def initial_level(plan: Plan) -> float:
    """The level a target-response-time run starts at: ``start``, or the default of its kind."""
    steer = plan.steer
    assert isinstance(steer, TargetResponseTime)
    kind = "pace" if steer.by == "pace" else steered_model(plan)
    start = steer.start if steer.start is not None else DEFAULT_START[kind]
    return min(steer.max, max(steer.min, start))


def _log_error(reading: Reading) -> float:
    """A reading's percentile's standard error in log terms (its interval spans 2 × Z of them)."""
    if not reading.low_ms or not reading.high_ms or reading.low_ms <= 0:
        return 0.0
    return math.log(reading.high_ms / reading.low_ms) / (2 * CONFIDENCE_Z)


#: Student's t at 97.5 % (a two-sided 95 % interval) by degrees of freedom; 2 beyond the table.
_STUDENT_T = {
    1: 12.71,
    2: 4.30,
    3: 3.18,
    4: 2.78,
    5: 2.57,
    6: 2.45,
    7: 2.36,
    8: 2.31,
    9: 2.26,
    10: 2.23,
    15: 2.13,
    20: 2.09,
    30: 2.04,
}


def _student_t(freedom: int) -> float:
    """Student's t for a 95 % two-sided interval with ``freedom`` degrees of freedom.

    >>> _student_t(1), _student_t(12), _student_t(100)
    (12.71, 2.13, 2.0)
    """
    for degrees in sorted(_STUDENT_T):
        if freedom <= degrees:
            return _STUDENT_T[degrees]
    return 2.0


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _level_text(level: float, unit: str) -> str:
    if unit == "vus":
        return f"{level:,.0f} VUs"
    if unit == "pace":
        return f"pace ×{level:.3g}"
    return f"{level:,.4g}/s"
