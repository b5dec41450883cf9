#!/usr/bin/env python3
"""Horde's benchmark: generator CPU per request against wrk, and memory per VU at 10,000 VUs.

    .venv/bin/python bench/run.py --quick     # about 1.5 minutes (`make bench`)
    .venv/bin/python bench/run.py --full      # about 2.5 minutes, more and longer repetitions

Everything runs on loopback against the built-in target (`horde target`, its own process). The
generator is pinned to one CPU and the target to another with `taskset`, so that neither steals
the other's core. Every process started here runs in its own process group and is killed at the
end, on error and on Ctrl-C too. See bench/README.md for the method and the last figures.

Standard library only, so that it runs with whatever Python runs Horde.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
README = BENCH_DIR / "README.md"
RESULTS_DIR = BENCH_DIR / "results"

CLK_TCK = os.sysconf("SC_CLK_TCK")
CONNECTIONS = 50
TARGET_RATIO = 2.0  # the slice's goal: Horde within 2x of wrk's CPU per request


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


class BenchError(Exception):
    """A set-up fault: printed as `error: ...` with a hint, exit code 2."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


# ----------------------------------------------------------------------------- processes


def _raise_nofile() -> None:
    # Runs in the child before exec: soft open-file limit up to the hard one (the target needs one
    # descriptor per connection; the engine raises its own, this makes it explicit for both).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Processes:
    """Every child of the bench: own session (so own process group), killed in `close()`."""

    def __init__(self) -> None:
        self._children: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            child = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_raise_nofile, cwd=REPO,
            )
        self._children.append(child)
        return child

    def forget(self, child: subprocess.Popen[bytes]) -> None:
        if child in self._children:
            self._children.remove(child)

    def stop(self, child: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
        """SIGINT to the child's group, then SIGKILL after `grace_s`; reaps it."""
        if child.returncode is None:
            for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(child.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    child.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            try:  # the leader is gone; anything left in its group goes too
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.forget(child)

    def close(self) -> None:
        for child in list(self._children):
            self.stop(child, grace_s=3.0)


@dataclass
class Measured:
    rc: int
    wall_s: float
    cpu_s: float  # user + system CPU of the process (and any children it waited for)
    maxrss_kb: int  # peak resident set (getrusage ru_maxrss, KiB)
    rss_samples_kb: list[int] = field(default_factory=list)
    target_cpu_s: float = 0.0  # the target's CPU over the same run
    others_cores: float = 0.0  # CPU used by everything else on the machine, in cores
    steal_cores: float = 0.0  # CPU the hypervisor gave to other guests, in cores


def _proc_stat_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def _machine_ticks() -> tuple[int, int]:
    """(busy, steal) ticks of the whole machine from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return user + nice + system + irq + softirq, steal


def _vm_rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def run_measured(procs: Processes, argv: list[str], log: Path, *, timeout_s: float,
                 target_pid: int | None = None, sample_rss: bool = False) -> Measured:
    """Runs `argv` to its end and measures it: CPU and peak RSS from wait4()'s rusage of that
    very child (exact, no sampling), VmRSS once a second if asked, and the machine's other load."""
    busy0, steal0 = _machine_ticks()
    target0 = _proc_stat_cpu(target_pid) if target_pid else 0.0
    started = time.monotonic()
    child = procs.start(argv, log)
    samples: list[int] = []
    next_sample = started + 1.0
    deadline = started + timeout_s
    reaped = False
    try:
        while True:  # bounded by `deadline`
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid == child.pid:
                reaped = True
                child.returncode = os.waitstatus_to_exitcode(status)
                break
            now = time.monotonic()
            if now > deadline:
                raise BenchError(f"{shlex.join(argv)} did not end within {timeout_s:.0f} s", hint=f"its output is in {log}")
            if sample_rss and now >= next_sample:
                rss = _vm_rss_kb(child.pid)
                if rss is not None:
                    samples.append(rss)
                next_sample += 1.0
            time.sleep(0.02)
    finally:
        if not reaped:
            procs.stop(child)  # timeout or interrupt: the child's whole group goes
    procs.stop(child)  # reaped: kills whatever might be left in its group, forgets it
    wall = time.monotonic() - started
    busy1, steal1 = _machine_ticks()
    target_cpu = (_proc_stat_cpu(target_pid) - target0) if target_pid else 0.0
    cpu = usage.ru_utime + usage.ru_stime
    others = max(0.0, (busy1 - busy0) / CLK_TCK - cpu - target_cpu) / wall
    return Measured(
        rc=int(child.returncode), wall_s=wall, cpu_s=cpu,
        maxrss_kb=usage.ru_maxrss, rss_samples_kb=samples, target_cpu_s=target_cpu,
        others_cores=others, steal_cores=(steal1 - steal0) / CLK_TCK / wall,
    )


# ----------------------------------------------------------------------------- the bench


@dataclass
class Env:
    horde: str
    wrk: str
    gen_cpu: str
    target_cpu: str
    work: Path
    procs: Processes
    notes: list[str] = field(default_factory=list)


def check_environment(horde: str | None) -> tuple[str, str, str, str, list[str]]:
    notes: list[str] = []
    horde_path = horde or str(Path(sys.executable).parent / "horde")
    if not Path(horde_path).exists():
        found = shutil.which("horde")
        if not found:
            raise BenchError("the horde command was not found", hint="run `make setup` (or pass --horde PATH)")
        horde_path = found
    wrk = shutil.which("wrk")
    if not wrk:
        raise BenchError("wrk is not installed; the bench compares Horde with it",
                         hint="install it (Debian/Ubuntu): sudo apt-get install -y wrk")
    if not shutil.which("taskset"):
        raise BenchError("taskset is not installed", hint="sudo apt-get install -y util-linux")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        gen_cpu, target_cpu = str(cpus[0]), str(cpus[1])
    else:
        gen_cpu = target_cpu = str(cpus[0])
        notes.append("only one CPU is available: the generator and the target share it, so rates are lower and CPU per request is still comparable")
    return horde_path, wrk, gen_cpu, target_cpu, notes


def start_target(env: Env) -> tuple[subprocess.Popen[bytes], int]:
    log = env.work / "target.log"
    child = env.procs.start(["taskset", "-c", env.target_cpu, env.horde, "target", "--port", "0", "--threads", "1"], log)
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if match:
            return child, int(match.group(1))
        if child.poll() is not None:
            break
        time.sleep(0.05)
    raise BenchError("the built-in target did not start", hint=f"its output: {log.read_text(errors='replace')[-500:]!r}")


def horde_run(env: Env, url: str, vus: int, seconds: int, tag: str, target_pid: int,
              sample_rss: bool = False) -> tuple[Measured, dict[str, Any]]:
    summary_path = env.work / f"{tag}.summary.json"
    log = env.work / f"{tag}.log"
    argv = ["taskset", "-c", env.gen_cpu, env.horde, "run", "--url", url, "--vus", str(vus),
            "--duration", f"{seconds}s", "--workers", "1", "--summary-json", str(summary_path),
            "--store", str(env.work / "store.sqlite")]
    measured = run_measured(env.procs, argv, log, timeout_s=seconds + 60, target_pid=target_pid, sample_rss=sample_rss)
    if measured.rc != 0 or not summary_path.exists():
        raise BenchError(f"horde run ended with exit code {measured.rc}", hint=f"last output: {log.read_text(errors='replace')[-800:]}")
    return measured, json.loads(summary_path.read_text())


def wrk_run(env: Env, url: str, seconds: int, tag: str, target_pid: int) -> tuple[Measured, dict[str, Any]]:
    log = env.work / f"{tag}.log"
    argv = ["taskset", "-c", env.gen_cpu, env.wrk, "-c", str(CONNECTIONS), "-t", "1", "-d", f"{seconds}s", url]
    measured = run_measured(env.procs, argv, log, timeout_s=seconds + 60, target_pid=target_pid)
    text = log.read_text(errors="replace")
    match = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)\b", text)
    if measured.rc != 0 or not match:
        raise BenchError(f"wrk ended with exit code {measured.rc} or printed no request count", hint=f"its output: {text[-800:]}")
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[match.group(3)]
    requests, duration = int(match.group(1)), float(match.group(2)) * scale
    errors = 0
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if socket:
        errors += sum(int(g) for g in socket.groups())
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if non2xx:
        errors += int(non2xx.group(1))
    return measured, {"requests": requests, "duration_s": duration, "rps": requests / duration, "errors": errors}


def startup_cpu(env: Env, reps: int) -> float:
    """CPU of `horde --version`: the Python interpreter and Horde's imports, no run at all."""
    values = []
    for i in range(reps):
        m = run_measured(env.procs, ["taskset", "-c", env.gen_cpu, env.horde, "--version"], env.work / f"version-{i}.log", timeout_s=60)
        values.append(m.cpu_s)
    return statistics.median(values)


def cpu_section(env: Env, mode: Mode) -> dict[str, Any]:
    target, port = start_target(env)
    url = f"http://127.0.0.1:{port}/"
    try:
        # Warm-up: the target's first connections and the page cache of Horde's imports.
        wrk_run(env, url, 1, "warmup-wrk", target.pid)
        horde_run(env, url, CONNECTIONS, 1, "warmup-horde", target.pid)
        version_cpu = startup_cpu(env, 3)
        wrk_rows: list[dict[str, Any]] = []
        horde_rows: list[dict[str, Any]] = []
        for rep in range(mode.reps):
            order = ("wrk", "horde") if rep % 2 == 0 else ("horde", "wrk")
            for tool in order:
                if tool == "wrk":
                    m, s = wrk_run(env, url, mode.seconds, f"wrk-{rep}", target.pid)
                    wrk_rows.append({"requests": s["requests"], "rps": s["rps"], "errors": s["errors"], "cpu_s": m.cpu_s,
                                     "us_per_req": m.cpu_s / s["requests"] * 1e6,
                                     "target_us_per_req": m.target_cpu_s / s["requests"] * 1e6,
                                     "others_cores": m.others_cores, "steal_cores": m.steal_cores})
                    print(f"  wrk   #{rep + 1}: {s['rps']:>9,.0f} req/s  {wrk_rows[-1]['us_per_req']:6.2f} us/req  (others {m.others_cores:.2f} cores)", flush=True)
                else:
                    m, s = horde_run(env, url, CONNECTIONS, mode.seconds, f"horde-{rep}", target.pid)
                    ms, ss = horde_run(env, url, CONNECTIONS, mode.short_seconds, f"horde-short-{rep}", target.pid)
                    d_req = s["requests"] - ss["requests"]
                    marginal = (m.cpu_s - ms.cpu_s) / d_req * 1e6 if d_req > 0 else float("nan")
                    horde_rows.append({"requests": s["requests"], "rps": s["rps"], "errors": s["errors"], "cpu_s": m.cpu_s,
                                       "us_per_req": m.cpu_s / s["requests"] * 1e6,
                                       "us_per_req_marginal": marginal,
                                       "us_per_req_minus_version": (m.cpu_s - version_cpu) / s["requests"] * 1e6,
                                       "fixed_cpu_s": ms.cpu_s - ss["requests"] * marginal / 1e6,
                                       "short_requests": ss["requests"], "short_cpu_s": ms.cpu_s,
                                       "target_us_per_req": m.target_cpu_s / s["requests"] * 1e6,
                                       "others_cores": m.others_cores, "steal_cores": m.steal_cores})
                    r = horde_rows[-1]
                    print(f"  horde #{rep + 1}: {s['rps']:>9,.0f} req/s  {r['us_per_req']:6.2f} us/req raw, {marginal:6.2f} marginal  (others {m.others_cores:.2f} cores)", flush=True)
    finally:
        env.procs.stop(target)
    return {"wrk": wrk_rows, "horde": horde_rows, "version_cpu_s": version_cpu}


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
        for name, n, seconds in (("baseline", mode.baseline_vus, mode.mem_baseline_seconds), ("many", vus, mode.mem_seconds)):
            m, s = horde_run(env, url, n, seconds, f"mem-{name}", target.pid, sample_rss=True)
            samples = m.rss_samples_kb
            # The plateau: the samples of the second half of the run (all VUs up, before the drain).
            plateau = samples[len(samples) // 2:] or samples
            rows[name] = {"vus": n, "seconds": seconds, "requests": s["requests"], "rps": s["rps"], "errors": s["errors"],
                          "errors_by_kind": s.get("errors_by_kind", {}), "peak_vus": s.get("peak_vus"),
                          "peak_rss_kb": m.maxrss_kb, "peak_sampled_rss_kb": max(samples, default=0),
                          "plateau_rss_kb": int(statistics.median(plateau)) if plateau else 0,
                          "rss_samples_kb": samples, "cpu_s": m.cpu_s, "others_cores": m.others_cores,
                          "latency_ms": s.get("latency_ms", {}), "connections_opened": s.get("connections_opened")}
            print(f"  {n:>6} VUs: {s['rps']:>8,.0f} req/s  errors {s['errors']}  peak RSS {m.maxrss_kb / 1024:.1f} MiB  "
                  f"plateau {rows[name]['plateau_rss_kb'] / 1024:.1f} MiB", flush=True)
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


def machine() -> dict[str, str]:
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {"nproc": str(os.cpu_count()), "model": model, "kernel": platform.release()}


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def render(mode: Mode, command: str, env: Env, started: dt.datetime, load_before: str, load_after: str,
           cpu: dict[str, Any] | None, mem: dict[str, Any] | None) -> tuple[str, str]:
    """(the Markdown block, the one-paragraph reading)."""
    m = machine()
    lines = [
        f"- machine: {m['nproc']} CPUs, {m['model']}, Linux {m['kernel']}",
        f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}; mode `{mode.name}`",
        f"- command: `{command}`",
        f"- load average (1/5/15 min) before: {load_before}; after: {load_after}",
        f"- generator pinned to CPU {env.gen_cpu}, target (`horde target --threads 1`, own process) to CPU {env.target_cpu}",
    ]
    lines += [f"- note: {n}" for n in env.notes]
    reading: list[str] = []
    if cpu:
        w, h = cpu["wrk"], cpu["horde"]
        w_us, h_raw, h_marg, h_ver = med(w, "us_per_req"), med(h, "us_per_req"), med(h, "us_per_req_marginal"), med(h, "us_per_req_minus_version")
        ratio_raw, ratio_corr = h_raw / w_us, h_marg / w_us
        met = ratio_corr <= TARGET_RATIO
        cpu["ratio_raw"], cpu["ratio_corrected"], cpu["met"] = ratio_raw, ratio_corr, met
        lines += [
            "",
            f"**Cost per request** — closed loop, {CONNECTIONS} keep-alive connections, `GET /`, {mode.reps} × {mode.seconds} s per tool, alternating; medians",
            "",
            "| generator | req/s | generator CPU µs/req (raw) | start-up corrected | target CPU µs/req | errors | others' CPU (cores) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| wrk 4 (`-t 1 -c {CONNECTIONS}`) | {med(w, 'rps'):,.0f} | {w_us:.2f} | {w_us:.2f} | {med(w, 'target_us_per_req'):.2f} | {sum(r['errors'] for r in w)} | {med(w, 'others_cores'):.2f} |",
            f"| Horde (`--vus {CONNECTIONS} --workers 1`) | {med(h, 'rps'):,.0f} | {h_raw:.2f} | {h_marg:.2f} | {med(h, 'target_us_per_req'):.2f} | {sum(r['errors'] for r in h)} | {med(h, 'others_cores'):.2f} |",
            f"| **Horde / wrk** | {med(h, 'rps') / med(w, 'rps'):.2f} | {ratio_raw:.2f} | **{ratio_corr:.2f}** | | | |",
            "",
            f"Spread over the runs (min–max µs/req): wrk {min(r['us_per_req'] for r in w):.2f}–{max(r['us_per_req'] for r in w):.2f}; "
            f"Horde raw {min(r['us_per_req'] for r in h):.2f}–{max(r['us_per_req'] for r in h):.2f}, "
            f"corrected {min(r['us_per_req_marginal'] for r in h):.2f}–{max(r['us_per_req_marginal'] for r in h):.2f}. "
            f"Horde's fixed cost per run (Python start-up, plan, store, summary): {statistics.median(r['fixed_cpu_s'] for r in h):.2f} s CPU "
            f"(from {mode.seconds} s vs {mode.short_seconds} s runs); `horde --version` alone: {cpu['version_cpu_s']:.2f} s; "
            f"raw minus `--version`: {h_ver:.2f} µs/req.",
            "",
            f"Target (Horde within {TARGET_RATIO:g}× of wrk's CPU per request, start-up corrected): **{'met' if met else 'NOT met'}** ({ratio_corr:.2f}×).",
        ]
        faster = "more" if med(h, "rps") > med(w, "rps") else "fewer"
        reading.append(
            f"On this machine Horde spent {h_marg:.1f} µs of generator CPU per request once its fixed start-up is removed "
            f"({h_raw:.1f} µs raw over a {mode.seconds} s run) against wrk's {w_us:.1f} µs, a ratio of {ratio_corr:.2f} "
            f"({ratio_raw:.2f} raw), so the {TARGET_RATIO:g}× target is {'met' if met else 'not met'}; "
            f"it completed {faster} requests per second than wrk ({med(h, 'rps'):,.0f} vs {med(w, 'rps'):,.0f}) with the same {CONNECTIONS} connections."
        )
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
        busy = [r["others_cores"] for r in cpu["wrk"] + cpu["horde"]]
        worst = max(busy)
        noise = "quiet" if worst < 0.15 else "somewhat busy" if worst < 0.5 else "busy"
        reading.append(f"Other processes took up to {worst:.2f} of a core during the timed CPU runs (median {statistics.median(busy):.2f}): "
                       f"the machine was {noise} for that part.")
    if mem:
        reading.append(f"During the memory runs they took {max(mem['baseline']['others_cores'], mem['many']['others_cores']):.2f} of a core (RSS does not depend on it).")
    paragraph = " ".join(reading)
    return "\n".join(lines) + "\n\n" + paragraph + "\n", paragraph


def update_readme(mode: Mode, block: str) -> None:
    begin, end = f"<!-- last-figures:{mode.name}:begin -->", f"<!-- last-figures:{mode.name}:end -->"
    text = README.read_text() if README.exists() else "# Horde benchmark\n"
    if "## Last figures" not in text:
        text = text.rstrip("\n") + "\n\n## Last figures\n"
    section = f"{begin}\n### `--{mode.name}`\n\n{block}{end}"
    if begin in text and end in text:
        text = text[: text.index(begin)] + section + text[text.index(end) + len(end):]
    else:  # a new block goes at the end of the "Last figures" section
        head, heading, tail = text.partition("## Last figures\n")
        next_section = re.search(r"^## ", tail, flags=re.MULTILINE)
        cut = next_section.start() if next_section else len(tail)
        text = head + heading + tail[:cut].rstrip("\n") + "\n\n" + section + "\n" + ("\n" + tail[cut:] if tail[cut:] else "")
    README.write_text(text)


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Horde vs wrk: generator CPU per request; memory per VU at 10k VUs.")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_const", dest="mode", const="quick", help="3 x 5 s per tool, 15 s at 10k VUs (default; under 5 min)")
    group.add_argument("--full", action="store_const", dest="mode", const="full", help="5 x 10 s per tool, 20 s at 10k VUs")
    parser.add_argument("--reps", type=int, help="override the repetitions per tool")
    parser.add_argument("--seconds", type=int, help="override the length of each CPU-section run")
    parser.add_argument("--skip-cpu", action="store_true", help="skip the Horde-vs-wrk section")
    parser.add_argument("--skip-memory", action="store_true", help="skip the 10k-VU section")
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/README.md")
    parser.add_argument("--check", action="store_true", help=f"exit 1 when Horde is not within {TARGET_RATIO:g}x of wrk's CPU per request")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)
    mode = MODES[args.mode or "quick"]
    if args.reps:
        mode.reps = max(1, min(args.reps, 50))
    if args.seconds:
        mode.seconds = max(2, min(args.seconds, 600))
    command = shlex.join([os.path.relpath(sys.executable, REPO) if sys.executable.startswith(str(REPO)) else sys.executable,
                          os.path.relpath(__file__, REPO), *(argv if argv is not None else sys.argv[1:])])

    procs = Processes()
    # Ctrl-C, SIGTERM and SIGHUP all end the bench through the finally below (SIGINT explicitly:
    # a shell may start a background job with it ignored).
    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    try:
        horde, wrk, gen_cpu, target_cpu, notes = check_environment(args.horde)
        with tempfile.TemporaryDirectory(prefix="horde-bench-") as work:
            env = Env(horde=horde, wrk=wrk, gen_cpu=gen_cpu, target_cpu=target_cpu, work=Path(work), procs=procs, notes=notes)
            started = dt.datetime.now(dt.timezone.utc)
            load_before = load()
            print(f"horde bench --{mode.name}: generator on CPU {gen_cpu}, target on CPU {target_cpu}; load {load_before}", flush=True)
            cpu = mem = None
            if not args.skip_cpu:
                print(f"cost per request: wrk vs horde, {CONNECTIONS} connections, {mode.reps} x {mode.seconds} s each", flush=True)
                cpu = cpu_section(env, mode)
            if not args.skip_memory:
                print(f"memory per VU: {mode.baseline_vus} then {mode.mem_vus:,} VUs against /delay/1000", flush=True)
                mem = memory_section(env, mode)
            load_after = load()
            block, _ = render(mode, command, env, started, load_before, load_after, cpu, mem)
            print()
            print(block)
            RESULTS_DIR.mkdir(exist_ok=True)
            raw = {"mode": mode.name, "command": command, "date": started.isoformat(), "machine": machine(),
                   "load_before": load_before, "load_after": load_after, "notes": env.notes, "cpu": cpu, "memory": mem}
            (RESULTS_DIR / f"last-{mode.name}.json").write_text(json.dumps(raw, indent=2) + "\n")
            if not args.no_readme:
                update_readme(mode, block)
                print(f"updated {os.path.relpath(README)} (raw figures: {os.path.relpath(RESULTS_DIR / f'last-{mode.name}.json')})")
            if args.check and cpu is not None and not cpu["met"]:
                print(f"the {TARGET_RATIO:g}x target was not met (--check)", file=sys.stderr)
                return 1
        return 0
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        if error.hint:
            print(f"hint: {error.hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        procs.close()


if __name__ == "__main__":
    sys.exit(main())
