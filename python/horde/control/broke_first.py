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

from collections.abc import Mapping, Sequence
from typing import Any

from horde.control.measure import measure
from horde.engine.snapshot import Snapshot
from horde.monitors.crossings import Crossing
from horde.plan.control import FindMax, TargetResponseTime

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
) -> dict[str, Any]:
    """The capacity block's ``what_broke_first``: ``sentence``, ``first`` (the first crossing),
    ``load`` (the moment the load side gave way), ``lead_s`` (how many seconds the first
    crossing came before it; negative after) and ``crossings`` (the first MAX_CROSSINGS)."""
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
    }
