"""Horde against pgbench: the same scripts against the same local PostgreSQL, side by side in one
run, at the same client count: transactions/s and the client's CPU per transaction. Target (issue
19): at least pgbench's rate at no more than its CPU.

    .venv/bin/python bench/sql.py                       # 3 repetitions x 5 s per tool and script (~2 min)
    .venv/bin/python bench/sql.py --reps 5 --seconds 8 --clients 8

Scripts: pgbench's built-in `select-only` (-S: one primary-key SELECT on pgbench_accounts) and
`tpcb-like` (BEGIN, three UPDATEs, a SELECT and an INSERT, END: seven round trips), both with
`-M prepared`; Horde runs the same statements as one `sql` step (`mode: prepared`; the tpcb-like
step's `statements:` are sent inside BEGIN ... COMMIT, also seven round trips) with the random
aid/bid/tid/delta of a transaction drawn from a feeder file of random rows (pgbench's `\\set
random(...)`, drawn once per transaction and used in several statements). pgbench -i at scale
`--scale` (default 1: 100,000 accounts, one branch, so tpcb-like transactions queue on the
branch row in both tools alike).

Method (as scenario.py): the client and the database each pinned to a CPU (pgbench `-j 1`,
`horde run --workers 1`); every repetition runs each tool for N seconds and for 1 second,
alternating which goes first; CPU from wait4()'s rusage of the client process itself
(`harness.run_measured`, the same for both), so Horde's count includes its Python control plane;
the start-up corrected cost is (CPU_N - CPU_1) / (transactions_N - transactions_1), and the
steady cost each client's CPU read from /proc over its steady seconds (`harness.steady_window`)
over the transactions of those seconds; the target is judged on the steady cost, which carries
neither run's start-up nor its noise. The steady cost is also split into the client's user space
and the kernel's work for it (utime and stime from /proc; this VM's noise is mostly the
kernel's). The database's CPU (postmaster and backends) is read from /proc around each run;
"others' CPU" is the rest of the machine, in cores. Figures go to bench/FIGURES.md ("Horde against pgbench").
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py: processes, pinning, exact CPU measurement)
import monitors  # noqa: E402  (its throw-away PostgreSQL, pinned to the target's CPU)

SCRIPTS = ("select-only", "tpcb-like")
TOOLS = ("pgbench", "horde")
#: Random rows the tpcb-like feeder holds: enough that reuse is no cache effect at scale 1-10.
FEED_ROWS = 200_000


def database_cpu_s(data: Path) -> float:
    """CPU of the postmaster, its reaped children (backends of runs that ended) and its live ones."""
    pid = int((data / "postmaster.pid").read_text().split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(value) for value in fields[11:15]) / harness.CLK_TCK  # utime, stime, cutime, cstime
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            child_fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(child_fields[11]) + int(child_fields[12])) / harness.CLK_TCK
        except (FileNotFoundError, ProcessLookupError):
            pass  # exited between the two reads (its time is now in cutime)
    return total


def horde_plan(env: harness.Env, script: str, dsn: str, scale: int, clients: int, seconds: int) -> Path:
    accounts = 100_000 * scale
    if script == "select-only":
        step: dict[str, Any] = {
            "type": "sql",
            "name": "txn",
            "mode": "prepared",
            "query": "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
            "params": [f"{{{{ random_int(1, {accounts}) }}}}"],
        }
        feeders: list[dict[str, str]] = []
    else:
        step = {
            "type": "sql",
            "name": "txn",
            "mode": "prepared",
            "statements": [
                {
                    "query": "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
                    "params": ["{{ t.delta }}", "{{ t.aid }}"],
                },
                {"query": "SELECT abalance FROM pgbench_accounts WHERE aid = $1", "params": ["{{ t.aid }}"]},
                {
                    "query": "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2",
                    "params": ["{{ t.delta }}", "{{ t.tid }}"],
                },
                {
                    "query": "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2",
                    "params": ["{{ t.delta }}", "{{ t.bid }}"],
                },
                {
                    "query": "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
                    "params": ["{{ t.tid }}", "{{ t.bid }}", "{{ t.aid }}", "{{ t.delta }}"],
                },
            ],
        }
        feed = env.work / "tpcb.csv"
        if not feed.exists():
            draw = random.Random(19)
            with feed.open("w", newline="") as out:
                writer = csv.writer(out)
                writer.writerow(["aid", "bid", "tid", "delta"])
                for _ in range(FEED_ROWS):
                    writer.writerow(
                        [
                            draw.randint(1, accounts),
                            draw.randint(1, scale),
                            draw.randint(1, 10 * scale),
                            draw.randint(-5000, 5000),
                        ]
                    )
        feeders = [{"name": "t", "path": str(feed), "format": "csv", "mode": "random"}]
    plan = {
        "version": 1,
        "name": f"pgbench-{script}",
        "target": {"base_url": dsn},
        "scenarios": [
            {
                "name": "clients",
                "steps": [step],
                "feeders": feeders,
                "workload": {
                    "type": "closed",
                    "start_vus": clients,
                    "stages": [{"duration_s": seconds, "vus": clients}],
                },
            }
        ],
        "graceful_stop_s": 2,
    }
    path = env.work / f"{script}-{seconds}.json"
    path.write_text(json.dumps(plan))
    return path


def run_pgbench(
    env: harness.Env, pgbench: str, script: str, port: int, clients: int, seconds: int, tag: str
) -> tuple[harness.Measured, int, float]:
    """(measurement, transactions, tps) of one pgbench run pinned to the client's CPU."""
    log = env.work / f"{tag}.log"
    argv = [
        "taskset",
        "-c",
        env.gen_cpu,
        pgbench,
        "-n",
        "-M",
        "prepared",
        "-b",
        script,
        "-c",
        str(clients),
        "-j",
        "1",
        "-T",
        str(seconds),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-U",
        "postgres",
        "postgres",
    ]
    measured = harness.run_measured(
        env.procs,
        argv,
        log,
        timeout_s=seconds + 60,
        cpu_window_s=harness.steady_window(seconds),
        idle_cpus=(env.gen_cpu, env.target_cpu),
    )
    out = log.read_text(errors="replace")
    done = re.search(r"number of transactions actually processed: (\d+)", out)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
    if measured.rc != 0 or not done or not tps:
        raise harness.BenchError(f"pgbench ended with exit code {measured.rc}", hint=out[-800:])
    return measured, int(done.group(1)), float(tps.group(1))


def measure(env: harness.Env, reps: int, seconds: int, clients: int, scale: int) -> dict[str, Any]:
    pgbench = shutil.which("pgbench")
    if pgbench is None:
        raise harness.BenchError("pgbench is not installed", hint="apt-get install postgresql-contrib (or postgresql)")
    dsn, prefix, pg_ctl = monitors.start_postgres(env)
    data = env.work / "pg"
    port = int(dsn.rsplit(":", 1)[1].split("/")[0])
    rows: dict[str, dict[str, list[dict[str, float]]]] = {script: {tool: [] for tool in TOOLS} for script in SCRIPTS}
    try:
        subprocess.run(
            [pgbench, "-i", "-q", "-s", str(scale), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "postgres"],
            check=True,
            capture_output=True,
        )
        for rep in range(reps):
            for script in SCRIPTS:
                order = TOOLS if rep % 2 == 0 else TOOLS[::-1]
                for tool in order:
                    runs: list[tuple[harness.Measured, int, float, float]] = []
                    for length in (seconds, 1):
                        tag = f"{tool}-{script}-{rep}-{length}"
                        db0 = database_cpu_s(data)
                        if tool == "pgbench":
                            measured, done, tps = run_pgbench(env, pgbench, script, port, clients, length, tag)
                        else:
                            plan = horde_plan(env, script, dsn, scale, clients, length)
                            measured, summary = harness.horde_run(
                                env, [str(plan)], length, tag, None, cpu_window_s=harness.steady_window(length)
                            )
                            if summary["errors"]:
                                raise harness.BenchError(f"horde counted errors: {summary['errors_by_kind']}")
                            done, tps = int(summary["requests"]), float(summary["rps"])
                        runs.append((measured, done, tps, database_cpu_s(data) - db0))
                    (long, done, tps, db_cpu), (short, short_done, _, _) = runs
                    steady_us, user_us = harness.steady_us_per(long, tps), harness.steady_user_us_per(long, tps)
                    rows[script][tool].append(
                        {
                            "tps": tps,
                            "raw_us": long.cpu_s / done * 1e6,
                            "marginal_us": (long.cpu_s - short.cpu_s) / (done - short_done) * 1e6,
                            "steady_us": steady_us,
                            "user_us": user_us,
                            "kernel_us": steady_us - user_us,
                            "db_us": db_cpu / done * 1e6,
                            "db_cores": db_cpu / long.wall_s,
                            # others_cores counts everything but the client: the database is not "others".
                            "others": max(0.0, long.others_cores - db_cpu / long.wall_s),
                            "steal": long.steal_cores,
                            **harness.window_rates(long, tps, env.gen_cpu, env.target_cpu),
                        }
                    )
                    print(
                        f"rep {rep} {script:11} {tool:7} {tps:8.0f} tx/s  {rows[script][tool][-1]['marginal_us']:7.1f} us/tx, "
                        f"{rows[script][tool][-1]['steady_us']:7.1f} steady",
                        file=sys.stderr,
                    )
    finally:
        subprocess.run(
            [*prefix, str(pg_ctl), "--pgdata", str(data), "--mode", "immediate", "stop"],
            capture_output=True,
            check=False,
        )
    medians = {
        script: {
            tool: {key: statistics.median(row[key] for row in values) for key in values[0]}
            for tool, values in by_tool.items()
        }
        for script, by_tool in rows.items()
    }
    return {"rows": rows, "medians": medians}


def render(
    result: dict[str, Any], command: str, reps: int, seconds: int, clients: int, scale: int, load_before: str
) -> str:
    machine = harness.machine()
    lines = [
        "### Horde against pgbench",
        "",
        f"- machine: {machine['nproc']} CPUs, {machine['model']}, Linux {machine['kernel']}; load before: {load_before}",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; command: `{command}`",
        f"- {reps} x {seconds} s per tool and script (plus 1 s runs for the start-up correction), {clients} clients, "
        f"pgbench -i scale {scale}, `-M prepared` / `mode: prepared`, pgbench `-j 1` / `horde run --workers 1`, "
        "client and database each pinned to a CPU; medians over the repetitions (min-max of the corrected CPU)",
        "",
        "| script | client | tx/s (min-max) | client CPU µs/tx (raw) | start-up corrected (min-max) | steady (min-max) | database CPU µs/tx | database (cores) | others' CPU (cores) | steal (cores) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    verdicts = []
    for script in SCRIPTS:
        for tool in TOOLS:
            median = result["medians"][script][tool]
            spread = [row["marginal_us"] for row in result["rows"][script][tool]]
            rates = [row["tps"] for row in result["rows"][script][tool]]
            steady = [row["steady_us"] for row in result["rows"][script][tool]]
            lines.append(
                f"| {script} | {tool} | {median['tps']:,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) | {median['raw_us']:.1f} "
                f"| {median['marginal_us']:.1f} ({min(spread):.1f}-{max(spread):.1f}) "
                f"| {median['steady_us']:.1f} ({min(steady):.1f}-{max(steady):.1f}) | {median['db_us']:.1f} "
                f"| {median['db_cores']:.2f} | {median['others']:.2f} | {median['steal']:.2f} |"
            )
        horde, pgbench = result["medians"][script]["horde"], result["medians"][script]["pgbench"]
        rate_ok = horde["tps"] >= 0.97 * pgbench["tps"]  # within 3 %: the repetitions' own spread
        cpu_ok = horde["steady_us"] <= pgbench["steady_us"]
        pairs = harness.paired(result["rows"][script]["horde"], result["rows"][script]["pgbench"], "steady_us")
        low, high = harness.median_interval(pairs)
        verdicts.append(
            f"{script}: rate {horde['tps'] / pgbench['tps'] * 100:.0f} % of pgbench's ({'met' if rate_ok else 'NOT met'}), "
            f"CPU per transaction {horde['steady_us'] / pgbench['steady_us']:.2f}x pgbench's in the steady seconds "
            f"({'met' if cpu_ok else 'NOT met'}; {horde['marginal_us'] / pgbench['marginal_us']:.2f}x start-up corrected; "
            f"repetition by repetition {', '.join(f'{x:.2f}' for x in pairs)}x, median {statistics.median(pairs):.2f}x, "
            f"90 % bootstrap interval {low:.2f}-{high:.2f}x)"
        )
    lines += [
        "",
        "Where the client's steady CPU goes, and its wake-ups (medians): its user space and the kernel's work for it, "
        "per transaction (utime and stime from /proc, summed over the client's threads; the kernel samples that split at "
        "its tick, 250 Hz here, and `perf record` on the same runs puts less of Horde's time in user space than the tick "
        "does: read the split as a trend, the sum is exact); how often its threads were switched in, and how often its CPU halted, "
        "per transaction; how often the database's CPU halted, per second. On a VM a halted CPU is woken by the "
        "hypervisor, at the cost of whoever wakes it: a result that finds the client's CPU halted costs the database "
        "an interrupt to another CPU.",
        "",
        "| script | client | user space µs/tx (min-max) | kernel µs/tx | wake-ups per tx | client's CPU halts per tx "
        "| database's CPU halts/s |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for script in SCRIPTS:
        for tool in TOOLS:
            median = result["medians"][script][tool]
            users = [row["user_us"] for row in result["rows"][script][tool]]
            lines.append(
                f"| {script} | {tool} | {median['user_us']:.2f} ({min(users):.2f}-{max(users):.2f}) "
                f"| {median['kernel_us']:.2f} | {median['wakeups_per_req']:.3f} "
                f"| {median['gen_halts_s'] / median['tps']:.3f} | {median['target_halts_s']:,.0f} |"
            )
    window = harness.steady_window(seconds)
    lines += [
        "",
        f"*Steady*: each client's CPU (every thread of its process) from {window[0]:g} s after its "
        f"start to {seconds - window[1]:g} s before its end, read from /proc, over the transactions of "
        "those seconds at its rate; "
        "*start-up corrected*: the long run's CPU less a 1 s run's, over the difference of their transactions.",
        "",
        "Target (at least pgbench's rate at no more than its CPU): " + "; ".join(verdicts) + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Horde against pgbench: tx/s and client CPU per transaction, side by side."
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)
    if harness.steady_window(args.seconds) is None:
        parser.error(f"--seconds {args.seconds}: the steady window needs runs of at least 5 s")

    def body(procs: harness.Processes) -> int:
        load_before = harness.load()
        horde = harness.find_horde(args.horde)
        gen_cpu, target_cpu, _notes = harness.pick_cpus()
        with tempfile.TemporaryDirectory(prefix="horde-bench-sql-") as work:
            env = harness.Env(horde=horde, wrk="", gen_cpu=gen_cpu, target_cpu=target_cpu, work=Path(work), procs=procs)
            result = measure(env, args.reps, args.seconds, args.clients, args.scale)
        text = render(
            result, harness.command_line(__file__, argv), args.reps, args.seconds, args.clients, args.scale, load_before
        )
        print(text)
        if not args.no_readme:
            harness.write_readme_block("sql-pgbench", text, section="Horde against pgbench (`bench/sql.py`)")
        return 0

    return harness.run_main(body)


if __name__ == "__main__":
    sys.exit(main())
