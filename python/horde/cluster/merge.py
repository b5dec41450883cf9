"""One second of a run over several generators, made from each generator's snapshot of it.

The merge is exact: counters are summed, latency histograms are merged bucket by bucket (HDR,
through the engine's own code), never averaged percentiles. What is not a sum:

- ``target_vus`` / ``target_rate_per_s``: every generator reports the plan's level (its share
  is the engine's business), so the merged second takes it from any of them;
- ``cpu_percent`` and ``timer_lateness_p99_ms``: the sickest generator's, because saturation of
  any one generator distorts the run and the autostop rule must see it;
- ``elapsed_s`` / ``interval_s`` / ``timestamp``: the longest interval, on the agreed clock.

The merged second also carries ``generators``, one row per generator (its requests, rate,
CPU, lateness, and its state: ``running``, ``suspect``, ``lost`` or ``finished``) and
``lost_share``, the part of the plan's load the lost generators carried.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from horde.engine import histogram
from horde.engine.snapshot import Snapshot, StepSnapshot, merge_checks, merge_error_details, merge_messages


#: Counters summed over generators.
SummedKey = Literal["active_vus", "peak_vus", "busy_vus", "iterations", "dropped_arrivals", "connections_opened"]
SUMMED: tuple[SummedKey, ...] = ("active_vus", "peak_vus", "busy_vus", "iterations", "dropped_arrivals",
                                 "connections_opened")
#: A step's counters that a snapshot carries only when non-zero.
OptionalCounter = Literal["rows", "http1", "http2", "h2_stalls"]
OPTIONAL_COUNTERS: tuple[OptionalCounter, ...] = ("rows", "http1", "http2", "h2_stalls")


def merge_second(parts: Sequence[Snapshot], *, final: bool) -> Snapshot:
    """The exact merge of several generators' snapshots of one second (at least one)."""
    if not parts:
        raise ValueError("nothing to merge")
    first = parts[0]
    merged: Snapshot = {
        "second": first["second"],
        "elapsed_s": max(part["elapsed_s"] for part in parts),
        "interval_s": max(part["interval_s"] for part in parts),
        "timestamp": max(part["timestamp"] for part in parts),
        "final": final,
        "steps": merge_steps([part["steps"] for part in parts]),
        "target_vus": first.get("target_vus"),
        "target_rate_per_s": first.get("target_rate_per_s"),
        "cpu_percent": max(float(part.get("cpu_percent") or 0.0) for part in parts),
        "timer_lateness_p99_ms": max(float(part.get("timer_lateness_p99_ms") or 0.0) for part in parts),
        "timer_lateness_max_ms": max(float(part.get("timer_lateness_max_ms") or 0.0) for part in parts),
        "run_delay_ms": max(float(part.get("run_delay_ms") or 0.0) for part in parts),
        "steal_percent": max(float(part.get("steal_percent") or 0.0) for part in parts),
        "active_vus": _summed(parts, "active_vus"),
        "peak_vus": _summed(parts, "peak_vus"),
        "busy_vus": _summed(parts, "busy_vus"),
        "iterations": _summed(parts, "iterations"),
        "dropped_arrivals": _summed(parts, "dropped_arrivals"),
        "connections_opened": _summed(parts, "connections_opened"),
        "connect_backoffs": sum(int(part.get("connect_backoffs") or 0) for part in parts),
        "connect_backoff_s": sum(float(part.get("connect_backoff_s") or 0.0) for part in parts),
        "setup_failures": sum(int(part.get("setup_failures") or 0) for part in parts),
    }
    return merged


def _summed(parts: Sequence[Snapshot], key: SummedKey) -> int:
    return sum(int(part.get(key) or 0) for part in parts)


def merge_steps(step_lists: Sequence[Sequence[StepSnapshot]]) -> list[StepSnapshot]:
    """Steps by (scenario, step), in the order they first appear; counters summed, errors summed
    by kind, histograms merged."""
    order: list[tuple[str, str]] = []
    grouped: dict[tuple[str, str], list[StepSnapshot]] = {}
    for steps in step_lists:
        for step in steps:
            key = (step["scenario"], step["step"])
            if key not in grouped:
                order.append(key)
                grouped[key] = []
            grouped[key].append(step)
    merged: list[StepSnapshot] = []
    for key in order:
        entries = grouped[key]
        errors: dict[str, int] = {}
        for entry in entries:
            for kind, count in entry["errors"].items():
                errors[kind] = errors.get(kind, 0) + int(count)
        histograms = [bytes(entry["histogram"]) for entry in entries]
        entry_merged: StepSnapshot = {
            "scenario": key[0],
            "step": key[1],
            "kind": entries[0].get("kind", "request"),
            "requests": sum(int(entry["requests"]) for entry in entries),
            "ok": sum(int(entry["ok"]) for entry in entries),
            "errors": errors,
            "bytes_sent": sum(int(entry["bytes_sent"]) for entry in entries),
            "bytes_received": sum(int(entry["bytes_received"]) for entry in entries),
            "histogram": _merged(histograms),
        }
        # Counters a snapshot carries only when non-zero (SQL rows, requests by protocol, HTTP/2
        # bodies stalled): summed, and kept when the sum is.
        for counter in OPTIONAL_COUNTERS:
            total = sum(int(entry.get(counter, 0)) for entry in entries)
            if total:
                entry_merged[counter] = total
        if any(entry.get("from_send_histogram") for entry in entries):
            # A generator that timed nothing from an intended instant sent its latency once.
            entry_merged["from_send_histogram"] = _merged(
                [bytes(entry.get("from_send_histogram") or entry["histogram"]) for entry in entries])
        details = merge_error_details(entry.get("error_details") or [] for entry in entries)
        if details:
            entry_merged["error_details"] = details
        checks = merge_checks(entry.get("checks") or [] for entry in entries)
        if checks:
            entry_merged["checks"] = checks
        messages = merge_messages(entry.get("messages") for entry in entries)
        if messages:
            entry_merged["messages"] = messages
        merged.append(entry_merged)
    return merged


def _merged(histograms: list[bytes]) -> bytes:
    return histograms[0] if len(histograms) == 1 else histogram.merge(histograms)


def generator_row(index: int, address: str, state: str, part: Snapshot | None) -> dict[str, Any]:
    """One generator's line in a merged second: what it did that second (nothing when it did not
    report it)."""
    if part is None:
        return {"generator": index, "node": address, "state": state, "requests": 0, "rps": 0.0,
                "cpu_percent": None, "timer_lateness_p99_ms": None, "active_vus": 0}
    requests = sum(int(step["requests"]) for step in part["steps"] if step.get("kind", "request") == "request")
    interval = float(part["interval_s"]) or 1.0
    return {"generator": index, "node": address, "state": state, "requests": requests,
            "rps": requests / interval, "cpu_percent": part.get("cpu_percent"),
            "timer_lateness_p99_ms": part.get("timer_lateness_p99_ms"), "active_vus": int(part.get("active_vus") or 0)}
