"""Each generator's line in a cluster run's merged second.

The merge itself is the engine's (:func:`horde.engine.snapshot.merge_seconds`: counters summed,
histograms merged bucket by bucket, the sickest generator's CPU and lateness); the coordinator
adds to it ``generators``, one row per generator (its requests, rate, CPU, lateness, and its
state: ``running``, ``suspect``, ``lost`` or ``finished``) and ``lost_share``, the part of the
plan's load the lost generators carried.
"""

from __future__ import annotations

from typing import Any

from horde.engine.snapshot import Snapshot


def generator_row(index: int, address: str, state: str, part: Snapshot | None) -> dict[str, Any]:
    """One generator's line in a merged second: what it did that second (nothing when it did not
    report it)."""
    if part is None:
        return {
            "generator": index,
            "node": address,
            "state": state,
            "requests": 0,
            "rps": 0.0,
            "cpu_percent": None,
            "timer_lateness_p99_ms": None,
            "active_vus": 0,
        }
    requests = sum(int(step["requests"]) for step in part["steps"] if step.get("kind", "request") == "request")
    interval = float(part["interval_s"]) or 1.0
    return {
        "generator": index,
        "node": address,
        "state": state,
        "requests": requests,
        "rps": requests / interval,
        "cpu_percent": part.get("cpu_percent"),
        "timer_lateness_p99_ms": part.get("timer_lateness_p99_ms"),
        "active_vus": int(part.get("active_vus") or 0),
    }
