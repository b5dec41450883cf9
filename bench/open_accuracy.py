#!/usr/bin/env python3
"""Open-model accuracy: does the generator deliver the arrival rate it is asked for, and time
each request from its intended start?

    .venv/bin/python bench/open_accuracy.py            # 5,000 and 20,000 arrivals/s, 10 s each
    .venv/bin/python bench/open_accuracy.py --rates 5000 --seconds 5

Each rate runs against the built-in target in its own process (`horde target`, pinned to the
last CPU with taskset when there are two or more), with evenly spaced arrivals and the
generator on the remaining CPUs. Per rate it reports, over the steady seconds (the first and the
final one left out): the arrivals delivered (iterations + dropped) against the rate asked, the
worst second, latency p50/p99 measured from the intended start, dropped arrivals and the
generator's own timer lateness and CPU. Results go to bench/results/open-accuracy.json; the
figures and their reading are in bench/FIGURES.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
HORDE = REPO / ".venv" / "bin" / "horde"
RESULTS = BENCH_DIR / "results" / "open-accuracy.json"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_target(port: int) -> subprocess.Popen[bytes]:
    command = [str(HORDE), "target", "--port", str(port)]
    cpus = os.cpu_count() or 1
    if cpus >= 2 and shutil.which("taskset"):
        command = ["taskset", "-c", str(cpus - 1), *command]
    target = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return target
        time.sleep(0.1)
    os.killpg(target.pid, signal.SIGKILL)
    raise SystemExit("the built-in target did not start")


def measure(rate: float, seconds: int, workers: int) -> dict[str, Any]:
    # Imported here: the benchmark's own arguments are checked before Horde loads.
    from horde.engine import histogram
    from horde.plan import plan_from_dict
    from horde.engine.run import Run

    port = free_port()
    target = start_target(port)
    try:
        plan = plan_from_dict(
            {
                "version": 1,
                "name": f"open-{rate:g}",
                "target": {"base_url": f"http://127.0.0.1:{port}"},
                "scenarios": [
                    {
                        "name": "open",
                        "steps": [{"name": "get", "method": "GET", "path": "/"}],
                        "workload": {
                            "type": "open",
                            "start_rate_per_s": rate,
                            "max_vus": 2000,
                            "stages": [{"duration_s": seconds, "rate_per_s": rate}],
                        },
                    }
                ],
            }
        )
        snapshots = list(Run.start(plan, workers=workers))
    finally:
        os.killpg(target.pid, signal.SIGKILL)
        target.wait()
    steady = [s for s in snapshots if not s["final"] and s["second"] > 1]
    delivered = [s["iterations"] + s["dropped_arrivals"] for s in steady]
    blobs = [step["histogram"] for s in steady for step in s["steps"]]
    stats = histogram.stats(histogram.merge(blobs))
    total = sum(delivered)
    span = sum(s["interval_s"] for s in steady)
    return {
        "rate_asked": rate,
        "seconds_judged": len(steady),
        "rate_delivered": round(total / span, 1),
        "error_percent": round(100 * (total / span - rate) / rate, 3),
        "worst_second_error_percent": round(
            max(abs(n / s["interval_s"] - rate) / rate * 100 for n, s in zip(delivered, steady)), 3
        ),
        "dropped": sum(s["dropped_arrivals"] for s in steady),
        "latency_p50_ms": round(stats.percentile(50.0), 3),
        "latency_p99_ms": round(stats.percentile(99.0), 3),
        "timer_lateness_p99_ms_worst": max(s["timer_lateness_p99_ms"] for s in steady),
        "generator_cpu_percent_median": sorted(s["cpu_percent"] for s in steady)[len(steady) // 2],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[5000.0, 20000.0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    args = parser.parse_args()
    if not HORDE.exists():
        print("error: .venv/bin/horde not found\nhint: run `make setup` first", file=sys.stderr)
        return 2
    if args.seconds < 3:
        print("error: --seconds must be at least 3 (the first and final seconds are left out)", file=sys.stderr)
        return 2
    results = [measure(rate, args.seconds, args.workers) for rate in args.rates]
    report = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} · {os.cpu_count()} CPUs · {platform.platform()}",
        "command": " ".join(["bench/open_accuracy.py", *sys.argv[1:]]),
        "workers": args.workers,
        "results": results,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"{'asked/s':>9} {'delivered/s':>12} {'error %':>8} {'worst s %':>10} {'dropped':>8} {'p50 ms':>8} {'p99 ms':>8} {'lateness p99':>13} {'cpu %':>6}"
    )
    for r in results:
        print(
            f"{r['rate_asked']:>9,.0f} {r['rate_delivered']:>12,.1f} {r['error_percent']:>8.3f} {r['worst_second_error_percent']:>10.3f} "
            f"{r['dropped']:>8} {r['latency_p50_ms']:>8.3f} {r['latency_p99_ms']:>8.3f} {r['timer_lateness_p99_ms_worst']:>12.1f}  {r['generator_cpu_percent_median']:>5.0f}"
        )
    print(f"written to {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
