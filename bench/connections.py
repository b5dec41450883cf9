"""Connections: the most concurrent keep-alive connections one generator process holds on this
machine, and the memory each costs; with ``--generators N``, how many N generator processes
hold together (a local Ray cluster, ``horde run --cluster local``): the way to C100k on one
machine whose processes may each open 20,000 files.

    .venv/bin/python bench/connections.py                     # as many as the open-file limit allows
    .venv/bin/python bench/connections.py --connections 10000 --seconds 20
    .venv/bin/python bench/connections.py --generators 5      # 5 x (limit - 100): about 100,000
    .venv/bin/python bench/connections.py --connections 100000 --tag 16cpu  # where the limit allows it
    .venv/bin/python bench/connections.py --generators 5 --transport tcp   # C100k of message connections

`--transport tcp`: message connections instead (`tcp://`, the built-in gateway's TCP port,
`horde target --tcp-port`), each VU connecting once (a `connect` setup step) and then sending a
`ping` every think time and reading its `pong` over its own connection; the gateways are
`target.instances` as the targets are, and the connections bind to the same source addresses.

One connection per VU (`target.connections: per_vu`), each VU sending `GET /` every 5 s over
its own keep-alive connection, so every connection stays open and in use for the whole run. The
count is the process's hard open-file limit less 100 (19,900 of 20,000 here: the engine raises
its soft limit to the hard one; Horde refuses a plan that could need more than the limit less
64). Outgoing connections bind to four loopback source addresses in turn
(`target.source_addresses: 127.0.0.2..5`), each with its own ephemeral port range. The target
side is two built-in target processes (`target.instances`; VU n talks to instance n mod 2): one
process may hold at most 20,000 files as well, so each holds half.

Method: targets pinned to one CPU, the generator (`horde run --workers 1`) to the other. Held
connections are counted in the generator itself (its socket descriptors in /proc/PID/fd) once a
second, beside its VmRSS; the kernel's TCP memory comes from /proc/net/sockstat. Memory per
connection is (median RSS of the held phase - that of a 100-VU run) / (connections - 100): a
VU with its connection, buffers and task, as `per_vu` runs them. Figures go to bench/FIGURES.md
("Connections").
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py: processes, pinning, the built-in target)

SOURCES = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
TARGETS = 2
BASELINE_VUS = 100
THINK_MS = 5000
#: Files the generator keeps besides connections (Horde's own check reserves 64).
HEADROOM = 100


def plan_file(
    work: Path,
    ports: list[int],
    vus: int,
    ramp_s: float,
    seconds: float,
    think_ms: float = THINK_MS,
    transport: str = "http",
) -> Path:
    think = {"type": "constant", "duration_ms": think_ms}
    workload = {
        "type": "closed",
        "start_vus": 0,
        "stages": [{"duration_s": ramp_s, "vus": vus}, {"duration_s": seconds, "vus": vus}],
    }
    urls = [f"{transport}://127.0.0.1:{port}" for port in ports]
    target: dict[str, Any] = {
        "base_url": urls[0],
        "instances": urls[1:],
        "source_addresses": SOURCES,
        "connect_timeout_ms": 10000,
    }
    if transport == "http":
        target.update(connections="per_vu", request_timeout_ms=30000)
        scenario = {
            "name": "hold",
            "steps": [{"name": "get", "method": "GET", "path": "/", "think_time": think}],
            "workload": workload,
        }
    else:
        scenario = {
            "name": "hold",
            "setup": [{"type": "connect", "name": "connect"}],
            "steps": [
                {"type": "ping", "name": "rtt", "reply_seq": "pong (\\d+)", "timeout_ms": 30000, "think_time": think}
            ],
            "workload": workload,
        }
    plan = {
        "version": 1,
        "name": f"connections-{transport}-{vus}",
        "target": target,
        "graceful_stop_s": 5,
        "scenarios": [scenario],
    }
    path = work / f"plan-{vus}.json"
    path.write_text(json.dumps(plan))
    return path


def socket_count(pid: int) -> int | None:
    try:
        return sum(1 for fd in os.scandir(f"/proc/{pid}/fd") if os.readlink(fd.path).startswith("socket:"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def tcp_memory_kb() -> int:
    """The kernel's TCP buffer memory in use (all sockets of the machine), KiB."""
    for line in Path("/proc/net/sockstat").read_text().splitlines():
        if line.startswith("TCP:"):
            fields = line.split()
            return int(fields[fields.index("mem") + 1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    return 0


def tcp_sockets_in_use() -> int:
    """TCP sockets in use on the machine (both ends of a loopback connection count)."""
    for line in Path("/proc/net/sockstat").read_text().splitlines():
        if line.startswith("TCP:"):
            fields = line.split()
            return int(fields[fields.index("inuse") + 1])
    return 0


def tree_rss_kb(root: int) -> int | None:
    """VmRSS of a process and all its descendants (a local Ray cluster's processes descend from
    the `horde run` that started it), KiB."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        rss = harness.vm_rss_kb(pid)
        if rss is None and pid == root:
            return None
        total += rss or 0
        stack.extend(children.get(pid, []))
    return total


def hold(
    env: harness.Env,
    ports: list[int],
    vus: int,
    ramp_s: float,
    seconds: float,
    tag: str,
    generators: int = 1,
    think_ms: float = THINK_MS,
    transport: str = "http",
) -> dict[str, Any]:
    """Runs `vus` VUs and samples, once a second, the generator's sockets, RSS and TCP memory.
    With several generators (a local Ray cluster) the sockets are the machine's TCP sockets in
    use beyond those before the run, halved (both ends are on this machine), and the RSS is the
    whole process tree's (the cluster's own processes included)."""
    summary_path = env.work / f"{tag}.summary.json"
    log = env.work / f"{tag}.log"
    argv = [
        "taskset",
        "-c",
        env.gen_cpu,
        env.horde,
        "run",
        str(plan_file(env.work, ports, vus, ramp_s, seconds, think_ms, transport)),
        "--workers",
        "1",
        "--summary-json",
        str(summary_path),
        "--store",
        str(env.work / "store.sqlite"),
    ]
    if generators > 1:
        argv += ["--cluster", "local", "--generators", str(generators)]
    tcp_before = tcp_memory_kb()
    sockets_before = tcp_sockets_in_use()
    child = env.procs.start(argv, log)
    samples: list[tuple[float, int, int, int]] = []  # (seconds since start, sockets, RSS KiB, TCP KiB)
    started = time.monotonic()
    deadline = started + ramp_s + seconds + 120
    try:
        while child.poll() is None:  # bounded by the deadline
            if time.monotonic() > deadline:
                raise harness.BenchError(f"horde run ({tag}) did not end in time", hint=f"its output is in {log}")
            if generators > 1:
                sockets: int | None = (tcp_sockets_in_use() - sockets_before) // 2
                rss = tree_rss_kb(child.pid)
            else:
                sockets = socket_count(child.pid)
                rss = harness.vm_rss_kb(child.pid)
            if sockets is not None and rss is not None:
                samples.append((time.monotonic() - started, sockets, rss, tcp_memory_kb()))
                if len(samples) % 5 == 0:  # progress, and a trace of the run when a figure looks wrong
                    print(f"  {samples[-1][0]:5.0f} s: {sockets:,} sockets, RSS {rss / 1024:,.0f} MiB", flush=True)
            time.sleep(1.0)
    finally:
        env.procs.stop(child)
    if child.returncode != 0 or not summary_path.exists():
        raise harness.BenchError(
            f"horde run ({tag}) ended with exit code {child.returncode}",
            hint=f"last output: {log.read_text(errors='replace')[-800:]}",
        )
    summary = json.loads(summary_path.read_text())
    # Held: from 3 s after the ramp (start-up and the last connections) to 2 s before the end.
    # Several generators: the local Ray cluster and the generators start first, so the run's time
    # zero comes later; the first sample with a tenth of a second of the ramp's sockets up marks it.
    zero = 0.0
    if generators > 1:
        zero = next((sample[0] for sample in samples if sample[1] >= vus / (10 * ramp_s)), 0.0)
    start_s = zero + 2.0 + ramp_s + 3.0
    held = [sample for sample in samples if start_s <= sample[0] <= zero + 2.0 + ramp_s + seconds - 2.0] or samples[-3:]
    return {
        "vus": vus,
        "held_samples": len(held),
        "sockets_held_min": min(sample[1] for sample in held),
        "sockets_max": max(sample[1] for sample in samples),
        "rss_held_kb": statistics.median(sample[2] for sample in held),
        "tcp_memory_delta_kb": statistics.median(sample[3] for sample in held) - tcp_before,
        "requests": summary["requests"],
        "errors_by_kind": summary["errors_by_kind"],
        "rps": summary["rps"],
        "connections_opened": summary["connections_opened"],
        "p99_ms": summary["latency_ms"]["p99"],
    }


def start_targets(env: harness.Env, count: int = TARGETS, transport: str = "http") -> list[int]:
    """`count` built-in targets pinned to the target CPU; their HTTP ports, or with `transport`
    tcp their gateways' TCP ports."""
    if transport == "tcp":
        return [start_gateway(env, index) for index in range(count)]
    ports = []
    for index in range(count):
        # Each target logs into its own file; harness.start_target reads target.log.
        target, port = harness.start_target(env)
        (env.work / "target.log").rename(env.work / f"target-{index}.log")
        ports.append(port)
        del target  # stopped with every child of env.procs
    return ports


def start_gateway(env: harness.Env, index: int) -> int:
    """A built-in target with its gateway on a free TCP port, pinned to the target CPU; the port."""
    log = env.work / f"gateway-{index}.log"
    child = env.procs.start(
        ["taskset", "-c", env.target_cpu, env.horde, "target", "--port", "0", "--tcp-port", "0"], log
    )
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:  # bounded
        match = re.search(r"gateway on tcp://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if match:
            return int(match.group(1))
        if child.poll() is not None:
            break
        time.sleep(0.05)
    raise harness.BenchError(
        "the gateway did not start", hint=f"its output: {log.read_text(errors='replace')[-500:]!r}"
    )


def render(result: dict[str, Any], command: str, started: dt.datetime, env: harness.Env) -> str:
    machine = harness.machine()
    base, many = result["baseline"], result["many"]
    http = result.get("transport", "http") == "http"
    kind = "keep-alive connections" if http else "TCP message connections"
    per_connection = (many["rss_held_kb"] - base["rss_held_kb"]) / (many["vus"] - base["vus"])
    kernel = (many["tcp_memory_delta_kb"] - base["tcp_memory_delta_kb"]) / (many["vus"] - base["vus"])
    errors = ", ".join(f"{kind} {count:,}" for kind, count in many["errors_by_kind"].items()) or "none"
    lines = [
        f"- machine: {machine['nproc']} CPUs, {machine['model']}, Linux {machine['kernel']}; open-file limit {result['limit']:,}",
        f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}; command: `{command}`",
        (
            f"- generator (`horde run --workers 1`) pinned to CPU {env.gen_cpu}"
            if result["generators"] == 1
            else f"- {result['generators']} generators of one worker each (`horde run --cluster local --generators "
            f"{result['generators']} --workers 1`: a local Ray cluster, all its processes pinned to CPU {env.gen_cpu})"
        )
        + f"; {result['targets']} built-in {'targets' if http else 'gateways (`horde target --tcp-port`)'} (`target.instances`) "
        f"pinned to CPU {env.target_cpu}; source addresses {', '.join(SOURCES)}; each VU "
        + (
            f"sends `GET /` every {result['think_ms'] / 1000:g} s"
            if http
            else f"connects once (`tcp://`, newline framing) and pings every {result['think_ms'] / 1000:g} s (`ping`, the reply's `pong N` matched)"
        ),
        "",
        "| run | VUs (one connection each) | sockets held (min over held s) | connections opened | req/s | p99 ms | errors | RSS held MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in (("baseline", base), ("many connections", many)):
        row_errors = ", ".join(f"{kind} {count:,}" for kind, count in row["errors_by_kind"].items()) or "none"
        lines.append(
            f"| {name} | {row['vus']:,} | {row['sockets_held_min']:,} | {row['connections_opened']:,} | {row['rps']:,.0f} | "
            f"{row['p99_ms']:,.1f} | {row_errors} | {row['rss_held_kb'] / 1024:,.1f} |"
        )
    # The baseline's sockets beyond its VUs are the process's own (the store, Python); counted
    # machine-wide (several generators) there are none to take off.
    held = many["sockets_held_min"] - (base["sockets_held_min"] - base["vus"] if result["generators"] == 1 else 0)
    kernel_text = (
        f"plus about {kernel:.1f} KiB of kernel TCP buffer memory each"
        if kernel >= 0.1
        else "and no kernel TCP buffer memory to speak of (an idle socket holds no buffer pages)"
    )
    lines += [
        "",
        (
            f"One generator process held **{held:,} {kind}** to the target at once (errors: {errors}), "
            if result["generators"] == 1
            else f"{result['generators']} generator processes held **{held:,} {kind}** to the target at once "
            f"(errors: {errors}; counted as the machine's TCP sockets beyond those before the run, halved), "
        )
        + f"at **{per_connection:.1f} KiB of resident memory per connection** (its VU, buffers and task included"
        + (
            ""
            if result["generators"] == 1
            else "; RSS of the whole process tree, the Ray cluster's own processes "
            "included, less the same tree's at 100 VUs"
        )
        + f"), {kernel_text}; /proc/net/sockstat, machine-wide, not in RSS.",
    ]
    return "\n".join(lines) + "\n"


def figures_name(generators: int, tag: str | None, transport: str = "http") -> str:
    """The FIGURES.md block and results file of these figures: one generator and several, each
    transport, and each tag (a larger machine), keep their own."""
    return (
        ("connections" if generators == 1 else "connections-cluster")
        + ("" if transport == "http" else f"-{transport}")
        + (f"-{tag}" if tag else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The most keep-alive connections one generator process holds.")
    parser.add_argument(
        "--connections", type=int, help="connections (one per VU); default: the open-file limit less 100"
    )
    parser.add_argument("--ramp", type=float, default=20.0, help="seconds to open them (default 20)")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds held after the ramp (default 30)")
    parser.add_argument(
        "--generators",
        type=int,
        default=1,
        help="generator processes (a local Ray cluster when more than 1; needs horde[cluster]); "
        "the default count is then this many times the open-file limit less 100",
    )
    parser.add_argument(
        "--think-ms", type=float, default=THINK_MS, help=f"each VU's pause between requests (default {THINK_MS})"
    )
    parser.add_argument(
        "--transport",
        choices=("http", "tcp"),
        default="http",
        help="http: keep-alive HTTP connections (default); tcp: message connections to the built-in gateway, pinging",
    )
    harness.add_tag_argument(parser)
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    limit = 1_000_000 if limit == resource.RLIM_INFINITY else int(limit)
    generators = max(1, args.generators)
    per_process = limit - HEADROOM
    connections = max(BASELINE_VUS + 1, min(args.connections or per_process * generators, per_process * generators))
    command = harness.command_line(__file__, argv)

    def body(procs: harness.Processes) -> int:
        horde = harness.find_horde(args.horde)
        gen_cpu, target_cpu, _ = harness.pick_cpus()
        with tempfile.TemporaryDirectory(prefix="horde-connections-") as work:
            env = harness.Env(horde=horde, wrk="", gen_cpu=gen_cpu, target_cpu=target_cpu, work=Path(work), procs=procs)
            started = dt.datetime.now(dt.timezone.utc)
            # Each target process holds at most its own open-file limit: one more than needed.
            ports = start_targets(env, max(TARGETS, -(-connections // per_process) + 1), args.transport)
            print(f"baseline: {BASELINE_VUS} connections", flush=True)
            baseline = hold(env, ports, BASELINE_VUS, 2.0, 10.0, "baseline", generators, args.think_ms, args.transport)
            print(
                f"{connections:,} connections over {generators} generator(s): {args.ramp:g} s to open, "
                f"{args.seconds:g} s held",
                flush=True,
            )
            many = hold(
                env, ports, connections, args.ramp, args.seconds, "many", generators, args.think_ms, args.transport
            )
            result = {
                "limit": limit,
                "generators": generators,
                "targets": len(ports),
                "think_ms": args.think_ms,
                "transport": args.transport,
                "baseline": baseline,
                "many": many,
            }
            block = render(result, command, started, env)
            print()
            print(block)
            harness.RESULTS_DIR.mkdir(exist_ok=True)
            name = figures_name(generators, args.tag, args.transport)
            (harness.RESULTS_DIR / f"{name}.json").write_text(
                json.dumps({"command": command, "date": started.isoformat(), **result}, indent=2) + "\n"
            )
            if not args.no_readme:
                harness.write_readme_block(name, block, section="Connections (`bench/connections.py`)")
                print(f"updated {os.path.relpath(harness.FIGURES)}")
        return 0

    return harness.run_main(body)


if __name__ == "__main__":
    sys.exit(main())
