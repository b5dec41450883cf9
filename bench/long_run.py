#!/usr/bin/env python3
"""Long run: does the generator's memory stay flat under steady load for half an hour?

    .venv/bin/python bench/long_run.py                 # 30 minutes (issue 6's figure)
    .venv/bin/python bench/long_run.py --quick         # 2 minutes: the same method, a smoke check
    .venv/bin/python bench/long_run.py --minutes 10 --players 500

The load is the game scenario of examples/game as it ships: each player registers and logs in,
then loops over a weighted mix of JSON actions with an exponential think time (200 ms mean), and
telemetry devices post every second. A closed model of a few hundred players against the
built-in target in its own process; the generator (`horde run`, one worker, its summary and a
throw-away store) pinned to one CPU and the target to the other, as in bench/run.py.

The generator's VmRSS is read from /proc every few seconds. Reported: the RSS just after the
warm-up and at the end (medians of the samples in a short window, so one allocator spike does not
decide), the growth between them (target: under 5 %), the least-squares slope over every sample
after the warm-up, the peak, and the rate held per minute (from `horde export` of the
stored run). Raw samples go to bench/results/long-run-<date>.json (ignored by git); a run that is
not --quick rewrites its block in bench/FIGURES.md.

Standard library only. Every process it starts is killed on exit, on error and on Ctrl-C, and
every wait has a deadline (bench/harness.py's Processes and run_measured).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py: processes, pinning, exact measurement, FIGURES.md blocks)

GAME = harness.REPO / "examples" / "game"
TARGET_GROWTH = 0.05  # issue 6: memory growth under 5 % after the warm-up
RAMP_UP_S = 10


def minute_label(seconds: float) -> str:
    return f"{int(seconds // 60):02d}:{int(seconds % 60):02d}"


def per_second_rates(env: harness.Env, run_id: str) -> list[dict[str, float]]:
    """Requests, generator CPU % and timer lateness of each second of the stored run, through
    `horde export` (the store's public reading), with group rows left out: a group's time is
    measured as one action but it sends no request of its own."""
    path = env.work / "export.csv"
    measured = harness.run_measured(
        env.procs,
        [env.horde, "export", run_id, "--store", str(env.work / "store.sqlite"), "-o", str(path)],
        env.work / "export.log",
        timeout_s=300,
    )
    if measured.rc != 0 or not path.exists():
        raise harness.BenchError(
            f"horde export ended with exit code {measured.rc}",
            hint=f"its output: {(env.work / 'export.log').read_text(errors='replace')[-800:]}",
        )
    seconds: dict[int, dict[str, float]] = {}
    with open(path, newline="") as rows:
        for row in csv.DictReader(rows):
            if row["final"] == "True":
                continue
            second = seconds.setdefault(
                int(row["second"]),
                {
                    "second": int(row["second"]),
                    "elapsed_s": float(row["elapsed_s"]),
                    "interval_s": float(row["interval_s"]),
                    "requests": 0.0,
                    "cpu_percent": float(row["cpu_percent"] or 0),
                    "timer_lateness_p99_ms": float(row["timer_lateness_p99_ms"] or 0),
                },
            )
            if row["kind"] == "request":
                second["requests"] += float(row["requests"])
    return [seconds[s] for s in sorted(seconds)]


def slope_kb_per_minute(times_s: list[float], values_kb: list[int]) -> float:
    """Least-squares slope of RSS over time, in KiB per minute."""
    if len(times_s) < 2:
        return 0.0
    mean_t, mean_v = statistics.fmean(times_s), statistics.fmean(values_kb)
    spread = sum((t - mean_t) ** 2 for t in times_s)
    return sum((t - mean_t) * (v - mean_v) for t, v in zip(times_s, values_kb)) / spread * 60 if spread else 0.0


def analyse(
    measured: harness.Measured,
    summary: dict[str, Any],
    seconds: list[dict[str, float]],
    *,
    run_s: float,
    warmup_s: float,
    window_s: float,
) -> dict[str, Any]:
    times, rss = measured.rss_sample_times_s, measured.rss_samples_kb
    # Sample times count from the process's start, the run's stages from a moment later (Python
    # start-up, plan, store): the end window is taken before the last sample, not at run_s.
    last = max((t for t in times if t <= run_s + 5), default=run_s)
    after = [v for t, v in zip(times, rss) if warmup_s <= t < warmup_s + window_s]
    end = [v for t, v in zip(times, rss) if last - window_s < t <= last]
    steady = [(t, v) for t, v in zip(times, rss) if warmup_s <= t <= last]
    if not after or not end:
        raise harness.BenchError(
            "too few RSS samples after the warm-up to judge growth",
            hint="run longer (--minutes) or sample more often (--sample-seconds)",
        )
    rss_after, rss_end = statistics.median(after), statistics.median(end)
    growth = rss_end / rss_after - 1.0
    judged = [s for s in seconds if s["elapsed_s"] > warmup_s]
    rate = sum(s["requests"] for s in judged) / sum(s["interval_s"] for s in judged) if judged else 0.0
    minutes: dict[int, list[dict[str, float]]] = {}
    for s in judged:
        minutes.setdefault(int((s["elapsed_s"] - 1e-9) // 60), []).append(s)
    # Whole minutes only: a partial first or last minute would read as a dip in the rate.
    per_minute = [
        sum(s["requests"] for s in group) / sum(s["interval_s"] for s in group)
        for _, group in sorted(minutes.items())
        if sum(s["interval_s"] for s in group) >= 59
    ]
    return {
        "rss_after_warmup_kb": rss_after,
        "rss_end_kb": rss_end,
        "growth": growth,
        "met": growth < TARGET_GROWTH,
        "rss_min_after_warmup_kb": min(v for _, v in steady),
        "rss_max_after_warmup_kb": max(v for _, v in steady),
        "slope_kb_per_min": slope_kb_per_minute([t for t, _ in steady], [v for _, v in steady]),
        # ru_maxrss is the kernel's high-water mark, kept with some lag: a sample may be above it.
        "peak_rss_kb": max(measured.maxrss_kb, max(rss)),
        "rate_after_warmup": rate,
        "rate_per_minute": per_minute,
        "requests": summary["requests"],
        "errors": summary["errors"],
        "errors_by_kind": summary.get("errors_by_kind", {}),
        "latency_ms": summary.get("latency_ms", {}),
        "peak_vus": summary.get("peak_vus"),
        "generator_cpu_s": measured.cpu_s,
        "generator_cores": measured.cpu_s / measured.wall_s,
        "generator_us_per_req": measured.cpu_s / summary["requests"] * 1e6 if summary["requests"] else float("nan"),
        "timer_lateness_p99_ms_worst": max((s["timer_lateness_p99_ms"] for s in judged), default=0.0),
        "timer_lateness_p99_ms_median": statistics.median(s["timer_lateness_p99_ms"] for s in judged)
        if judged
        else 0.0,
        "target_cores": measured.target_cpu_s / measured.wall_s,
        "others_cores": measured.others_cores,
    }


def render(
    figures: dict[str, Any],
    *,
    command: str,
    started: dt.datetime,
    minutes: float,
    players: int,
    devices: int,
    warmup_s: float,
    window_s: float,
    sample_s: float,
    env: harness.Env,
    results: Path,
) -> str:
    m = harness.machine()
    f = figures
    per_minute = f["rate_per_minute"]
    spread = (
        (
            f"{min(per_minute):,.0f}–{max(per_minute):,.0f} req/s ({(min(per_minute) / f['rate_after_warmup'] - 1) * 100:+.1f} % to "
            f"{(max(per_minute) / f['rate_after_warmup'] - 1) * 100:+.1f} % of the mean)"
        )
        if per_minute
        else "n/a (no whole minute)"
    )
    errors = ", ".join(f"{kind} {count}" for kind, count in f["errors_by_kind"].items()) or "none"
    mib = 1024.0
    lines = [
        "### Long run",
        "",
        f"- machine: {m['nproc']} CPUs, {m['model']}, Linux {m['kernel']}",
        f"- date: {started:%Y-%m-%d %H:%M} UTC; command: `{command}`",
        f"- load: examples/game as it ships (closed model, {players:,} players with exponential think time of 200 ms mean after a "
        f"{RAMP_UP_S} s ramp, plus {devices} telemetry devices at 1 s pacing), {minutes:g} min, `--workers 1`; generator pinned to CPU "
        f"{env.gen_cpu}, built-in target (`horde target --threads 1`, own process) to CPU {env.target_cpu}",
        f"- RSS sampled every {sample_s:g} s; warm-up {warmup_s / 60:g} min; each RSS figure is the median of the samples in a "
        f"{window_s:g} s window; raw samples in `{results.relative_to(harness.REPO)}` (ignored by git)",
        "",
        "| RSS after warm-up | RSS at the end | growth | slope after warm-up | min–max after warm-up | peak |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {f['rss_after_warmup_kb'] / mib:.1f} MiB | {f['rss_end_kb'] / mib:.1f} MiB | **{f['growth'] * 100:+.2f} %** | "
        f"{f['slope_kb_per_min']:+.1f} KiB/min | {f['rss_min_after_warmup_kb'] / mib:.1f}–{f['rss_max_after_warmup_kb'] / mib:.1f} MiB | "
        f"{f['peak_rss_kb'] / mib:.1f} MiB |",
        "",
        "| rate after warm-up | per whole minute (min–max) | requests | errors | p50 / p99 ms | generator CPU | µs/req | timer lateness p99 (median / worst s) | target CPU | others' CPU |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {f['rate_after_warmup']:,.0f} req/s | {spread} | {f['requests']:,} | {f['errors']:,} | "
        f"{f['latency_ms'].get('p50', 0):.2f} / {f['latency_ms'].get('p99', 0):.2f} | {f['generator_cores']:.2f} core | "
        f"{f['generator_us_per_req']:.1f} | {f['timer_lateness_p99_ms_median']:.1f} / {f['timer_lateness_p99_ms_worst']:.1f} ms | "
        f"{f['target_cores']:.2f} core | {f['others_cores']:.2f} core |",
        "",
        f"Errors by kind: {errors}. Memory growth after the warm-up: **{f['growth'] * 100:+.2f} %**; target under "
        f"{TARGET_GROWTH * 100:g} %: **{'met' if f['met'] else 'NOT met'}**.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generator memory over a long run of steady load (the game scenario).")
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the run (default 30)")
    parser.add_argument(
        "--quick", action="store_true", help="2 minutes, RSS every 2 s, FIGURES.md untouched: a smoke check"
    )
    parser.add_argument("--players", type=int, default=300, help="players of the game scenario (default 300)")
    parser.add_argument("--devices", type=int, default=10, help="telemetry devices at 1 s pacing (default 10)")
    parser.add_argument(
        "--warmup-minutes",
        type=float,
        help="left out before judging growth (default: 10 %% of the run, at least 1 min)",
    )
    parser.add_argument("--sample-seconds", type=float, help="RSS sampling interval (default 5, 2 with --quick)")
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 when memory grows by {TARGET_GROWTH * 100:g} %% or more after the warm-up",
    )
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)
    minutes = 2.0 if args.quick else args.minutes
    if not 1 <= minutes <= 24 * 60:
        return harness.fail(harness.BenchError(f"--minutes {minutes:g} is out of range", hint="give 1 to 1440 minutes"))
    run_s = minutes * 60
    warmup_s = (args.warmup_minutes * 60) if args.warmup_minutes is not None else max(0.1 * run_s, 60.0)
    # The RSS windows: 5 % of the run (90 s of 30 min), at least three samples.
    sample_s = args.sample_seconds or (2.0 if args.quick else 5.0)
    window_s = max(0.05 * run_s, 3 * sample_s)
    if warmup_s + 2 * window_s > run_s:
        return harness.fail(
            harness.BenchError(
                f"a {warmup_s / 60:g} min warm-up leaves too little of a {minutes:g} min run to judge",
                hint="lower --warmup-minutes or raise --minutes",
            )
        )
    command = harness.command_line(__file__, argv)

    def body(procs: harness.Processes) -> int:
        horde = harness.find_horde(args.horde)
        gen_cpu, target_cpu, notes = harness.pick_cpus()
        started = dt.datetime.now(dt.timezone.utc)
        with tempfile.TemporaryDirectory(prefix="horde-long-run-") as work:
            env = harness.Env(
                horde=horde, wrk="", gen_cpu=gen_cpu, target_cpu=target_cpu, work=Path(work), procs=procs, notes=notes
            )
            target, port = harness.start_target(env)
            print(
                f"long run: {minutes:g} min of examples/game, {args.players} players + {args.devices} devices; generator on CPU {gen_cpu}, "
                f"target on CPU {target_cpu}; RSS every {sample_s:g} s, warm-up {warmup_s / 60:g} min",
                flush=True,
            )
            next_report = [0.0]

            def progress(elapsed: float, rss_kb: int) -> None:
                if elapsed >= next_report[0]:  # one line a minute (every 15 s with --quick)
                    print(f"  {minute_label(elapsed)}  RSS {rss_kb / 1024:7.1f} MiB", flush=True)
                    next_report[0] = elapsed + (15.0 if args.quick else 60.0)

            game = [
                str(GAME),
                "--base-url",
                f"http://127.0.0.1:{port}",
                "-p",
                f"players={args.players}",
                "-p",
                f"devices={args.devices}",
                "-p",
                f"ramp_up={RAMP_UP_S}",
                "-p",
                f"duration={run_s - RAMP_UP_S:g}",
            ]
            try:
                measured, summary = harness.horde_run(
                    env,
                    game,
                    run_s,
                    "long-run",
                    target.pid,
                    sample_rss=True,
                    sample_every_s=sample_s,
                    on_sample=progress,
                )
            finally:
                procs.stop(target)
            seconds = per_second_rates(env, summary["run_id"])
        figures = analyse(measured, summary, seconds, run_s=run_s, warmup_s=warmup_s, window_s=window_s)
        harness.RESULTS_DIR.mkdir(exist_ok=True)
        results = harness.RESULTS_DIR / f"long-run-{started:%Y%m%d-%H%M%S}.json"
        block = render(
            figures,
            command=command,
            started=started,
            minutes=minutes,
            players=args.players,
            devices=args.devices,
            warmup_s=warmup_s,
            window_s=window_s,
            sample_s=sample_s,
            env=env,
            results=results,
        )
        results.write_text(
            json.dumps(
                {
                    "command": command,
                    "date": started.isoformat(),
                    "machine": harness.machine(),
                    "notes": notes,
                    "minutes": minutes,
                    "players": args.players,
                    "devices": args.devices,
                    "warmup_s": warmup_s,
                    "window_s": window_s,
                    "figures": figures,
                    "rss_samples": [
                        [round(t, 2), kb] for t, kb in zip(measured.rss_sample_times_s, measured.rss_samples_kb)
                    ],
                    "seconds": seconds,
                    "summary": summary,
                },
                indent=1,
            )
            + "\n"
        )
        print()
        print(block)
        print(f"raw samples: {os.path.relpath(results)}")
        if not (args.quick or args.no_readme):
            harness.write_readme_block("long-run", block, section="Long run (`bench/long_run.py`)")
            print(f"updated {os.path.relpath(harness.FIGURES)}")
        if args.check and not figures["met"]:
            print(
                f"memory grew by {figures['growth'] * 100:.1f} % after the warm-up (--check: under {TARGET_GROWTH * 100:g} %)",
                file=sys.stderr,
            )
            return 1
        return 0

    return harness.run_main(body)


if __name__ == "__main__":
    sys.exit(main())
