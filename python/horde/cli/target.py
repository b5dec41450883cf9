"""``horde target``: the built-in target, and its game gateway when asked, served until Ctrl-C.
``register(app)`` adds the command to the ``horde`` application."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from horde.errors import ExitCode, InvalidInput
from horde.cli.arguments import HordeCommand
from horde.cli.terminal import stdout


def register(app: typer.Typer) -> None:
    """Add ``target`` to ``app``."""
    app.command(
        "target",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde target --port 8080\n\n  horde target --workers 4 --service-ms 10 --service-times exponential\n\n  horde target --tls --port 8443",
    )(target)


def target(
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="port to listen on (0: any free port)")] = 8080,
    workers: Annotated[Optional[int], typer.Option("--workers", help="capacity model: requests served at once")] = None,
    service_ms: Annotated[
        Optional[float], typer.Option("--service-ms", help="capacity model: service time of each request, ms")
    ] = None,
    threads: Annotated[int, typer.Option("--threads", help="the target's own threads")] = 1,
    service_times: Annotated[
        str,
        typer.Option(
            "--service-times",
            help="capacity model: 'fixed' (each request takes --service-ms) or 'exponential' (that on average: latency rises smoothly, an M/M/c queue)",
        ),
    ] = "fixed",
    tcp_port: Annotated[
        Optional[int],
        typer.Option(
            "--tcp-port",
            help="game gateway on this TCP port too (0: any free port): echo, 'ping N' -> 'pong N', rooms ('join R', 'move ...' to every player of R)",
        ),
    ] = None,
    udp_port: Annotated[
        Optional[int],
        typer.Option("--udp-port", help="the game gateway on this UDP port too (a datagram is a message)"),
    ] = None,
    kcp_port: Annotated[
        Optional[int],
        typer.Option("--kcp-port", help="the game gateway over KCP on this UDP port too (ikcp's fast mode)"),
    ] = None,
    tls: Annotated[
        bool,
        typer.Option(
            "--tls",
            help="serve HTTPS (ALPN: h2 and http/1.1) with a self-signed certificate made at start, whose PEM file is printed: a plan trusts it with target.ca_file",
        ),
    ] = False,
    tls_cert: Annotated[
        Optional[Path],
        typer.Option(
            "--tls-cert",
            help="serve HTTPS with this PEM certificate (chain) instead of a self-signed one; with --tls-key",
        ),
    ] = None,
    tls_key: Annotated[Optional[Path], typer.Option("--tls-key", help="the PEM private key of --tls-cert")] = None,
    tcp_framing: Annotated[
        str,
        typer.Option(
            "--tcp-framing",
            help="the gateway's TCP messages: 'newline', or a big-endian length prefix 'length1', 'length2', 'length4'",
        ),
    ] = "newline",
    shared_serial_ms: Annotated[
        Optional[float],
        typer.Option(
            "--shared-serial-ms",
            help="share a resource with the other targets of this process (horde scale --instances): each request holds it this long, ms (contention σ = this / (service + this))",
        ),
    ] = None,
    crosstalk_ms: Annotated[
        Optional[float],
        typer.Option(
            "--crosstalk-ms",
            help="the shared resource: each request holds it this much longer per other active target, ms (coherency κ = this / (service + serial))",
        ),
    ] = None,
) -> int:
    """Serve the built-in target until Ctrl-C, over HTTPS with --tls; with --tcp-port, --udp-port
    or --kcp-port, the game gateway too. Its routes, on one port:

    Any method: / (a short body), /delay/{ms} (answered ms later), /status/{code} (that status,
    200 to 599), /bytes/{n} (n zero bytes, up to 16 MiB), /stall/{ms} (every request arriving in
    the next ms waits until then; answered at once).

    The game, in JSON: POST /game/register, POST /game/login (a token and a session cookie); then,
    as that player (Authorization: Bearer TOKEN, or the cookie), GET /game/city, /game/buildings,
    /game/resources and POST /game/construct, /game/collect.

    WebSockets: /ws/echo (each message back), /ws/delay/{ms} (back ms later), /ws/rooms/{room}
    (each message to every member of the room).
    """
    from horde.engine.target import serve_until_interrupted

    if (workers is None) != (service_ms is None):
        raise InvalidInput(
            "--workers and --service-ms go together",
            hint="e.g. --workers 8 --service-ms 20 caps the target at 400 req/s",
        )
    if service_times not in ("fixed", "exponential"):
        raise InvalidInput(
            f"--service-times: '{service_times}' is not a distribution", hint="give fixed or exponential"
        )
    if service_times != "fixed" and workers is None:
        raise InvalidInput("--service-times shapes the capacity model", hint="give --workers and --service-ms too")
    shared = shared_costs(
        shared_serial_ms, crosstalk_ms, capacity=workers is not None, flags=("--workers", "--service-ms")
    )
    if tcp_framing not in ("newline", "length1", "length2", "length4"):
        raise InvalidInput(
            f"--tcp-framing: '{tcp_framing}' is not a framing", hint="give newline, length1, length2 or length4"
        )
    serve_until_interrupted(
        stdout,
        host=host,
        port=port,
        workers=workers,
        service_ms=service_ms,
        threads=threads,
        service_times=service_times,
        tcp_port=tcp_port,
        udp_port=udp_port,
        tcp_framing=tcp_framing,
        kcp_port=kcp_port,
        tls=tls,
        tls_cert=tls_cert,
        tls_key=tls_key,
        shared=shared,
    )
    return ExitCode.OK


def shared_costs(
    serial_ms: float | None, crosstalk_ms: float | None, *, capacity: bool, flags: tuple[str, str]
) -> tuple[float, float] | None:
    """(serial ms, crosstalk ms) of ``--shared-serial-ms`` and ``--crosstalk-ms`` (either alone
    leaves the other 0), or None without them. Both shape the capacity model's slot, so they need
    it (``flags``: that command's names for it)."""
    if serial_ms is None and crosstalk_ms is None:
        return None
    if not capacity:
        raise InvalidInput(
            "the shared resource's costs are served inside the capacity model's slot",
            hint=f"give {flags[0]} and {flags[1]} too, e.g. {flags[0]} 4 {flags[1]} 9.5",
        )
    return serial_ms or 0.0, crosstalk_ms or 0.0
