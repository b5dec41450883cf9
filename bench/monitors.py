"""Monitors' cost: the control plane's CPU per sample of each kind of source, and the generator's
CPU per request with and without monitors, side by side in one run.

    .venv/bin/python bench/monitors.py                          # 3 x 8 s per plan at 1,000 req/s (~2 min)
    .venv/bin/python bench/monitors.py --reps 5 --seconds 10 --rate 2000

Method (as bench/scenario.py): the built-in target and the generator (`horde run --workers 1`)
each pinned to a CPU; every repetition runs the same load (an open model, GET /) without
monitors and with three, each read every second: `host` (this machine's /proc), `node` (a real
node_exporter, scraped and turned into host figures: `node_exporter: true`) and `pg` (a
throw-away PostgreSQL this script starts: initdb, pg_ctl). Each plan runs for N seconds and for
1 second; the start-up corrected cost is (CPU_N - CPU_1) / (requests_N - requests_1), CPU from
wait4()'s rusage of the generator process, whose threads include the monitors' own (they run in
the control plane, pinned to the generator's CPU with the engine). The cost of one sample is
the monitor thread's CPU while reading (time.thread_time, the summary's `monitors.cost`) over
its readings; storing and judging the samples is the run loop's, and shows in the process's
CPU per request. node_exporter and PostgreSQL run on the target's CPU: theirs is the watched
machine's CPU, not the generator's. Figures go to bench/FIGURES.md ("Monitors' cost").
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py: processes, pinning, exact CPU measurement)

MONITORS = ("host", "node", "pg")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise harness.BenchError(f"{what} did not listen on 127.0.0.1:{port} within 30 s")


def start_node_exporter(env: harness.Env) -> str:
    binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if binary is None:
        raise harness.BenchError("node_exporter is not installed", hint="apt-get install prometheus-node-exporter")
    port = _free_port()
    # On the target's CPU, as the database: the generator's CPU stays the generator's.
    env.procs.start(
        ["taskset", "-c", env.target_cpu, binary, f"--web.listen-address=127.0.0.1:{port}"],
        env.work / "node_exporter.log",
    )
    _wait_for_port(port, "node_exporter")
    return f"http://127.0.0.1:{port}/metrics"


def start_postgres(env: harness.Env) -> tuple[str, list[str], Path]:
    """A throw-away PostgreSQL on a free port: (its DSN, the prefix its commands run with, pg_ctl)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: [int(part) for part in path.parts[-3].split(".")],
    )
    bindir = found[-1].parent if found else Path(shutil.which("initdb") or "/nonexistent").parent
    if not (bindir / "pg_ctl").exists():
        raise harness.BenchError("PostgreSQL's server binaries were not found", hint="apt-get install postgresql")
    data = env.work / "pg"
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the database runs as the postgres system user
        prefix = ["runuser", "-u", "postgres", "--"]
        shutil.chown(env.work, user="postgres")
    port = _free_port()
    subprocess.run(
        [
            *prefix,
            str(bindir / "initdb"),
            "--pgdata",
            str(data),
            "--auth",
            "trust",
            "--username",
            "postgres",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        cwd=env.work,
    )
    subprocess.run(
        [
            "taskset",
            "-c",
            env.target_cpu,
            *prefix,
            str(bindir / "pg_ctl"),
            "--pgdata",
            str(data),
            "--log",
            str(env.work / "postgres.log"),
            "--wait",
            "--options",
            f"-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={env.work}",
            "start",
        ],
        check=True,
        capture_output=True,
        cwd=env.work,
    )
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", prefix, bindir / "pg_ctl"


def write_plan(
    env: harness.Env, name: str, port: int, rate: float, seconds: int, monitors: list[dict[str, Any]]
) -> Path:
    plan = {
        "version": 1,
        "name": name,
        "target": {"base_url": f"http://127.0.0.1:{port}"},
        "scenarios": [
            {
                "name": "s",
                "steps": [{"name": "home", "method": "GET", "path": "/"}],
                "workload": {
                    "type": "open",
                    "max_vus": 200,
                    "start_rate_per_s": rate,
                    "stages": [{"duration_s": seconds, "rate_per_s": rate}],
                },
            }
        ],
        "monitors": monitors,
        "graceful_stop_s": 2,
    }
    path = env.work / f"{name}-{seconds}.json"
    path.write_text(json.dumps(plan))
    return path


def lateness_median(env: harness.Env, summary: dict[str, Any]) -> float:
    """The median over the run's seconds of the engine's timer lateness p99 (ms)."""
    shown = subprocess.run(
        [env.horde, "export", summary["run_id"], "--format", "json", "--store", str(env.work / "store.sqlite")],
        capture_output=True,
        text=True,
        check=True,
    )
    values = {
        row["second"]: row["timer_lateness_p99_ms"] for row in json.loads(shown.stdout)["rows"] if not row["final"]
    }
    return statistics.median(values.values()) if values else float("nan")


def measure(env: harness.Env, reps: int, seconds: int, rate: float) -> dict[str, Any]:
    target, port = harness.start_target(env)
    node = start_node_exporter(env)
    dsn, prefix, pg_ctl = start_postgres(env)
    monitors: list[dict[str, Any]] = [
        {"name": "host", "type": "host"},
        {"name": "node", "type": "prometheus", "url": node, "node_exporter": True},
        {"name": "pg", "type": "postgres", "dsn": dsn},
    ]
    rows: dict[str, list[dict[str, float]]] = {"plain": [], "monitored": []}
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in MONITORS}
    try:
        plans: dict[str, list[dict[str, Any]]] = {"plain": [], "monitored": monitors}
        for rep in range(reps):
            for name in ["plain", "monitored"] if rep % 2 == 0 else ["monitored", "plain"]:
                run: dict[str, tuple[harness.Measured, dict[str, Any]]] = {}
                for length in (seconds, 1):
                    plan = write_plan(env, name, port, rate, length, plans[name])
                    run[str(length)] = harness.horde_run(env, [str(plan)], length, f"{name}-{rep}-{length}", target.pid)
                (long, summary), (short, short_summary) = run[str(seconds)], run["1"]
                requests = summary["requests"] - short_summary["requests"]
                cost = (summary.get("monitors") or {}).get("cost", {})
                monitor_cpu = sum(entry["cpu_s"] for entry in cost.values())
                rows[name].append(
                    {
                        "rps": summary["rps"],
                        "errors": summary["errors"],
                        "raw_us": long.cpu_s / summary["requests"] * 1e6,
                        "marginal_us": (long.cpu_s - short.cpu_s) / requests * 1e6 if requests > 0 else float("nan"),
                        "cpu_ms_per_s": long.cpu_s / summary["duration_s"] * 1e3,
                        "monitor_us": monitor_cpu / summary["requests"] * 1e6,
                        "lateness_ms": lateness_median(env, summary),
                        "others": long.others_cores,
                    }
                )
                for source, entry in cost.items():
                    readings = entry["readings"]
                    samples[source].append(
                        {
                            "readings": readings,
                            "cpu_ms": entry["cpu_s"] / readings * 1e3 if readings else float("nan"),
                            "slowest_ms": entry["slowest_read_s"] * 1e3,
                        }
                    )
    finally:
        env.procs.stop(target)
        subprocess.run(
            [*prefix, str(pg_ctl), "--pgdata", str(env.work / "pg"), "--mode", "immediate", "stop"],
            capture_output=True,
            check=False,
            cwd=env.work,
        )
    medians = {
        name: {key: statistics.median(row[key] for row in values) for key in values[0]} for name, values in rows.items()
    }
    per_sample = {
        name: {key: statistics.median(row[key] for row in values) for key in values[0]}
        for name, values in samples.items()
        if values
    }
    return {"rows": rows, "medians": medians, "samples": per_sample}


def render(result: dict[str, Any], command: str, reps: int, seconds: int, rate: float) -> str:
    machine = harness.machine()
    plain, monitored = result["medians"]["plain"], result["medians"]["monitored"]
    kinds = {
        "host": "host (/proc)",
        "node": "prometheus, node_exporter (a real one, host figures)",
        "pg": "postgres (a local server)",
    }
    lines = [
        "### Monitors' cost",
        "",
        f"- machine: {machine['nproc']} CPUs, {machine['model']}, Linux {machine['kernel']}; load before: {harness.load()}",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; command: `{command}`",
        f"- {reps} x {seconds} s per plan (plus 1 s runs for the start-up correction), open model at {rate:g} req/s, "
        "`--workers 1`, generator and target pinned; medians over the repetitions",
        "",
        "| monitor | source | samples per run | CPU per sample (ms) | slowest read (ms) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, entry in result["samples"].items():
        lines.append(
            f"| `{name}` | {kinds[name]} | {entry['readings']:.0f} | {entry['cpu_ms']:.2f} | {entry['slowest_ms']:.1f} |"
        )
    lines += [
        "",
        "| plan | req/s | errors | generator CPU µs/req (raw) | start-up corrected (min-max) | generator CPU ms/s (min-max) | of it, reading monitors µs/req | timer lateness p99, median s (ms) | others' CPU (cores) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, label in (("plain", "without monitors"), ("monitored", "with host, node and pg each second")):
        row, runs = result["medians"][name], result["rows"][name]

        def spread(key: str, digits: int, row: dict[str, float] = row, runs: list[dict[str, float]] = runs) -> str:
            values = [run[key] for run in runs]
            return f"{row[key]:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

        lines.append(
            f"| {label} | {row['rps']:,.0f} | {row['errors']:.0f} | {row['raw_us']:.2f} | {spread('marginal_us', 1)} | "
            f"{spread('cpu_ms_per_s', 0)} | {row['monitor_us']:.2f} | {row['lateness_ms']:.2f} | {row['others']:.2f} |"
        )
    extra = monitored["cpu_ms_per_s"] - plain["cpu_ms_per_s"]
    reading = monitored["monitor_us"] * monitored["rps"] / 1e3
    noise = max(
        max(run["cpu_ms_per_s"] for run in runs) - min(run["cpu_ms_per_s"] for run in runs)
        for runs in result["rows"].values()
    )
    kept = (
        f"the engine's rate was {plain['rps']:,.0f} and {monitored['rps']:,.0f} req/s, its timer lateness p99 "
        f"{plain['lateness_ms']:.2f} and {monitored['lateness_ms']:.2f} ms"
    )
    if abs(extra) < noise:
        verdict = (
            f"The generator's process used {plain['cpu_ms_per_s']:.0f} and {monitored['cpu_ms_per_s']:.0f} ms of CPU "
            f"per second without and with monitors: a difference ({extra:+.0f} ms/s) within this machine's spread "
            f"from run to run ({noise:.0f} ms/s). The exact figure is the monitors' own, on their threads: "
            f"**{reading:.0f} ms of CPU per second** for the three ({reading / 10:.1f} % of a core); {kept}."
        )
    else:
        verdict = (
            f"Watching three sources each second cost the generator's process **{extra:.0f} ms of CPU per second** "
            f"({extra / 10:.1f} % of a core), {reading:.0f} ms of it reading them (the rest: connecting at the start, "
            f"storing and judging the samples); {kept}."
        )
    lines += ["", verdict]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return harness.side_by_side_main(
        argv,
        script=__file__,
        description="Monitors' cost: CPU per sample, and per request with and without monitors.",
        default_rate=1000.0,
        rate_help="arrivals/s of both plans",
        measure=measure,
        render=render,
        block="monitors-cost",
        section="Monitors' cost (`bench/monitors.py`)",
    )


if __name__ == "__main__":
    sys.exit(main())
