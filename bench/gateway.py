"""Messages a second one generator core sends and receives against the built-in gateway, over
TCP, UDP and KCP, and against the built-in target's WebSocket echo (`/ws/echo`), and the
generator's CPU per message.

    .venv/bin/python bench/gateway.py                 # 2 repetitions x 5 s per transport (~1 min)
    .venv/bin/python bench/gateway.py --reps 3 --seconds 8 --vus 100
    .venv/bin/python bench/gateway.py --connections 10000 --interval-ms 1000   # many idle-ish connections
    .venv/bin/python bench/gateway.py --connections 3000 --transport kcp       # KCP sessions against TCP

`--connections N`: instead, N TCP connections opened over the first half of the run (two
workers), each pinging every `--interval-ms` (`pacing_s`: a ping starts each interval, whatever the RTT), held for the second half: errors, RTT and the
generator's timer lateness (the worst second's p99; the issue's aim: under 10 ms at 10,000
connections pinging every 100 ms), its peak RSS, and the gateway's CPU. With `--transport kcp`,
N KCP sessions (fast mode: nodelay, 10 ms interval) and then N TCP connections the same way,
`--reps` times in turn, so that KCP's RTT is read beside TCP's at the same load.

Method (as scenario.py): the generator (`horde run --workers 1`) and the gateway (`horde target
--tcp-port 0 --udp-port 0 --kcp-port 0`) each pinned to a CPU; each VU pings in a loop without
pausing (`ping` steps: one message out, its reply in), so the rate is what one core sustains with
that many messages in flight. Each repetition runs each transport for N seconds and for 1
second; CPU from wait4()'s rusage of the generator process itself (its Python control plane
included), start-up corrected: (CPU_N - CPU_1) / (messages_N - messages_1), messages counting
both ways. Beside each TCP, UDP and WebSocket figure, the reference: `ping_client` (a plain Rust client,
`crates/horde-target/examples/ping_client.rs`, built by this script with cargo: the same pings
with nothing else, on one current-thread runtime), measured the same way; the ratio is Horde's
CPU per message over the reference's. Figures go to bench/FIGURES.md ("Game gateways").
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py: processes, pinning, exact CPU measurement)

TRANSPORTS = ("tcp", "udp", "kcp", "ws")
#: The transports the reference client speaks too.
REFERENCED = ("tcp", "udp", "ws")


def start_gateway(env: harness.Env) -> tuple[int, dict[str, int]]:
    """The built-in target with its gateway on free ports, pinned; (its pid, port by transport)."""
    log = env.work / "gateway.log"
    child = env.procs.start(
        [
            "taskset",
            "-c",
            env.target_cpu,
            env.horde,
            "target",
            "--port",
            "0",
            "--tcp-port",
            "0",
            "--udp-port",
            "0",
            "--kcp-port",
            "0",
        ],
        log,
    )
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:  # bounded
        text = log.read_text(errors="replace")
        ports = dict(re.findall(r"gateway on (tcp|udp|kcp)://127\.0\.0\.1:(\d+)", text))
        # The WebSocket is the HTTP port's.
        ports.update(("ws", port) for port in re.findall(r"listening on http://127\.0\.0\.1:(\d+)", text))
        if len(ports) == len(TRANSPORTS):
            return child.pid, {transport: int(port) for transport, port in ports.items()}
        if child.poll() is not None:
            break
        time.sleep(0.05)
    raise harness.BenchError(
        "the gateway did not start", hint=f"its output: {log.read_text(errors='replace')[-500:]!r}"
    )


def build_reference() -> str:
    """Builds the reference client (release) and returns its path."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise harness.BenchError(
            "cargo was not found: the reference client is built with it", hint="install Rust with rustup"
        )
    built = subprocess.run(
        [cargo, "build", "--release", "--quiet", "-p", "horde-target", "--example", "ping_client"],
        cwd=harness.REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if built.returncode != 0:
        raise harness.BenchError("the reference client did not build", hint=built.stderr[-800:])
    return str(harness.REPO / "target" / "release" / "examples" / "ping_client")


def reference_run(
    env: harness.Env, client: str, transport: str, port: int, vus: int, seconds: int, tag: str, target_pid: int
) -> tuple[harness.Measured, int]:
    log = env.work / f"{tag}.log"
    argv = ["taskset", "-c", env.gen_cpu, client, transport, f"127.0.0.1:{port}", str(vus), str(seconds)]
    measured = harness.run_measured(env.procs, argv, log, timeout_s=seconds + 60, target_pid=target_pid)
    if measured.rc != 0:
        raise harness.BenchError(
            f"the reference client ended with exit code {measured.rc}", hint=log.read_text(errors="replace")[-500:]
        )
    return measured, int(json.loads(log.read_text().strip().splitlines()[-1])["messages"])


def plan(env: harness.Env, transport: str, port: int, vus: int, seconds: int) -> Path:
    target: dict[str, Any] = {"base_url": f"{transport}://127.0.0.1:{port}" + ("/ws/echo" if transport == "ws" else "")}
    # The echo sends a ping back as it came; the gateway answers `pong N`.
    reply_seq = "ping (\\d+)" if transport == "ws" else "pong (\\d+)"
    if transport == "kcp":
        target["kcp"] = {"nodelay": True, "interval_ms": 10, "resend": 2, "no_congestion_window": True}
    document = {
        "version": 1,
        "name": f"gateway-{transport}",
        "target": target,
        "graceful_stop_s": 2,
        "scenarios": [
            {
                "name": "pingers",
                "steps": [{"type": "ping", "name": "rtt", "reply_seq": reply_seq, "timeout_ms": 1000}],
                "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": seconds, "vus": vus}]},
            }
        ],
    }
    path = env.work / f"{transport}-{seconds}.json"
    path.write_text(json.dumps(document))
    return path


def messages_of(summary: dict[str, Any]) -> int:
    counts = summary["steps"]["rtt"].get("messages") or {}
    return int(counts.get("sent", 0)) + int(counts.get("received", 0))


def measure(env: harness.Env, reps: int, seconds: int, vus: int) -> dict[str, Any]:
    client = build_reference()
    target_pid, ports = start_gateway(env)
    results: dict[str, list[dict[str, float]]] = {transport: [] for transport in TRANSPORTS}
    for rep in range(reps):
        for transport in TRANSPORTS:
            long_run, long_summary = harness.horde_run(
                env,
                [str(plan(env, transport, ports[transport], vus, seconds))],
                seconds,
                f"{transport}-{rep}-long",
                target_pid,
            )
            short_run, short_summary = harness.horde_run(
                env, [str(plan(env, transport, ports[transport], vus, 1))], 1, f"{transport}-{rep}-short", target_pid
            )
            messages_long, messages_short = messages_of(long_summary), messages_of(short_summary)
            rtt = long_summary["steps"]["rtt"]
            reference: dict[str, float] = {
                "reference_messages_per_s": math.nan,
                "reference_cpu_us_per_message": math.nan,
            }
            if transport in REFERENCED:
                ref_long, ref_messages_long = reference_run(
                    env, client, transport, ports[transport], vus, seconds, f"ref-{transport}-{rep}-long", target_pid
                )
                ref_short, ref_messages_short = reference_run(
                    env, client, transport, ports[transport], vus, 1, f"ref-{transport}-{rep}-short", target_pid
                )
                reference = {
                    "reference_messages_per_s": ref_messages_long / max(ref_long.wall_s, 1e-9),
                    "reference_cpu_us_per_message": 1e6
                    * (ref_long.cpu_s - ref_short.cpu_s)
                    / max(ref_messages_long - ref_messages_short, 1),
                }
            results[transport].append(
                {
                    **reference,
                    "messages_per_s": messages_long / max(long_summary["duration_s"], 1e-9),
                    "cpu_us_per_message": 1e6
                    * (long_run.cpu_s - short_run.cpu_s)
                    / max(messages_long - messages_short, 1),
                    "p50_ms": rtt["latency_ms"]["p50"],
                    "p99_ms": rtt["latency_ms"]["p99"],
                    "errors": rtt["errors"],
                    "gateway_cores": long_run.target_cpu_s / long_run.wall_s,
                    "others_cores": long_run.others_cores,
                }
            )
    return {"results": results, "machine": harness.machine(), "load": harness.load()}


def render(result: dict[str, Any], command: str, reps: int, seconds: int, vus: int) -> str:
    lines = [
        f"`{command}` — {reps} repetitions × {seconds} s, {vus} VUs pinging without pause, one worker; "
        f"machine: {result['machine']['nproc']} CPUs ({result['machine']['model']}), load {result['load']}",
        "",
        "| transport | messages/s (both ways) | generator CPU µs/message | reference messages/s | reference µs/message | ratio | RTT p50 ms | RTT p99 ms | errors | gateway cores | others' cores |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for transport, runs in result["results"].items():
        median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        has_reference = not math.isnan(median["reference_cpu_us_per_message"])
        reference = (
            f"{median['reference_messages_per_s']:,.0f} | {median['reference_cpu_us_per_message']:.1f} | "
            f"{median['cpu_us_per_message'] / median['reference_cpu_us_per_message']:.2f}×"
            if has_reference
            else "- | - | -"
        )
        lines.append(
            f"| {transport} | {median['messages_per_s']:,.0f} | {median['cpu_us_per_message']:.1f} | {reference} | {median['p50_ms']:.2f} | "
            f"{median['p99_ms']:.2f} | {median['errors']:.0f} | {median['gateway_cores']:.2f} | {median['others_cores']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def measure_connections(
    env: harness.Env, connections: int, interval_ms: float, seconds: int, transport: str
) -> dict[str, Any]:
    target_pid, ports = start_gateway(env)
    target: dict[str, Any] = {"base_url": f"{transport}://127.0.0.1:{ports[transport]}", "connect_timeout_ms": 10000}
    if transport == "kcp":
        target["kcp"] = {"nodelay": True, "interval_ms": 10, "resend": 2, "no_congestion_window": True}
    document = {
        "version": 1,
        "name": f"gateway-{transport}-connections",
        "graceful_stop_s": 3,
        "target": target,
        # Pacing, not a think time: a ping starts every interval whatever the last one's RTT.
        "scenarios": [
            {
                "name": "pingers",
                "pacing_s": interval_ms / 1000,
                "setup": [{"type": "connect", "name": "connect"}],
                "steps": [{"type": "ping", "name": "rtt", "reply_seq": "pong (\\d+)", "timeout_ms": 2000}],
                "workload": {
                    "type": "closed",
                    "start_vus": 0,
                    "stages": [
                        {"duration_s": seconds / 2, "vus": connections},
                        {"duration_s": seconds / 2, "vus": connections},
                    ],
                },
            }
        ],
    }
    path = env.work / "connections.json"
    path.write_text(json.dumps(document))
    # Two workers: connections are spread over them as VUs are.
    argv = [
        "taskset",
        "-c",
        env.gen_cpu,
        env.horde,
        "run",
        str(path),
        "--workers",
        "2",
        "--summary-json",
        str(env.work / "connections.summary.json"),
        "--store",
        str(env.work / "store.sqlite"),
    ]
    measured = harness.run_measured(
        env.procs, argv, env.work / "connections.log", timeout_s=seconds + 90, target_pid=target_pid
    )
    summary = json.loads((env.work / "connections.summary.json").read_text())
    rtt = summary["steps"]["rtt"]
    return {
        "connections": summary["steps"]["connect"]["requests"],
        "connect_errors": summary["steps"]["connect"]["errors"],
        # Asked: the ramp's connections (on average half of them) for its half, all of them after.
        "pings": rtt["requests"],
        "asked": connections * (seconds / 2 * 0.5 + seconds / 2) * 1000 / interval_ms,
        "errors": rtt["errors"],
        "resent": int((rtt.get("messages") or {}).get("retransmitted", 0)),
        "p50_ms": rtt["latency_ms"]["p50"],
        "p99_ms": rtt["latency_ms"]["p99"],
        "timer_lateness_p99_ms": summary["generator"]["timer_lateness_p99_ms"],
        "maxrss_mb": measured.maxrss_kb / 1024,
        "cpu_s": measured.cpu_s,
        "gateway_cores": measured.target_cpu_s / measured.wall_s,
        "others_cores": measured.others_cores,
        "load": harness.load(),
    }


def kcp_against_tcp(env: harness.Env, args: argparse.Namespace, command: str) -> str:
    """N KCP sessions, then as many TCP connections at the same load, `--reps` times in turn: a
    row per run and the median p99 of each."""
    seconds = max(args.seconds, 10)
    runs = [
        (transport, measure_connections(env, args.connections, args.interval_ms, seconds, transport))
        for _ in range(args.reps)
        for transport in ("kcp", "tcp")
    ]
    lines = [
        f"`{command}` — {args.connections:,} KCP sessions (fast mode) against as many TCP connections, each pinging "
        f"every {args.interval_ms:g} ms, {args.reps} × {seconds} s each in turn; machine: {harness.machine()['nproc']} CPUs "
        f"({harness.machine()['model']})",
        "",
        "| transport | connected | pings | errors | KCP resends | RTT p50 ms | RTT p99 ms | timer lateness p99 ms (worst second) | generator CPU s | gateway cores | others' cores | load after |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for transport, held in runs:
        lines.append(
            f"| {transport} | {held['connections']:,} | {held['pings']:,} | {held['errors']} | "
            f"{held['resent'] if transport == 'kcp' else '-'} | {held['p50_ms']:.2f} | {held['p99_ms']:.2f} | "
            f"{held['timer_lateness_p99_ms']:.1f} | {held['cpu_s']:.1f} | {held['gateway_cores']:.2f} | "
            f"{held['others_cores']:.2f} | {held['load']} |"
        )
    medians = {
        transport: statistics.median(held["p99_ms"] for kind, held in runs if kind == transport)
        for transport in ("kcp", "tcp")
    }
    lines += ["", f"Median RTT p99: KCP {medians['kcp']:.2f} ms, TCP {medians['tcp']:.2f} ms."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--vus", type=int, default=50)
    parser.add_argument(
        "--connections", type=int, help="instead: this many TCP connections pinging every --interval-ms"
    )
    parser.add_argument("--interval-ms", type=float, default=100.0)
    parser.add_argument(
        "--transport",
        choices=("tcp", "kcp"),
        default="tcp",
        help="with --connections: TCP connections, or KCP sessions measured in turn with as many TCP connections (--reps times)",
    )
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)

    def body(procs: harness.Processes) -> int:
        horde = harness.find_horde(args.horde)
        gen_cpu, target_cpu, _notes = harness.pick_cpus()
        with tempfile.TemporaryDirectory(prefix="horde-bench-gateway-") as work:
            env = harness.Env(horde=horde, wrk="", gen_cpu=gen_cpu, target_cpu=target_cpu, work=Path(work), procs=procs)
            if args.connections and args.transport == "kcp":
                text = kcp_against_tcp(env, args, harness.command_line(__file__, argv))
                print(text)
                if not args.no_readme:
                    harness.write_readme_block("gateway-kcp-sessions", text, section="Game gateways")
                return 0
            if args.connections:
                held = measure_connections(env, args.connections, args.interval_ms, max(args.seconds, 10), "tcp")
                text = (
                    f"`{harness.command_line(__file__, argv)}`: {held['connections']:,} TCP connections "
                    f"({held['connect_errors']} failed) pinging every {args.interval_ms:g} ms (`pacing_s`): {held['pings']:,} pings "
                    f"({100 * held['pings'] / held['asked']:.0f} % of those asked), "
                    f"{held['errors']} errors, RTT p50 {held['p50_ms']:.2f} ms p99 {held['p99_ms']:.2f} ms, timer lateness "
                    f"p99 (worst second) {held['timer_lateness_p99_ms']:.1f} ms, peak RSS {held['maxrss_mb']:.0f} MB, "
                    f"generator CPU {held['cpu_s']:.1f} s, gateway {held['gateway_cores']:.2f} cores; others' cores "
                    f"{held['others_cores']:.2f}, load {held['load']}\n"
                )
                print(text)
                if not args.no_readme:
                    harness.write_readme_block("gateway-connections", text, section="Game gateways")
                return 0
            result = measure(env, args.reps, args.seconds, args.vus)
        text = render(result, harness.command_line(__file__, argv), args.reps, args.seconds, args.vus)
        print(text)
        if not args.no_readme:
            harness.write_readme_block("gateway", text, section="Game gateways")
        return 0

    return harness.run_main(body)


if __name__ == "__main__":
    sys.exit(main())
