"""Snapshot entries built from known latencies, for tests of what reads snapshots (measure,
thresholds, autostop, steering) without running the engine."""

from __future__ import annotations

from typing import Any

from horde._engine import histogram_from_values


def entry(
    step: str,
    latencies_us: list[int],
    *,
    scenario: str = "shop",
    kind: str = "request",
    errors: dict[str, int] | None = None,
) -> dict[str, Any]:
    """One step's entry: a request per latency; ``sum(errors)`` of them failed."""
    errors = dict(errors or {})
    requests = len(latencies_us)
    return {
        "scenario": scenario,
        "step": step,
        "kind": kind,
        "requests": requests,
        "ok": requests - sum(errors.values()),
        "errors": errors,
        "bytes_sent": 0,
        "bytes_received": 0,
        "histogram": histogram_from_values(latencies_us),
    }
