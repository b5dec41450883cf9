"""`horde profile`'s speed and memory: lines per second on a generated access log of a few
million lines, beside a plain `awk` pass over the same file, and peak memory at two sizes (flat
with the log's size: the profile keeps per-endpoint counters, not lines).

    .venv/bin/python bench/log_profile.py                   # 2,000,000 lines (and 500,000 for memory)
    .venv/bin/python bench/log_profile.py --lines 1000000   # a modest size on a small machine
    .venv/bin/python bench/log_profile.py --gzip            # the same log gzip-compressed

The log is nginx's combined format with `$request_time $upstream_response_time`, over a day:
12 endpoints (ids in paths, query strings with a token), 20,000 clients (each with its user
agent), busier in the afternoon. `horde profile LOG --json FILE --session-gap 30m` reads it (off a
terminal: no progress bar) and `awk '{ n[$7]++ } END { for (k in n) c++; print c }' LOG` (one
pass counting requests per path, the least any log tool does) is the reference. Each is run to
its end once per size, its CPU and peak RSS taken from wait4()'s rusage (bench/harness.py);
lines/s is lines over the wall time of the whole command (start-up included). Figures go to
bench/FIGURES.md ("Log profile").
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py: processes, exact CPU and memory measurement)

AWK_PROGRAM = "{ n[$7]++ } END { for (k in n) c++; print c }"
#: 2024-03-01 00:00:00 UTC: the generated day's start.
DAY_START = 1709251200
AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/122.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_3 like Mac OS X) Mobile/15E148",
    "okhttp/4.12.0",
    "python-requests/2.31",
]


def generate(path: Path, lines: int, *, compress: bool, seed: int = 1, as_json: bool = False) -> None:
    """A day of nginx combined-format lines (or the same requests as JSON lines), in time order,
    written in blocks."""
    rng = random.Random(seed)
    endpoints = [
        ("GET", "/api/items/{}", 30),
        ("GET", "/api/items/{}/reviews?page={}", 10),
        ("POST", "/api/cart", 8),
        ("GET", "/api/users/{}/orders?token={}", 8),
        ("GET", "/", 15),
        ("GET", "/static/app.{}.js", 10),
        ("POST", "/api/login", 3),
        ("GET", "/api/search?q=shoe{}&page={}", 7),
        ("PUT", "/api/cart/{}", 3),
        ("DELETE", "/api/cart/{}", 1),
        ("GET", "/health", 3),
        ("GET", "/api/orders/{}", 2),
    ]
    weights = [weight for *_, weight in endpoints]
    opener = (
        (lambda p: gzip.open(p, "wt", encoding="utf-8", compresslevel=1))
        if compress
        else (lambda p: open(p, "w", encoding="utf-8"))
    )
    # Busier in the afternoon: minute m's share of the day follows 1 + 0.9 cos(2π (m/1440 - 15/24)).
    shares = [1 + 0.9 * math.cos(2 * math.pi * (minute / 1440 - 15 / 24)) for minute in range(1440)]
    total, cumulative, bounds = sum(shares), 0.0, [0]
    for share in shares:
        cumulative += share
        bounds.append(round(lines * cumulative / total))
    counts = [end - start for start, end in zip(bounds, bounds[1:])]
    with opener(path) as out:
        block: list[str] = []
        chosen = rng.choices(range(len(endpoints)), weights=weights, k=lines)
        i = previous = 0
        stamp = ""
        for minute, count in enumerate(counts):
            for j in range(count):
                second = DAY_START + 60 * minute + 60 * j // count
                if second != previous:
                    stamp, previous = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(second)), second
                method, template, _ = endpoints[chosen[i]]
                target = template.format(rng.randrange(1, 100_000), rng.randrange(1, 10))
                seconds = rng.expovariate(1 / 0.04)
                client = rng.randrange(20_000)
                if as_json:
                    block.append(
                        json.dumps(
                            {
                                "time": second,
                                "remote_addr": f"10.{client // 250}.{client % 250}.1",
                                "method": method,
                                "uri": target,
                                "status": 200,
                                "bytes": rng.randrange(100, 20000),
                                "http_user_agent": AGENTS[client % 4],
                                "request_time": round(seconds, 3),
                            }
                        )
                        + "\n"
                    )
                else:
                    block.append(
                        f'10.{client // 250}.{client % 250}.1 - - [{stamp}] '
                        f'"{method} {target} HTTP/1.1" 200 {rng.randrange(100, 20000)} "-" "{AGENTS[client % 4]}" '
                        f"{seconds:.3f} {seconds * 0.9:.3f}\n"
                    )
                i += 1
                if len(block) >= 65536:
                    out.write("".join(block))
                    block.clear()
        out.write("".join(block))


def measure(procs: harness.Processes, argv: list[str], work: Path, tag: str, lines: int) -> dict[str, Any]:
    measured = harness.run_measured(procs, argv, work / f"{tag}.out", timeout_s=3600)
    if measured.rc != 0:
        raise harness.BenchError(
            f"{argv[0]} ended with exit code {measured.rc}",
            hint=f"its output: {(work / f'{tag}.out').read_text()[-600:]}",
        )
    return {
        "wall_s": round(measured.wall_s, 3),
        "cpu_s": round(measured.cpu_s, 3),
        "lines_per_s": round(lines / measured.wall_s),
        "peak_rss_mib": round(measured.maxrss_kb / 1024, 1),
        "others_cores": round(measured.others_cores, 2),
    }


def render(
    results: list[dict[str, Any]],
    command: str,
    started: dt.datetime,
    awk: str,
    compress: bool,
    load_before: str,
    as_json: bool = False,
) -> str:
    machine = harness.machine()
    rows = [
        "| lines | log | tool | wall s | lines/s | lines/s reading | CPU s | lines per CPU s | peak RSS MiB | other load (cores) |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        for tool in ("horde", "awk"):
            figures = result[tool]
            reading = (
                f"{round(result['lines'] / figures['read_s']):,}" if tool == "horde" and figures.get("read_s") else "—"
            )
            rows.append(
                f"| {result['lines']:,} | {result['log_mib']:,.0f} MiB{' gz' if compress else ''} | "
                f"{'horde profile' if tool == 'horde' else 'awk'} | {figures['wall_s']:.2f} | "
                f"{figures['lines_per_s']:,} | {reading} | {figures['cpu_s']:.2f} | {round(result['lines'] / max(figures['cpu_s'], 1e-9)):,} | "
                f"{figures['peak_rss_mib']:.1f} | "
                f"{figures['others_cores']:.2f} |"
            )
    big, small = results[-1], results[0]
    ratio = big["horde"]["lines_per_s"] / big["awk"]["lines_per_s"]
    growth = big["horde"]["peak_rss_mib"] / small["horde"]["peak_rss_mib"] - 1
    return "\n".join(
        [
            f"Measured {started:%Y-%m-%d %H:%M} UTC on {machine['model']} ({machine['nproc']} CPUs, Linux {machine['kernel']}), "
            f"load average before {load_before}, after {harness.load()} (a shared machine: *other load* is the "
            f"other processes' cores during each command); `{command}`; awk is `{awk}`.",
            "",
            *rows,
            "",
            "*lines/s reading*: the lines over the time `horde profile` itself reports for reading them "
            "(without the command's start-up: Python and the `horde` command's imports); *lines per CPU s*: "
            "the lines over the command's whole CPU time (start-up included), the per-core figure."
            + (
                " The log is JSON lines (awk's `$7` is then whatever word it is: the same one pass)." if as_json else ""
            ),
            "",
            f"`horde profile` reads {ratio:.2f}× awk's lines per second (a pass that only counts paths); "
            f"from {small['lines']:,} to {big['lines']:,} lines its peak memory moved {growth * 100:+.1f} %.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="horde profile: lines per second against awk, memory against the log's size."
    )
    parser.add_argument(
        "--lines",
        type=int,
        default=2_000_000,
        help="lines of the larger log (default 2,000,000; the smaller has a quarter)",
    )
    parser.add_argument(
        "--gzip", action="store_true", help="compress the logs (horde unpacks them; awk reads them through zcat)"
    )
    parser.add_argument(
        "--json", action="store_true", help="JSON lines (the same requests, one object a line) instead of combined"
    )
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)
    command = harness.command_line(__file__, argv)
    lines_big = max(10_000, args.lines)

    def body(procs: harness.Processes) -> int:
        horde = harness.find_horde(args.horde)
        awk = shutil.which("awk")
        if awk is None:
            raise harness.BenchError("awk is not installed", hint="sudo apt-get install -y mawk")
        awk_name = os.path.realpath(awk)
        started = dt.datetime.now(dt.timezone.utc)
        load_before = harness.load()
        results = []
        with tempfile.TemporaryDirectory(prefix="horde-log-profile-") as folder:
            work = Path(folder)
            for lines in (lines_big // 4, lines_big):
                log = work / f"access-{lines}.{'jsonl' if args.json else 'log'}{'.gz' if args.gzip else ''}"
                print(f"generating {lines:,} lines ...", flush=True)
                generate(log, lines, compress=args.gzip, as_json=args.json)
                awk_argv = (
                    ["sh", "-c", f"zcat '{log}' | {awk} '{AWK_PROGRAM}'"] if args.gzip else [awk, AWK_PROGRAM, str(log)]
                )
                result = {
                    "lines": lines,
                    "log_mib": log.stat().st_size / 2**20,
                    "awk": measure(procs, awk_argv, work, f"awk-{lines}", lines),
                    "horde": measure(
                        procs,
                        [horde, "profile", str(log), "--json", str(work / f"p-{lines}.json")],
                        work,
                        f"horde-{lines}",
                        lines,
                    ),
                }
                profile = json.loads((work / f"p-{lines}.json").read_text())
                if profile["source"]["requests"] != lines:
                    raise harness.BenchError(
                        f"horde profile counted {profile['source']['requests']:,} requests of {lines:,}"
                    )
                result["horde"]["read_s"] = profile["source"]["read_s"]
                print(
                    f"  awk {result['awk']['lines_per_s']:,} lines/s, horde profile {result['horde']['lines_per_s']:,} lines/s "
                    f"({result['horde']['peak_rss_mib']} MiB)",
                    flush=True,
                )
                results.append(result)
        block = render(results, command, started, awk_name, args.gzip, load_before, args.json)
        tag = "log-profile" + ("-json" if args.json else "") + ("-gzip" if args.gzip else "")
        print()
        print(block)
        harness.RESULTS_DIR.mkdir(exist_ok=True)
        (harness.RESULTS_DIR / f"{tag}.json").write_text(
            json.dumps(
                {
                    "command": command,
                    "date": started.isoformat(),
                    "load_before": load_before,
                    "load_after": harness.load(),
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )
        if not args.no_readme:
            harness.write_readme_block(tag, block, section="Log profile (`bench/log_profile.py`)")
            print(f"updated {os.path.relpath(harness.FIGURES)}")
        return 0

    return harness.run_main(body)


if __name__ == "__main__":
    sys.exit(main())
