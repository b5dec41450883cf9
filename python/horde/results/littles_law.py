"""Little's law on a run: were the VUs' seconds all spent where the figures say?

A closed model's VUs are each, at every instant, waiting for a response, thinking, waiting for
their pacing or backing off after a failed connect. Over steady seconds, Little's law then says
VUs = throughput × (mean response time + think time), and the same for an open model's VUs in
flight. The engine times every one of those parts; time no figure accounts for was spent queued
somewhere unmeasured on the client side: in the generator (a starved or saturated process runs
its timers late, so think times and pacing last longer than planned), or in a connection pool.

A pool is the one queue the latency does include: a request's wait for a pooled connection counts
in its latency, and the engine has no figure of its own for that wait. The target, though, never
held more requests than the pool has connections, so the check counts at most that many in flight
at the target and the rest as queued in the pool (:func:`judge`).

The check reads the plan as stored (think times, pacing, the pool) and judges only seconds at a
steady level (not a ramp's, not the first second at a new level, not an open model's second
whose VUs in flight moved between its two readings: a queue building or draining). Where the
figures do not allow it (too few steady seconds, think times it cannot count), it says why and
``consistent`` is ``None``: not known.

>>> mean_think_ms({"type": "uniform", "min_ms": 10, "max_ms": 30})
20.0
>>> round(mean_think_ms({"type": "normal", "mean_ms": 0, "stddev_ms": 10}), 3)
3.989
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from horde.engine import histogram
from horde.engine.snapshot import Snapshot
from horde.results.summary_blocks import LittlesLawBlock

#: A gap above this share of the VUs (either way) is more than the per-second bookkeeping's
#: own error: something queued that no figure measured.
TOLERANCE_PERCENT: Final = 10.0
#: Fewer steady seconds than this are too short to judge (each second's edges carry requests
#: begun in the one before).
MIN_STEADY_SECONDS: Final = 3
#: Requests that got no response are counted, never timed: past this share of the requests,
#: the time they held their VUs is too large an unknown.
UNTIMED_LIMIT_PERCENT: Final = 5.0
#: The engine's timers resolve the millisecond (a pause rounds up to the next one): a gap of
#: at most this much a pause is the timers', not a queue.
TIMER_RESOLUTION_MS: Final = 1.0
#: An open model's VUs in flight are read once a second (the busy VUs at each second's end):
#: a gap within this many standard errors of that sampling is not evidence.
SAMPLING_SIGMAS: Final = 3.0


def mean_think_ms(think: Mapping[str, Any] | None) -> float:
    """The mean pause of a think time as the engine draws it (a normal one is cut at 0)."""
    if not think:
        return 0.0
    kind = think.get("type")
    if kind == "constant":
        return float(think["duration_ms"])
    if kind == "uniform":
        return (float(think["min_ms"]) + float(think["max_ms"])) / 2.0
    if kind == "exponential":
        return float(think["mean_ms"])
    mean, stddev = float(think["mean_ms"]), float(think["stddev_ms"])
    if stddev <= 0:
        return max(0.0, mean)
    # E[max(0, X)] for X ~ N(mean, stddev²): mean·Φ(mean/σ) + σ·φ(mean/σ).
    z = mean / stddev
    return mean * 0.5 * (1.0 + math.erf(z / math.sqrt(2.0))) + stddev * math.exp(-z * z / 2.0) / math.sqrt(
        2.0 * math.pi
    )


@dataclass(frozen=True)
class PlanShape:
    """What the check reads of a stored plan."""

    #: "closed" or "open"; None when the plan mixes them.
    model: str | None
    #: The mean think time after each request step, by (scenario, step).
    think_ms: dict[tuple[str, str], float] = field(default_factory=dict)
    #: Each scenario's ``think`` steps at its top level, their means added up (once an iteration).
    think_steps_ms: dict[str, float] = field(default_factory=dict)
    #: The request step that runs once an iteration, per scenario (counts its iterations).
    first_step: dict[str, str] = field(default_factory=dict)
    pacing_s: dict[str, float] = field(default_factory=dict)
    #: Connections a generator's pool holds when they bound the requests at the target at once
    #: (an HTTP/1.1 or SQL pool; an HTTP/2 pool multiplexes, so it bounds nothing).
    pool: int | None = None
    #: Why the plan's time cannot be counted from the figures; None when it can.
    unknowable: str | None = None
    #: When the longest scenario's stages end: later seconds drain, they are not steady.
    planned_s: float | None = None


def plan_shape(plan: Mapping[str, Any]) -> PlanShape:
    """The think times, pacing, pool and workload model of a plan as the store keeps it.

    >>> shape = plan_shape({"target": {"base_url": "http://h", "connections": {"pool": 4}}, "scenarios": [
    ...     {"name": "s", "workload": {"type": "closed"}, "steps": [
    ...         {"type": "http", "name": "a", "think_time": {"type": "constant", "duration_ms": 50}},
    ...         {"type": "think", "think_time": {"type": "constant", "duration_ms": 100}}]}]})
    >>> shape.model, shape.think_ms, shape.think_steps_ms, shape.first_step, shape.pool
    ('closed', {('s', 'a'): 50.0}, {'s': 100.0}, {'s': 'a'}, 4)
    """
    scenarios = list(plan.get("scenarios") or [])
    models = {str((scenario.get("workload") or {}).get("type") or "closed") for scenario in scenarios}
    think_ms: dict[tuple[str, str], float] = {}
    think_steps_ms: dict[str, float] = {}
    first_step: dict[str, str] = {}
    pacing_s: dict[str, float] = {}
    unknowable: list[str] = []
    steer = plan.get("steer") or {}
    for scenario in scenarios:
        name = str(scenario.get("name"))
        if scenario.get("pacing_s"):
            pacing_s[name] = float(scenario["pacing_s"])
        _walk(scenario.get("steps") or [], name, True, think_ms, think_steps_ms, first_step, unknowable)
        if (think_steps_ms.get(name) or name in pacing_s) and name not in first_step:
            unknowable.append(f"scenario {name}'s iterations cannot be counted (no request step at its top level)")
        if steer.get("by") == "pace" and (think_steps_ms.get(name) or name in pacing_s or any(think_ms.values())):
            unknowable.append("the steered pace scales think times and pacing, and the figures do not carry it")
    target = plan.get("target") or {}
    connections = target.get("connections")
    pool = int(connections["pool"]) if isinstance(connections, Mapping) and connections.get("pool") else None
    if pool is not None and target.get("http_version") in ("2", "auto") and not _is_sql(target):
        pool = None
    return PlanShape(
        model=models.pop() if len(models) == 1 else None,
        think_ms=think_ms,
        think_steps_ms=think_steps_ms,
        first_step=first_step,
        pacing_s=pacing_s,
        pool=pool,
        unknowable="; ".join(dict.fromkeys(unknowable)) or None,
        planned_s=max(
            (
                sum(
                    float(stage.get("duration_s") or 0.0)
                    for stage in (scenario.get("workload") or {}).get("stages") or []
                )
                for scenario in scenarios
            ),
            default=None,
        ),
    )


def _is_sql(target: Mapping[str, Any]) -> bool:
    return str(target.get("base_url") or "").startswith(("postgresql://", "postgres://"))


def _walk(
    steps: list[Any],
    scenario: str,
    once: bool,
    think_ms: dict[tuple[str, str], float],
    think_steps_ms: dict[str, float],
    first_step: dict[str, str],
    unknowable: list[str],
) -> None:
    """Reads a list of steps; ``once``: they run once an iteration (the top level, a group in
    it). A request step's think time is counted per request wherever it is; a ``think`` step's
    only where it runs once an iteration (inside a choice, a loop or an if, how often is not
    known)."""
    for step in steps:
        if not isinstance(step, Mapping):
            continue
        kind = step.get("type", "http")
        if kind == "think":
            if once:
                think_steps_ms[scenario] = think_steps_ms.get(scenario, 0.0) + mean_think_ms(step.get("think_time"))
            elif mean_think_ms(step.get("think_time")):
                unknowable.append(f"scenario {scenario} has a think step inside a choice, loop or if")
        elif kind == "parallel":
            unknowable.append(f"scenario {scenario}'s parallel step overlaps its requests")
        elif kind in ("choice", "loop", "if", "group"):
            inner = [*(step.get("steps") or []), *(step.get("then") or []), *(step.get("else") or [])]
            for branch in step.get("branches") or []:
                inner.extend(branch.get("steps") or [])
            _walk(inner, scenario, once and kind == "group", think_ms, think_steps_ms, first_step, unknowable)
        elif step.get("name") is not None:
            think_ms[(scenario, str(step["name"]))] = mean_think_ms(step.get("think_time"))
            if once:
                first_step.setdefault(scenario, str(step["name"]))


@dataclass
class Sums:
    """The check's running sums over steady seconds."""

    seconds: int = 0
    elapsed_s: float = 0.0
    #: VU-seconds: alive (closed) or busy (open) by the snapshots.
    measured_vu_s: float = 0.0
    #: VU-seconds the figures account for (responses' latencies, think, pacing, backoff), with
    #: at most the pool's connections in flight at the target.
    expected_vu_s: float = 0.0
    #: Request-seconds by the latencies (every request in flight from its start, pool waits too).
    in_flight_s: float = 0.0
    #: Request-seconds over what the pool's connections could hold at once.
    pool_queued_s: float = 0.0
    think_s: float = 0.0
    #: Think times and pacing waits taken (each a timer that may fire late).
    pauses: int = 0
    requests: int = 0
    responses: int = 0
    #: Each second's VUs, squared and summed (an open model's sampling error).
    measured_squares: float = 0.0


def _reading_noise(mean: float) -> float:
    """How far apart two once-a-second readings of busy VUs around ``mean`` may lie by chance:
    Poisson arrivals spread them by about √mean, and a count is read to the whole VU (uniform
    arrivals read at the same phase each second are off by up to one, every time)."""
    return max(1.0, TOLERANCE_PERCENT / 100.0 * mean, SAMPLING_SIGMAS * math.sqrt(mean))


class LittlesLaw:
    """The check over a run, fed one snapshot at a time."""

    def __init__(self, shape: PlanShape) -> None:
        self.shape = shape
        self.sums = Sums()
        self._level: tuple[Any, ...] | None = None
        self._held = 0
        #: The previous second's busy VUs (an open model's queue moving between two readings).
        self._previous_busy: float | None = None

    def add(self, snapshot: Snapshot) -> None:
        level = (snapshot.get("target_vus"), snapshot.get("target_rate_per_s"))
        self._held = self._held + 1 if level == self._level else 0
        self._level = level
        busy, self._previous_busy = self._previous_busy, float(snapshot["busy_vus"])
        # The first second at a level holds requests begun at the one before; a closed model's
        # VUs still arriving or leaving are not at the level yet.
        if snapshot["final"] or self._held < 1 or int(snapshot["second"]) < 2:
            return
        # Past the stages' end the run drains (the 0.5 s: the last interval's own lateness).
        if self.shape.planned_s is not None and float(snapshot["elapsed_s"]) > self.shape.planned_s + 0.5:
            return
        if self.shape.model == "closed" and snapshot.get("target_vus") != snapshot["active_vus"]:
            return
        # An open model's VUs in flight that moved between the second's two readings: a queue
        # building or draining, whose latencies belong to other seconds than its VUs.
        now = float(snapshot["busy_vus"])
        if self.shape.model == "open" and busy is not None and abs(now - busy) > _reading_noise(max(busy, now)):
            return
        interval = float(snapshot["interval_s"])
        if interval <= 0:
            return
        sums = self.sums
        vus = float(snapshot["active_vus"] if self.shape.model == "closed" else snapshot["busy_vus"])
        generators = len(snapshot.get("generators") or []) or 1
        in_flight = think = 0.0
        work: dict[str, float] = {}
        iterations: dict[str, int] = {}
        for entry in snapshot["steps"]:
            if entry.get("kind", "request") != "request":
                continue
            scenario, step = entry["scenario"], entry["step"]
            requests = int(entry["requests"])
            # From the actual send where the open model timed from the intended start: a VU is
            # busy from the moment it is handed its arrival, not from when that was due.
            blob = entry.get("from_send_histogram") or entry["histogram"]
            stats = histogram.stats(blob, ()) if blob else None
            responses = stats.count if stats else 0
            latency_s = responses * stats.mean_ms / 1000.0 if stats else 0.0
            thinking = requests * self.shape.think_ms.get((scenario, step), 0.0) / 1000.0
            sums.pauses += requests if self.shape.think_ms.get((scenario, step)) else 0
            if self.shape.first_step.get(scenario) == step:
                iterations[scenario] = requests
                thinking += requests * self.shape.think_steps_ms.get(scenario, 0.0) / 1000.0
                sums.pauses += requests if self.shape.think_steps_ms.get(scenario) else 0
                sums.pauses += requests if scenario in self.shape.pacing_s else 0
            in_flight += latency_s
            think += thinking
            work[scenario] = work.get(scenario, 0.0) + latency_s + thinking
            sums.requests += requests
            sums.responses += responses
        queued = 0.0
        if self.shape.pool is not None:
            queued = max(0.0, in_flight - self.shape.pool * generators * interval)
        paced = sum(
            max(spent, iterations.get(scenario, 0) * self.shape.pacing_s.get(scenario, 0.0))
            for scenario, spent in work.items()
        )
        sums.seconds += 1
        sums.elapsed_s += interval
        sums.measured_vu_s += vus * interval
        sums.measured_squares += vus * vus
        sums.expected_vu_s += paced - queued + float(snapshot.get("connect_backoff_s") or 0.0)
        sums.in_flight_s += in_flight
        sums.pool_queued_s += queued
        sums.think_s += think

    def block(self, generator: Mapping[str, Any]) -> LittlesLawBlock:
        """The summary's ``littles_law`` block (see :func:`judge`); ``generator`` is the
        summary's generator health, named when it explains a gap."""
        return judge(self.shape, self.sums, generator)


def judge(shape: PlanShape, sums: Sums, generator: Mapping[str, Any]) -> LittlesLawBlock:
    """``expected`` VUs (what the figures account for) against ``measured`` ones, the gap in %
    of the measured, ``consistent`` (the gap within :data:`TOLERANCE_PERCENT`; ``None``: not
    known) and ``why``: for a gap, what likely queued unmeasured; when not known, why not.

    A closed run of 10 VUs, 100 responses a second of 100 ms each: 10 VUs in flight, consistent.

    >>> sums = Sums(seconds=5, elapsed_s=5.0, measured_vu_s=50.0, expected_vu_s=50.0, in_flight_s=50.0,
    ...             requests=500, responses=500)
    >>> {key: judge(PlanShape(model="closed"), sums, {})[key] for key in ("expected", "measured", "gap_percent", "consistent")}
    {'expected': 10.0, 'measured': 10.0, 'gap_percent': 0.0, 'consistent': True}

    A pool of 2 connections under the same 10 VUs: at most 2 in flight at the target.

    >>> pooled = Sums(seconds=5, elapsed_s=5.0, measured_vu_s=50.0, expected_vu_s=10.0, in_flight_s=50.0,
    ...               pool_queued_s=40.0, requests=500, responses=500)
    >>> verdict = judge(PlanShape(model="closed", pool=2), pooled, {})
    >>> verdict["gap_percent"], verdict["consistent"], verdict["why"].split(":")[0]
    (80.0, False, 'a connection pool smaller than the concurrency')
    """
    model = shape.model
    base: LittlesLawBlock = {"model": model, "seconds": sums.seconds, "tolerance_percent": TOLERANCE_PERCENT}
    if model is None:
        return {**base, "consistent": None, "why": "not known: the plan mixes closed and open scenarios"}
    if shape.unknowable:
        return {**base, "consistent": None, "why": f"not known: {shape.unknowable}"}
    if sums.seconds < MIN_STEADY_SECONDS:
        return {
            **base,
            "consistent": None,
            "why": f"not known: {sums.seconds} second(s) at a steady level, {MIN_STEADY_SECONDS} needed",
        }
    elapsed = sums.elapsed_s
    measured = sums.measured_vu_s / elapsed
    expected = sums.expected_vu_s / elapsed
    untimed = sums.requests - sums.responses
    figures: LittlesLawBlock = {
        **base,
        "expected": round(expected, 3),
        "measured": round(measured, 3),
        "throughput_per_s": round(sums.requests / elapsed, 3),
        "response_time_ms": round(1000.0 * sums.in_flight_s / sums.responses, 3) if sums.responses else None,
        "think_time_ms": round(1000.0 * sums.think_s / sums.requests, 3) if sums.requests else None,
        "in_flight": round(sums.in_flight_s / elapsed, 3),
        "pool_connections": shape.pool,
    }
    if measured <= 0:
        return {**figures, "gap_percent": None, "consistent": None, "why": "not known: no VU was busy"}
    gap = 100.0 * (measured - expected) / measured
    figures["gap_percent"] = round(gap, 2)
    if sums.requests and 100.0 * untimed / sums.requests > UNTIMED_LIMIT_PERCENT:
        return {
            **figures,
            "consistent": None,
            "why": f"not known: {untimed:,} of {sums.requests:,} requests got no response, and the time "
            "they held their VUs is not measured",
        }
    if abs(gap) <= TOLERANCE_PERCENT:
        return {**figures, "consistent": True, "why": None}
    overrun_ms = 1000.0 * (sums.measured_vu_s - sums.expected_vu_s) / sums.pauses if sums.pauses else None
    figures["overrun_ms_per_pause"] = None if overrun_ms is None else round(overrun_ms, 3)
    if overrun_ms is not None and 0 < overrun_ms <= TIMER_RESOLUTION_MS and shape.pool is None:
        return {
            **figures,
            "consistent": None,
            "why": f"not known: the {gap:.0f} % gap is {overrun_ms:.2f} ms a think time or pacing wait, within "
            f"the {TIMER_RESOLUTION_MS:g} ms the engine's timers resolve",
        }
    if model == "open":
        # Busy VUs are read once a second: the mean of those readings has their spread's
        # standard error (Poisson arrivals spread them about √L around a mean of L), and is
        # read to the whole VU (see _reading_noise).
        variance = max(0.0, sums.measured_squares / sums.seconds - measured * measured)
        error = math.sqrt(variance * sums.seconds / (sums.seconds - 1) / sums.seconds)
        if abs(measured - expected) <= max(1.0, SAMPLING_SIGMAS * error):
            return {
                **figures,
                "consistent": None,
                "why": f"not known: {measured:.2f} VUs in flight on average, read once a second over "
                f"{sums.seconds} s, cannot tell a {abs(gap):.0f} % gap from chance",
            }
    return {**figures, "consistent": False, "why": _why(shape, sums, gap, expected, measured, generator)}


def _why(
    shape: PlanShape, sums: Sums, gap: float, expected: float, measured: float, generator: Mapping[str, Any]
) -> str:
    """What likely queued unmeasured, most specific first."""
    elapsed = sums.elapsed_s
    unit = "VUs" if shape.model == "closed" else "VUs in flight"
    if gap < 0:
        return (
            f"the figures account for {expected:.1f} {unit}, more than the {measured:.1f} there were: "
            "requests overlapped within a VU, or the latency counts time the VUs did not spend"
        )
    pool = shape.pool
    if pool is not None and sums.pool_queued_s > (TOLERANCE_PERCENT / 100.0) * sums.measured_vu_s:
        return (
            f"a connection pool smaller than the concurrency: by the latencies {sums.in_flight_s / elapsed:.1f} "
            f"requests were in flight, and the pool's {pool} connection(s) per generator carried at most "
            f"{pool} of them; the rest waited for a connection, a wait the latency includes and the target never saw"
        )
    saturated = int(generator.get("saturated_seconds") or 0)
    starved = int(generator.get("starved_seconds") or 0)
    late = float(generator.get("timer_lateness_p99_ms") or 0.0)
    unaccounted = f"{measured - expected:.1f} of {measured:.1f} {unit} ({gap:.0f} %) are in no figure"
    if saturated:
        return f"{unaccounted}: the generator was saturated for {saturated} s (its CPU), so VUs waited to run"
    if sums.pauses:
        overrun = 1000.0 * (sums.measured_vu_s - sums.expected_vu_s) / sums.pauses
        return (
            f"{unaccounted}: likely the generator's timers: think times and pacing waits lasting {overrun:.1f} ms "
            f"longer each than planned would account for it (they ran up to {late:g} ms late at p99, and round "
            "up to the millisecond)"
        )
    if starved or late > 10.0:
        return f"{unaccounted}: the generator, whose timers ran up to {late:g} ms late (p99), so VUs waited to run"
    return (
        f"{unaccounted}: something on the client side queued unmeasured (client-side limits, a proxy, "
        "the generator's scheduling), though the generator's health looked fine"
    )


def littles_law_warning(summary: Mapping[str, Any]) -> str | None:
    """The run's warning when its figures fail Little's law, as the console, the report and
    the dashboard word it; None when they pass or it is not known.

    >>> littles_law_warning({"littles_law": {"consistent": False, "model": "closed", "measured": 50.0,
    ...     "expected": 10.0, "gap_percent": 80.0, "why": "a connection pool smaller than the concurrency"}})
    "Little's law: 50 VUs, the figures account for 10 (80 % gap): a connection pool smaller than the concurrency. The latency includes a client-side queue: it does not describe the target alone."
    """
    block = summary.get("littles_law") or {}
    if block.get("consistent") is not False:
        return None
    unit = "VUs" if block.get("model") == "closed" else "VUs in flight"
    return (
        f"Little's law: {float(block['measured']):,.3g} {unit}, the figures account for "
        f"{float(block['expected']):,.3g} ({float(block['gap_percent']):.0f} % gap): {block['why']}. "
        "The latency includes a client-side queue: it does not describe the target alone."
    )
