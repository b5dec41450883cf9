"""The IoT study's report, in Markdown, from what its steps wrote as JSON: each instance count's
find-max run (its knee, why it stopped there, the mix it sent) and the scalability model fitted
to the knees (``horde scale --from-study``). Reads JSON only, so any Python 3 runs it.

    python3 report.py --scale SCALE.json --runs run-1.json run-3.json run-5.json --out iot-report.md
"""

from __future__ import annotations

import argparse
import json
from typing import Any

#: The counts the forecast table shows, past the measured ones.
FORECAST_AT = (1, 3, 5, 7, 10, 15, 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", required=True)
    parser.add_argument("--runs", nargs="+", required=True)
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    scale = _read(options.scale)
    runs = {run["run_id"]: run for run in map(_read, options.runs)}
    with open(options.out, "w") as out:
        out.write("\n".join(report(scale, runs)) + "\n")


def _read(path: str) -> dict[str, Any]:
    with open(path) as file:
        return dict(json.load(file))


def report(scale: dict[str, Any], runs: dict[str, dict[str, Any]]) -> list[str]:
    rows = scale["rows"]
    forecast = scale["forecast"]
    measured = ", ".join(f"{row['instances']} → {row['throughput_rps']:,.0f} req/s" for row in rows)
    lines = [
        "# IoT platform: the maximum throughput before p95 passes 1 s, and past the measured instances",
        "",
        f"**Measured: {measured}.**",
        "",
        "Devices write a value every 1, 5 or 10 s (a third each) while users read their series and "
        "triggers in their dashboards, at once. For each instance count, a stepped ramp (find-max) "
        "raised devices and users together, in the plan's proportions and in proportion to the count, "
        "until the throughput stopped following the load or p95 passed 1 s.",
        "",
        "## 1. Each instance count's maximum",
        "",
        "| instances | max req/s | per instance | efficiency | p95 ms there | stopped by | reads | Little's law | run |",
        "| ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |",
    ]
    for row in rows:
        run = runs.get(row["run_id"], {})
        efficiency = "" if row.get("efficiency") is None else f"{row['efficiency']:.0%}"
        littles = run.get("littles_law") or {}
        consistent = {True: "consistent", False: f"gap {littles.get('gap_percent')} %", None: ""}[
            littles.get("consistent")
        ]
        lines.append(
            f"| {row['instances']} | {row['throughput_rps']:,.0f} | {row['per_instance_rps']:,.1f} | {efficiency} "
            f"| {row.get('latency_ms')} | {row.get('saturation_reason') or ''} | {_read_share(run)} | {consistent} "
            f"| {row['run_id']} |"
        )
    refusal = forecast.get("refusal")
    lines += ["", "## 2. The forecast", "", *([f"No forecast: {refusal}."] if refusal else [])]
    if not refusal:
        peak = forecast.get("peak_n")
        lines += [
            f"Fitted X(N) = λN / (1 + σ(N−1) + κN(N−1)): λ {forecast['lambda']:,.1f} req/s (one instance), "
            f"σ {forecast['sigma']:.4f} (contention), κ {forecast['kappa']:.6f} (coherency). "
            + (
                f"Throughput peaks at {peak} instances; past it, more instances serve less."
                if peak
                else "The fitted curve has no peak: its κ is 0, so the knees bend by contention alone."
            ),
            "",
        ]
        if forecast.get("note"):
            lines += [f"*{forecast['note']}.*", ""]
        lines += ["| instances | forecast req/s | interval | per 2 more instances |", "| ---: | ---: | --- | ---: |"]
        curve = {point["n"]: point for point in forecast.get("curve", []) if point.get("throughput") is not None}
        for n in FORECAST_AT:
            point = curve.get(n)
            if point is None:
                continue
            interval = "" if point["low"] is None else f"{point['low']:,.0f}–{point['high']:,.0f}"
            before = curve.get(n - 2)
            gain = "" if before is None else f"+{point['throughput'] - before['throughput']:,.0f}"
            lines.append(f"| {n} | {point['throughput']:,.0f} | {interval} | {gain} |")
        if forecast["sigma"] > 0 or forecast["kappa"] > 0:
            lines += [
                "",
                "Each pair of instances adds less than the pair before it: \"about the same gain for every two "
                "more machines\" holds only over the measured range.",
            ]
    lines += [
        "",
        "---",
        "The platform here is Horde's built-in target: each instance a capacity model, the instances sharing "
        "a resource (their database) whose serial hold and crosstalk are set in `targets.py` "
        "(`--shared-serial-ms`, `--crosstalk-ms` of `horde target`), so that σ and κ are known in advance. "
        "Against a real platform, the same steps read its own.",
    ]
    return lines


def _read_share(run: dict[str, Any]) -> str:
    """The reads' share of the requests the run sent."""
    steps = run.get("steps") or {}
    total = sum(step.get("requests", 0) for step in steps.values())
    reads = sum(step.get("requests", 0) for name, step in steps.items() if name.startswith("read"))
    return f"{reads / total:.1%}" if total else ""


if __name__ == "__main__":
    main()
