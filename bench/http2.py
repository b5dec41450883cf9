"""HTTP/2 side by side: Horde (`target.http_version: "2"`, a pool of C connections multiplexed by
C x M VUs) and h2load (C connections, M streams each, one thread) against the same built-in
target over h2c, each pinned to its own CPU: requests/s and client CPU per request.

Horde's CPU per request is marginal: a long run minus a 1-second one, divided by the requests
between them, which removes the fixed cost of a run (Python start-up, plan, store, summary).
h2load's is its CPU over its requests (its start-up is a few milliseconds).

Needs h2load (Debian package nghttp2-client); not part of CI. Usage:

    .venv/bin/python bench/http2.py --reps 3 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import BenchError, Env, Processes  # noqa: E402


def h2load_run(
    env: Env, h2load: str, port: int, connections: int, streams: int, seconds: int, tag: str, target_pid: int
) -> dict[str, Any]:
    log = env.work / f"{tag}.log"
    argv = [
        "taskset",
        "-c",
        env.gen_cpu,
        h2load,
        "-c",
        str(connections),
        "-m",
        str(streams),
        "-t",
        "1",
        "-D",
        str(seconds),
        f"http://127.0.0.1:{port}/",
    ]
    measured = harness.run_measured(env.procs, argv, log, timeout_s=seconds + 60, target_pid=target_pid)
    text = log.read_text(errors="replace")
    done = re.search(r"requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded", text)
    if measured.rc != 0 or not done:
        raise BenchError(f"h2load ended with exit code {measured.rc} or printed no request count", hint=text[-800:])
    succeeded = int(done.group(2))
    return {
        "requests": succeeded,
        "rps": succeeded / seconds,
        "errors": int(done.group(1)) - succeeded,
        "us_per_req": measured.cpu_s / succeeded * 1e6,
        "others_cores": measured.others_cores,
    }


def write_plan(env: Env, port: int, connections: int, vus: int, seconds: int) -> Path:
    plan = env.work / f"h2-{seconds}s.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "name": "h2-bench",
                "target": {
                    "base_url": f"http://127.0.0.1:{port}",
                    "http_version": "2",
                    "connections": {"pool": connections},
                },
                "scenarios": [
                    {
                        "name": "s",
                        "steps": [{"name": "home", "method": "GET", "path": "/"}],
                        "workload": {
                            "type": "closed",
                            "start_vus": vus,
                            "stages": [{"duration_s": seconds, "vus": vus}],
                        },
                    }
                ],
            }
        )
    )
    return plan


def horde_pair(
    env: Env, port: int, connections: int, vus: int, seconds: int, tag: str, target_pid: int
) -> dict[str, Any]:
    long_m, long_s = harness.horde_run(
        env, [str(write_plan(env, port, connections, vus, seconds))], seconds, tag, target_pid
    )
    short_m, short_s = harness.horde_run(
        env, [str(write_plan(env, port, connections, vus, 1))], 1, f"{tag}-short", target_pid
    )
    between = long_s["requests"] - short_s["requests"]
    marginal = (long_m.cpu_s - short_m.cpu_s) / between * 1e6 if between > 0 else float("nan")
    return {
        "requests": long_s["requests"],
        "rps": long_s["rps"],
        "errors": long_s["errors"],
        "connections_opened": long_s["connections_opened"],
        "us_per_req": marginal,
        "others_cores": long_m.others_cores,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument(
        "--streams",
        type=int,
        default=25,
        help="concurrent streams per connection (h2load -m; Horde's VUs per connection)",
    )
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)

    def body(procs: Processes) -> int:
        h2load = shutil.which("h2load")
        if not h2load:
            raise BenchError("h2load is not installed", hint="sudo apt-get install -y nghttp2-client")
        horde = harness.find_horde(args.horde)
        gen_cpu, target_cpu, notes = harness.pick_cpus()
        load_before = harness.load()
        rows: dict[str, list[dict[str, Any]]] = {"h2load": [], "horde": []}
        with tempfile.TemporaryDirectory(prefix="horde-bench-http2-") as work:
            env = Env(
                horde=horde, wrk="", gen_cpu=gen_cpu, target_cpu=target_cpu, work=Path(work), procs=procs, notes=notes
            )
            target, port = harness.start_target(env)
            vus = args.connections * args.streams
            for rep in range(args.reps):
                rows["h2load"].append(
                    h2load_run(
                        env, h2load, port, args.connections, args.streams, args.seconds, f"h2load-{rep}", target.pid
                    )
                )
                rows["horde"].append(
                    horde_pair(env, port, args.connections, vus, args.seconds, f"horde-{rep}", target.pid)
                )
        text = render(rows, args, harness.command_line(__file__, argv), load_before, harness.load(), notes)
        print(text)
        if not args.no_readme:
            harness.write_readme_block("http2", text, section="HTTP/2 against h2load (`bench/http2.py`)")
        return 0

    return harness.run_main(body)


def render(
    rows: dict[str, list[dict[str, Any]]],
    args: argparse.Namespace,
    command: str,
    load_before: str,
    load_after: str,
    notes: list[str],
) -> str:
    def med(tool: str, key: str) -> float:
        return float(statistics.median(row[key] for row in rows[tool]))

    spread = {
        tool: f"{min(r['us_per_req'] for r in rows[tool]):.2f}-{max(r['us_per_req'] for r in rows[tool]):.2f}"
        for tool in rows
    }
    ratio = med("horde", "us_per_req") / med("h2load", "us_per_req")
    machine = harness.machine()
    lines = [
        f"`{command}`: h2c against the built-in target, {args.connections} connections x {args.streams} streams "
        f"({args.connections * args.streams} Horde VUs on a pool of {args.connections}), {args.seconds} s, {args.reps} reps, "
        f"client and target each pinned to a CPU ({machine['nproc']} x {machine['model']}; load {load_before} before, {load_after} after).",
        "",
        "| client | requests/s (median) | CPU per request, us (median; range) | errors |",
        "| --- | --- | --- | --- |",
        f"| h2load | {med('h2load', 'rps'):,.0f} | {med('h2load', 'us_per_req'):.2f} ({spread['h2load']}) | {sum(r['errors'] for r in rows['h2load'])} |",
        f"| Horde | {med('horde', 'rps'):,.0f} | {med('horde', 'us_per_req'):.2f} ({spread['horde']}) | {sum(r['errors'] for r in rows['horde'])} |",
        "",
        f"Horde's CPU per request is {ratio:.2f}x h2load's (the issue's aim: within 1.2x). Horde opened "
        f"{rows['horde'][0]['connections_opened']} connections per run. Other processes used "
        f"{max(r['others_cores'] for tool in rows for r in rows[tool]):.2f} cores at most during a run.",
        *[f"Note: {note}" for note in notes],
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
