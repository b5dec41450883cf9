"""The payments study's report, in Markdown, from what its steps wrote as JSON: the production
profile, the sighting shot, one instance's knee (find-max) and the scalability study with its
forecast. Reads JSON only, so any Python 3 runs it.

    python3 report.py --profile P.json --sight S.json --find-max F.json --scale SC.json \
        --peak-rps 1500 --headroom 20 --out payments-report.md
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("--profile", "--sight", "--find-max", "--scale", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--peak-rps", type=float, required=True)
    parser.add_argument("--headroom", type=float, required=True)
    options = parser.parse_args()
    profile, sight, find_max, scale = (
        _read(path) for path in (options.profile, options.sight, options.find_max, options.scale)
    )
    lines = report(profile, sight, find_max, scale, options.peak_rps, options.headroom)
    with open(options.out, "w") as out:
        out.write("\n".join(lines) + "\n")


def _read(path: str) -> dict[str, Any]:
    with open(path) as file:
        return dict(json.load(file))


def report(
    profile: dict[str, Any],
    sight: dict[str, Any],
    find_max: dict[str, Any],
    scale: dict[str, Any],
    peak_rps: float,
    headroom: float,
) -> list[str]:
    forecast = scale["forecast"]
    peak = forecast.get("peak") or {}
    rows = scale["rows"]
    one = next((row["throughput_rps"] for row in rows if row["instances"] == 1), None)
    need = peak_rps / (1 - headroom / 100)
    linear = math.ceil(need / one) if one else None
    answer = peak.get("answer") or f"no forecast: {forecast.get('refusal')}"
    lines = [
        "# Payments: how many instances for next year's peak",
        "",
        f"**Answer: {answer}.**",
        "",
        f"The peak to carry is {peak_rps:,.0f} req/s, each instance kept {headroom:g} % below its throughput "
        f"(so {need:,.0f} req/s of capacity). Linear arithmetic from one instance's {one or 0:,.0f} req/s "
        f"would say {linear} instances; the instances share a resource, so they do not add up, and the "
        "answer above comes from the Universal Scalability Law fitted to what 1..4 instances measured.",
        "",
        "## 1. The production profile (the access log)",
        "",
    ]
    rate = profile["rate"]
    source = profile.get("source") or {}
    lines += [
        f"{_int(source.get('requests'))} requests, mean {rate['mean_per_s']:g} req/s; the busiest minute "
        f"{rate['peak_minute']['per_s']:g} req/s at {rate['peak_minute']['at']} (peak to mean "
        f"{rate['peak_to_mean']:g}).",
        "",
        "| endpoint | share of requests | share of time | mean ms | p95 ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for endpoint in profile["endpoints"]:
        lines.append(
            f"| {endpoint['endpoint']} | {endpoint['share_by_count']:.1%} | {endpoint['share_by_time']:.1%} "
            f"| {endpoint['mean_ms']:g} | {endpoint['p95_ms']:g} |"
        )
    plan = profile.get("plan") or {}
    lines += [
        "",
        f"The plan keeps {len(plan.get('endpoints', []))} endpoints: {plan.get('covered_share', 0):.1%} of the "
        f"requests, {plan.get('covered_time_share', 0):.1%} of the server's time, mixed as in the peak minute.",
        "",
        "## 2. The sighting shot (one user, nothing else running)",
        "",
        "| endpoint | p50 ms | p95 ms | requests/s one user gets |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, step in sight["steps"].items():
        lines.append(f"| {name} | {step['p50_ms']:g} | {step['p95_ms']:g} | {step['rate_per_vu']:g} |")
    capacity = find_max.get("capacity") or {}
    littles = find_max.get("littles_law") or {}
    lines += [
        "",
        "## 3. One instance's knee (a stepped ramp, find-max)",
        "",
        f"One instance serves at most **{_rate(capacity.get('max_rps'))} req/s**, p95 "
        f"{capacity.get('latency_ms_at_max')} ms there; the next step saturated it "
        f"({capacity.get('saturation_reason')}), bracketed to {capacity.get('bracket_percent')} %.",
    ]
    if littles:
        verdict = "consistent" if littles.get("consistent") else f"NOT consistent: {littles.get('why')}"
        lines.append(f"Little's law on the ramp: {verdict} (gap {littles.get('gap_percent')} %).")
    lines += [
        "",
        "## 4. 1..4 instances, each saturated",
        "",
        "| instances | req/s | per instance | efficiency | p95 ms | run |",
        "| ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        efficiency = "" if row.get("efficiency") is None else f"{row['efficiency']:.0%}"
        lines.append(
            f"| {row['instances']} | {row['throughput_rps']:,.1f} | {row['per_instance_rps']:,.1f} | {efficiency} "
            f"| {row.get('latency_ms')} | {row['run_id']} |"
        )
    lines += ["", "## 5. The forecast", ""]
    if forecast.get("refusal"):
        lines.append(f"No forecast: {forecast['refusal']}.")
    else:
        lines += [
            f"Fitted X(N) = λN / (1 + σ(N−1) + κN(N−1)), intervals at {forecast['confidence']:.0%}:",
            "",
            f"- λ (one instance) {forecast['lambda']:,.1f} req/s ({_pair(forecast['lambda_interval'])})",
            f"- σ (contention: the share of the work that queues on what the instances share) "
            f"{forecast['sigma']:.4f} ({_pair(forecast['sigma_interval'], 4)})",
            f"- κ (coherency: the crosstalk between every pair of instances) {forecast['kappa']:.5f} "
            f"({_pair(forecast['kappa_interval'], 5)})",
            f"- throughput peaks at {forecast['peak_n']} instances ({_pair(forecast['peak_n_interval'])}); "
            "past it, more instances serve less",
            "",
            "| instances | forecast req/s | 90 % interval |",
            "| ---: | ---: | --- |",
        ]
        for point in forecast.get("curve", []):
            if point["n"] in (1, 2, 4, 6, 8, 10, 12, 14, 16) and point.get("throughput") is not None:
                lines.append(
                    f"| {point['n']:g} | {point['throughput']:,.0f} | {point['low']:,.0f}–{point['high']:,.0f} |"
                )
        for left in forecast.get("left_out", []):
            lines.append(f"- left out of the fit: {left['instances']} instances ({left['why']})")
        lines += ["", f"**{answer}.**"]
    lines += [
        "",
        "---",
        "The service here is Horde's built-in target (`horde target`): each instance a capacity model, the "
        "instances sharing a resource whose serial hold and crosstalk are set by `--shared-serial-ms` and "
        "`--crosstalk-ms`, so that σ and κ are known in advance (README: the built-in target). Against a real "
        "service, the same steps read its own σ and κ.",
    ]
    return lines


def _int(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def _rate(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, (int, float)) else "?"


def _pair(pair: Any, digits: int = 1) -> str:
    if not pair:
        return "no interval"
    low, high = pair
    return f"{low:.{digits}f}–{'?' if high is None else f'{high:.{digits}f}'}"


if __name__ == "__main__":
    main()
