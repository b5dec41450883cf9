"""Serving the built-in target from the command line (``horde target``).

The target itself is Rust (``crates/horde-target``); this module only starts it in-process
and waits for Ctrl-C. Tests and benchmarks start it the same way, or as ``horde target`` in
its own process so that its CPU is not counted as the generator's.
"""

from __future__ import annotations

import time

from rich.console import Console

from horde import _engine
from horde.errors import InvalidInput


def start(*, host: str = "127.0.0.1", port: int = 0, workers: int | None = None, service_ms: float | None = None, threads: int = 1,
          service_times: str = "fixed", tcp_port: int | None = None, udp_port: int | None = None,
          tcp_framing: str = "newline", kcp_port: int | None = None) -> _engine.TargetHandle:
    """Starts the target and returns its handle (``.port``, ``.stop()``). ``service_times``:
    ``fixed`` (every request takes ``service_ms``) or ``exponential`` (that on average: an
    M/M/c queue, whose latency rises smoothly towards capacity). ``tcp_port`` and ``udp_port``
    start the game gateway too (echo, ``ping N`` → ``pong N``, rooms: ``join R``, ``move ...``
    broadcast to the room), its TCP messages framed by ``tcp_framing``: ``newline``, ``length1``,
    ``length2`` or ``length4`` (a big-endian length prefix); ``kcp_port`` serves it over KCP too."""
    try:
        return _engine.start_target(host, port, workers, service_ms, threads, service_times, tcp_port, udp_port, tcp_framing, kcp_port)
    except (OSError, ValueError) as error:
        raise InvalidInput(
            f"the target cannot start: {error}",
            hint="pick another --port (0 picks a free one), or stop what already listens there",
        ) from error


def serve_until_interrupted(console: Console, **options: object) -> None:
    handle = start(**options)  # type: ignore[arg-type]
    port = handle.port
    capacity = ""
    if options.get("workers") is not None:
        workers, service_ms = options["workers"], options["service_ms"]
        mean = " on average" if options.get("service_times") == "exponential" else ""
        capacity = f" (capacity: {workers} at once × {service_ms} ms{mean} = {float(workers) * 1000 / float(service_ms):g} req/s max)"  # type: ignore[arg-type]
    console.print(f"built-in target listening on http://{options['host']}:{port}{capacity}; Ctrl-C to stop", highlight=False)
    if handle.tcp_port is not None:
        console.print(f"gateway on tcp://{options['host']}:{handle.tcp_port} ({options.get('tcp_framing', 'newline')} framing)", highlight=False)
    if handle.udp_port is not None:
        console.print(f"gateway on udp://{options['host']}:{handle.udp_port}", highlight=False)
    if handle.kcp_port is not None:
        console.print(f"gateway on kcp://{options['host']}:{handle.kcp_port}", highlight=False)
    try:
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        handle.stop()
        console.print("target stopped")
