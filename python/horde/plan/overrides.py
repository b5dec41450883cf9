"""What a CI job passes on the command line, applied to a plan: load level, duration, ramp-up,
base URL; and the one-step plan built from ``--url`` for quick checks.

The rules, so that a flag always means the same thing:

- ``--vus N`` makes every scenario closed, ``--rate R`` open (``--max-vus`` caps its VUs).
  With several scenarios the level is spread over them by their ``weight``: N VUs exactly (the
  largest-remainder method: the shares add up to N), R arrivals/s and the ``--max-vus`` cap in
  proportion (each scenario keeps at least one VU of cap). Without either flag, each scenario
  keeps its model and its peak level.
- ``--duration D`` is the total length of each scenario's stages; ``--ramp-up U`` is the first
  part of it, a linear ramp from 0 to the level. Without ``--duration`` the plan's own total
  length is kept.
- Any of these flags replaces the scenario's stages by that simple profile: ramp, then hold.

- A ``unique`` feeder must still have a row for each VU once the flags are applied.

>>> spread_vus(10, [70, 20, 10]), spread_vus(10, [1, 1, 1]), spread_rate(50.0, [3, 1])
([7, 2, 1], [4, 3, 3], [37.5, 12.5])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from horde.errors import InvalidInput
from horde.plan.feeders import unique_feeder_faults
from horde.plan.model import Plan
from horde.plan.problems import plan_from_dict
from horde.plan.redaction import redact_url_query


def spread_vus(vus: int, weights: Sequence[float]) -> list[int]:
    """``vus`` split by ``weights`` into whole VUs that add up to ``vus`` exactly: each share
    rounded down, then one more VU to the largest remainders (the first scenario on a tie)."""
    total = sum(weights)
    exact = [vus * weight / total for weight in weights]
    shares = [math.floor(value) for value in exact]
    left = vus - sum(shares)
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))
    for index in by_remainder[:left]:
        shares[index] += 1
    return shares


def spread_rate(rate: float, weights: Sequence[float]) -> list[float]:
    """``rate`` split in proportion to ``weights``."""
    total = sum(weights)
    return [rate * weight / total for weight in weights]


def url_plan(url: str, *, method: str, headers: list[tuple[str, str]], body: str | None) -> dict[str, Any]:
    """A one-step plan for ``horde run --url URL``; its load comes from the flags."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket: 'http://[::1'
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(
            f"--url: '{url}' is not an http(s) URL with a host", hint="for example --url http://127.0.0.1:8080/"
        )
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return {
        "version": 1,
        "name": "url",
        "target": {"base_url": f"{parts.scheme}://{parts.netloc}"},
        "scenarios": [
            {
                "name": "url",
                "steps": [
                    # The name is shown and stored as it is: a credential in the query stays out.
                    {
                        "name": f"{method.upper()} {redact_url_query(path)}",
                        "method": method.upper(),
                        "path": path,
                        "headers": dict(headers),
                        "body": body,
                    }
                ],
                "workload": {"type": "closed", "start_vus": 10, "stages": [{"duration_s": 10, "vus": 10}]},
            }
        ],
    }


def apply_overrides(
    plan: Plan,
    *,
    vus: int | None = None,
    rate: float | None = None,
    max_vus: int | None = None,
    duration_s: float | None = None,
    ramp_up_s: float | None = None,
    base_url: str | None = None,
    insecure: bool = False,
) -> Plan:
    """The plan with the command line's overrides applied (see the module's rules);
    ``insecure`` turns TLS certificate verification off (``target.insecure``)."""
    if vus is not None and rate is not None:
        raise InvalidInput(
            "--vus and --rate cannot be used together", hint="--vus for a closed model, --rate for an open one"
        )
    if vus is not None and vus < 0:
        raise InvalidInput(f"--vus must be 0 or more (got {vus})")
    if rate is not None and rate <= 0:
        raise InvalidInput(f"--rate must be more than 0 (got {rate})")
    if max_vus is not None and max_vus < 1:
        raise InvalidInput(f"--max-vus must be at least 1 (got {max_vus})")
    if max_vus is not None and rate is None and any(s.workload.type == "closed" for s in plan.scenarios):
        raise InvalidInput(
            "--max-vus applies to the open model only",
            hint="use it with --rate R (or on a plan whose scenarios are open); a closed model's VUs are --vus",
        )
    reshaping = any(value is not None for value in (vus, rate, max_vus, duration_s, ramp_up_s))
    if base_url is None and not insecure and not reshaping:
        return plan  # no flag given: the plan was checked on its way in; nothing to dump or check again
    data = plan.model_dump(mode="json", by_alias=True)
    if base_url is not None:
        data["target"]["base_url"] = base_url
    if insecure:
        data["target"]["insecure"] = True
    if reshaping:
        weights = [scenario.weight for scenario in plan.scenarios]
        count = len(weights)
        vus_shares = spread_vus(vus, weights) if vus is not None else [None] * count
        rate_shares = spread_rate(rate, weights) if rate is not None else [None] * count
        cap_shares = (
            [max(1, share) for share in spread_vus(max_vus, weights)] if max_vus is not None else [None] * count
        )
        for scenario, share_vus, share_rate, share_cap in zip(data["scenarios"], vus_shares, rate_shares, cap_shares):
            scenario["workload"] = _reshaped(
                scenario["workload"], share_vus, share_rate, share_cap, duration_s, ramp_up_s
            )
    changed = plan_from_dict(data, source="the plan with the command line's overrides")
    if reshaping:
        for _, _, fault in unique_feeder_faults(changed):
            raise InvalidInput(
                fault.message,
                hint="lower --vus (or --max-vus with --rate), add rows to the feeder's file, or use mode circular or random",
            )
    return changed


def _reshaped(
    workload: dict[str, Any],
    vus: int | None,
    rate: float | None,
    max_vus: int | None,
    duration_s: float | None,
    ramp_up_s: float | None,
) -> dict[str, Any]:
    stages = workload["stages"]
    total = duration_s if duration_s is not None else sum(stage["duration_s"] for stage in stages)
    ramp = ramp_up_s or 0.0
    if total <= 0:
        raise InvalidInput("--duration must be more than 0", hint="for example --duration 30s")
    if ramp >= total:
        raise InvalidInput(
            f"--ramp-up ({ramp:g} s) must be shorter than the duration ({total:g} s)",
            hint="the ramp-up is the first part of --duration",
        )
    closed = vus is not None or (rate is None and workload["type"] == "closed")
    if closed:
        level: float = vus if vus is not None else max([workload.get("start_vus", 0)] + [s["vus"] for s in stages])
        key = "vus"
    else:
        level = (
            rate
            if rate is not None
            else max([workload.get("start_rate_per_s", 0.0)] + [s["rate_per_s"] for s in stages])
        )
        key = "rate_per_s"
    shaped: list[dict[str, Any]] = []
    if ramp > 0:
        shaped.append({"duration_s": ramp, key: level})
    shaped.append({"duration_s": total - ramp, key: level})
    start_level = 0 if ramp > 0 else level
    if closed:
        return {"type": "closed", "start_vus": int(start_level), "stages": shaped}
    cap = max_vus if max_vus is not None else workload.get("max_vus") or max(10, math.ceil(level))
    return {
        "type": "open",
        "start_rate_per_s": float(start_level),
        "stages": shaped,
        "max_vus": cap,
        "arrivals": workload.get("arrivals", "uniform"),
    }


@dataclass(frozen=True)
class SteerFlags:
    """The steering flags of ``horde run`` (find-max and target response time)."""

    find_max: bool = False
    target_response_ms: float | None = None
    percentile: float = 95.0
    start: float | None = None
    step: float | None = None
    step_duration_s: float | None = None
    limit: float | None = None
    latency_limit_ms: float | None = None
    duration_s: float | None = None
    precision_percent: float | None = None
    max_vus: int | None = None
    #: Target response time: what moves, "level" (VUs or rate) or "pace" (each VU's pauses).
    steer_by: str | None = None


#: The VU cap of an open model made for steering a quick --url plan: high, so that the target's
#: queue shows as latency rather than as dropped arrivals, and well inside a 20,000 open-file
#: limit (one connection per VU).
STEER_MAX_VUS = 5_000


def apply_steer_flags(plan: Plan, flags: SteerFlags, *, quick: bool, vus_given: bool = False) -> Plan:
    """The plan with ``steer`` set from the flags (over the plan's own ``steer``, field by field).

    A quick ``--url`` plan steered without ``--vus`` becomes an open model (its level is an
    arrival rate, as ``--start``/``--step`` in requests per second suggest).
    """
    steering_only = {
        "--start": flags.start,
        "--step": flags.step,
        "--step-duration": flags.step_duration_s,
        "--limit": flags.limit,
        "--latency-limit-ms": flags.latency_limit_ms,
        "--precision": flags.precision_percent,
    }
    if flags.steer_by is not None and flags.target_response_ms is None:
        raise InvalidInput(
            "--steer-by belongs to --target-response-ms",
            hint="e.g. --target-response-ms 50 --steer-by pace (the plan's VUs kept, their pace steered)",
        )
    if not flags.find_max and flags.target_response_ms is None:
        given = [name for name, value in steering_only.items() if value is not None]
        if given:
            raise InvalidInput(
                f"{', '.join(given)} steer the load: give --find-max or --target-response-ms too",
                hint="e.g. --find-max --start 50 --step 50 --step-duration 30s",
            )
        return plan
    if flags.find_max and flags.target_response_ms is not None:
        raise InvalidInput(
            "--find-max and --target-response-ms cannot be used together",
            hint="find-max looks for the knee; target response time holds a latency",
        )
    data = plan.model_dump(mode="json", by_alias=True)
    if quick and not vus_given and flags.steer_by != "pace":
        for scenario in data["scenarios"]:
            scenario["workload"] = {
                "type": "open",
                "start_rate_per_s": 1,
                "stages": [{"duration_s": 1, "rate_per_s": 1}],
                "max_vus": flags.max_vus or STEER_MAX_VUS,
            }
    own = data.get("steer") or {}
    if flags.find_max:
        base = own if own.get("type") == "find_max" else {}
        steer: dict[str, Any] = {**base, "type": "find_max", "percentile": flags.percentile}
        # Without --start and --step (and none in the plan) find-max searches: a sighting shot
        # sizes the start, the level grows geometrically, bisection finds the knee. --step asks
        # for the stepped ramp (starting at --start, or at one step).
        for key, value in (
            ("start", flags.start),
            ("step", flags.step),
            ("limit", flags.limit),
            ("latency_limit_ms", flags.latency_limit_ms),
            ("precision_percent", flags.precision_percent),
        ):
            if value is not None:
                steer[key] = value
        if flags.step_duration_s is not None:
            steer["step_duration_s"] = flags.step_duration_s
        if flags.precision_percent is not None and steer.get("step") is not None:
            raise InvalidInput(
                "--precision belongs to find-max's search; a stepped ramp (--step) moves by its step",
                hint="drop --step to let find-max search to a precision, or drop --precision",
            )
    else:
        if (
            flags.step is not None
            or flags.step_duration_s is not None
            or flags.latency_limit_ms is not None
            or flags.precision_percent is not None
        ):
            raise InvalidInput(
                "--step, --step-duration, --latency-limit-ms and --precision belong to --find-max",
                hint="--target-response-ms takes --start, --limit, --percentile and --duration",
            )
        base = own if own.get("type") == "target_response_time" else {}
        steer = {
            **base,
            "type": "target_response_time",
            "target_ms": flags.target_response_ms,
            "percentile": flags.percentile,
        }
        # Without --start the steering starts from its own default (1 VU, 10/s or the plan's pace).
        if flags.start is not None:
            steer["start"] = flags.start
        if flags.steer_by is not None:
            if flags.steer_by not in ("level", "pace"):
                raise InvalidInput(
                    f"--steer-by takes level or pace (got '{flags.steer_by}')",
                    hint="level moves the VUs or the rate; pace keeps the VUs and moves their think times",
                )
            steer["by"] = flags.steer_by
        if flags.limit is not None:
            steer["max"] = flags.limit
        if flags.duration_s is not None:
            steer["duration_s"] = flags.duration_s
    data["steer"] = steer
    return plan_from_dict(data, source="the steering flags")
