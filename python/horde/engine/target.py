"""Serving the built-in target from the command line (``horde target``).

The target itself is Rust (``crates/horde-target``); this module only starts it in-process
and waits for Ctrl-C. Tests and benchmarks start it the same way, or as ``horde target`` in
its own process so that its CPU is not counted as the generator's.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rich.console import Console

from horde import _engine
from horde.errors import InvalidInput


def start(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    workers: int | None = None,
    service_ms: float | None = None,
    threads: int = 1,
    service_times: str = "fixed",
    tcp_port: int | None = None,
    udp_port: int | None = None,
    tcp_framing: str = "newline",
    kcp_port: int | None = None,
    tls: tuple[str, str] | None = None,
    shared: tuple[float, float] | None = None,
) -> _engine.TargetHandle:
    """Starts the target and returns its handle (``.port``, ``.stop()``). ``service_times``:
    ``fixed`` (every request takes ``service_ms``) or ``exponential`` (that on average: an
    M/M/c queue, whose latency rises smoothly towards capacity). ``tcp_port`` and ``udp_port``
    start the game gateway too (echo, ``ping N`` → ``pong N``, rooms: ``join R``, ``move ...``
    broadcast to the room), its TCP messages framed by ``tcp_framing``: ``newline``, ``length1``,
    ``length2`` or ``length4`` (a big-endian length prefix); ``kcp_port`` serves it over KCP too.
    ``tls`` (certificate PEM, key PEM): HTTPS instead, ALPN offering h2 and http/1.1.
    ``shared`` (serial ms, crosstalk ms): the target joins the resource every target of this
    process shares (see :func:`shared_law` for what it does to their throughput)."""
    try:
        return _engine.start_target(
            host,
            port,
            workers,
            service_ms,
            threads,
            service_times,
            tcp_port,
            udp_port,
            tcp_framing,
            kcp_port,
            tls,
            shared,
        )
    except (OSError, ValueError) as error:
        if "TLS" in str(error):
            hint = (
                "give --tls-cert a PEM certificate (chain) and --tls-key its PEM private key, or --tls alone for a "
                "self-signed one"
            )
        elif "shared." in str(error):
            hint = "give --shared-serial-ms and --crosstalk-ms as milliseconds from 0 to 1000"
        else:
            hint = "pick another --port (0 picks a free one), or stop what already listens there"
        raise InvalidInput(f"the target cannot start: {error}", hint=hint) from error


def shared_law(workers: int, service_ms: float, serial_ms: float, crosstalk_ms: float) -> tuple[float, float, float]:
    """(λ req/s per instance, σ, κ) of built-in targets of ``workers`` × ``service_ms`` sharing
    the process's resource at ``serial_ms`` and ``crosstalk_ms``: under a saturating closed load
    n of them serve X(n) = λn / (1 + σ(n−1) + κn(n−1)). A request admitted while n instances are
    active is charged n·(s + c·(n−1)) ms inside its worker's slot (horde-target's ``shared``
    module derives it), so each worker completes one request per S + s + s(n−1) + c·n(n−1) ms.

    >>> shared_law(4, 9.5, 0.5, 0.05)
    (400.0, 0.05, 0.005)
    """
    slot_ms = service_ms + serial_ms
    return workers * 1000.0 / slot_ms, serial_ms / slot_ms, crosstalk_ms / slot_ms


def tls_material(host: str, certificate: Path | None, key: Path | None) -> tuple[tuple[str, str], Path, bool]:
    """What ``horde target --tls`` serves: the given certificate and key files, or a
    self-signed certificate for localhost, 127.0.0.1, ::1 and ``host`` made now, its PEM written
    to a new temporary folder (the key stays in memory). Returns ((certificate PEM, key PEM),
    the certificate's file, whether it was made here)."""
    if (certificate is None) != (key is None):
        raise InvalidInput(
            "--tls-cert and --tls-key go together", hint="give both PEM files, or neither for a self-signed certificate"
        )
    if certificate is not None and key is not None:
        try:
            return (certificate.read_text(), key.read_text()), certificate, False
        except OSError as error:
            raise InvalidInput(f"--tls-cert/--tls-key: {error}", hint="give readable PEM files") from error
    names = list(dict.fromkeys(["localhost", "127.0.0.1", "::1", host]))
    certificate_pem, key_pem = _engine.self_signed_certificate(names)
    written = Path(tempfile.mkdtemp(prefix="horde-target-tls-")) / "certificate.pem"
    written.write_text(certificate_pem)
    return (certificate_pem, key_pem), written, True


def serve_until_interrupted(
    console: Console, *, tls: bool = False, tls_cert: Path | None = None, tls_key: Path | None = None, **options: object
) -> None:
    material = tls_material(str(options["host"]), tls_cert, tls_key) if tls or tls_cert is not None else None
    handle = start(**options, tls=material[0] if material else None)  # type: ignore[arg-type]
    port = handle.port
    capacity = ""
    if options.get("workers") is not None:
        workers, service_ms = options["workers"], options["service_ms"]
        mean = " on average" if options.get("service_times") == "exponential" else ""
        capacity = f" (capacity: {workers} at once × {service_ms} ms{mean} = {float(workers) * 1000 / float(service_ms):g} req/s max)"  # type: ignore[arg-type]
        shared = options.get("shared")
        if isinstance(shared, tuple):
            serial_ms, crosstalk_ms = float(shared[0]), float(shared[1])
            rate, sigma, kappa = shared_law(int(workers), float(service_ms), serial_ms, crosstalk_ms)  # type: ignore[call-overload,arg-type]
            capacity = (
                f" (shared resource: {serial_ms} ms serial, {crosstalk_ms} ms crosstalk; n such targets in one process "
                f"serve {rate:g}·n / (1 + {sigma:.4g}(n−1) + {kappa:.4g}·n(n−1)) req/s)"
            )
    scheme = "https" if material else "http"
    console.print(
        f"built-in target listening on {scheme}://{options['host']}:{port}{capacity}; Ctrl-C to stop", highlight=False
    )
    if material:
        made = "self-signed, made now" if material[2] else "given"
        console.print(f"TLS certificate ({made}): {material[1]}", highlight=False, soft_wrap=True)
        console.print(
            f"a plan trusts it with target.ca_file: {material[1]} (or target.insecure: true); "
            "ALPN offers h2 and http/1.1",
            highlight=False,
            soft_wrap=True,
        )
    if handle.tcp_port is not None:
        console.print(
            f"gateway on tcp://{options['host']}:{handle.tcp_port} ({options.get('tcp_framing', 'newline')} framing)",
            highlight=False,
        )
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
        if material and material[2]:
            # The certificate made here is good for this target only.
            material[1].unlink(missing_ok=True)
            material[1].parent.rmdir()
        console.print("target stopped")
