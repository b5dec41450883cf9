"""JMeter's thread groups as Horde workloads: the standard group and the plugins' Concurrency,
Ultimate, Arrivals and Free-Form Arrivals groups become closed (a number of VUs) or open (an
arrival rate) workloads with stages.

Each function gives the workload and how it differs from the source (empty when it does not);
the numbers that were ``${__P(...)}`` properties stay parameters where a stage takes them as they
are, and are read at their defaults where the stages are computed from them.
"""

from __future__ import annotations

import itertools
from typing import Any

from horde.conversion.jmeter_text import Names
from horde.conversion.jmeter_xml import Node

#: How long a stage that jumps to a level lasts: JMeter starts a step's threads at once, a stage
#: moves linearly, so the jump is a stage this short.
JUMP_S = 0.1
#: The hold when JMeter gives no duration (a loop count instead): Horde's workloads are timed.
DEFAULT_HOLD_S = 60

Workload = dict[str, Any]


def standard(group: Node, names: Names, unresolved: list[str]) -> tuple[Workload, list[str]]:
    """``ThreadGroup`` (and setUp/tearDown groups): N threads started over the ramp-up, run for
    the scheduler's duration (which counts the ramp-up) or for a loop count."""
    differences: list[str] = []
    vus = names.number(group.prop("ThreadGroup.num_threads", "1"), unresolved)
    ramp = names.number(group.prop("ThreadGroup.ramp_time", "0") or "0", unresolved)
    if vus is None or ramp is None:
        return _fallback(differences), differences
    scheduled = group.prop("ThreadGroup.scheduler").lower() == "true"
    duration = names.number(group.prop("ThreadGroup.duration"), []) if scheduled else None
    loops = _loops(group)
    if duration is None:
        if loops == "-1":
            differences.append(f"JMeter loops until stopped; the plan holds its VUs {DEFAULT_HOLD_S} s")
        else:
            differences.append(
                f"JMeter runs {loops or 1} loop(s) per thread; Horde's workloads are timed: the plan holds its VUs "
                f"{DEFAULT_HOLD_S} s"
            )
        duration = DEFAULT_HOLD_S
    stages: list[dict[str, Any]] = []
    delay = names.number(group.prop("ThreadGroup.delay") or "0", []) if scheduled else 0
    if delay and names.resolved_number(delay) > 0:
        stages.append({"duration_s": delay, "vus": 0})
    ramp_s = names.resolved_number(ramp)
    if ramp_s > 0:
        stages.append({"duration_s": ramp, "vus": vus})
    if isinstance(duration, str) or isinstance(ramp, str):
        hold: int | float | str = duration
        if ramp_s > 0:
            differences.append("JMeter's duration counts the ramp-up; the plan holds the whole duration after it")
    else:
        hold = duration - ramp if duration > ramp else duration
    if names.resolved_number(hold) > 0:
        stages.append({"duration_s": hold, "vus": vus})
    if not stages:
        stages.append({"duration_s": DEFAULT_HOLD_S, "vus": vus})
    start = 0 if ramp_s > 0 or stages[0]["vus"] == 0 else vus
    return {"type": "closed", "start_vus": start, "stages": stages}, differences


def _loops(group: Node) -> str:
    for child in group.children:
        if child.tag == "elementProp" and child.attrs.get("name") == "ThreadGroup.main_controller":
            if child.prop("LoopController.continue_forever").lower() == "true" and child.prop(
                "LoopController.loops"
            ) in ("", "-1"):
                return "-1"
            return child.prop("LoopController.loops", "1")
    return "1"


def _fallback(differences: list[str]) -> Workload:
    differences.append(f"a count or time that is not a number: the plan holds 1 VU for {DEFAULT_HOLD_S} s")
    return {"type": "closed", "start_vus": 1, "stages": [{"duration_s": DEFAULT_HOLD_S, "vus": 1}]}


def _unit_s(group: Node) -> int:
    return 60 if group.prop("Unit", "S").strip().upper() == "M" else 1


def _stepped(level: float, ramp_s: float, steps: int, hold_s: float, key: str) -> list[dict[str, Any]]:
    """Stages that reach ``level`` over ``ramp_s`` (in ``steps`` jumps, or linearly without), then
    hold it ``hold_s``."""
    stages: list[dict[str, Any]] = []
    if ramp_s > 0 and steps > 0:
        for index in range(1, steps + 1):
            value = level * index / steps
            stages.append({"duration_s": JUMP_S, key: _rounded(value, key)})
            stages.append({"duration_s": max(ramp_s / steps - JUMP_S, JUMP_S), key: _rounded(value, key)})
    elif ramp_s > 0:
        stages.append({"duration_s": ramp_s, key: _rounded(level, key)})
    if hold_s > 0 or not stages:
        stages.append({"duration_s": hold_s if hold_s > 0 else DEFAULT_HOLD_S, key: _rounded(level, key)})
    return stages


def _rounded(value: float, key: str) -> int | float:
    return round(value) if key == "vus" else round(value, 6)


def _level_ramp_steps_hold(
    group: Node, names: Names, unresolved: list[str], differences: list[str]
) -> tuple[float, float, float, float] | None:
    """The Concurrency and Arrivals groups' target level, ramp-up, steps and hold (in their unit);
    None when one is not a number. Stages are computed from them, so parameters count at their
    defaults."""
    values = [names.number(group.prop(key, default) or default, unresolved) for key, default in _ARRIVAL_KEYS]
    numbers = [value for value in values if value is not None]
    if len(numbers) != len(values):
        return None
    shown = [value for value in numbers if isinstance(value, str)]
    if shown:
        differences.append(f"its stages are computed from {', '.join(shown)} at the defaults: -p does not change them")
    level, ramp, steps, hold = (names.resolved_number(value) for value in numbers)
    return level, ramp, steps, hold


_ARRIVAL_KEYS = (("TargetLevel", "1"), ("RampUp", "0"), ("Steps", "0"), ("Hold", "0"))


def _max_vus(group: Node, names: Names, level_per_s: float, differences: list[str]) -> int:
    limit = names.number(group.prop("ConcurrencyLimit"), [])
    if limit is not None and names.resolved_number(limit) >= 1:
        return int(names.resolved_number(limit))
    chosen = max(10, int(level_per_s * 10))
    differences.append(f"no concurrency limit: the plan allows {chosen} VUs (ten seconds of arrivals)")
    return chosen


def concurrency(group: Node, names: Names, unresolved: list[str]) -> tuple[Workload, list[str]]:
    """``ConcurrencyThreadGroup``: a target concurrency reached over the ramp-up (in steps when
    given), held; times in the group's unit."""
    return _leveled(group, names, unresolved, open_model=False)


def arrivals(group: Node, names: Names, unresolved: list[str]) -> tuple[Workload, list[str]]:
    """``ArrivalsThreadGroup``: a target arrival rate (per the group's unit) reached over the
    ramp-up (in steps when given), held; an open workload."""
    return _leveled(group, names, unresolved, open_model=True)


def _leveled(group: Node, names: Names, unresolved: list[str], *, open_model: bool) -> tuple[Workload, list[str]]:
    differences: list[str] = []
    read = _level_ramp_steps_hold(group, names, unresolved, differences)
    if read is None:
        return _fallback(differences), differences
    level, ramp, steps, hold = read
    unit = _unit_s(group)
    if group.prop("Iterations"):
        differences.append("its iteration limit is not kept: the plan is timed")
    if not open_model:
        return {
            "type": "closed",
            "start_vus": 0,
            "stages": _stepped(level, ramp * unit, int(steps), hold * unit, "vus"),
        }, differences
    rate = level / unit  # arrivals per unit (a minute with Unit M)
    workload = {
        "type": "open",
        "start_rate_per_s": 0,
        "stages": _stepped(rate, ramp * unit, int(steps), hold * unit, "rate_per_s"),
        "max_vus": _max_vus(group, names, rate, differences),
    }
    return workload, differences


def free_form_arrivals(group: Node, names: Names, unresolved: list[str]) -> tuple[Workload, list[str]]:
    """``FreeFormArrivalsThreadGroup``: rows of (start rate, end rate, duration), each a linear
    stage; an open workload."""
    unit = _unit_s(group)
    differences: list[str] = []
    stages: list[dict[str, Any]] = []
    start_rate: float | None = None
    level = 0.0
    for row in group.collection("Schedule"):
        cells = [names.number(cell.text, unresolved) for cell in row.children if cell.tag == "stringProp"]
        if len(cells) != 3 or any(cell is None for cell in cells):
            differences.append(f"a schedule row at line {row.line} that is not three numbers is left out")
            continue
        begin, end, duration = (names.resolved_number(cell) for cell in cells if cell is not None)
        begin, end, duration = begin / unit, end / unit, duration * unit
        if duration <= 0:
            continue
        if start_rate is None:
            start_rate = begin
        elif abs(begin - level) > 1e-9:
            stages.append({"duration_s": JUMP_S, "rate_per_s": round(begin, 6)})
        stages.append({"duration_s": duration, "rate_per_s": round(end, 6)})
        level = end
    if not stages:
        differences.append(f"an empty schedule: the plan runs 1 arrival/s for {DEFAULT_HOLD_S} s")
        stages = [{"duration_s": DEFAULT_HOLD_S, "rate_per_s": 1}]
    peak = max([start_rate or 0.0] + [float(stage["rate_per_s"]) for stage in stages])
    workload = {
        "type": "open",
        "start_rate_per_s": round(start_rate or 0.0, 6),
        "stages": stages,
        "max_vus": _max_vus(group, names, peak, differences),
    }
    return workload, differences


def ultimate(group: Node, names: Names, unresolved: list[str]) -> tuple[Workload, list[str]]:
    """``UltimateThreadGroup``: rows of (threads, initial delay, startup time, hold, shutdown
    time), each adding threads that ramp up, hold and ramp down; the VU count, the sum of the
    rows, is linear between the rows' corners, so stages at every corner give it exactly."""
    differences: list[str] = []
    rows: list[tuple[float, float, float, float, float]] = []
    for row in group.collection("ultimatethreadgroupdata"):
        cells = [names.number(cell.text, unresolved) for cell in row.children if cell.tag == "stringProp"]
        if len(cells) != 5 or any(cell is None for cell in cells):
            differences.append(f"a schedule row at line {row.line} that is not five numbers is left out")
            continue
        threads, delay, startup, hold, shutdown = (names.resolved_number(cell) for cell in cells if cell is not None)
        rows.append((threads, delay, startup, hold, shutdown))
    if not rows:
        return _fallback(differences), differences

    def vus_at(t: float) -> float:
        total = 0.0
        for threads, delay, startup, hold, shutdown in rows:
            up, top, down = delay + startup, delay + startup + hold, delay + startup + hold + shutdown
            if t <= delay:
                continue
            if t < up:
                total += threads * (t - delay) / startup
            elif t <= top:
                total += threads
            elif t < down:
                total += threads * (down - t) / shutdown
        return total

    corners = sorted({0.0} | {c for r in rows for c in (r[1], r[1] + r[2], r[1] + r[2] + r[3], sum(r[1:]))})
    stages = [
        {"duration_s": round(b - a, 6), "vus": round(vus_at(b))} for a, b in itertools.pairwise(corners) if b - a > 0
    ]
    if any(r[2] == 0 or r[4] == 0 for r in rows):
        differences.append("a row that starts or stops its threads at once becomes a jump of the VU count")
    return {"type": "closed", "start_vus": round(vus_at(0.0)), "stages": stages}, differences
