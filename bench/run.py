#!/usr/bin/env python3
"""Horde's benchmark: generator CPU per request against wrk, and memory per VU at 10,000 VUs.

    .venv/bin/python bench/run.py --quick     # about 3 minutes (`make bench`)
    .venv/bin/python bench/run.py --full      # about 6 minutes, more and longer repetitions

Everything runs on loopback against two targets, each in its own process: the built-in one
(`horde target`) and nginx from Debian (when installed; the bench never installs anything). The
generator is pinned to one CPU and the target to another with `taskset`, so that neither steals
the other's core. Against the built-in target Horde also runs the game scenario, to show the
scenario language's cost on top of the HTTP path. Every process started here runs in its own
process group and is killed at the end, on error and on Ctrl-C too. See bench/README.md for the
method and bench/FIGURES.md for the last figures.

Standard library only, so that it runs with whatever Python runs Horde. The processes, the exact
measurement, the built-in target and the FIGURES.md blocks are bench/harness.py's, shared with the
other bench scripts; this file is the CPU and memory benchmark itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (  # noqa: E402  (bench/harness.py: the bench scripts' shared harness)
    BENCH_DIR,
    FIGURES,
    RESULTS_DIR,
    BenchError,
    Env,
    Measured,
    Processes,
    command_line,
    find_horde,
    horde_run,
    load,
    machine,
    pick_cpus,
    run_main,
    run_measured,
    start_target,
    write_readme_block,
)

CONNECTIONS = 50
TARGET_RATIO = 1.2  # issue 6: Horde's CPU per request at most 1.2x wrk's, in the same run
GAME_PLAN = BENCH_DIR / "plans" / "game.yaml"


@dataclass
class Mode:
    name: str
    reps: int  # repetitions of each tool in the CPU section (alternating)
    seconds: int  # length of each CPU-section run
    short_seconds: int  # the short horde run used to separate start-up cost
    mem_seconds: int  # the 10k-VU run
    mem_baseline_seconds: int  # the 10-VU baseline run
    mem_vus: int = 10_000
    baseline_vus: int = 10


MODES = {
    "quick": Mode("quick", reps=3, seconds=5, short_seconds=1, mem_seconds=15, mem_baseline_seconds=8),
    "full": Mode("full", reps=5, seconds=10, short_seconds=1, mem_seconds=20, mem_baseline_seconds=10),
}


# ----------------------------------------------------------------------------- the bench


NGINX_HINT = "install it (Debian/Ubuntu): sudo apt-get install -y nginx"


def find_wrk() -> str:
    wrk = shutil.which("wrk")
    if not wrk:
        raise BenchError(
            "wrk is not installed; the bench compares Horde with it",
            hint="install it (Debian/Ubuntu): sudo apt-get install -y wrk",
        )
    return wrk


def find_nginx() -> str | None:
    # Debian installs nginx in /usr/sbin, which is not on every user's PATH.
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


# taskset), the same `GET /` answer (200, `ok\n`, text/plain) served from memory, no logging per
# request. Everything nginx writes goes to the bench's temporary folder.
NGINX_CONF = """\
daemon off;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    # nginx closes a keep-alive connection after 1,000 requests by default; the bench's
    # connections must stay open for the whole run, as with the built-in target.
    keepalive_requests 1000000000;
    keepalive_timeout 300s;
    client_body_temp_path {work}/nginx-body;
    proxy_temp_path {work}/nginx-proxy;
    fastcgi_temp_path {work}/nginx-fastcgi;
    uwsgi_temp_path {work}/nginx-uwsgi;
    scgi_temp_path {work}/nginx-scgi;
    server {{
        listen 127.0.0.1:{port};
        location = / {{
            default_type text/plain;
            return 200 "ok\\n";
        }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_nginx(env: Env) -> tuple[subprocess.Popen[bytes], int]:
    if not env.nginx:
        raise BenchError("nginx is not installed; the bench needs it as its second target", hint=NGINX_HINT)
    port = free_port()
    config = env.work / "nginx.conf"
    config.write_text(NGINX_CONF.format(work=env.work, port=port))
    log = env.work / "nginx.log"
    # -e: the error log before the config is read (the default, /var/log/nginx, may not be writable).
    child = env.procs.start(
        [
            "taskset",
            "-c",
            env.target_cpu,
            env.nginx,
            "-p",
            str(env.work),
            "-c",
            str(config),
            "-e",
            str(env.work / "nginx-error.log"),
        ],
        log,
    )
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline and child.poll() is None:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return child, port
        time.sleep(0.05)
    errors = env.work / "nginx-error.log"
    text = (log.read_text(errors="replace") + (errors.read_text(errors="replace") if errors.exists() else ""))[-800:]
    raise BenchError("nginx did not start", hint=f"its output: {text!r} (configuration: {config})")


def nginx_version(nginx: str) -> str:
    done = subprocess.run([nginx, "-v"], capture_output=True, text=True, timeout=10, check=False)
    match = re.search(r"nginx/(\S+)", done.stderr + done.stdout)
    return match.group(1) if match else "?"


def url_args(url: str, vus: int, seconds: int) -> list[str]:
    return ["--url", url, "--vus", str(vus), "--duration", f"{seconds}s"]


def game_args(base_url: str, vus: int, seconds: int) -> list[str]:
    # --vus turns the plan's open workload into a closed loop of that many players, no think time.
    return [str(GAME_PLAN), "--base-url", base_url, "--vus", str(vus), "--duration", f"{seconds}s"]


def wrk_run(env: Env, url: str, seconds: int, tag: str, target_pid: int) -> tuple[Measured, dict[str, Any]]:
    log = env.work / f"{tag}.log"
    argv = ["taskset", "-c", env.gen_cpu, env.wrk, "-c", str(CONNECTIONS), "-t", "1", "-d", f"{seconds}s", url]
    measured = run_measured(env.procs, argv, log, timeout_s=seconds + 60, target_pid=target_pid)
    text = log.read_text(errors="replace")
    match = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)\b", text)
    if measured.rc != 0 or not match:
        raise BenchError(
            f"wrk ended with exit code {measured.rc} or printed no request count", hint=f"its output: {text[-800:]}"
        )
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[match.group(3)]
    requests, duration = int(match.group(1)), float(match.group(2)) * scale
    errors = 0
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if socket_errors:
        errors += sum(int(g) for g in socket_errors.groups())
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if non2xx:
        errors += int(non2xx.group(1))
    return measured, {"requests": requests, "duration_s": duration, "rps": requests / duration, "errors": errors}


def startup_cpu(env: Env, reps: int) -> float:
    """CPU of `horde --version`: the Python interpreter and Horde's imports, no run at all."""
    values = []
    for i in range(reps):
        m = run_measured(
            env.procs,
            ["taskset", "-c", env.gen_cpu, env.horde, "--version"],
            env.work / f"version-{i}.log",
            timeout_s=60,
        )
        values.append(m.cpu_s)
    return statistics.median(values)


#: Runs Horde for that many seconds under that tag: (its measure, its summary).
HordeRunner = Callable[[int, str], tuple[Measured, dict[str, Any]]]


def horde_pair(run_one: HordeRunner, mode: Mode, tag: str, version_cpu: float) -> dict[str, Any]:
    """One Horde repetition: the N-second run and the short one, whose difference removes the
    fixed cost of a run (Python start-up, plan, store, summary) from the cost per request."""
    m, s = run_one(mode.seconds, tag)
    ms, ss = run_one(mode.short_seconds, f"{tag}-short")
    d_req = s["requests"] - ss["requests"]
    marginal = (m.cpu_s - ms.cpu_s) / d_req * 1e6 if d_req > 0 else float("nan")
    return {
        "requests": s["requests"],
        "rps": s["rps"],
        "errors": s["errors"],
        "cpu_s": m.cpu_s,
        "us_per_req": m.cpu_s / s["requests"] * 1e6,
        "us_per_req_marginal": marginal,
        "us_per_req_minus_version": (m.cpu_s - version_cpu) / s["requests"] * 1e6,
        "fixed_cpu_s": ms.cpu_s - ss["requests"] * marginal / 1e6,
        "short_requests": ss["requests"],
        "short_cpu_s": ms.cpu_s,
        "target_us_per_req": m.target_cpu_s / s["requests"] * 1e6,
        "others_cores": m.others_cores,
        "steal_cores": m.steal_cores,
    }


#: The targets of the cost-per-request section, and how to start each (its process, its port).
TARGETS: dict[str, Callable[[Env], tuple[subprocess.Popen[bytes], int]]] = {
    "builtin": start_target,
    "nginx": start_nginx,
}


def cpu_section(
    env: Env, mode: Mode, target_name: str, version_cpu: float, baseline: str | None = None
) -> dict[str, Any]:
    """wrk and Horde (and, against the built-in target, Horde running the game scenario) in
    alternating order against one target: rows of each tool, one per repetition. With `baseline`
    (another build's horde command) that build's `GET /` and game runs take their turns too."""
    target, port = TARGETS[target_name](env)
    url = f"http://127.0.0.1:{port}/"

    def plain_get(seconds: int, tag: str, env: Env = env) -> tuple[Measured, dict[str, Any]]:
        return horde_run(env, url_args(url, CONNECTIONS, seconds), seconds, tag, target.pid)

    def game_on_a_new_target(seconds: int, tag: str, env: Env = env) -> tuple[Measured, dict[str, Any]]:
        # The game's world lives in the target process and grows with every run: cities fill up
        # to 50 buildings and /game/city answers grow with them (to about 3 KB), and so does the
        # JSON the scenario reads. A new target for each game run makes every repetition start
        # from the same empty world, instead of costing more than the one before.
        game_target, game_port = start_target(env, name=f"target-{tag}")
        try:
            return horde_run(
                env, game_args(f"http://127.0.0.1:{game_port}", CONNECTIONS, seconds), seconds, tag, game_target.pid
            )
        finally:
            env.procs.stop(game_target)

    tools: dict[str, HordeRunner] = {"horde": plain_get}
    if target_name == "builtin":
        tools["game"] = game_on_a_new_target
    if baseline:
        # The baseline build's runs, each beside this build's in the same rotation.
        base_env = dataclasses.replace(env, horde=baseline)
        tools["horde_base"] = lambda seconds, tag: plain_get(seconds, tag, base_env)
        if target_name == "builtin":
            tools["game_base"] = lambda seconds, tag: game_on_a_new_target(seconds, tag, base_env)
    rows: dict[str, list[dict[str, Any]]] = {"wrk": [], **{tool: [] for tool in tools}}
    try:
        # Warm-up: the target's first connections and the page cache of Horde's imports.
        wrk_run(env, url, 1, f"{target_name}-warmup-wrk", target.pid)
        for tool, run_one in tools.items():
            run_one(1, f"{target_name}-warmup-{tool}")
        order = list(rows)
        for rep in range(mode.reps):
            for tool in order if rep % 2 == 0 else order[::-1]:
                tag = f"{target_name}-{tool}-{rep}"
                if tool == "wrk":
                    m, s = wrk_run(env, url, mode.seconds, tag, target.pid)
                    row = {
                        "requests": s["requests"],
                        "rps": s["rps"],
                        "errors": s["errors"],
                        "cpu_s": m.cpu_s,
                        "us_per_req": m.cpu_s / s["requests"] * 1e6,
                        "target_us_per_req": m.target_cpu_s / s["requests"] * 1e6,
                        "others_cores": m.others_cores,
                        "steal_cores": m.steal_cores,
                    }
                    detail = ""
                else:
                    row = horde_pair(tools[tool], mode, tag, version_cpu)
                    detail = f" raw, {row['us_per_req_marginal']:6.2f} marginal"
                rows[tool].append(row)
                print(
                    f"  {target_name:<7} {tool:<10} #{rep + 1}: {row['rps']:>9,.0f} req/s  {row['us_per_req']:6.2f} us/req{detail}  "
                    f"(others {row['others_cores']:.2f} cores)",
                    flush=True,
                )
    finally:
        env.procs.stop(target)
    return rows


def memory_section(env: Env, mode: Mode) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    vus = mode.mem_vus
    if hard < vus + 200:
        vus = max(100, hard - 200)
        env.notes.append(f"the open-file hard limit is {hard}: the memory run used {vus} VUs instead of {mode.mem_vus}")
    target, port = start_target(env)
    url = f"http://127.0.0.1:{port}/delay/1000"
    try:
        rows = {}
        for name, n, seconds in (
            ("baseline", mode.baseline_vus, mode.mem_baseline_seconds),
            ("many", vus, mode.mem_seconds),
        ):
            m, s = horde_run(env, url_args(url, n, seconds), seconds, f"mem-{name}", target.pid, sample_rss=True)
            samples = m.rss_samples_kb
            # The plateau: the samples of the second half of the run (all VUs up, before the drain).
            plateau = samples[len(samples) // 2 :] or samples
            rows[name] = {
                "vus": n,
                "seconds": seconds,
                "requests": s["requests"],
                "rps": s["rps"],
                "errors": s["errors"],
                "errors_by_kind": s.get("errors_by_kind", {}),
                "peak_vus": s.get("peak_vus"),
                "peak_rss_kb": m.maxrss_kb,
                "peak_sampled_rss_kb": max(samples, default=0),
                "plateau_rss_kb": int(statistics.median(plateau)) if plateau else 0,
                "rss_samples_kb": samples,
                "cpu_s": m.cpu_s,
                "others_cores": m.others_cores,
                "latency_ms": s.get("latency_ms", {}),
                "connections_opened": s.get("connections_opened"),
            }
            print(
                f"  {n:>6} VUs: {s['rps']:>8,.0f} req/s  errors {s['errors']}  peak RSS {m.maxrss_kb / 1024:.1f} MiB  "
                f"plateau {rows[name]['plateau_rss_kb'] / 1024:.1f} MiB",
                flush=True,
            )
    finally:
        env.procs.stop(target)
    base, many = rows["baseline"], rows["many"]
    extra = many["vus"] - base["vus"]
    rows["kb_per_vu_peak"] = (many["peak_rss_kb"] - base["peak_rss_kb"]) / extra
    rows["kb_per_vu_plateau"] = (many["plateau_rss_kb"] - base["plateau_rss_kb"]) / extra
    return rows


# ----------------------------------------------------------------------------- report


def med(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(float(r[key]) for r in rows))


TOOL_LABELS = {
    "wrk": f"wrk 4 (`-t 1 -c {CONNECTIONS}`), `GET /`",
    "horde": f"Horde (`--vus {CONNECTIONS} --workers 1`), `GET /`",
    "game": f"Horde, game scenario (`bench/plans/game.yaml --vus {CONNECTIONS}`)",
    "horde_base": "Horde, baseline build, `GET /`",
    "game_base": "Horde, baseline build, game scenario",
}


def judge_cpu(cpu: dict[str, Any]) -> None:
    """Adds to each target its medians and ratios to wrk, and to `cpu` whether the target is met
    everywhere it was measured (start-up corrected Horde / wrk at most TARGET_RATIO)."""
    for result in cpu["targets"].values():
        rows = result["rows"]
        w_us = med(rows["wrk"], "us_per_req")
        result["wrk_us"] = w_us
        for tool in ("horde", "game", "horde_base", "game_base"):
            if tool in rows:
                result[f"{tool}_ratio_raw"] = med(rows[tool], "us_per_req") / w_us
                result[f"{tool}_ratio_corrected"] = med(rows[tool], "us_per_req_marginal") / w_us
        result["met"] = result["horde_ratio_corrected"] <= TARGET_RATIO
    cpu["met"] = all(result["met"] for result in cpu["targets"].values())


def cpu_lines(cpu: dict[str, Any], mode: Mode) -> tuple[list[str], list[str]]:
    """(the table and its notes, the sentences of the reading) of the cost-per-request section."""
    lines = [
        "",
        f"**Cost per request** — closed loop, {CONNECTIONS} keep-alive connections, {mode.reps} × {mode.seconds} s per tool and target, alternating; medians",
        "",
        "| target | generator | req/s | generator CPU µs/req (raw) | start-up corrected | target CPU µs/req | errors | others' CPU (cores) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    spreads, verdicts, reading = [], [], []
    for result in cpu["targets"].values():
        rows, label, w_us = result["rows"], result["label"], result["wrk_us"]
        for tool in rows:
            r = rows[tool]
            corrected = w_us if tool == "wrk" else med(r, "us_per_req_marginal")
            lines.append(
                f"| {label} | {TOOL_LABELS[tool]} | {med(r, 'rps'):,.0f} | {med(r, 'us_per_req'):.2f} | {corrected:.2f} | "
                f"{med(r, 'target_us_per_req'):.2f} | {sum(x['errors'] for x in r)} | {med(r, 'others_cores'):.2f} |"
            )
            if tool == "horde":
                lines.append(
                    f"| {label} | **Horde / wrk** | {med(r, 'rps') / med(rows['wrk'], 'rps'):.2f} | {result['horde_ratio_raw']:.2f} | "
                    f"**{result['horde_ratio_corrected']:.2f}** | | | |"
                )
            elif tool == "game":
                lines.append(
                    f"| {label} | **game / wrk** (scenario on top of the HTTP path) | | {result['game_ratio_raw']:.2f} | "
                    f"**{result['game_ratio_corrected']:.2f}** | | | |"
                )
            elif tool in ("horde_base", "game_base"):
                mine = rows[tool.removesuffix("_base")]
                what = "Horde" if tool == "horde_base" else "game"
                lines.append(
                    f"| {label} | **{what} / baseline build's** | {med(mine, 'rps') / med(r, 'rps'):.2f} | "
                    f"{med(mine, 'us_per_req') / med(r, 'us_per_req'):.2f} | "
                    f"**{med(mine, 'us_per_req_marginal') / med(r, 'us_per_req_marginal'):.2f}** | | | |"
                )
                lines.append(
                    f"| {label} | baseline build's {what} / wrk | | "
                    f"{result[f'{tool}_ratio_raw']:.2f} | {result[f'{tool}_ratio_corrected']:.2f} | | | |"
                )
        spread = "; ".join(
            f"{tool} "
            + (
                f"{min(x['us_per_req'] for x in rows[tool]):.2f}–{max(x['us_per_req'] for x in rows[tool]):.2f}"
                if tool == "wrk"
                else f"raw {min(x['us_per_req'] for x in rows[tool]):.2f}–{max(x['us_per_req'] for x in rows[tool]):.2f}, "
                f"corrected {min(x['us_per_req_marginal'] for x in rows[tool]):.2f}–{max(x['us_per_req_marginal'] for x in rows[tool]):.2f}"
            )
            for tool in rows
        )
        spreads.append(f"{label}: {spread}")
        verdicts.append(f"{label} **{'met' if result['met'] else 'NOT met'}** ({result['horde_ratio_corrected']:.2f}×)")
        h = rows["horde"]
        faster = "more" if med(h, "rps") > med(rows["wrk"], "rps") else "fewer"
        reading.append(
            f"Against the {label} target Horde spent {med(h, 'us_per_req_marginal'):.1f} µs of generator CPU per request once its fixed start-up "
            f"is removed ({med(h, 'us_per_req'):.1f} µs raw over a {mode.seconds} s run) against wrk's {w_us:.1f} µs, a ratio of "
            f"{result['horde_ratio_corrected']:.2f} ({result['horde_ratio_raw']:.2f} raw), and completed {faster} requests per second than wrk "
            f"({med(h, 'rps'):,.0f} vs {med(rows['wrk'], 'rps'):,.0f}) with the same {CONNECTIONS} connections."
        )
        if "game" in rows:
            g = rows["game"]
            reading.append(
                f"Running the game scenario against it (closed loop, {CONNECTIONS} players, no think time) Horde spent "
                f"{med(g, 'us_per_req_marginal'):.1f} µs per request, {result['game_ratio_corrected']:.2f}× wrk's plain `GET /` in the same run."
            )
        for tool in ("horde_base", "game_base"):
            if tool in rows:
                mine, base = rows[tool.removesuffix("_base")], rows[tool]
                what = "`GET /`" if tool == "horde_base" else "the game scenario"
                reading.append(
                    f"The baseline build ran {what} at {med(base, 'us_per_req_marginal'):.1f} µs per request ({result[f'{tool}_ratio_corrected']:.2f}× wrk's), "
                    f"so this build spent {med(mine, 'us_per_req_marginal') / med(base, 'us_per_req_marginal'):.2f}× the baseline's CPU per request on it."
                )
    all_horde = [x for result in cpu["targets"].values() for x in result["rows"]["horde"]]
    minus_version = "; ".join(
        f"{result['label']} {med(result['rows']['horde'], 'us_per_req_minus_version'):.2f}"
        for result in cpu["targets"].values()
    )
    lines += [
        "",
        "Spread over the runs (min–max µs/req): " + "; ".join(spreads) + ". "
        f"Horde's fixed cost per run (Python start-up, plan, store, summary): {statistics.median(x['fixed_cpu_s'] for x in all_horde):.2f} s CPU "
        f"(from {mode.seconds} s vs {mode.short_seconds} s runs); `horde --version` alone: {cpu['version_cpu_s']:.2f} s; "
        f"raw minus `--version`: {minus_version} µs/req.",
    ]
    if "builtin" in cpu["targets"] and "game" in cpu["targets"]["builtin"]["rows"]:
        lines += [
            "",
            f"The game row is Horde running the game scenario (setup, a weighted choice, a group, JSON checks and extractors, templated "
            f"headers and JSON bodies) as a closed loop of {CONNECTIONS} players with no think time against the built-in target's `/game/` "
            "endpoints, each run on a new target process (an empty game world); *game / wrk* divides its CPU per request by wrk's plain "
            "`GET /` figure from the same run, so it is the cost of the scenario language (and of the game's larger JSON requests and "
            "responses) on top of the HTTP path. It has no target of its own; bench/scenario.py isolates the language alone, against the "
            "same requests sent fixed.",
        ]
    lines += [
        "",
        f"Target (Horde within {TARGET_RATIO:g}× of wrk's CPU per request, start-up corrected): "
        + "; ".join(verdicts)
        + ".",
    ]
    lines += [f"- skipped: {note}" for note in cpu["skipped"]]
    met = [result["label"] for result in cpu["targets"].values() if result["met"]]
    missed = [result["label"] for result in cpu["targets"].values() if not result["met"]]
    reading.append(
        f"The {TARGET_RATIO:g}× target is "
        + ("met against " + " and ".join(met) if met else "")
        + ("; " if met and missed else "")
        + ("not met against " + " and ".join(missed) if missed else "")
        + "."
    )
    return lines, reading


def render(
    mode: Mode,
    command: str,
    env: Env,
    started: dt.datetime,
    load_before: str,
    load_after: str,
    cpu: dict[str, Any] | None,
    mem: dict[str, Any] | None,
) -> tuple[str, str]:
    """(the Markdown block, the one-paragraph reading)."""
    m = machine()
    targets = "built-in `horde target --threads 1`" + (
        f", nginx {nginx_version(env.nginx)} with 1 worker" if env.nginx and cpu and "nginx" in cpu["targets"] else ""
    )
    lines = [
        f"- machine: {m['nproc']} CPUs, {m['model']}, Linux {m['kernel']}",
        f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}; mode `{mode.name}`",
        f"- command: `{command}`",
        f"- load average (1/5/15 min) before: {load_before}; after: {load_after}",
        f"- generator pinned to CPU {env.gen_cpu}, target ({targets}; each its own process) to CPU {env.target_cpu}",
    ]
    lines += [f"- note: {n}" for n in env.notes]
    reading: list[str] = []
    if cpu:
        judge_cpu(cpu)
        cpu_table, cpu_reading = cpu_lines(cpu, mode)
        lines += cpu_table
        reading += cpu_reading
    if mem:
        b, n = mem["baseline"], mem["many"]
        errors = ", ".join(f"{k} {v}" for k, v in n["errors_by_kind"].items()) or "none"
        lines += [
            "",
            "**Memory per VU** — closed loop against `/delay/1000` (one request per VU per second), `--workers 1`",
            "",
            "| run | VUs | s | req/s | p50 / p99 ms | errors | generator CPU s | peak RSS MiB | plateau RSS MiB |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| baseline | {b['vus']:,} | {b['seconds']} | {b['rps']:,.0f} | {b['latency_ms'].get('p50', 0):,.0f} / {b['latency_ms'].get('p99', 0):,.0f} | {b['errors']} | {b['cpu_s']:.1f} | {b['peak_rss_kb'] / 1024:.1f} | {b['plateau_rss_kb'] / 1024:.1f} |",
            f"| many VUs | {n['vus']:,} | {n['seconds']} | {n['rps']:,.0f} | {n['latency_ms'].get('p50', 0):,.0f} / {n['latency_ms'].get('p99', 0):,.0f} | {n['errors']} | {n['cpu_s']:.1f} | {n['peak_rss_kb'] / 1024:.1f} | {n['plateau_rss_kb'] / 1024:.1f} |",
            f"| **per VU** | | | | | | | **{mem['kb_per_vu_peak']:.1f} KiB** | {mem['kb_per_vu_plateau']:.1f} KiB |",
            "",
            f"Errors of the {n['vus']:,}-VU run by kind: {errors}.",
        ]
        reading.append(
            f"At {n['vus']:,} VUs Horde's process peaked at {n['peak_rss_kb'] / 1024:.0f} MiB, "
            f"{mem['kb_per_vu_peak']:.1f} KiB per VU over the {b['vus']}-VU baseline ({mem['kb_per_vu_plateau']:.1f} KiB on the plateau), "
            f"and kept {n['rps']:,.0f} req/s (about {n['vus']:,} expected) with {n['errors']} errors."
        )
    if cpu:
        busy = [
            x["others_cores"] for result in cpu["targets"].values() for rows in result["rows"].values() for x in rows
        ]
        worst = max(busy)
        noise = "quiet" if worst < 0.15 else "somewhat busy" if worst < 0.5 else "busy"
        reading.append(
            f"Other processes took up to {worst:.2f} of a core during the timed CPU runs (median {statistics.median(busy):.2f}): "
            f"the machine was {noise} for that part."
        )
    if mem:
        reading.append(
            f"During the memory runs they took {max(mem['baseline']['others_cores'], mem['many']['others_cores']):.2f} of a core (RSS does not depend on it)."
        )
    paragraph = " ".join(reading)
    return "\n".join(lines) + "\n\n" + paragraph + "\n", paragraph


def update_readme(mode: Mode, block: str) -> None:
    write_readme_block(
        f"last-figures:{mode.name}",
        f"### `--{mode.name}`\n\n{block}",
        section="Cost per request and memory per VU (`bench/run.py`, `make bench`)",
    )


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Horde vs wrk: generator CPU per request (built-in target and nginx); memory per VU at 10k VUs."
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--quick",
        action="store_const",
        dest="mode",
        const="quick",
        help="3 x 5 s per tool and target, 15 s at 10k VUs (default; under 5 min)",
    )
    group.add_argument(
        "--full", action="store_const", dest="mode", const="full", help="5 x 10 s per tool and target, 20 s at 10k VUs"
    )
    parser.add_argument("--reps", type=int, help="override the repetitions per tool")
    parser.add_argument("--seconds", type=int, help="override the length of each CPU-section run")
    parser.add_argument(
        "--targets",
        choices=("all", "builtin", "nginx"),
        default="all",
        help="cost-per-request targets: all (the built-in one, and nginx when installed; default), or only one (nginx: an error when missing)",
    )
    parser.add_argument("--skip-cpu", action="store_true", help="skip the Horde-vs-wrk section")
    parser.add_argument("--skip-memory", action="store_true", help="skip the 10k-VU section")
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 when Horde is not within {TARGET_RATIO:g}x of wrk's CPU per request against a target",
    )
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    parser.add_argument(
        "--baseline-horde",
        metavar="PATH",
        help="another build's horde command (a script that runs it will do): its "
        "`GET /` and game runs take their turns in the same rotation, with rows comparing this build to it",
    )
    args = parser.parse_args(argv)
    mode = MODES[args.mode or "quick"]
    if args.reps:
        mode.reps = max(1, min(args.reps, 50))
    if args.seconds:
        mode.seconds = max(2, min(args.seconds, 600))
    command = command_line(__file__, argv)

    def body(procs: Processes) -> int:
        horde, wrk = find_horde(args.horde), find_wrk()
        if args.baseline_horde and not Path(args.baseline_horde).exists():
            raise BenchError(
                f"--baseline-horde {args.baseline_horde}: no such file", hint="the horde command of the other build"
            )
        gen_cpu, target_cpu, notes = pick_cpus()
        nginx = find_nginx()
        targets = {"all": ["builtin", "nginx"], "builtin": ["builtin"], "nginx": ["nginx"]}[args.targets]
        skipped = []
        if "nginx" in targets and not nginx:
            if args.targets == "nginx":
                raise BenchError("nginx is not installed; --targets nginx needs it", hint=NGINX_HINT)
            # `make bench` must work without nginx: the built-in target alone, and the block says so.
            targets.remove("nginx")
            skipped.append(f"nginx (not installed; {NGINX_HINT})")
            print(f"note: nginx is not installed, so that target is skipped; {NGINX_HINT}", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="horde-bench-") as work:
            env = Env(
                horde=horde,
                wrk=wrk,
                gen_cpu=gen_cpu,
                target_cpu=target_cpu,
                work=Path(work),
                procs=procs,
                nginx=nginx,
                notes=notes,
            )
            started = dt.datetime.now(dt.timezone.utc)
            load_before = load()
            print(
                f"horde bench --{mode.name}: generator on CPU {gen_cpu}, target on CPU {target_cpu}; load {load_before}",
                flush=True,
            )
            cpu = mem = None
            if not args.skip_cpu:
                print(
                    f"cost per request: wrk vs horde against {' and '.join(targets)}, {CONNECTIONS} connections, {mode.reps} x {mode.seconds} s each",
                    flush=True,
                )
                version_cpu = startup_cpu(env, 3)
                labels = {"builtin": "built-in", "nginx": f"nginx {nginx_version(nginx)}" if nginx else "nginx"}
                cpu = {
                    "version_cpu_s": version_cpu,
                    "skipped": skipped,
                    "targets": {
                        name: {
                            "label": labels[name],
                            "rows": cpu_section(env, mode, name, version_cpu, args.baseline_horde),
                        }
                        for name in targets
                    },
                }
            if not args.skip_memory:
                print(f"memory per VU: {mode.baseline_vus} then {mode.mem_vus:,} VUs against /delay/1000", flush=True)
                mem = memory_section(env, mode)
            load_after = load()
            block, _ = render(mode, command, env, started, load_before, load_after, cpu, mem)
            print()
            print(block)
            RESULTS_DIR.mkdir(exist_ok=True)
            raw = {
                "mode": mode.name,
                "command": command,
                "date": started.isoformat(),
                "machine": machine(),
                "load_before": load_before,
                "load_after": load_after,
                "notes": env.notes,
                "cpu": cpu,
                "memory": mem,
            }
            (RESULTS_DIR / f"last-{mode.name}.json").write_text(json.dumps(raw, indent=2) + "\n")
            if not args.no_readme:
                update_readme(mode, block)
                print(
                    f"updated {os.path.relpath(FIGURES)} (raw figures: {os.path.relpath(RESULTS_DIR / f'last-{mode.name}.json')})"
                )
            if args.check and cpu is not None and not cpu["met"]:
                print(f"the {TARGET_RATIO:g}x target was not met (--check)", file=sys.stderr)
                return 1
        return 0

    return run_main(body)


if __name__ == "__main__":
    sys.exit(main())
