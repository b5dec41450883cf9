"""The bench scripts' shared harness: what every script under bench/ needs besides its own
measurement, so that run.py (the CPU benchmark against wrk) is one script among the others.

- paths: the repository, bench/FIGURES.md (the current figures), bench/results/;
- set-up faults: `BenchError` (printed by `fail` as `error:` and `hint:`, exit code 2);
- processes: `Processes`, every child in its own process group (so its own session) and
  killed at the end, on error and on Ctrl-C too; `end_on_signals`;
- exact measurement: `run_measured` runs a command to its end and reads its CPU and peak RSS
  from wait4()'s rusage of that very child, its VmRSS while it runs (`vm_rss_kb`), the
  target's CPU and the rest of the machine's load (`Measured`);
- pinning and start-up: `find_horde`, `require_taskset`, `pick_cpus`, `Env`, the built-in target
  (`start_target`) and `horde_run` (`horde run` pinned, one worker, its summary JSON);
- provenance and figures: `machine`, `load`, `command_line`, `add_tag_argument`, and
  `write_readme_block` for the figure blocks of bench/FIGURES.md;
- `run_main`: the ending every script's main() shares (set-up faults, Ctrl-C, clean-up).

Standard library only, so that it runs with whatever Python runs Horde. A script imports it
after putting bench/ on sys.path (`import harness`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
FIGURES = BENCH_DIR / "FIGURES.md"
RESULTS_DIR = BENCH_DIR / "results"

CLK_TCK = os.sysconf("SC_CLK_TCK")


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
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_raise_nofile,
                cwd=REPO,
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
    rss_sample_times_s: list[float] = field(default_factory=list)  # since the start, one per sample
    target_cpu_s: float = 0.0  # the target's CPU over the same run
    others_cores: float = 0.0  # CPU used by everything else on the machine, in cores
    steal_cores: float = 0.0  # CPU the hypervisor gave to other guests, in cores
    # CPU of the process (every thread) between two instants of its run (`cpu_window_s`), and
    # the wall time between them: its steady cost, without start-up, connection set-up or exit.
    window_cpu_s: float | None = None
    window_wall_s: float | None = None
    # Over the same window: the process's wake-ups (times any of its threads was switched in)
    # and, per CPU named in `idle_cpus`, how often that CPU went idle (halted): on a VM each of
    # those is a wake-up the hypervisor serves, which costs whoever wakes the CPU again.
    window_wakeups: int | None = None
    window_halts: dict[str, int] = field(default_factory=dict)
    # The user-space part of `window_cpu_s` (the rest is the kernel's work for the process):
    # this VM's noise is mostly in the kernel's part (wake-ups, halts), so a difference in user
    # space shows over fewer repetitions.
    window_user_s: float | None = None


def _stat_times(stat: Path) -> tuple[float, float]:
    """(user, system) CPU seconds from a `stat` file of /proc (a process's or a thread's)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK  # utime, stime (fields 14, 15)


def _proc_stat_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, every thread included."""
    return _stat_times(Path(f"/proc/{pid}/stat"))


def _threads_stat_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process summed over its live threads. The kernel splits
    a task's exact run time into user and system by the ratio of its ticks over its whole life,
    and never lets either go back: read off the process, a window's split carries the ratio of
    everything before it (for Horde, the Python control plane's start-up, nearly all user
    space), so a steady window's user time comes out inflated. Each thread's own split does not
    carry its neighbours' history: the worker's is its steady ratio."""
    user = system = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            thread_user, thread_system = _stat_times(task / "stat")
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended between the listing and the read
        user += thread_user
        system += thread_system
    return user, system


def _proc_stat_cpu(pid: int) -> float:
    return sum(_proc_stat_times(pid))


def _target_cpu(pid: int) -> float:
    """CPU of a target process and its live children: nginx serves from a worker process that
    its master forked, and a child's time reaches the parent's counters only once reaped."""
    total = _proc_stat_cpu(pid)
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                total += _proc_stat_cpu(int(child))
            except (FileNotFoundError, ProcessLookupError):
                pass  # exited between the two reads
    return total


def _wakeups(pid: int) -> int:
    """Times the process's threads were switched in (each thread's third schedstat field)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[2])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended between the listing and the read
    return total


def idle_entries(cpu: str) -> int | None:
    """How often `cpu` has entered an idle state that halts it (not the polling one), from
    cpuidle's counters; None where the kernel keeps none."""
    states = sorted(Path(f"/sys/devices/system/cpu/cpu{cpu}/cpuidle").glob("state*"))
    if not states:
        return None
    return sum(int((state / "usage").read_text()) for state in states if (state / "name").read_text().strip() != "POLL")


def _machine_ticks() -> tuple[int, int]:
    """(busy, steal) ticks of the whole machine from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return user + nice + system + irq + softirq, steal


def vm_rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def run_measured(
    procs: Processes,
    argv: list[str],
    log: Path,
    *,
    timeout_s: float,
    target_pid: int | None = None,
    sample_rss: bool = False,
    sample_every_s: float = 1.0,
    on_sample: Callable[[float, int], None] | None = None,
    cpu_window_s: tuple[float, float] | None = None,
    idle_cpus: tuple[str, ...] = (),
) -> Measured:
    """Runs `argv` to its end and measures it: CPU and peak RSS from wait4()'s rusage of that
    very child (exact, no sampling), VmRSS every `sample_every_s` if asked (each sample also
    handed to `on_sample(seconds since start, KiB)`), the machine's other load, and, with
    `cpu_window_s` (from, to: seconds since the start), the child's CPU between those instants
    read from /proc (the child itself: a command that execs, as taskset does, keeps its pid),
    with its wake-ups and the halts of each CPU in `idle_cpus` over the same window."""
    busy0, steal0 = _machine_ticks()
    target0 = _target_cpu(target_pid) if target_pid else 0.0
    started = time.monotonic()
    child = procs.start(argv, log)
    samples: list[int] = []
    sample_times: list[float] = []
    next_sample = started + sample_every_s
    deadline = started + timeout_s
    reaped = False
    # (instant, CPU s, wake-ups, halts per CPU, user CPU s) at the window's start and end
    window: list[tuple[float, float, int, dict[str, int], float]] = []
    try:
        while True:  # bounded by `deadline`
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid == child.pid:
                reaped = True
                child.returncode = os.waitstatus_to_exitcode(status)
                break
            now = time.monotonic()
            if cpu_window_s and len(window) < 2 and now - started >= cpu_window_s[len(window)]:
                try:
                    halts = {cpu: count for cpu in idle_cpus if (count := idle_entries(cpu)) is not None}
                    user, system = _proc_stat_times(child.pid)
                    # The window's CPU is the process's (every thread, exact); its user space is
                    # its threads' (see `_threads_stat_times`).
                    window.append((now, user + system, _wakeups(child.pid), halts, _threads_stat_times(child.pid)[0]))
                except (FileNotFoundError, ProcessLookupError):
                    pass  # exiting: no window
            if now > deadline:
                raise BenchError(
                    f"{shlex.join(argv)} did not end within {timeout_s:.0f} s", hint=f"its output is in {log}"
                )
            if sample_rss and now >= next_sample:
                rss = vm_rss_kb(child.pid)
                if rss is not None:
                    samples.append(rss)
                    sample_times.append(now - started)
                    if on_sample:
                        on_sample(now - started, rss)
                next_sample += sample_every_s
            time.sleep(0.02)
    finally:
        if not reaped:
            procs.stop(child)  # timeout or interrupt: the child's whole group goes
    procs.stop(child)  # reaped: kills whatever might be left in its group, forgets it
    wall = time.monotonic() - started
    busy1, steal1 = _machine_ticks()
    target_cpu = (_target_cpu(target_pid) - target0) if target_pid else 0.0
    cpu = usage.ru_utime + usage.ru_stime
    others = max(0.0, (busy1 - busy0) / CLK_TCK - cpu - target_cpu) / wall
    return Measured(
        rc=int(child.returncode),
        wall_s=wall,
        cpu_s=cpu,
        maxrss_kb=usage.ru_maxrss,
        rss_samples_kb=samples,
        rss_sample_times_s=sample_times,
        target_cpu_s=target_cpu,
        others_cores=others,
        steal_cores=(steal1 - steal0) / CLK_TCK / wall,
        window_cpu_s=window[1][1] - window[0][1] if len(window) == 2 else None,
        window_wall_s=window[1][0] - window[0][0] if len(window) == 2 else None,
        window_wakeups=window[1][2] - window[0][2] if len(window) == 2 else None,
        window_halts={cpu: window[1][3][cpu] - window[0][3][cpu] for cpu in window[1][3]} if len(window) == 2 else {},
        window_user_s=window[1][4] - window[0][4] if len(window) == 2 else None,
    )


#: A run's steady window (`run_measured`'s `cpu_window_s`): from this long after its start to
#: `STEADY_TAIL_S` before its end, past start-up and connection set-up, short of the exit.
STEADY_FROM_S = 4.0
STEADY_TAIL_S = 1.0
#: The shortest steady window, and the earliest it may start in a run too short to start it at
#: `STEADY_FROM_S` (`make bench-sql`'s 5 s): Horde's first second of load begins about 0.8 s
#: after its process starts (Python, the plan's check, the store, pinned to one CPU), pgbench's
#: at once; 2 s leaves both well inside their load.
STEADY_MIN_S = 2.0
STEADY_MIN_FROM_S = 2.0


def steady_window(seconds: float) -> tuple[float, float] | None:
    """The seconds (since the start) over which a run's steady CPU is read; none for runs too
    short to hold `STEADY_MIN_S` of it after `STEADY_MIN_FROM_S` (under 5 s).

    >>> steady_window(10), steady_window(7), steady_window(6), steady_window(5), steady_window(4)
    ((4.0, 9.0), (4.0, 6.0), (3.0, 5.0), (2.0, 4.0), None)
    """
    end = seconds - STEADY_TAIL_S
    start = max(STEADY_MIN_FROM_S, min(STEADY_FROM_S, end - STEADY_MIN_S))
    return (start, end) if end - start >= STEADY_MIN_S else None


def steady_us_per(m: Measured, rate: float) -> float:
    """CPU µs per request (or transaction) over the steady window, at the rate the run achieved."""
    if m.window_cpu_s is None or not m.window_wall_s or rate <= 0:
        return float("nan")
    return m.window_cpu_s / (rate * m.window_wall_s) * 1e6


def steady_user_us_per(m: Measured, rate: float) -> float:
    """The user-space part of `steady_us_per` (the rest is the kernel's, for the process)."""
    if m.window_user_s is None or not m.window_wall_s or rate <= 0:
        return float("nan")
    return m.window_user_s / (rate * m.window_wall_s) * 1e6


def window_rates(m: Measured, rate: float, gen_cpu: str, target_cpu: str) -> dict[str, float]:
    """Over the steady window: the process's wake-ups per request (or transaction) at the rate it
    achieved, and its CPU's and the target's CPU's halts per second (NaN where not counted)."""
    nan = float("nan")
    wall = m.window_wall_s or 0.0
    if not wall or m.window_wakeups is None or rate <= 0:
        return {"wakeups_per_req": nan, "gen_halts_s": nan, "target_halts_s": nan}
    return {
        "wakeups_per_req": m.window_wakeups / (rate * wall),
        "gen_halts_s": m.window_halts[gen_cpu] / wall if gen_cpu in m.window_halts else nan,
        "target_halts_s": m.window_halts[target_cpu] / wall if target_cpu in m.window_halts else nan,
    }


def paired(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str) -> list[float]:
    """Each repetition's ratio of `key`, the two tools' runs of a repetition being back to back: a
    drift of the machine between repetitions (this VM's is several percent) cancels in each."""
    return [a[key] / b[key] for a, b in zip(mine, theirs)]


def median_interval(values: list[float], level: float = 0.9, resamples: int = 4000) -> tuple[float, float]:
    """A percentile-bootstrap interval of the median of `values` (repetitions' paired ratios):
    how far the median could move were the repetitions drawn again from the same machine. Seeded,
    so a report reads the same from the same figures. With five repetitions it is wide; that
    width is the honest answer to "is 1.02x more than 1.00x here?"."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    draw = random.Random(0)
    medians = sorted(statistics.median(draw.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1.0 - level) / 2
    return medians[int(tail * resamples)], medians[min(resamples - 1, int((1.0 - tail) * resamples))]


# ----------------------------------------------------------------------------- set-up


@dataclass
class Env:
    """What a bench script runs with: the commands, the pinned CPUs (taskset lists), its temporary
    folder and its children. `wrk` and `nginx` are run.py's; the other scripts leave `wrk` empty."""

    horde: str
    wrk: str
    gen_cpu: str
    target_cpu: str
    work: Path
    procs: Processes
    nginx: str | None = None
    notes: list[str] = field(default_factory=list)


def find_horde(horde: str | None) -> str:
    horde_path = horde or str(Path(sys.executable).parent / "horde")
    if not Path(horde_path).exists():
        found = shutil.which("horde")
        if not found:
            raise BenchError("the horde command was not found", hint="run `make setup` (or pass --horde PATH)")
        horde_path = found
    return horde_path


def require_taskset() -> None:
    if not shutil.which("taskset"):
        raise BenchError("taskset is not installed", hint="sudo apt-get install -y util-linux")


def pick_cpus() -> tuple[str, str, list[str]]:
    """(generator CPU, target CPU, notes): the first two CPUs this process may run on."""
    require_taskset()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        return str(cpus[0]), str(cpus[1]), []
    return (
        str(cpus[0]),
        str(cpus[0]),
        [
            "only one CPU is available: the generator and the target share it, so rates are lower and CPU per request is still comparable"
        ],
    )


def start_target(env: Env, name: str = "target", threads: int = 1) -> tuple[subprocess.Popen[bytes], int]:
    log = env.work / f"{name}.log"
    child = env.procs.start(
        ["taskset", "-c", env.target_cpu, env.horde, "target", "--port", "0", "--threads", str(threads)], log
    )
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if match:
            return child, int(match.group(1))
        if child.poll() is not None:
            break
        time.sleep(0.05)
    raise BenchError(
        "the built-in target did not start", hint=f"its output: {log.read_text(errors='replace')[-500:]!r}"
    )


def horde_run(
    env: Env,
    args: list[str],
    seconds: float,
    tag: str,
    target_pid: int | None,
    *,
    sample_rss: bool = False,
    sample_every_s: float = 1.0,
    on_sample: Callable[[float, int], None] | None = None,
    cpu_window_s: tuple[float, float] | None = None,
) -> tuple[Measured, dict[str, Any]]:
    """`horde run ARGS` pinned to the generator's CPU with one worker, a throw-away store and its
    summary JSON. `seconds` is how long ARGS make the run last; its deadline allows a minute more."""
    summary_path = env.work / f"{tag}.summary.json"
    log = env.work / f"{tag}.log"
    argv = [
        "taskset",
        "-c",
        env.gen_cpu,
        env.horde,
        "run",
        *args,
        "--workers",
        "1",
        "--summary-json",
        str(summary_path),
        "--store",
        str(env.work / "store.sqlite"),
    ]
    measured = run_measured(
        env.procs,
        argv,
        log,
        timeout_s=seconds + 60,
        target_pid=target_pid,
        sample_rss=sample_rss,
        sample_every_s=sample_every_s,
        on_sample=on_sample,
        cpu_window_s=cpu_window_s,
        idle_cpus=(env.gen_cpu, env.target_cpu),
    )
    if measured.rc != 0 or not summary_path.exists():
        raise BenchError(
            f"`horde run {shlex.join(args)}` ended with exit code {measured.rc}",
            hint=f"last output: {log.read_text(errors='replace')[-800:]}",
        )
    return measured, json.loads(summary_path.read_text())


# ----------------------------------------------------------------------------- report


def machine() -> dict[str, str]:
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {"nproc": str(os.cpu_count()), "model": model, "kernel": platform.release()}


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def add_tag_argument(parser: argparse.ArgumentParser) -> None:
    """`--tag NAME`: figures of their own (FIGURES.md block and results file), such as a larger
    machine's, so that they do not replace this machine's."""

    def tag(value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", value):
            raise argparse.ArgumentTypeError(f"{value!r}: use letters, digits, '-' and '_' (at most 32)")
        return value

    parser.add_argument(
        "--tag",
        type=tag,
        help="a name for these figures' own FIGURES.md block and results file (such as "
        "`16cpu` on a larger machine), so that they do not replace this machine's",
    )


def write_readme_block(name: str, content: str, section: str | None = None) -> None:
    """Replaces FIGURES.md's block between `<!-- NAME:begin -->` and `<!-- NAME:end -->` with
    `content`. A new block goes at the end of the `## SECTION` (made if missing) or of the file."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = FIGURES.read_text() if FIGURES.exists() else "# Horde benchmark: current figures\n"
    block = f"{begin}\n{content}{end}"
    if begin in text and end in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    elif section:
        heading = f"## {section}\n"
        if heading not in text:
            text = text.rstrip("\n") + f"\n\n{heading}"
        head, heading, tail = text.partition(heading)
        next_section = re.search(r"^## ", tail, flags=re.MULTILINE)
        cut = next_section.start() if next_section else len(tail)
        text = (
            head + heading + tail[:cut].rstrip("\n") + "\n\n" + block + "\n" + ("\n" + tail[cut:] if tail[cut:] else "")
        )
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    FIGURES.write_text(text)


# ----------------------------------------------------------------------------- main


def fail(error: BenchError) -> int:
    """Prints a set-up fault as `error:` and `hint:` lines; the exit code for it, 2."""
    print(f"error: {error}", file=sys.stderr)
    if error.hint:
        print(f"hint: {error.hint}", file=sys.stderr)
    return 2


def end_on_signals() -> None:
    """Ctrl-C, SIGTERM and SIGHUP all raise KeyboardInterrupt, so that the caller's `finally`
    (run_main's) stops every child (SIGINT explicitly: a shell may start a background job with it ignored).
    SIGHUP stays ignored when it already is: that is `nohup` asking the bench to outlive its
    terminal (the 30-minute long run)."""

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        signal.signal(sig, interrupt)


def command_line(script: str, argv: list[str] | None) -> str:
    """The command as it was typed, relative to the repository, for the figures' provenance."""
    python = os.path.relpath(sys.executable, REPO) if sys.executable.startswith(str(REPO)) else sys.executable
    return shlex.join([python, os.path.relpath(script, REPO), *(argv if argv is not None else sys.argv[1:])])


def side_by_side_main(
    argv: list[str] | None,
    *,
    script: str,
    description: str,
    default_rate: float,
    rate_help: str,
    measure: Callable[[Env, int, int, float], dict[str, Any]],
    render: Callable[[dict[str, Any], str, int, int, float], str],
    block: str,
    section: str | None = None,
) -> int:
    """The main() of a script that runs two plans side by side at one rate (scenario.py,
    monitors.py): `--reps`, `--seconds`, `--rate`, `--no-readme` (FIGURES.md untouched),
    `--horde`; `measure(env, reps, seconds, rate)` in a temporary folder with the generator and
    the target pinned, then `render(result, command, reps, seconds, rate)` printed and written to
    FIGURES.md's `block`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rate", type=float, default=default_rate, help=rate_help)
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)

    def body(procs: Processes) -> int:
        horde = find_horde(args.horde)
        gen_cpu, target_cpu, _notes = pick_cpus()
        with tempfile.TemporaryDirectory(prefix=f"horde-bench-{Path(script).stem}-") as work:
            env = Env(horde=horde, wrk="", gen_cpu=gen_cpu, target_cpu=target_cpu, work=Path(work), procs=procs)
            result = measure(env, args.reps, args.seconds, args.rate)
        command = f"bench/{Path(script).name} " + " ".join(argv if argv is not None else sys.argv[1:])
        text = render(result, command.strip(), args.reps, args.seconds, args.rate)
        print(text)
        if not args.no_readme:
            write_readme_block(block, text, section=section)
        return 0

    return run_main(body)


def run_main(body: Callable[[Processes], int]) -> int:
    """The ending every bench script's main() shares: runs `body` with the script's `Processes`
    (Ctrl-C, SIGTERM and SIGHUP made KeyboardInterrupt first) and returns its exit code; a
    set-up fault is printed as `error:`/`hint:` (exit code 2), an interrupt as `interrupted`
    (130), and every child still running is stopped in any case."""
    procs = Processes()
    end_on_signals()
    try:
        return body(procs)
    except BenchError as error:
        return fail(error)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        procs.close()
