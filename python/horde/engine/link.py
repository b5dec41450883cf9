"""The emulated link (``horde link``): a network namespace reached through two TUN devices whose
IP packets the engine's relay (``crates/horde-link``) delays, drops, duplicates and reorders in
user space, each way, so that the kernel's own TCP (and any protocol) sees a real impaired
network. The system under test runs inside the namespace; the generator, in this one, reaches it
at the namespace's address.

Needs root: creating the namespace, the TUN devices and their addresses takes CAP_NET_ADMIN and
CAP_SYS_ADMIN. Everything is torn down when the link stops (Ctrl-C, SIGTERM, SIGHUP, the command's
end): the relay stops, the devices vanish with their descriptors, what still runs in the namespace
is killed and the namespace deleted. A link killed outright (SIGKILL) leaves its namespace, which
the next link deletes.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from rich.console import Console

from horde import _engine
from horde.errors import ExitCode, InvalidInput, LinkUnavailable

#: What to do when not allowed.
ROOT_HINT = (
    "the link needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN: a network namespace, TUN devices, their addresses): "
    "run it with sudo, or impair UDP and KCP with the scenario's `network:` instead, which needs no privilege"
)

#: The signals that stop a link, and the exit code each gives (128 + the signal, as a shell says).
STOP_SIGNALS = {
    signal.SIGINT: ExitCode.INTERRUPTED,
    signal.SIGTERM: ExitCode.TERMINATED,
    signal.SIGHUP: ExitCode.HUNG_UP,
}

#: How long the command has to end after SIGTERM before it is killed.
COMMAND_GRACE_S = 5.0


@dataclass(frozen=True)
class LinkOptions:
    """The impairment, the same each way (each way its own draws from ``seed``)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_percent: float = 0.0
    duplicate_percent: float = 0.0
    reorder_percent: float = 0.0
    seed: int = 1
    #: A bottleneck each way: packets leave one after another at this rate (None: no limit)...
    rate_mbit: float | None = None
    #: ... from a drop-tail queue holding at most this much backlog.
    queue_ms: float = 100.0

    def check(self) -> None:
        for name in ("delay_ms", "jitter_ms"):
            value = getattr(self, name)
            if not 0 <= value <= 60_000:
                raise InvalidInput(f"--{name.replace('_', '-')}: {value:g} is out of range", hint="give 0 to 60000 ms")
        for name in ("loss_percent", "duplicate_percent", "reorder_percent"):
            value = getattr(self, name)
            if not 0 <= value <= 100:
                raise InvalidInput(
                    f"--{name.replace('_', '-')}: {value:g} is not a share", hint="give 0 to 100 (percent)"
                )
        if self.rate_mbit is not None and not 0.001 <= self.rate_mbit <= 100_000:
            raise InvalidInput(f"--rate-mbit: {self.rate_mbit:g} is out of range", hint="give 0.001 to 100000 Mbit/s")
        if not 0 <= self.queue_ms <= 60_000:
            raise InvalidInput(f"--queue-ms: {self.queue_ms:g} is out of range", hint="give 0 to 60000 ms")
        if not 0 <= self.seed < 2**64:
            raise InvalidInput(f"--seed: {self.seed} is out of range", hint="give 0 to 2^64 - 1")

    def describe(self) -> str:
        parts = [f"{self.delay_ms:g} ms" + (f" ± {self.jitter_ms:g}" if self.jitter_ms else "") + " each way"]
        for name, value in (
            ("loss", self.loss_percent),
            ("duplicates", self.duplicate_percent),
            ("reordered", self.reorder_percent),
        ):
            if value:
                parts.append(f"{value:g} % {name}")
        if self.rate_mbit is not None:
            parts.append(f"{self.rate_mbit:g} Mbit/s each way (queue {self.queue_ms:g} ms)")
        return ", ".join(parts) + f", seed {self.seed}"


def start(options: LinkOptions) -> _engine.LinkHandle:
    """Builds the link and starts its relay; :class:`LinkUnavailable` (exit code 17) when it
    cannot, with what to do."""
    options.check()
    if os.geteuid() != 0:
        raise LinkUnavailable("horde link needs root", hint=ROOT_HINT)
    if shutil.which("ip") is None:
        raise LinkUnavailable("the `ip` command (iproute2) is not installed", hint="install iproute2")
    try:
        return _engine.start_link(
            options.delay_ms,
            options.jitter_ms,
            options.loss_percent,
            options.duplicate_percent,
            options.reorder_percent,
            options.seed,
            options.rate_mbit,
            options.queue_ms,
        )
    except PermissionError as error:
        raise LinkUnavailable(f"the link cannot be built: {error}", hint=ROOT_HINT) from error
    except FileNotFoundError as error:
        raise LinkUnavailable(
            f"the link cannot be built: {error}", hint="the link needs /dev/net/tun (modprobe tun) and iproute2's `ip`"
        ) from error
    except OSError as error:
        raise LinkUnavailable(f"the link cannot be built: {error}") from error


@contextmanager
def running(options: LinkOptions) -> Iterator[_engine.LinkHandle]:
    """The link for the block's length (for tests and benchmarks)."""
    handle = start(options)
    try:
        yield handle
    finally:
        handle.stop()


def netem_available() -> bool:
    """Whether this kernel has netem (``tc qdisc ... netem``), which could impair a real device
    instead; a probe that changes nothing (a netem qdisc on a throwaway namespace's loopback)."""
    if os.geteuid() != 0 or shutil.which("tc") is None or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
        capture_output=True,
        timeout=10,
        check=False,
    )
    return probe.returncode == 0


class _StopSignals:
    """Remembers the first stop signal instead of raising wherever the program is."""

    def __init__(self) -> None:
        self.first: signal.Signals | None = None
        self.event = threading.Event()
        self._previous: dict[signal.Signals, object] = {}

    def __enter__(self) -> _StopSignals:
        for sig in STOP_SIGNALS:
            if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                continue
            self._previous[sig] = signal.signal(sig, self._note)
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        if self.first is None:
            self.first = signal.Signals(signum)
        self.event.set()

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)  # type: ignore[arg-type]


def _die_with_the_link() -> None:
    """In the command's child, before exec: its own session (signals reach its whole group), and
    SIGKILL when the link's process dies, even killed outright (``PR_SET_PDEATHSIG``)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stop_command(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the command's process group, SIGKILL after the grace period."""
    for sig, wait_s in ((signal.SIGTERM, COMMAND_GRACE_S), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue


def serve(console: Console, options: LinkOptions, command: Sequence[str]) -> int:
    """Builds the link, runs ``command`` inside its namespace (or, without one, holds the link)
    until it ends or a stop signal comes, tears everything down and says what the link did.
    Returns the command's exit code, or 128 + the stop signal's number; without a command, 0."""
    with _StopSignals() as signals:
        handle = start(options)
        try:
            console.print(
                f"link up: namespace {handle.namespace}, reach it at {handle.inside_address} "
                f"(this side {handle.outside_address}); {options.describe()}",
                highlight=False,
            )
            if netem_available():
                console.print(
                    "note: this kernel has netem too: `tc qdisc add dev DEVICE root netem delay 20ms loss 10%` "
                    "impairs a real device, traffic leaving the machine included",
                    highlight=False,
                )
            if not command:
                console.print(
                    f"run commands inside with: ip netns exec {handle.namespace} COMMAND; Ctrl-C to stop",
                    highlight=False,
                )
                while not signals.event.wait(0.5):
                    if not handle.running:
                        raise LinkUnavailable("the link's relay stopped (a device failed)")
                return ExitCode.OK  # without a command, a stop signal is how a link ends
            env = {
                **os.environ,
                "HORDE_LINK_NAMESPACE": handle.namespace,
                "HORDE_LINK_ADDRESS": handle.inside_address,
                "HORDE_LINK_PEER": handle.outside_address,
            }
            try:
                process = subprocess.Popen(
                    ["ip", "netns", "exec", handle.namespace, *command],
                    env=env,
                    start_new_session=True,
                    preexec_fn=_die_with_the_link,
                )
            except OSError as error:
                raise InvalidInput(f"cannot run {command[0]}: {error}") from error
            while process.poll() is None and not signals.event.is_set():
                signals.event.wait(0.2)
                if not handle.running:
                    _stop_command(process)
                    raise LinkUnavailable("the link's relay stopped (a device failed): the command was stopped with it")
            if signals.first is not None:
                _stop_command(process)
                return int(STOP_SIGNALS[signals.first])
            return process.returncode if process.returncode >= 0 else 128 - process.returncode
        finally:
            started = time.monotonic()
            try:
                handle.stop()
            except OSError as error:  # torn down all the same; the relay had failed on its own
                console.print(f"the link's relay had failed: {error}", highlight=False)
            stats = handle.stats()
            console.print(_stats_line(stats) + f"; torn down in {time.monotonic() - started:.2f} s", highlight=False)


def _stats_line(stats: dict[str, float]) -> str:
    def way(name: str) -> str:
        packets, dropped = int(stats[f"packets_{name}"]), int(stats[f"dropped_{name}"])
        duplicated, overflowed = int(stats[f"duplicated_{name}"]), int(stats[f"overflowed_{name}"])
        extra = (f", {duplicated} duplicated" if duplicated else "") + (
            f", {overflowed} over the full queue" if overflowed else ""
        )
        return f"{name} {packets} packets ({dropped} dropped{extra})"

    return f"link down: {way('out')}, {way('back')}; relay CPU {stats['cpu_s']:.2f} s"
