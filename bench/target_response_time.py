#!/usr/bin/env python3
"""Target response time: how long it takes to converge from a cold start, and what share of the
time after it T is held, against built-in targets and the simulated servers of the unit tests.

    .venv/bin/python bench/target_response_time.py              # real targets and simulations (~9 min)
    .venv/bin/python bench/target_response_time.py --sim-only   # the simulations only (~1 min)

Real targets (`horde run --url URL --target-response-ms T` and nothing else but the duration):
an M/M/4 queue (4 workers, exponential service of 10 ms on average), the same with two CPU-bound
processes beside the generator, and a deterministic one (10 workers × 20 ms, closed VUs). The
target runs pinned to the second CPU, the generator (and the hogs) to the first. Simulations:
tests/queue_sim.py's servers over eight seeds each, their truth from queueing theory or the same
server held at fixed levels. Writes the tables in bench/FIGURES.md (unless
--no-readme) and every answer to bench/results/last-target-response-time.json. Exit code 2 for a
set-up fault.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from capacity import start_target  # noqa: E402  (bench/capacity.py: a built-in target on a pinned CPU)
from harness import (  # noqa: E402  (bench/harness.py: the bench scripts' shared harness)
    REPO,
    BenchError,
    Processes,
    command_line,
    find_horde,
    load,
    machine,
    pick_cpus,
    run_main,
    write_readme_block,
)

#: (name, workers, service ms, service times, extra flags, T ms, CPU hogs beside the generator)
REAL: tuple[tuple[str, int, float, str, tuple[str, ...], float, int], ...] = (
    ("M/M/4 (exp., mean 10 ms), open, p95 40 ms", 4, 10.0, "exponential", (), 40.0, 0),
    ("the same, two CPU hogs beside the generator", 4, 10.0, "exponential", (), 40.0, 2),
    ("10 × 20 ms, closed VUs, p95 50 ms", 10, 20.0, "fixed", ("--vus", "1"), 50.0, 0),
)
DURATION_S = 120
RUN_TIMEOUT_S = 240
SEEDS = range(1, 9)


def real_run(
    procs: Processes, horde: str, gen_cpu: str, target_cpu: str, case: tuple[Any, ...], work: Path, tag: str
) -> dict[str, Any]:
    name, workers, service_ms, times, extra, target_ms, hogs = case
    port = start_target(procs, horde, target_cpu, workers, service_ms, times, work / f"{tag}-target.log")
    hog_processes = [
        procs.start(["taskset", "-c", gen_cpu, sys.executable, "-c", "while True: pass"], work / f"{tag}-hog{i}.log")
        for i in range(hogs)
    ]
    summary, log = work / f"{tag}.json", work / f"{tag}.log"
    child = procs.start(
        [
            "taskset",
            "-c",
            gen_cpu,
            horde,
            "run",
            "--url",
            f"http://127.0.0.1:{port}/",
            *extra,
            "--target-response-ms",
            f"{target_ms:g}",
            "--duration",
            f"{DURATION_S}s",
            "--store",
            str(work / "store.sqlite"),
            "--summary-json",
            str(summary),
        ],
        log,
    )
    try:
        child.wait(timeout=RUN_TIMEOUT_S)
    except Exception as error:
        raise BenchError(f"the run did not finish in {RUN_TIMEOUT_S} s", hint=f"see {log}") from error
    finally:
        for hog in hog_processes:
            hog.kill()
    if child.returncode != 0 or not summary.exists():
        raise BenchError(f"the run exited {child.returncode}", hint=log.read_text(errors="replace")[-500:])
    capacity: dict[str, Any] = json.loads(summary.read_text())["capacity"]
    return {
        "name": name,
        "outcome": capacity["outcome"],
        "max_rps": capacity["max_rps"],
        "level_at_max": capacity["level_at_max"],
        "latency_ms_at_max": capacity["latency_ms_at_max"],
        "converged_after_s": capacity["converged_after_s"],
        "held_percent": capacity["held_percent"],
        "set_aside_s": capacity["set_aside_s"],
        "sentence": capacity["sentence"],
    }


def simulations() -> list[dict[str, Any]]:
    """The unit tests' simulated servers over eight seeds: the answer's error against the truth,
    the convergence time and the held share, seed by seed."""
    from queue_sim import QueueServer, drive, highest_level, mmc_p95_ms, percentile_at
    from test_target_response_time import CLOSED, OPEN, closed_mm4, database, mm4, noisy, steering_for

    cases = [
        (
            "M/M/4, open, p95 40 ms",
            lambda seed: mm4(seed=seed),
            OPEN,
            40.0,
            highest_level(lambda rate: mmc_p95_ms(rate, 4, 10.0) <= 40.0, 50, 399),
        ),
        (
            "M/M/4 on a noisy VM (5 % of requests up to 15 ms late)",
            lambda seed: noisy(seed),
            OPEN,
            40.0,
            highest_level(lambda rate: percentile_at(noisy, rate, 95, seconds=60) <= 40.0, 50, 399),
        ),
        (
            "closed VUs thinking 100 ms on an M/M/4, p95 40 ms",
            closed_mm4,
            CLOSED,
            40.0,
            highest_level(lambda vus: percentile_at(closed_mm4, vus, 95) <= 40.0, 1, 60, whole=True),
        ),
        (
            "a database-like closed queue (2 × 0.4 ms), p95 3 ms",
            database,
            CLOSED,
            3.0,
            highest_level(lambda vus: percentile_at(database, vus, 95, seconds=30) <= 3.0, 1, 40, whole=True),
        ),
    ]
    rows = []
    for name, make, workload, target_ms, truth in cases:
        for seed in SEEDS:
            steering = steering_for(workload, target_ms)
            server: QueueServer = make(seed)
            drive(steering, server, 150)
            result = steering.result()
            level = result["level_at_max"]
            rows.append(
                {
                    "name": name,
                    "seed": seed,
                    "truth": truth,
                    "outcome": result["outcome"],
                    "level": level,
                    "error_percent": None if level is None else round(100 * (level - truth) / truth, 1),
                    "converged_after_s": result["converged_after_s"],
                    "held_percent": result["held_percent"],
                }
            )
    return rows


def sim_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| simulated server (8 seeds) | truth | answers' error, median (range) | held T | converged after s, median (max) | held %, median (range) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in dict.fromkeys(row["name"] for row in rows):
        mine = [row for row in rows if row["name"] == name]
        errors = [row["error_percent"] for row in mine if row["error_percent"] is not None]
        converged = [row["converged_after_s"] for row in mine if row["converged_after_s"] is not None]
        held = [row["held_percent"] for row in mine if row["held_percent"] is not None]
        lines.append(
            f"| {name} | {mine[0]['truth']:,.4g} | {statistics.median(errors):+.1f} % ({min(errors):+.1f} to {max(errors):+.1f}) | "
            f"{sum(row['outcome'] == 'held' for row in mine)} of {len(mine)} | "
            f"{statistics.median(converged):g} ({max(converged)}) | "
            f"{statistics.median(held):.0f} ({min(held):.0f} to {max(held):.0f}) |"
        )
    return "\n".join(lines) + "\n"


def real_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| target | outcome | answer | converged after s | held % after | set aside s |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        answer = (
            "-" if row["max_rps"] is None else f"{row['max_rps']:,.1f} req/s at p95 {row['latency_ms_at_max']:,.2f} ms"
        )
        lines.append(
            f"| {row['name']} | {row['outcome']} | {answer} | {row['converged_after_s']} | {row['held_percent']} | "
            f"{row['set_aside_s']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="target response time: time to converge and share of time held")
    parser.add_argument("--sim-only", action="store_true", help="the simulated servers only")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    args = parser.parse_args(argv)
    command = command_line(__file__, argv)

    def body(procs: Processes) -> int:
        started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        sims = simulations()
        real: list[dict[str, Any]] = []
        if not args.sim_only:
            horde = find_horde(args.horde)
            gen_cpu, target_cpu, _ = pick_cpus()
            with tempfile.TemporaryDirectory(prefix="horde-bench-trt-") as folder:
                for index, case in enumerate(REAL):
                    real.append(real_run(procs, horde, gen_cpu, target_cpu, case, Path(folder), f"case{index}"))
                    procs.close()  # this case's target and hogs
                    print(real[-1]["name"], "—", real[-1]["sentence"], flush=True)
        facts = machine()
        header = f"{started}, {facts['nproc']} CPUs ({facts['model']}), load {load()}; `{command}`\n\n"
        content = header + sim_table(sims) + ("\n" + real_table(real) if real else "")
        print(content)
        results = REPO / "bench" / "results"
        results.mkdir(exist_ok=True)
        (results / "last-target-response-time.json").write_text(
            json.dumps({"simulations": sims, "real": real}, indent=2) + "\n"
        )
        if not args.no_readme:
            write_readme_block(
                "target-response-time", content, section="Target response time (`bench/target_response_time.py`)"
            )
        return 0

    return run_main(body)


if __name__ == "__main__":
    sys.exit(main())
