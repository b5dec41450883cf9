#!/usr/bin/env python3
"""The open model's cost and tail: Horde against wrk2 at a fixed arrival rate, side by side.

    .venv/bin/python bench/open_cost.py                      # 5,000 and 20,000 arrivals/s, 3 x 20 s each (~5 min)
    .venv/bin/python bench/open_cost.py --rates 5000 --reps 1 --seconds 15
    .venv/bin/python bench/open_cost.py --wrk2 /opt/wrk2/wrk   # or --wrk2-src DIR / HORDE_WRK2_SRC=DIR

Both tools send `GET /` to the same built-in target (its own process, pinned to one CPU) at the
same constant rate, the generator pinned to the other CPU, and both time each request from its
*intended* start (wrk2's corrected latency; Horde's open model). Per rate and tool: requests/s,
generator CPU per request (exact, from wait4() of the generator process), p50/p99/p99.9 and the
target's CPU per request. Two figures leave Horde's fixed start-up CPU (the Python control
plane's imports, the plan, the store) out, so that its per-request figure is the cost of one
more request once the run is going: *start-up corrected* (a 1 s run beside each long one, as in
run.py: the difference of the two runs' CPU over the difference of their requests), and
*steady* (each tool's CPU read from /proc from 4 s after its start to 1 s before its end, every
thread of the process, over the requests of those seconds at the rate it achieved). The steady
figure is the one compared: the corrected one carries the noise of two whole runs, start-ups
and connection set-ups included (a tenth of a second of it is 1.3 µs per request in a 15 s run
at 5,000/s).

wrk2 (https://github.com/giltene/wrk2) is no Debian package. The bench looks for `wrk2` on
PATH, or takes `--wrk2 PATH`, or builds it with `make` in the source folder given by
`--wrk2-src DIR` (or `HORDE_WRK2_SRC`); without any, it measures Horde alone and says so
(as run.py skips nginx). It never downloads anything.

wrk2 resets its histograms at the end of its calibration (10 s + 5 ms per connection after its
start), so its percentiles cover the rest of the run only; Horde's are read off the same window
from the run's per-second snapshots in its throw-away store (with Horde's own histogram merge,
in a subprocess of the Python that runs Horde: this script stays standard-library only), and
its whole-run figures are reported beside them. Results: bench/results/open-cost.json and the
"Open model against wrk2" block of bench/FIGURES.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
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

#: wrk2's connections (its rate is split evenly over them); Horde opens what the open model needs.
CONNECTIONS = 50
#: Horde's cap on VUs in flight (an arrival beyond it is dropped and counted).
MAX_VUS = 1000
#: wrk2's calibration: it resets its histograms this long after its start (wrk.h, CALIBRATE_DELAY_MS).
WRK2_CALIBRATION_MS = 10_000
WRK2_MAKE_TIMEOUT_S = 900
WRK2_HINT = (
    "build wrk2 from its source (https://github.com/giltene/wrk2: `make` needs a C compiler, libssl-dev "
    "and zlib) and pass --wrk2 PATH/TO/wrk, or --wrk2-src DIR to have the bench run `make` there"
)
PERCENTILES = (50.0, 99.0, 99.9)

#: Run with the Python that runs Horde: Horde's latency percentiles over a window of seconds,
#: read off the run's snapshots in its store (merged with Horde's own HDR code).
WINDOW_SCRIPT = """
import json, sqlite3, sys
from horde.engine import histogram
store, first, percentiles = sys.argv[1], int(sys.argv[2]), [float(p) for p in sys.argv[3].split(",")]
db = sqlite3.connect(store)
run_id = db.execute("select run_id from runs order by started_at desc limit 1").fetchone()[0]
rows = db.execute("select st.histogram from snapshot_steps st join snapshots s on s.run_id = st.run_id and s.second = st.second "
                  "where st.run_id = ? and st.second >= ? and not s.final", (run_id, first)).fetchall()
stats = histogram.stats(histogram.merge(bytes(r[0]) for r in rows), percentiles)
print(json.dumps({"count": stats.count, "percentiles_ms": [stats.percentile(p) for p in percentiles]}))
"""


# ----------------------------------------------------------------------------- wrk2


def is_wrk2(binary: str) -> bool:
    """wrk2 is the wrk that takes `-R` (its usage lists `--rate`); plain wrk does not."""
    try:
        done = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10, check=False)
    except OSError:
        return False
    return "-R, --rate" in done.stdout + done.stderr


def find_wrk2(given: str | None, source: str | None) -> tuple[str | None, str]:
    """(the wrk2 binary or None, a note on where it came from or why it is skipped)."""
    if given:
        if not (Path(given).exists() and is_wrk2(given)):
            raise harness.BenchError(
                f"--wrk2 {given}: not a wrk2 binary (missing, or no `-R` rate option)", hint=WRK2_HINT
            )
        return given, f"wrk2 from {given}"
    if source:
        folder = Path(source).expanduser()
        if not (folder / "Makefile").exists():
            raise harness.BenchError(f"wrk2 source folder {folder}: no Makefile there", hint=WRK2_HINT)
        binary = folder / "wrk"
        if not binary.exists():
            print(f"building wrk2 in {folder} (make)", flush=True)
            try:
                done = subprocess.run(
                    ["make", "-C", str(folder)],
                    capture_output=True,
                    text=True,
                    timeout=WRK2_MAKE_TIMEOUT_S,
                    check=False,
                )
            except subprocess.TimeoutExpired as error:
                raise harness.BenchError(
                    f"building wrk2 in {folder} took over {WRK2_MAKE_TIMEOUT_S} s", hint=WRK2_HINT
                ) from error
            if done.returncode != 0 or not binary.exists():
                raise harness.BenchError(
                    f"`make` in {folder} failed (exit code {done.returncode})",
                    hint=f"{(done.stdout + done.stderr)[-600:]!r}; {WRK2_HINT}",
                )
        if not is_wrk2(str(binary)):
            raise harness.BenchError(f"{binary} is not wrk2 (no `-R` rate option)", hint=WRK2_HINT)
        return str(binary), f"wrk2 built from {folder}"
    found = shutil.which("wrk2")
    if found and is_wrk2(found):
        return found, f"wrk2 from PATH ({found})"
    return None, f"wrk2 (not found: no `wrk2` on PATH, no --wrk2 or --wrk2-src / HORDE_WRK2_SRC; {WRK2_HINT})"


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def wrk2_run(
    env: harness.Env, wrk2: str, url: str, rate: float, seconds: int, tag: str, target_pid: int
) -> dict[str, Any]:
    log = env.work / f"{tag}.log"
    argv = [
        "taskset",
        "-c",
        env.gen_cpu,
        wrk2,
        "-t",
        "1",
        "-c",
        str(CONNECTIONS),
        "-d",
        f"{seconds}s",
        "-R",
        f"{rate:g}",
        "--latency",
        url,
    ]
    m = harness.run_measured(
        env.procs,
        argv,
        log,
        timeout_s=seconds + 60,
        target_pid=target_pid,
        cpu_window_s=harness.steady_window(seconds),
        idle_cpus=(env.gen_cpu, env.target_cpu),
    )
    text = log.read_text(errors="replace")
    total = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)\b", text)
    if m.rc != 0 or not total:
        raise harness.BenchError(
            f"wrk2 ended with exit code {m.rc} or printed no request count", hint=f"its output: {text[-800:]}"
        )
    requests, duration_s = int(total.group(1)), float(total.group(2)) * _UNITS[total.group(3)] / 1e3
    latency = {}
    for p in PERCENTILES:
        found = re.search(rf"^\s*{p:.3f}%\s+([\d.]+)(us|ms|s|m)\s*$", text, flags=re.MULTILINE)
        latency[p] = float(found.group(1)) * _UNITS[found.group(2)] if found else float("nan")
    errors = 0
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if socket_errors:
        errors += sum(int(g) for g in socket_errors.groups())
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if non2xx:
        errors += int(non2xx.group(1))
    return {
        "requests": requests,
        "rps": requests / duration_s,
        "errors": errors,
        "cpu_s": m.cpu_s,
        "us_per_req": m.cpu_s / requests * 1e6,
        "us_per_req_steady": harness.steady_us_per(m, requests / duration_s),
        "target_us_per_req": m.target_cpu_s / requests * 1e6,
        **harness.window_rates(m, requests / duration_s, env.gen_cpu, env.target_cpu),
        **{f"p{p:g}_ms": latency[p] for p in PERCENTILES},
        "others_cores": m.others_cores,
    }


# ----------------------------------------------------------------------------- Horde


def horde_window(env: harness.Env, first_second: int) -> dict[str, Any]:
    """Horde's percentiles over the seconds from `first_second` on (the last run in the store)."""
    python = str(Path(env.horde).resolve().parent / "python")
    if not Path(python).exists():
        python = sys.executable
    done = subprocess.run(
        [
            python,
            "-c",
            WINDOW_SCRIPT,
            str(env.work / "store.sqlite"),
            str(first_second),
            ",".join(f"{p:g}" for p in PERCENTILES),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise harness.BenchError("could not read Horde's latency from its store", hint=done.stderr[-600:])
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def horde_run(env: harness.Env, url: str, rate: float, seconds: int, tag: str, target_pid: int) -> dict[str, Any]:
    """The N-second run and a 1-second one: their difference is the cost of one more request.
    `env.horde` is the Horde that runs (the baseline build's, for that tool)."""
    args = ["--url", url, "--rate", f"{rate:g}", "--max-vus", str(MAX_VUS), "--duration"]
    m, s = harness.horde_run(
        env, [*args, f"{seconds}s"], seconds, tag, target_pid, cpu_window_s=harness.steady_window(seconds)
    )
    # Snapshot k covers second (k-1, k]: from the whole second nearest wrk2's calibration end on.
    window = horde_window(env, first_second=round((WRK2_CALIBRATION_MS + 5 * CONNECTIONS) / 1000) + 1)
    ms, ss = harness.horde_run(env, [*args, "1s"], 1, f"{tag}-short", target_pid)
    d_req = s["requests"] - ss["requests"]
    marginal = (m.cpu_s - ms.cpu_s) / d_req * 1e6 if d_req > 0 else float("nan")
    whole = s.get("latency_ms", {})
    return {
        "requests": s["requests"],
        "rps": s["rps"],
        "errors": s["errors"],
        "dropped": s.get("dropped_arrivals", 0),
        "peak_vus": s.get("peak_vus"),
        "cpu_s": m.cpu_s,
        "us_per_req": m.cpu_s / s["requests"] * 1e6,
        "us_per_req_marginal": marginal,
        "us_per_req_steady": harness.steady_us_per(m, s["rps"]),
        "fixed_cpu_s": ms.cpu_s - ss["requests"] * marginal / 1e6,
        "short_cpu_s": ms.cpu_s,
        "target_us_per_req": m.target_cpu_s / s["requests"] * 1e6,
        **harness.window_rates(m, s["rps"], env.gen_cpu, env.target_cpu),
        **{f"p{p:g}_ms": v for p, v in zip(PERCENTILES, window["percentiles_ms"])},
        "window_requests": window["count"],
        "whole_p50_ms": whole.get("p50"),
        "whole_p99_ms": whole.get("p99"),
        "others_cores": m.others_cores,
    }


# ----------------------------------------------------------------------------- the bench


def measure(
    env: harness.Env, wrk2: str | None, rates: list[float], reps: int, seconds: int, baseline: str | None
) -> dict[str, Any]:
    target, port = harness.start_target(env)
    url = f"http://127.0.0.1:{port}/"
    results: dict[str, Any] = {}
    try:
        # Warm-up: the target's first connections and the page cache of Horde's imports.
        harness.horde_run(env, ["--url", url, "--rate", "1000", "--duration", "1s"], 1, "warmup", target.pid)
        for rate in rates:
            rows: dict[str, list[dict[str, Any]]] = {
                **({"wrk2": []} if wrk2 else {}),
                "horde": [],
                **({"baseline": []} if baseline else {}),
            }
            for rep in range(reps):
                for tool in list(rows) if rep % 2 == 0 else list(rows)[::-1]:
                    tag = f"{rate:g}-{tool}-{rep}"
                    if tool == "wrk2":
                        assert wrk2 is not None
                        row = wrk2_run(env, wrk2, url, rate, seconds, tag, target.pid)
                    else:
                        horde = dataclasses.replace(env, horde=baseline) if tool == "baseline" and baseline else env
                        row = horde_run(horde, url, rate, seconds, tag, target.pid)
                    rows[tool].append(row)
                    extra = f", {row['us_per_req_marginal']:.2f} marginal" if tool != "wrk2" else ""
                    print(
                        f"  {rate:>7,.0f}/s {tool:<8} #{rep + 1}: {row['rps']:>8,.0f} req/s  {row['us_per_req']:6.2f} us/req{extra}, "
                        f"{row['us_per_req_steady']:.2f} steady  "
                        f"p50 {row['p50_ms']:.2f}  p99 {row['p99_ms']:.2f}  p99.9 {row['p99.9_ms']:.2f} ms  "
                        f"(others {row['others_cores']:.2f} cores)",
                        flush=True,
                    )
            results[f"{rate:g}"] = rows
    finally:
        env.procs.stop(target)
    return results


def med(rows: list[dict[str, Any]], key: str) -> float:
    values = [float(r[key]) for r in rows if r.get(key) is not None and not math.isnan(float(r[key]))]
    return float(statistics.median(values)) if values else float("nan")


def render(
    results: dict[str, Any],
    command: str,
    env: harness.Env,
    wrk2_note: str,
    wrk2_found: bool,
    started: dt.datetime,
    load_before: str,
    load_after: str,
    reps: int,
    seconds: int,
    version_cpu: float,
    baseline: str | None,
) -> str:
    m = harness.machine()
    window_from = (WRK2_CALIBRATION_MS + 5 * CONNECTIONS) / 1000
    lines = [
        "### Open model against wrk2 (`bench/open_cost.py`)",
        "",
        f"- machine: {m['nproc']} CPUs, {m['model']}, Linux {m['kernel']}",
        f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}; command: `{command}`",
        f"- load average (1/5/15 min) before: {load_before}; after: {load_after}",
        f"- `GET /` at a constant rate, {reps} × {seconds} s per tool and rate, alternating; medians. Generator pinned to CPU "
        f"{env.gen_cpu}, the built-in target (`horde target --threads 1`) to CPU {env.target_cpu}",
        f"- wrk2: `wrk -t 1 -c {CONNECTIONS} -d {seconds}s -R RATE --latency URL` ({wrk2_note if wrk2_found else 'skipped'}); "
        f"Horde: `horde run --url URL --rate RATE --max-vus {MAX_VUS} --duration {seconds}s --workers 1` (full metrics and the store, as always)",
        "",
        "| rate | generator | req/s | CPU µs/req (raw) | start-up corrected | steady | p50 ms | p99 ms | p99.9 ms | Horde whole-run p50 / p99 ms | "
        "target CPU µs/req | errors (dropped) | others' CPU (cores) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    reading = []
    for rate, rows in results.items():
        for tool, r in rows.items():
            if tool == "wrk2":
                lines.append(
                    f"| {float(rate):,.0f}/s | wrk2 | {med(r, 'rps'):,.0f} | {med(r, 'us_per_req'):.2f} | {med(r, 'us_per_req'):.2f} | "
                    f"{med(r, 'us_per_req_steady'):.2f} | "
                    f"{med(r, 'p50_ms'):.2f} | {med(r, 'p99_ms'):.2f} | {med(r, 'p99.9_ms'):.2f} | | "
                    f"{med(r, 'target_us_per_req'):.2f} | {sum(x['errors'] for x in r)} | {med(r, 'others_cores'):.2f} |"
                )
            else:
                label = "Horde, baseline build" if tool == "baseline" else "Horde"
                lines.append(
                    f"| {float(rate):,.0f}/s | {label} | {med(r, 'rps'):,.0f} | {med(r, 'us_per_req'):.2f} | {med(r, 'us_per_req_marginal'):.2f} | "
                    f"{med(r, 'us_per_req_steady'):.2f} | "
                    f"{med(r, 'p50_ms'):.2f} | {med(r, 'p99_ms'):.2f} | {med(r, 'p99.9_ms'):.2f} | "
                    f"{med(r, 'whole_p50_ms'):.2f} / {med(r, 'whole_p99_ms'):.2f} | {med(r, 'target_us_per_req'):.2f} | "
                    f"{sum(x['errors'] for x in r)} ({sum(x['dropped'] for x in r)}) | {med(r, 'others_cores'):.2f} |"
                )
        if "baseline" in rows:
            h, b = rows["horde"], rows["baseline"]
            corrected = med(h, "us_per_req_marginal") / med(b, "us_per_req_marginal")
            steady = med(h, "us_per_req_steady") / med(b, "us_per_req_steady")
            tails = [med(h, f"p{p:g}_ms") / med(b, f"p{p:g}_ms") for p in PERCENTILES]
            lines.append(
                f"| {float(rate):,.0f}/s | **Horde / baseline build** | {med(h, 'rps') / med(b, 'rps'):.2f} | "
                f"{med(h, 'us_per_req') / med(b, 'us_per_req'):.2f} | {corrected:.2f} | **{steady:.2f}** | {tails[0]:.2f} | {tails[1]:.2f} | "
                f"{tails[2]:.2f} | | | | |"
            )
            reading.append(
                f"At {float(rate):,.0f} arrivals/s this build spent {steady:.2f}× the baseline build's CPU per request "
                f"({med(h, 'us_per_req_steady'):.1f} against {med(b, 'us_per_req_steady'):.1f} µs, steady; {corrected:.2f}× "
                f"start-up corrected), with a p99 {tails[1]:.2f}× the baseline's."
            )
        if "wrk2" in rows:
            h, w = rows["horde"], rows["wrk2"]
            corrected = med(h, "us_per_req_marginal") / med(w, "us_per_req")
            steady = med(h, "us_per_req_steady") / med(w, "us_per_req_steady")
            raw = med(h, "us_per_req") / med(w, "us_per_req")
            tails = [med(h, f"p{p:g}_ms") / med(w, f"p{p:g}_ms") for p in PERCENTILES]
            lines.append(
                f"| {float(rate):,.0f}/s | **Horde / wrk2** | {med(h, 'rps') / med(w, 'rps'):.2f} | {raw:.2f} | {corrected:.2f} | "
                f"**{steady:.2f}** | {tails[0]:.2f} | **{tails[1]:.2f}** | {tails[2]:.2f} | | | | |"
            )
            pairs = harness.paired(h, w, "us_per_req_steady")
            reading.append(
                f"At {float(rate):,.0f} arrivals/s Horde spent {med(h, 'us_per_req_steady'):.1f} µs of CPU per request in the "
                f"steady seconds against wrk2's {med(w, 'us_per_req_steady'):.1f}, {steady:.2f}× ({corrected:.2f}× start-up "
                f"corrected, {raw:.2f}× raw; repetition by repetition, each pair run back to back, "
                f"{', '.join(f'{x:.2f}' for x in pairs)}×, median {statistics.median(pairs):.2f}×); "
                f"its p99 was {med(h, 'p99_ms'):.2f} ms against {med(w, 'p99_ms'):.2f} ({tails[1]:.2f}×) and its p99.9 "
                f"{med(h, 'p99.9_ms'):.2f} against {med(w, 'p99.9_ms'):.2f} ({tails[2]:.2f}×)."
            )
    lines += [
        "",
        "Wake-ups in the steady seconds (medians): how often the generator's threads were switched in, per request, and how often "
        "each pinned CPU halted, per second. On a VM a halted CPU is woken by the hypervisor, and the cost lands on whoever wakes it: "
        "the generator's first request after a pause pays to wake the target's CPU, the target's answer to wake the generator's.",
        "",
        "| rate | generator | wake-ups per request | generator's CPU halts/s | target's CPU halts/s | target CPU µs/req |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for rate, rows in results.items():
        for tool, r in rows.items():
            label = {"wrk2": "wrk2", "baseline": "Horde, baseline build"}.get(tool, "Horde")
            lines.append(
                f"| {float(rate):,.0f}/s | {label} | {med(r, 'wakeups_per_req'):.3f} | {med(r, 'gen_halts_s'):,.0f} | "
                f"{med(r, 'target_halts_s'):,.0f} | {med(r, 'target_us_per_req'):.2f} |"
            )
    all_horde = [x for rows in results.values() for x in rows["horde"]]
    baseline_note = f" The baseline build is `{baseline}`, run the same way in the same rotation." if baseline else ""
    busy = [x["others_cores"] for rows in results.values() for r in rows.values() for x in r]
    lines += [
        "",
        f"Percentiles (both tools timed from each request's intended start) cover wrk2's recording window, from its calibration's "
        f"end ({window_from:g} s after its start) to the end of the run; Horde's over the same seconds of its run, from its "
        f"per-second snapshots; Horde's whole-run figures include the first seconds too (new connections). "
        f"*Steady*: each process's CPU (every thread) from {harness.STEADY_FROM_S:g} s after its start to {harness.STEADY_TAIL_S:g} s before its "
        f"end, read from /proc, over the requests of those seconds at its achieved rate. "
        f"Horde's fixed CPU per run (Python start-up, plan, store, summary; from the {seconds} s and 1 s runs): "
        f"{statistics.median(x['fixed_cpu_s'] for x in all_horde):.2f} s; `horde --version` alone: {version_cpu:.2f} s. "
        f"Other processes took up to {max(busy):.2f} of a core during the runs (median {statistics.median(busy):.2f})."
        + baseline_note,
    ]
    if not wrk2_found:
        lines.append(f"- skipped: {wrk2_note}")
    if reading:
        lines += ["", " ".join(reading)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The open model's CPU per request and tail latency: Horde against wrk2."
    )
    parser.add_argument(
        "--rates", type=float, nargs="+", default=[5000.0, 20000.0], help="arrivals/s (default: 5000 20000)"
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--seconds", type=int, default=20, help="length of each run (at least 15: wrk2 calibrates for the first 10)"
    )
    parser.add_argument("--wrk2", help="the wrk2 binary (default: `wrk2` on PATH)")
    parser.add_argument(
        "--wrk2-src",
        default=os.environ.get("HORDE_WRK2_SRC"),
        help="wrk2's source folder: the bench runs `make` there (default: $HORDE_WRK2_SRC)",
    )
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    parser.add_argument(
        "--baseline-horde",
        metavar="PATH",
        help="another build's horde command, run the same way in the same "
        "rotation (a before/after comparison measured side by side)",
    )
    args = parser.parse_args(argv)
    command = harness.command_line(__file__, argv)

    def body(procs: harness.Processes) -> int:
        if args.seconds < 15:
            raise harness.BenchError(
                f"--seconds {args.seconds}: too short",
                hint="at least 15 (wrk2 records latency only after a 10 s calibration)",
            )
        if not 1 <= args.reps <= 50 or any(not 1 <= rate <= 200_000 for rate in args.rates):
            raise harness.BenchError("--reps must be 1 to 50 and each rate 1 to 200,000 arrivals/s")
        horde = harness.find_horde(args.horde)
        if args.baseline_horde and not Path(args.baseline_horde).exists():
            raise harness.BenchError(
                f"--baseline-horde {args.baseline_horde}: no such file", hint="the horde command of the other build"
            )
        wrk2, wrk2_note = find_wrk2(args.wrk2, args.wrk2_src)
        if not wrk2:
            print(f"note: skipping {wrk2_note}", file=sys.stderr, flush=True)
        gen_cpu, target_cpu, notes = harness.pick_cpus()
        with tempfile.TemporaryDirectory(prefix="horde-bench-open-") as work:
            env = harness.Env(
                horde=horde, wrk="", gen_cpu=gen_cpu, target_cpu=target_cpu, work=Path(work), procs=procs, notes=notes
            )
            started = dt.datetime.now(dt.timezone.utc)
            load_before = harness.load()
            print(
                f"open model: {'wrk2 and ' if wrk2 else ''}horde at {', '.join(f'{r:,.0f}' for r in args.rates)} arrivals/s, "
                f"{args.reps} x {args.seconds} s; generator on CPU {gen_cpu}, target on CPU {target_cpu}; load {load_before}",
                flush=True,
            )
            versions = [
                harness.run_measured(
                    procs, ["taskset", "-c", gen_cpu, horde, "--version"], env.work / f"version-{i}.log", timeout_s=60
                ).cpu_s
                for i in range(3)
            ]
            results = measure(env, wrk2, args.rates, args.reps, args.seconds, args.baseline_horde)
            load_after = harness.load()
            text = render(
                results,
                command,
                env,
                wrk2_note,
                wrk2 is not None,
                started,
                load_before,
                load_after,
                args.reps,
                args.seconds,
                statistics.median(versions),
                args.baseline_horde,
            )
            for note in env.notes:
                text += f"- note: {note}\n"
        print()
        print(text)
        harness.RESULTS_DIR.mkdir(exist_ok=True)
        raw = {
            "command": command,
            "date": started.isoformat(),
            "machine": harness.machine(),
            "load_before": load_before,
            "load_after": load_after,
            "wrk2": wrk2_note,
            "results": results,
        }
        (harness.RESULTS_DIR / "open-cost.json").write_text(json.dumps(raw, indent=2) + "\n")
        if not args.no_readme:
            harness.write_readme_block(
                "open-cost", text, section="Open model against wrk2 (`bench/open_cost.py`, `make bench-open`)"
            )
        return 0

    return harness.run_main(body)


if __name__ == "__main__":
    sys.exit(main())
