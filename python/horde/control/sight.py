"""The sighting shot: one VU per scenario for a short time, before any real load, to learn
each step's unloaded latency and what load to ask for.

The payment team's routine, built in: fire one thread for a minute, read each request's median,
size with TPS ≈ VUs × 1000 / median_ms (x = 1000 / t per VU), and ramp in steps from there.

One VU's rate is the least a target that serves even one request at a time can take; how many
it serves at once, and so its maximum, one VU cannot tell. The suggestion is therefore find-max's
search (which finds the maximum in steps that grow with its logarithm), and beside it the seed's
stepped ramp: steps of one VU's worth, or, when the plan says what peak it must reach, steps
that reach it in 20.
"""

from __future__ import annotations

from collections.abc import Mapping

import math
from typing import TYPE_CHECKING, Any

from horde.plan import ClosedModel, ClosedStage, Plan

if TYPE_CHECKING:  # `horde --help` loads this module; the results layer (and the store) it does not need
    from horde.results.summary_blocks import SightBlock

#: How many find-max steps the suggested stepped ramp takes to reach the plan's own peak.
SUGGESTED_STEPS = 20
#: The step duration suggested: long enough to settle and judge (a quarter is skipped).
SUGGESTED_STEP_DURATION_S = 30


def sight_plan(plan: Plan, duration_s: float) -> Plan:
    """Every scenario closed with exactly one VU for ``duration_s``; no steering, autostop or
    thresholds (a sighting shot is a measurement, not a test)."""
    scenarios = [
        scenario.model_copy(
            update={"workload": ClosedModel(start_vus=1, stages=[ClosedStage(duration_s=duration_s, vus=1)])}
        )
        for scenario in plan.scenarios
    ]
    return plan.model_copy(update={"scenarios": scenarios, "steer": None, "autostop": [], "thresholds": []})


def _planned_peak_rps(plan: Plan, vu_rps: float) -> float | None:
    """The peak request rate the plan itself asks for: open models' highest rate (times the
    requests per iteration one VU showed), closed models' highest VU count times one VU's rate."""
    peak = 0.0
    for scenario in plan.scenarios:
        workload = scenario.workload
        if isinstance(workload, ClosedModel):
            peak += max([workload.start_vus, *(s.vus for s in workload.stages)]) * vu_rps / len(plan.scenarios)
        else:
            peak += max([workload.start_rate_per_s, *(s.rate_per_s for s in workload.stages)])
    return peak or None


def sight_block(plan: Plan, summary: Mapping[str, Any], plan_label: str, *, quick: bool = False) -> SightBlock:
    """Per step: median, p95 and the rate one VU gets out of it (1000 / median); per VU: the
    measured request rate; and a suggested find-max. ``quick``: a ``--url`` plan, which find-max
    steers as an arrival rate and which has no peak of its own."""
    steps = {}
    for name, figures in summary["steps"].items():
        median = figures["latency_ms"]["p50"]
        steps[name] = {
            "kind": figures.get("kind", "request"),
            "requests": figures["requests"],
            "errors": figures["errors"],
            "p50_ms": median,
            "p95_ms": figures["latency_ms"]["p95"],
            "rate_per_vu": round(1000.0 / median, 3)
            if median > 0 and figures.get("kind", "request") == "request"
            else None,
        }
    vu_rps = summary["rps"] / max(1, len(plan.scenarios))
    open_model = quick or all(scenario.workload.type == "open" for scenario in plan.scenarios)
    peak = None if quick else _planned_peak_rps(plan, vu_rps)
    # The plan's own peak, when it asks for more than a few VUs' worth; else unknown.
    up_to = peak if peak is not None and vu_rps > 0 and peak > 2 * vu_rps else None
    if open_model:
        step = nice_number(up_to / SUGGESTED_STEPS if up_to else vu_rps)
        unit = "arrivals/s"
    else:
        # In VUs: TPS ≈ VUs × vu_rps, so the peak needs peak / vu_rps VUs.
        vus_needed = math.ceil(up_to / vu_rps) if up_to else SUGGESTED_STEPS
        step = max(1.0, float(math.ceil(vus_needed / SUGGESTED_STEPS)))
        unit = "VUs"
    stepped = f"--find-max --start {step:g} --step {step:g} --step-duration {SUGGESTED_STEP_DURATION_S}s"
    return {
        "duration_s": summary["duration_s"],
        "vu_rps": round(vu_rps, 3),
        "iteration_s": round(summary["duration_s"] * len(plan.scenarios) / summary["iterations"], 4)
        if summary["iterations"]
        else None,
        "steps": steps,
        "suggestion": {
            "unit": unit,
            "start": step,
            "step": step,
            "step_duration_s": SUGGESTED_STEP_DURATION_S,
            "up_to": round(up_to, 3) if up_to else None,
            "command": f"horde run {plan_label} --find-max",
            "stepped_command": f"horde run {plan_label} {stepped}",
        },
    }


def nice_number(value: float) -> float:
    """A round number near ``value`` (1, 2, 2.5 or 5 times a power of ten), at least 1."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return float(min((m * power for m in (1, 2, 2.5, 5, 10)), key=lambda candidate: abs(candidate - value)))
