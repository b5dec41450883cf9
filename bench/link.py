"""The emulated link's own cost (`horde link`): packets a second its relay moves and its CPU per
packet, beside the same load over the direct path (loopback, no link). Needs root.

    sudo .venv/bin/python bench/link.py                  # 2 repetitions x 5 s (~1.5 min)
    sudo .venv/bin/python bench/link.py --reps 3 --seconds 8 --vus 100

Method (as gateway.py): the generator (`horde run --workers 1`, each VU pinging without pause)
pinned to one CPU, the built-in gateway (`horde target --udp-port --tcp-port`) to the other; for
the link, the gateway runs inside the link's namespace (`ip netns exec`) and the generator pings
it at the namespace's address, every packet crossing the relay thread of this process (not
pinned: the scheduler places it). Rows: UDP and TCP, direct and through a link with no
impairment (the relay's bare cost), and UDP through a link of 20 ms each way with many more VUs
(a heap of held packets: --held-vus). The relay's CPU is its thread's own (CLOCK_THREAD_CPUTIME_ID)
over the run, per packet relayed (both ways); the generator's CPU per message is start-up
corrected as in gateway.py. Figures go to bench/FIGURES.md ("The emulated link").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import harness  # noqa: E402  (bench/harness.py: processes, pinning, exact CPU measurement)
from gateway import messages_of  # noqa: E402  (the same pings, counted as bench/gateway.py counts them)

ROWS = (("udp", "direct"), ("udp", "link"), ("tcp", "direct"), ("tcp", "link"), ("udp", "link, 20 ms each way"))


def start_gateway(env: harness.Env, tag: str, namespace: str | None) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    log = env.work / f"gateway-{tag}.log"
    inside = ["ip", "netns", "exec", namespace] if namespace else []
    child = env.procs.start(
        [
            *inside,
            "taskset",
            "-c",
            env.target_cpu,
            env.horde,
            "target",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--tcp-port",
            "0",
            "--udp-port",
            "0",
        ],
        log,
    )
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:  # bounded
        ports = dict(re.findall(r"gateway on (tcp|udp)://0\.0\.0\.0:(\d+)", log.read_text(errors="replace")))
        if len(ports) == 2:
            time.sleep(0.3)
            return child, {transport: int(port) for transport, port in ports.items()}
        if child.poll() is not None:
            break
        time.sleep(0.05)
    raise harness.BenchError(
        "the gateway did not start", hint=f"its output: {log.read_text(errors='replace')[-500:]!r}"
    )


def plan(env: harness.Env, transport: str, address: str, port: int, vus: int, seconds: int, tag: str) -> Path:
    document = {
        "version": 1,
        "name": f"link-{transport}",
        "graceful_stop_s": 2,
        "target": {"base_url": f"{transport}://{address}:{port}", "connect_timeout_ms": 10000},
        "scenarios": [
            {
                "name": "pingers",
                "steps": [{"type": "ping", "name": "rtt", "reply_seq": "pong (\\d+)", "timeout_ms": 2000}],
                "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": seconds, "vus": vus}]},
            }
        ],
    }
    path = env.work / f"{tag}-{seconds}.json"
    path.write_text(json.dumps(document))
    return path


def one_row(env: harness.Env, transport: str, path: str, vus: int, seconds: int, tag: str) -> dict[str, float]:
    from horde.engine.link import LinkOptions, running

    delay_ms = 20.0 if "20 ms" in path else 0.0
    link_stats: dict[str, float] = {}
    with running(LinkOptions(delay_ms=delay_ms)) if path != "direct" else _nothing() as link:
        gateway, ports = start_gateway(env, tag, link.namespace if link else None)
        address = link.inside_address if link else "127.0.0.1"
        try:
            before = link.stats() if link else {}
            long_run, long_summary = harness.horde_run(
                env,
                [str(plan(env, transport, address, ports[transport], vus, seconds, tag))],
                seconds,
                f"{tag}-long",
                gateway.pid,
            )
            after = link.stats() if link else {}
            short_run, short_summary = harness.horde_run(
                env, [str(plan(env, transport, address, ports[transport], vus, 1, tag))], 1, f"{tag}-short", gateway.pid
            )
        finally:
            env.procs.stop(gateway)
        if link:
            packets = sum(after[f"packets_{way}"] - before[f"packets_{way}"] for way in ("out", "back"))
            # The thread's CPU is sampled every 256 rounds of its loop: close enough over seconds.
            relay_cpu = after["cpu_s"] - before["cpu_s"]
            link_stats = {
                "relay_packets_per_s": packets / max(long_summary["duration_s"], 1e-9),
                "relay_cpu_us_per_packet": 1e6 * relay_cpu / max(packets, 1),
                "relay_cores": relay_cpu / long_run.wall_s,
                "dropped": sum(
                    after[f"{kind}_{way}"] for kind in ("dropped", "write_errors") for way in ("out", "back")
                ),
            }
    messages_long, messages_short = messages_of(long_summary), messages_of(short_summary)
    rtt = long_summary["steps"]["rtt"]
    return {
        "messages_per_s": messages_long / max(long_summary["duration_s"], 1e-9),
        "cpu_us_per_message": 1e6 * (long_run.cpu_s - short_run.cpu_s) / max(messages_long - messages_short, 1),
        "p50_ms": rtt["latency_ms"]["p50"],
        "p99_ms": rtt["latency_ms"]["p99"],
        "errors": rtt["errors"],
        "gateway_cores": long_run.target_cpu_s / long_run.wall_s,
        "others_cores": long_run.others_cores,
        **link_stats,
    }


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def measure(env: harness.Env, reps: int, seconds: int, vus: int, held_vus: int) -> dict[str, Any]:
    results: dict[str, list[dict[str, float]]] = {f"{transport} {path}": [] for transport, path in ROWS}
    for rep in range(reps):
        for transport, path in ROWS:
            row_vus = held_vus if "20 ms" in path else vus
            tag = f"{transport}-{path.split(',')[0]}-{'held' if '20 ms' in path else 'bare'}-{rep}"
            results[f"{transport} {path}"].append(one_row(env, transport, path, row_vus, seconds, tag))
    return {"results": results, "machine": harness.machine(), "load": harness.load()}


def render(result: dict[str, Any], command: str, reps: int, seconds: int, vus: int, held_vus: int) -> str:
    lines = [
        f"`{command}` — {reps} repetitions × {seconds} s, {vus} VUs pinging without pause ({held_vus} through the 20 ms link), "
        f"one worker; machine: {result['machine']['nproc']} CPUs ({result['machine']['model']}), load {result['load']}",
        "",
        "| transport, path | messages/s (both ways) | generator CPU µs/message | RTT p50 ms | RTT p99 ms | errors | packets/s relayed | relay CPU µs/packet | relay cores | relay dropped | gateway cores | others' cores |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, runs in result["results"].items():
        median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        relay = (
            f"{median['relay_packets_per_s']:,.0f} | {median['relay_cpu_us_per_packet']:.2f} | {median['relay_cores']:.2f} | "
            f"{median['dropped']:.0f}"
            if "relay_packets_per_s" in median
            else "- | - | - | -"
        )
        lines.append(
            f"| {name} | {median['messages_per_s']:,.0f} | {median['cpu_us_per_message']:.1f} | {median['p50_ms']:.2f} | "
            f"{median['p99_ms']:.2f} | {median['errors']:.0f} | {relay} | {median['gateway_cores']:.2f} | {median['others_cores']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--vus", type=int, default=50)
    parser.add_argument(
        "--held-vus", type=int, default=1000, help="VUs through the 20 ms link (packets held at once ≈ rate × 20 ms)"
    )
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)

    def body(procs: harness.Processes) -> int:
        if os.geteuid() != 0:
            raise harness.BenchError(
                "bench/link.py needs root: the link builds a network namespace and TUN devices",
                hint="sudo .venv/bin/python bench/link.py",
            )
        horde = harness.find_horde(args.horde)
        gen_cpu, target_cpu, _notes = harness.pick_cpus()
        with tempfile.TemporaryDirectory(prefix="horde-bench-link-") as work:
            env = harness.Env(horde=horde, wrk="", gen_cpu=gen_cpu, target_cpu=target_cpu, work=Path(work), procs=procs)
            result = measure(env, args.reps, args.seconds, args.vus, args.held_vus)
        text = render(result, harness.command_line(__file__, argv), args.reps, args.seconds, args.vus, args.held_vus)
        print(text)
        if not args.no_readme:
            harness.write_readme_block("link", text, section="The emulated link")
        return 0

    return harness.run_main(body)


if __name__ == "__main__":
    sys.exit(main())
