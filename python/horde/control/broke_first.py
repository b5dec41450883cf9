"""What broke first: a steered run's capacity answer with the monitors as evidence.

Beside the knee (find-max) or the rate that held the target (target response time), the capacity
block gets ``what_broke_first``: the monitored resources that crossed their limits
(:mod:`horde.monitors.crossings`), the first of them, and the moment the load side gave way
(the latency limit or target crossed, else the first saturated step and its reason), in one
sentence ordered by time: "db host CPU 97 % from second 412; p95 crossed 50 ms at second 431".
A resource that crossed its limit before the load gave way is the likely bottleneck; none
crossing says the bottleneck is something the monitors do not watch.

>>> capacity = {"method": "target_response_time", "percentile": 95, "target_ms": 50.0,
...             "readings": [{"started_s": 2, "judged_at_s": 3, "latency_ms": 30.0, "verdict": "under"},
...                          {"started_s": 5, "judged_at_s": 7, "latency_ms": 61.0, "verdict": "over"}]}
>>> what_broke_first(capacity, [], None, [], ["db"])["sentence"]
'no monitored resource crossed its limit (monitors db); p95 crossed 50 ms from second 5'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from horde.control.measure import measure
from horde.engine.snapshot import Snapshot
from horde.monitors.crossings import Crossing
from horde.plan.control import FindMax, TargetResponseTime
from horde.store import MonitorSample

#: The most crossings the block lists (the first is what the sentence names).
MAX_CROSSINGS = 10

#: How a find-max step's saturation reads, by reason.
_REASONS = {
    "throughput_flat": "throughput stopped following the load",
    "errors": "errors passed the limit",
    "dropped_arrivals": "arrivals were dropped",
    "latency_rising": "latency rose past 3 times the first step's",
    "latency_limit": "latency passed the limit",
    "generator_saturated": "the generator itself saturated",
    "no_responses": "no responses came",
}


def load_moment(
    capacity: Mapping[str, Any], snapshots: Sequence[Snapshot], steer: FindMax | TargetResponseTime | None
) -> dict[str, Any] | None:
    """When the load side gave way: ``{"second", "phrase"}``, or None when it never did."""
    percentile = f"p{capacity.get('percentile', 95):g}"
    if capacity.get("method") == "target_response_time":
        # The first level read over T: from its first judged second (its reading came later).
        target = float(capacity["target_ms"])
        for reading in capacity.get("readings") or []:
            if reading.get("verdict") == "over" and reading.get("latency_ms") is not None:
                return {
                    "second": int(reading["started_s"]),
                    "phrase": f"{percentile} crossed {target:g} ms from second {reading['started_s']}",
                }
        return None
    first = capacity.get("first_saturated_step")
    if not first:
        return None
    start = int(first.get("started_s") or 0) or max(1, int(first["judged_at_s"]) - int(first["seconds"]))
    reason = str(first.get("saturated_reason"))
    limit = steer.latency_limit_ms if isinstance(steer, FindMax) else None
    if reason == "latency_limit" and limit is not None:
        # The step's first second whose own percentile passed the limit (its judgement came later).
        number = float(capacity.get("percentile", 95))
        for snapshot in snapshots:
            if start <= int(snapshot["second"]) <= int(first["judged_at_s"]) and not snapshot["final"]:
                latency = measure([snapshot], from_send=True).latency_ms(number)
                if latency is not None and latency > limit:
                    return {
                        "second": int(snapshot["second"]),
                        "phrase": f"{percentile} crossed {limit:g} ms at second {snapshot['second']}",
                    }
    unit = "VUs" if capacity.get("level_unit") == "vus" else "arrivals/s"
    latency = first.get("latency_ms")
    at = f"level {first['level']:,.6g} {unit}" + ("" if latency is None else f", {percentile} {latency:,.1f} ms")
    return {"second": start, "phrase": f"{_REASONS.get(reason, reason)} from second {start} ({at})"}


def what_broke_first(
    capacity: Mapping[str, Any],
    snapshots: Sequence[Snapshot],
    steer: FindMax | TargetResponseTime | None,
    crossings: Sequence[Crossing],
    monitors: Sequence[str],
    samples: Mapping[str, Sequence[MonitorSample]] | None = None,
) -> dict[str, Any]:
    """The capacity block's ``what_broke_first``: ``sentence``, ``first`` (the first crossing),
    ``load`` (the moment the load side gave way), ``lead_s`` (how many seconds the first
    crossing came before it; negative after), ``crossings`` (the first MAX_CROSSINGS) and, for
    find-max with the monitors' ``samples``, ``why_the_knee`` (:func:`why_the_knee`)."""
    load = load_moment(capacity, snapshots, steer)
    first = crossings[0] if crossings else None
    parts: list[tuple[int, str]] = []
    if first is not None:
        parts.append((first.second, first.phrase))
    else:
        parts.append((-1, f"no monitored resource crossed its limit (monitors {', '.join(monitors)})"))
    if load is not None:
        parts.append((int(load["second"]), str(load["phrase"])))
    elif capacity.get("method") == "find_max":
        parts.append((10**9, "no step saturated"))
    else:
        parts.append((10**9, "latency never passed the target"))
    return {
        "sentence": "; ".join(phrase for _, phrase in sorted(parts, key=lambda part: part[0])),
        "first": None if first is None else first.to_json(),
        "load": load,
        "lead_s": None if first is None or load is None else int(load["second"]) - first.second,
        "crossings": [crossing.to_json() for crossing in crossings[:MAX_CROSSINGS]],
        "why_the_knee": why_the_knee(capacity, samples) if samples is not None else None,
    }


# --- why the knee is where it is: the utilization law ----------------------------------------

#: A resource the law puts at this utilization or more at the knee's throughput explains the
#: knee: queueing at a single server already multiplies its response time by 5 there, and the
#: find-max judge (latency past 3 times the first step's, or past the limit) has spoken by then.
EXPLAINS_PERCENT: Final = 80.0
#: The most candidates the block lists.
MAX_CANDIDATES: Final = 8

_DISK = re.compile(r"disk\.(?P<dev>.+)\.busy_percent\Z")
_LINK = re.compile(r"net\.(?P<iface>.+)\.link_percent\Z")


def utilizations(values: Mapping[str, float]) -> dict[str, tuple[str, float]]:
    """A sample's utilization figures, in % of the resource: the host's CPU (all its CPUs), a
    disk's busy time, an interface's share of its link, the database's connections against
    ``max_connections``. Keyed by figure: (the resource in words, its utilization).

    >>> utilizations({"cpu.busy_percent": 40.0, "disk.sda.busy_percent": 5.0, "connections.total": 30.0,
    ...               "connections.max": 100.0, "memory.used_percent": 70.0})
    {'cpu.busy_percent': ('CPU', 40.0), 'disk.sda.busy_percent': ('disk sda busy', 5.0), 'connections': ('connections of max_connections', 30.0)}
    """
    found: dict[str, tuple[str, float]] = {}
    for figure, value in values.items():
        if figure == "cpu.busy_percent":
            found[figure] = ("CPU", float(value))
        elif (disk := _DISK.match(figure)) is not None:
            found[figure] = (f"disk {disk['dev']} busy", float(value))
        elif (link := _LINK.match(figure)) is not None:
            found[figure] = (f"{link['iface']} link", float(value))
    total, maximum = values.get("connections.total"), values.get("connections.max")
    if total is not None and maximum:
        found["connections"] = ("connections of max_connections", 100.0 * float(total) / float(maximum))
    return found


@dataclass(frozen=True)
class Demand:
    """One resource's service demand fitted by the utilization law U = U0 + X·S over the steps
    below the knee: S in % of the resource per request a second, U0 what it used with no load."""

    per_rps_percent: float
    idle_percent: float

    def at(self, rps: float) -> float:
        return self.idle_percent + self.per_rps_percent * rps


def fit_demand(points: Sequence[tuple[float, float]]) -> Demand | None:
    """The least-squares line through (throughput, utilization) points; through the origin
    (the bare law U = X·S) from one throughput, or when the line's intercept comes out below 0.

    >>> fit_demand([(100.0, 30.0), (200.0, 50.0)])
    Demand(per_rps_percent=0.2, idle_percent=10.0)
    >>> fit_demand([(100.0, 25.0)])
    Demand(per_rps_percent=0.25, idle_percent=0.0)
    """
    usable = [(x, u) for x, u in points if x > 0]
    if not usable:
        return None
    xs = {x for x, _ in usable}
    if len(xs) >= 2:
        n = len(usable)
        mean_x = sum(x for x, _ in usable) / n
        mean_u = sum(u for _, u in usable) / n
        spread = sum((x - mean_x) ** 2 for x, _ in usable)
        slope = sum((x - mean_x) * (u - mean_u) for x, u in usable) / spread
        intercept = mean_u - slope * mean_x
        if intercept >= 0 and slope >= 0:
            return Demand(round(slope, 9), round(intercept, 9))
    slope = sum(x * u for x, u in usable) / sum(x * x for x, _ in usable)
    return Demand(round(max(0.0, slope), 9), 0.0)


def _mean_utilizations(samples: Sequence[MonitorSample], first: int, last: int) -> dict[str, tuple[str, float]]:
    """Each utilization figure's mean over the samples of seconds first..last."""
    sums: dict[str, list[float]] = {}
    names: dict[str, str] = {}
    for sample in samples:
        if first <= sample.second <= last and sample.values:
            for figure, (name, value) in utilizations(sample.values).items():
                sums.setdefault(figure, []).append(value)
                names[figure] = name
    return {figure: (names[figure], sum(values) / len(values)) for figure, values in sums.items()}


def why_the_knee(capacity: Mapping[str, Any], samples: Mapping[str, Sequence[MonitorSample]]) -> dict[str, Any] | None:
    """Find-max's knee by the utilization law: for each monitored resource with a utilization
    figure, its service demand fitted on the good steps below the knee (each step's judged
    seconds: its throughput and the resource's mean utilization), the utilization that predicts
    at the knee's throughput and at the top of the knee's bracket (find-max's answer is the last
    good step; the knee lies up to ``bracket_percent`` above it), and what was measured at the
    knee. A candidate's reach is the most of those; candidates are ranked by it, and one that
    reaches :data:`EXPLAINS_PERCENT` explains the knee. ``None`` for another method or no knee.

    A CPU at 30 % for 100 req/s and 50 % for 200 req/s uses 0.2 % a request a second (2 ms of
    it per request) over 10 % idle: at a knee of 400 req/s it is at 90 %, at 440 (10 % above,
    where the knee may lie) at 98 %.

    >>> def at(second, cpu):
    ...     return MonitorSample("db", second, float(second), 0.0, {"cpu.busy_percent": cpu})
    >>> steps = [{"level": 100, "ok_rps": 100.0, "judged_at_s": 3, "seconds": 2, "saturated_reason": None},
    ...          {"level": 200, "ok_rps": 200.0, "judged_at_s": 6, "seconds": 2, "saturated_reason": None},
    ...          {"level": 400, "ok_rps": 400.0, "judged_at_s": 9, "seconds": 2, "saturated_reason": None}]
    >>> samples = {"db": [at(2, 30.0), at(3, 30.0), at(5, 50.0), at(6, 50.0), at(8, 88.0), at(9, 92.0)]}
    >>> capacity = {"method": "find_max", "level_at_max": 400, "bracket_percent": 10.0, "steps": steps}
    >>> print(why_the_knee(capacity, samples)["sentence"])
    db CPU explains the knee: by the utilization law 90 % at the knee's 400 req/s and 98 % at 440 req/s, where the knee may lie (2 ms of it per request over 10 % idle, fitted on 2 steps below); measured 90 % at the knee
    """
    if capacity.get("method") != "find_max" or capacity.get("level_at_max") is None:
        return None
    steps = [step for step in capacity.get("steps") or [] if step.get("saturated_reason") is None]
    knee = next((step for step in steps if step["level"] == capacity["level_at_max"]), None)
    if knee is None:
        return None
    below = [step for step in steps if step["level"] < knee["level"]]
    knee_rps = float(knee["ok_rps"])
    top_rps = knee_rps * (1.0 + float(capacity.get("bracket_percent") or 0.0) / 100.0)

    def seconds(step: Mapping[str, Any]) -> tuple[int, int]:
        last = int(step["judged_at_s"])
        return last - int(step["seconds"]) + 1, last

    candidates: list[dict[str, Any]] = []
    for monitor, monitor_samples in samples.items():
        at_knee = _mean_utilizations(monitor_samples, *seconds(knee))
        points: dict[str, list[tuple[float, float]]] = {}
        names: dict[str, str] = {}
        for step in below:
            for figure, (name, value) in _mean_utilizations(monitor_samples, *seconds(step)).items():
                points.setdefault(figure, []).append((float(step["ok_rps"]), value))
                names[figure] = name
        for figure, found in points.items():
            demand = fit_demand(found)
            if demand is None:
                continue
            measured = at_knee[figure][1] if figure in at_knee else None
            reach = max(demand.at(top_rps), measured if measured is not None else 0.0)
            candidates.append(
                {
                    "resource": f"{monitor} {names[figure]}",
                    "monitor": monitor,
                    "figure": figure,
                    "demand_percent_per_rps": demand.per_rps_percent,
                    # The resource's busy time per request (all its CPUs together for a host).
                    "demand_ms": round(10.0 * demand.per_rps_percent, 6),
                    "idle_percent": round(demand.idle_percent, 3),
                    "predicted_percent": round(demand.at(knee_rps), 2),
                    "predicted_top_percent": round(demand.at(top_rps), 2),
                    "measured_percent": None if measured is None else round(measured, 2),
                    "reach_percent": round(reach, 2),
                    "points": [[round(x, 3), round(u, 3)] for x, u in found],
                    "explains": reach >= EXPLAINS_PERCENT,
                    "phrase": f"{monitor} {names[figure]} {demand.at(knee_rps):.0f} % at the knee by the law "
                    f"({10.0 * demand.per_rps_percent:.3g} ms per request)"
                    + ("" if measured is None else f", measured {measured:.0f} %"),
                }
            )
    candidates.sort(key=lambda candidate: -float(candidate["reach_percent"]))
    first = candidates[0] if candidates else None
    return {
        "knee_rps": round(knee_rps, 3),
        "bracket_top_rps": round(top_rps, 3),
        "steps_below": len(below),
        "explains_percent": EXPLAINS_PERCENT,
        "explained_by": first["resource"] if first is not None and first["explains"] else None,
        "candidates": candidates[:MAX_CANDIDATES],
        "sentence": _knee_sentence(first, knee_rps, top_rps, len(below)),
    }


def _knee_sentence(first: Mapping[str, Any] | None, knee_rps: float, top_rps: float, below: int) -> str:
    """The answer in one sentence: what explains the knee, with its evidence, or that nothing
    monitored does."""
    unmonitored = "the limit is something unmonitored (a lock, a pool, the network, a service time)"
    if first is None:
        why = "no step below the knee to fit on" if not below else "no monitor gave a utilization figure"
        return f"no monitored resource explains the knee ({why}): {unmonitored}"
    top = (
        f" and {first['predicted_top_percent']:.0f} % at {top_rps:,.4g} req/s, where the knee may lie"
        if top_rps > knee_rps
        else ""
    )
    idle = f" over {first['idle_percent']:.3g} % idle" if first["idle_percent"] else ""
    law = (
        f"by the utilization law {first['predicted_percent']:.0f} % at the knee's {knee_rps:,.6g} req/s{top} "
        f"({first['demand_ms']:.3g} ms of it per request{idle}, fitted on {below} step{'s' if below != 1 else ''} below)"
    )
    measured = "" if first["measured_percent"] is None else f"; measured {first['measured_percent']:.0f} % at the knee"
    if first["explains"]:
        return f"{first['resource']} explains the knee: {law}{measured}"
    return f"no monitored resource explains the knee: the busiest, {first['resource']}, {law}{measured}; {unmonitored}"
