"""VU density: how many game players one generator process holds on this machine, at what rate,
with what timer lateness and memory per VU.

    .venv/bin/python bench/density.py            # 150,000 players, 60 s ramp + 120 s held (~4 min)
    .venv/bin/python bench/density.py --quick    # 20,000 players, 15 s ramp + 30 s held (~1 min)
    .venv/bin/python bench/density.py --players 100000 --pool 100 --seconds 120
    .venv/bin/python bench/density.py --workers 2 # the generator on both CPUs (the target on one)
    .venv/bin/python bench/density.py --workers 2 --target-threads 2 --tag 16cpu  # a larger machine

The plan is bench/plans/density.yaml: the game scenario of examples/game (register and log in
once, then a weighted mix of game actions with JSON extraction and checks), each player making
one action every `pacing` seconds, so the asked rate is exactly players / pacing iterations per
second (20,000/s at 150,000 players and 7.5 s; an iteration makes about 1.1 requests). The
players share a pool of N keep-alive connections (`target.connections: {pool: N}`): one
connection per player would need 150,000 open files and this machine allows 20,000 per process.

Method: the built-in target (`horde target --threads 1`, its own process) pinned to one CPU, the
generator (`horde run --workers 1`) to the other. With more workers the generator runs on every
CPU, the target's included, unless the machine has a CPU for each worker and each target thread:
then each gets its own (the generator the first `--workers` CPUs, the target the next
`--target-threads`). The generator's VmRSS is read once a second;
memory per VU is (median RSS of the held phase - RSS of a 10-player baseline run) / players.
Rate, latency and timer lateness come from the run's stored snapshots over the held phase
(from one pacing period after the ramp to the last whole second): the achieved rate is
iterations per second against players / pacing, and the timer lateness is each second's p99
(its worst second and its median). The generator's CPU per request over the held phase (from
each second's CPU share) is measured again on a rate-matched run of 1,000 players (the same
iterations per second from a shorter pacing): their ratio is the density tax, the cost of
having many players. Figures go to bench/FIGURES.md ("VU density").
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py: processes, pinning, exact CPU measurement)

BENCH = Path(__file__).resolve().parent
PLAN = BENCH / "plans" / "density.yaml"
#: Why 1,000 connections: an exchange holds its connection from the write until the worker next
#: polls it after the response arrived, and with 150,000 VUs on one worker a pass of its event
#: loop takes several milliseconds, so an exchange takes ~5 ms, not loopback's ~0.1 ms. Little's
#: law then puts 23,000 req/s x 5 ms = ~115 connections in use; 1,000 leaves room for the loop's
#: slow seconds, for 5 % of the 20,000 files the process may open. (100, the first choice made
#: from loopback's round trip alone, capped the run at ~21,000 req/s with 5 s of pool waiting.)
DEFAULT_POOL = 1000
#: The field report's game: 150,000 players at about 20,000 requests/s, one action every 7.5 s.
PACING_S = 7.5
RATE_TOLERANCE = 0.02
LATENESS_LIMIT_MS = 10.0
#: The aim for memory held per VU (issue: at most 4 KiB at 150,000 players).
MEMORY_AIM_KB = 4.0

SIZES = {
    "full": {"players": 150_000, "ramp": 60, "seconds": 120},
    "quick": {"players": 20_000, "ramp": 15, "seconds": 30},
}


@dataclass
class DensityEnv(harness.Env):
    #: The generator's worker threads.
    workers: int = 1
    #: The built-in target's threads.
    target_threads: int = 1


def cpu_layout(cpus: list[int], workers: int, target_threads: int) -> tuple[str, str]:
    """(generator CPUs, target CPUs) for taskset. Each gets CPUs of its own where the machine has
    enough; otherwise the target gets the second CPU and a generator of several workers every CPU
    (sharing the target's), as on a 2-CPU machine."""
    if len(cpus) >= workers + target_threads:
        mine = ",".join(map(str, cpus[:workers]))
        theirs = ",".join(map(str, cpus[workers : workers + target_threads]))
        return mine, theirs
    target = str(cpus[1] if len(cpus) > 1 else cpus[0])
    return (str(cpus[0]) if workers <= 1 else ",".join(map(str, cpus))), target


def horde_run(
    env: DensityEnv, tag: str, params: dict[str, str], timeout_s: float, target_pid: int
) -> tuple[harness.Measured, dict[str, Any]]:
    summary_path = env.work / f"{tag}.summary.json"
    log = env.work / f"{tag}.log"
    base_url = params.pop("base_url")
    flags = [flag for name, value in params.items() for flag in ("-p", f"{name}={value}")]
    argv = [
        "taskset",
        "-c",
        env.gen_cpu,
        env.horde,
        "run",
        str(PLAN),
        "--base-url",
        base_url,
        *flags,
        "--workers",
        str(env.workers),
        "--summary-json",
        str(summary_path),
        "--store",
        str(env.work / "store.sqlite"),
    ]
    measured = harness.run_measured(env.procs, argv, log, timeout_s=timeout_s, sample_rss=True, target_pid=target_pid)
    if measured.rc != 0 or not summary_path.exists():
        raise harness.BenchError(
            f"horde run ({tag}) ended with exit code {measured.rc}",
            hint=f"last output: {log.read_text(errors='replace')[-800:]}",
        )
    return measured, json.loads(summary_path.read_text())


def held_seconds(env: harness.Env, run_id: str, first_second: int, last_second: int) -> list[dict[str, Any]]:
    """The stored snapshots of the held phase: whole seconds `first_second` to `last_second`."""
    from horde.store import Store

    store = Store.open(str(env.work / "store.sqlite"))
    try:
        snapshots = store.snapshots(run_id)
    finally:
        store.close()
    return [
        dict(s)
        for s in snapshots
        if first_second <= s["second"] <= last_second and not s["final"] and s["interval_s"] > 0.99
    ]


#: The players of the rate-matched baseline: the same iterations per second from few players
#: (a short pacing), so that the ratio of CPU per request is the cost of having many players.
TAX_BASELINE_PLAYERS = 1_000
#: The aim for that ratio (issue: 150,000 players within 1.3x of 1,000 at the same rate).
TAX_AIM = 1.3


def measure(env: DensityEnv, players: int, pacing: float, ramp: float, seconds: int, pool: int) -> dict[str, Any]:
    target, port = harness.start_target(env, threads=env.target_threads)
    base_url = f"http://127.0.0.1:{port}"
    try:
        print("baseline: 10 players for 5 s", flush=True)
        baseline, _ = horde_run(
            env,
            "baseline",
            {
                "base_url": base_url,
                "players": "10",
                "pacing": str(pacing),
                "ramp": "1",
                "duration": "5",
                "pool": str(pool),
            },
            timeout_s=120,
            target_pid=target.pid,
        )
        # The same rate from 1,000 players: what a request costs without the density.
        few = min(TAX_BASELINE_PLAYERS, players)
        few_pacing = pacing * few / players
        few_ramp = max(1, round(5 / few_pacing)) * few_pacing
        print(f"rate-matched baseline: {few:,} players, pacing {few_pacing:g} s, held {seconds} s", flush=True)
        _, few_summary = horde_run(
            env,
            "rate-matched",
            {
                "base_url": base_url,
                "players": str(few),
                "pacing": f"{few_pacing:g}",
                "ramp": f"{few_ramp:g}",
                "duration": str(seconds),
                "pool": str(pool),
            },
            timeout_s=few_ramp + seconds + 300,
            target_pid=target.pid,
        )
        print(
            f"density: {players:,} players, ramp {ramp} s, held {seconds} s, pacing {pacing:g} s, pool {pool}",
            flush=True,
        )
        many, summary = horde_run(
            env,
            "density",
            {
                "base_url": base_url,
                "players": str(players),
                "pacing": str(pacing),
                "ramp": f"{ramp:g}",
                "duration": str(seconds),
                "pool": str(pool),
            },
            timeout_s=ramp + seconds + 600,
            target_pid=target.pid,
        )
    finally:
        env.procs.stop(target)
    few_held = held_seconds(env, few_summary["run_id"], int(few_ramp + few_pacing) + 2, int(few_ramp) + seconds - 1)
    first = int(ramp + pacing) + 2
    # The last second of the stages is left out: the stop may land in it.
    held = held_seconds(env, summary["run_id"], first, int(ramp) + seconds - 1)
    if not held or not few_held:
        raise harness.BenchError("the run has no held second to measure", hint="give it more --seconds than the pacing")
    # RSS samples are taken once a second from the start of the process; the held phase's
    # samples are those from `first` seconds after the engine started (about 2 s of start-up).
    held_rss = many.rss_samples_kb[first + 2 : first + 2 + len(held)] or many.rss_samples_kb[-5:]
    baseline_rss = statistics.median(baseline.rss_samples_kb[2:] or baseline.rss_samples_kb)
    requests = _requests(held)
    iterations = sum(s["iterations"] for s in held)
    lateness = [float(s["timer_lateness_p99_ms"]) for s in held]
    asked = players / pacing
    achieved = iterations / len(held)
    errors: dict[str, int] = {}
    for s in held:
        for step in s["steps"]:
            if step["kind"] == "request":
                for kind, count in step["errors"].items():
                    errors[kind] = errors.get(kind, 0) + count
    from horde.engine import histogram

    latency = histogram.stats(
        histogram.merge(step["histogram"] for s in held for step in s["steps"] if step["kind"] == "request"),
        [50.0, 99.0],
    )
    cpu_us, few_cpu_us = _cpu_us_per_request(held), _cpu_us_per_request(few_held)
    return {
        "players": players,
        "pacing_s": pacing,
        "ramp_s": ramp,
        "held_s": len(held),
        "pool": pool,
        "asked_iterations_per_s": asked,
        "iterations_per_s": achieved,
        "rate_error": achieved / asked - 1,
        "worst_second_error": max(abs(s["iterations"] / asked - 1) for s in held),
        "requests_per_s": requests / len(held),
        "errors": errors,
        "requests": requests,
        "lateness_p99_worst_ms": max(lateness),
        "lateness_p99_median_ms": statistics.median(lateness),
        "cpu_percent_median": statistics.median(float(s["cpu_percent"]) for s in held),
        "cpu_us_per_request": cpu_us,
        "rate_matched": {
            "players": few,
            "pacing_s": few_pacing,
            "held_s": len(few_held),
            "cpu_us_per_request": few_cpu_us,
            "iterations_per_s": sum(s["iterations"] for s in few_held) / len(few_held),
            "requests_per_s": _requests(few_held) / len(few_held),
        },
        "density_tax": cpu_us / few_cpu_us if few_cpu_us else None,
        "active_vus_min": min(s["active_vus"] for s in held),
        "rss_held_kb": statistics.median(held_rss),
        "rss_peak_kb": many.maxrss_kb,
        "rss_baseline_kb": baseline_rss,
        "kb_per_vu": (statistics.median(held_rss) - baseline_rss) / players,
        "connections_opened": sum(s["connections_opened"] for s in held_seconds(env, summary["run_id"], 1, 10**9)),
        "p50_ms": latency.percentile(50.0),
        "p99_ms": latency.percentile(99.0),
        "iterations_by_second": [s["iterations"] for s in held],
        "lateness_by_second_ms": lateness,
        "target_cpu_s": many.target_cpu_s,
        "wall_s": many.wall_s,
        "others_cores": many.others_cores,
        "summary_run_id": summary["run_id"],
    }


def _requests(seconds: list[dict[str, Any]]) -> int:
    return sum(step["requests"] for s in seconds for step in s["steps"] if step["kind"] == "request")


def _cpu_us_per_request(seconds: list[dict[str, Any]]) -> float:
    """The generator's CPU per request over these seconds (each snapshot's CPU share of its
    interval): a figure that compares across machines better than a share of a core."""
    cpu_s = sum(float(s["cpu_percent"]) / 100 * float(s["interval_s"]) for s in seconds)
    requests = _requests(seconds)
    return cpu_s * 1e6 / requests if requests else 0.0


def render(result: dict[str, Any], command: str, started: dt.datetime, env: DensityEnv) -> str:
    machine = harness.machine()
    met = abs(result["rate_error"]) <= RATE_TOLERANCE
    late_ok = result["lateness_p99_worst_ms"] < LATENESS_LIMIT_MS
    memory_ok = result["kb_per_vu"] <= MEMORY_AIM_KB
    errors = ", ".join(f"{kind} {count:,}" for kind, count in sorted(result["errors"].items())) or "none"
    matched = result["rate_matched"]
    tax = result["density_tax"] or float("nan")
    lines = [
        f"- machine: {machine['nproc']} CPUs, {machine['model']}, Linux {machine['kernel']}",
        f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}; command: `{command}`",
        f"- generator (`horde run --workers {env.workers}`) pinned to CPU {env.gen_cpu}, target "
        f"(`horde target --threads {env.target_threads}`) to CPU {env.target_cpu}",
        f"- {result['players']:,} players ramped over {result['ramp_s']:g} s, measured over {result['held_s']} held seconds; "
        f"pacing {result['pacing_s']:g} s; `connections: {{pool: {result['pool']}}}`",
        "",
        "| players | asked it/s | achieved it/s | error | worst second | req/s | p50 / p99 ms | errors | timer lateness p99 (worst s / median) | generator CPU | CPU µs/req | RSS held | per VU |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {result['players']:,} | {result['asked_iterations_per_s']:,.0f} | {result['iterations_per_s']:,.1f} | "
        f"{result['rate_error'] * 100:+.2f} % | {result['worst_second_error'] * 100:.2f} % | {result['requests_per_s']:,.0f} | "
        f"{result['p50_ms']:.2f} / {result['p99_ms']:.2f} | {errors} | "
        f"{result['lateness_p99_worst_ms']:.1f} / {result['lateness_p99_median_ms']:.1f} ms | {result['cpu_percent_median']:.0f} % of a core | "
        f"{result['cpu_us_per_request']:.1f} | {result['rss_held_kb'] / 1024:,.0f} MiB | **{result['kb_per_vu']:.1f} KiB** |",
        "",
        f"Rate within {RATE_TOLERANCE:.0%}: **{'met' if met else 'not met'}**; timer lateness p99 under "
        f"{LATENESS_LIMIT_MS:g} ms in every held second: **{'met' if late_ok else 'not met'}**; memory per VU at most "
        f"{MEMORY_AIM_KB:g} KiB: **{'met' if memory_ok else 'not met'}** (baseline {result['rss_baseline_kb'] / 1024:.0f} MiB "
        f"with 10 players; peak {result['rss_peak_kb'] / 1024:,.0f} MiB). Connections opened in the whole run: "
        f"{result['connections_opened']:,}. The target used {result['target_cpu_s'] / result['wall_s']:.0%} of its core over the "
        f"run; other processes took {result['others_cores']:.2f} of a core.",
        "",
        f"Density tax: the same rate ({matched['iterations_per_s']:,.0f} it/s, {matched['requests_per_s']:,.0f} req/s) from "
        f"{matched['players']:,} players (pacing {matched['pacing_s']:g} s) cost **{matched['cpu_us_per_request']:.1f} µs** of "
        f"generator CPU per request; {result['players']:,} players cost **{result['cpu_us_per_request']:.1f} µs**: "
        f"**×{tax:.2f}** (aim ≤ ×{TAX_AIM:g}: **{'met' if tax <= TAX_AIM else 'not met'}**).",
    ]
    return "\n".join(lines) + "\n"


def update_readme(key: str, title: str, block: str) -> None:
    harness.write_readme_block(
        f"density:{key}", f"#### `{title}`\n\n{block}", section="VU density (`bench/density.py`)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="VU density: the game scenario with many players on one generator process."
    )
    parser.add_argument("--quick", action="store_true", help="20,000 players, 15 s ramp, 30 s held")
    parser.add_argument("--players", type=int, help="players (VUs); default 150,000 (20,000 with --quick)")
    parser.add_argument(
        "--pacing", type=float, default=PACING_S, help=f"seconds between a player's actions (default {PACING_S:g})"
    )
    parser.add_argument("--ramp", type=int, help="seconds to start every player")
    parser.add_argument("--seconds", type=int, help="seconds held after the ramp")
    parser.add_argument(
        "--pool", type=int, default=DEFAULT_POOL, help=f"connections in the pool (default {DEFAULT_POOL})"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="generator workers (default 1, pinned to the first CPU; more: pinned to every CPU, sharing the target's)",
    )
    parser.add_argument("--target-threads", type=int, default=1, help="the built-in target's threads (default 1)")
    harness.add_tag_argument(parser)
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)
    size = "quick" if args.quick else "full"
    players = max(10, min(args.players or SIZES[size]["players"], 2_000_000))
    ramp = max(1, args.ramp or SIZES[size]["ramp"])
    seconds = max(10, min(args.seconds or SIZES[size]["seconds"], 3600))
    pacing = max(0.1, args.pacing)
    # Players start evenly over the ramp and then keep their phase within the pacing period: a
    # ramp of a whole number of periods spreads the phases evenly, any other ramp gives some
    # part of every period twice the players (and the rate a saw-tooth).
    ramp_s = max(1, round(ramp / pacing)) * pacing
    command = harness.command_line(__file__, argv)

    def body(procs: harness.Processes) -> int:
        horde = harness.find_horde(args.horde)
        harness.require_taskset()
        workers, target_threads = max(1, args.workers), max(1, args.target_threads)
        gen_cpus, target_cpus = cpu_layout(sorted(os.sched_getaffinity(0)), workers, target_threads)
        with tempfile.TemporaryDirectory(prefix="horde-density-") as work:
            env = DensityEnv(
                horde=horde,
                wrk="",
                gen_cpu=gen_cpus,
                target_cpu=target_cpus,
                work=Path(work),
                procs=procs,
                workers=workers,
                target_threads=target_threads,
            )
            started = dt.datetime.now(dt.timezone.utc)
            result = measure(env, players, pacing, ramp_s, seconds, args.pool)
            block = render(result, command, started, env)
            print()
            print(block)
            harness.RESULTS_DIR.mkdir(exist_ok=True)
            # Each size, worker count and tag keeps its own figures.
            other_size = players != SIZES[size]["players"]
            key = (
                size
                + (f"-{players}p" if other_size else "")
                + (f"-w{workers}" if workers > 1 else "")
                + (f"-{args.tag}" if args.tag else "")
            )
            title = (
                ("--quick" if size == "quick" else "full size")
                + (f", {players:,} players" if other_size else "")
                + (f", {workers} workers" if workers > 1 else "")
                + (f", {args.tag}" if args.tag else "")
            )
            (harness.RESULTS_DIR / f"density-{key}.json").write_text(
                json.dumps({"command": command, "date": started.isoformat(), **result}, indent=2) + "\n"
            )
            if not args.no_readme:
                update_readme(key, title, block)
                print(f"updated {os.path.relpath(harness.FIGURES)}")
        return 0

    return harness.run_main(body)


if __name__ == "__main__":
    sys.exit(main())
