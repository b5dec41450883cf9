"""The emulated link end to end (``horde link``): the game gateway of ``horde target`` inside the
link's namespace, ``horde run`` pinging it from this one over TCP and KCP. Known answers: a plain
link answers every ping; 20 ms each way is 40 ms round trip; under 10 % loss each way TCP still
delivers every message, late (the kernel's retransmission timeouts, at least 200 ms), and KCP's
p99 is well under TCP's; SIGTERM (and, for the next link, SIGKILL) leaves no namespace or device
behind; without root the link is refused with exit code 17.

The link needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), /dev/net/tun and iproute2's ``ip``: CI runs
as root; where a link cannot be built these tests skip, saying why (``HORDE_REQUIRE_LINK=1``
makes that an error instead). The refusal tests run anywhere."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import HORDE_BIN, HordeCli
from horde.errors import ExitCode


def _link_missing() -> str | None:
    """Why no link can be built here (None: it can): not root, no TUN, no ``ip``, or a
    container that forbids namespaces; a link is built and torn down to find out."""
    if os.geteuid() != 0:
        return "not root"
    if not Path("/dev/net/tun").exists() or shutil.which("ip") is None:
        return "no /dev/net/tun or no `ip` command (iproute2)"
    from horde.engine.link import LinkOptions, running
    from horde.errors import LinkUnavailable

    try:
        with running(LinkOptions()):
            return None
    except LinkUnavailable as error:
        return error.message


LINK_MISSING = _link_missing()
if LINK_MISSING is not None and os.environ.get("HORDE_REQUIRE_LINK") == "1":
    raise RuntimeError(f"HORDE_REQUIRE_LINK=1 but the link cannot be built here: {LINK_MISSING}")
needs_link = pytest.mark.skipif(
    LINK_MISSING is not None, reason=f"horde link needs root, /dev/net/tun and ip: {LINK_MISSING}"
)

TCP_PORT, KCP_PORT = 7000, 7002


class LinkedGateway:
    """``horde link FLAGS -- horde target --tcp-port --kcp-port`` in its own process."""

    def __init__(self, horde_cli: HordeCli, *flags: str) -> None:
        self.process = horde_cli.popen(
            "link",
            *flags,
            "--",
            str(HORDE_BIN),
            "target",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--tcp-port",
            str(TCP_PORT),
            "--kcp-port",
            str(KCP_PORT),
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        found = re.search(r"namespace (\S+), reach it at ([\d.]+)", first)
        assert found, (first, self.process.stderr.read() if self.process.stderr else "")
        self.namespace, self.address = found.group(1), found.group(2)
        _wait_for(self.address, TCP_PORT)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> tuple[int, str]:
        self.process.send_signal(sig)
        out, _ = self.process.communicate(timeout=30)
        return self.process.returncode, out


def _wait_for(address: str, port: int, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((address, port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on {address}:{port} through the link") from None
            time.sleep(0.05)


@pytest.fixture
def linked() -> Iterator[list[LinkedGateway]]:
    started: list[LinkedGateway] = []
    yield started
    for gateway in started:
        if gateway.process.poll() is None:
            gateway.stop()


def left_behind(namespace: str) -> list[str]:
    """The namespace and the link's devices (``hlPID-N...``) if they still exist."""
    pid_and_number = namespace.removeprefix("horde-link-")
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return ([namespace] if namespace in namespaces.split() else []) + re.findall(rf"\bhl{pid_and_number}[oi]\b", links)


def ping_run(
    horde_cli: HordeCli, transport: str, address: str, *, vus: int, duration_s: int, think_ms: int
) -> dict[str, Any]:
    """A ping loop over ``transport`` against the linked gateway; the ping step's summary."""
    port = TCP_PORT if transport == "tcp" else KCP_PORT
    kcp = ", kcp: {nodelay: true, interval_ms: 10, resend: 2, no_congestion_window: true}" if transport == "kcp" else ""
    plan = horde_cli.tmp_path / f"{transport}.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: link-{transport}
        target: {{base_url: "{transport}://{address}:{port}"{kcp}}}
        scenarios:
          - name: pingers
            steps:
              - {{type: ping, name: rtt, reply_seq: "pong (\\\\d+)", timeout_ms: 10000,
                  think_time: {{type: constant, duration_ms: {think_ms}}}}}
            workload: {{type: closed, start_vus: {vus}, stages: [{{duration_s: {duration_s}, vus: {vus}}}]}}
        graceful_stop_s: 10
        """)
    )
    summary_path = horde_cli.tmp_path / f"{transport}.json"
    result = horde_cli.run("run", str(plan), "--summary-json", str(summary_path), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    step: dict[str, Any] = json.loads(summary_path.read_text())["steps"]["rtt"]
    return step


@needs_link
def test_a_plain_link_answers_every_ping_and_sigterm_leaves_nothing(
    horde_cli: HordeCli, linked: list[LinkedGateway]
) -> None:
    gateway = LinkedGateway(horde_cli)
    linked.append(gateway)
    rtt = ping_run(horde_cli, "tcp", gateway.address, vus=5, duration_s=2, think_ms=10)
    assert rtt["requests"] > 200 and rtt["errors_by_kind"] == {}, rtt
    assert rtt["responses"] == rtt["requests"] == rtt["messages"]["received"]
    code, out = gateway.stop(signal.SIGTERM)
    assert code == ExitCode.TERMINATED, out
    assert "link down: out" in out and "(0 dropped)" in out, out
    assert left_behind(gateway.namespace) == []


@needs_link
def test_twenty_ms_each_way_is_forty_ms_round_trip(horde_cli: HordeCli, linked: list[LinkedGateway]) -> None:
    gateway = LinkedGateway(horde_cli, "--delay-ms", "20")
    linked.append(gateway)
    rtt = ping_run(horde_cli, "tcp", gateway.address, vus=4, duration_s=2, think_ms=5)
    assert rtt["errors_by_kind"] == {}, rtt
    assert 40.0 <= rtt["latency_ms"]["p50"] <= 45.0, rtt["latency_ms"]


@needs_link
def test_under_loss_tcp_delivers_everything_and_kcp_has_the_shorter_tail(
    horde_cli: HordeCli, linked: list[LinkedGateway]
) -> None:
    # The field report's study: 20 ms each way, 10 % random loss each way, a ping every 100 ms.
    gateway = LinkedGateway(horde_cli, "--delay-ms", "20", "--loss-percent", "10", "--seed", "7")
    linked.append(gateway)
    tcp = ping_run(horde_cli, "tcp", gateway.address, vus=30, duration_s=6, think_ms=100)
    kcp = ping_run(horde_cli, "kcp", gateway.address, vus=30, duration_s=6, think_ms=100)
    for rtt in (tcp, kcp):
        # Every ping answered, none lost: both retransmit what the link drops.
        assert rtt["requests"] > 500 and rtt["errors_by_kind"] == {}, rtt
        assert 40.0 <= rtt["latency_ms"]["p50"] <= 46.0, rtt["latency_ms"]
    print(f"TCP: {tcp['requests']} pings {tcp['latency_ms']}\nKCP: {kcp['requests']} pings {kcp['latency_ms']}")
    # TCP's losses wait for a retransmission timeout (Linux: at least 200 ms, doubling); KCP's
    # fast mode resends after ~30 ms.
    assert tcp["latency_ms"]["p99"] >= 240.0, tcp["latency_ms"]
    # The report: KCP never above 300 ms; a loaded machine's timers are given 50 ms more.
    assert kcp["latency_ms"]["p99"] <= 350.0, kcp["latency_ms"]
    assert tcp["latency_ms"]["p99"] >= 2.5 * kcp["latency_ms"]["p99"], (tcp["latency_ms"], kcp["latency_ms"])
    code, out = gateway.stop(signal.SIGINT)
    assert code == ExitCode.INTERRUPTED, out
    dropped = [int(count) for count in re.findall(r"\((\d+) dropped", out)]
    assert len(dropped) == 2 and all(count > 0 for count in dropped), out


@needs_link
def test_a_killed_link_is_cleaned_by_the_next(horde_cli: HordeCli, linked: list[LinkedGateway]) -> None:
    killed = LinkedGateway(horde_cli)
    killed.stop(signal.SIGKILL)
    # The devices went with the process's descriptors; the named namespace stayed, and the
    # target in it died with the link (PR_SET_PDEATHSIG).
    assert left_behind(killed.namespace) == [killed.namespace]
    gateway = LinkedGateway(horde_cli)
    linked.append(gateway)
    assert left_behind(killed.namespace) == []
    gateway.stop()
    assert left_behind(gateway.namespace) == []


def test_without_root_the_link_is_refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from horde.cli import main

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code = main(["link", "--delay-ms", "20", "--", "true"])
    assert code == ExitCode.LINK_UNAVAILABLE == 17
    err = capsys.readouterr().err
    assert "needs root" in err and "hint:" in err and "sudo" in err, err


def test_bad_impairments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from horde.cli import main

    assert main(["link", "--loss-percent", "120", "--", "true"]) == ExitCode.INVALID_INPUT
    assert "--loss-percent" in capsys.readouterr().err
    assert main(["link", "--rate-mbit", "0", "--", "true"]) == ExitCode.INVALID_INPUT
    assert "--rate-mbit" in capsys.readouterr().err


def test_the_netem_probe_answers_without_changing_anything() -> None:
    from horde.engine.link import netem_available

    # This machine's kernel has no netem; elsewhere the probe may say yes. Either way it leaves
    # no qdisc behind: it tried on a throwaway namespace's loopback.
    before = (
        subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True, check=False).stdout
        if shutil.which("tc")
        else ""
    )
    assert netem_available() in (True, False)
    after = (
        subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True, check=False).stdout
        if shutil.which("tc")
        else ""
    )
    assert before == after
