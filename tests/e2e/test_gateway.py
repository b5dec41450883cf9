"""Game gateways end to end: ``horde target --tcp-port --udp-port`` in its own process, a YAML
plan of message steps run by ``horde run`` over an impaired UDP network (known loss and
delay), the summary's and the console's message figures, ``horde show`` reading them back
from the store, and a bad message plan located (exit 2)."""

from __future__ import annotations

import json
import math
import re
import socket
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import HordeCli, free_tcp_port, wait_for_port
from test_report import page_figures
from horde.errors import ExitCode
from report_pages import readable


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def gateway_ports(target_process: Callable[..., int]) -> tuple[int, int]:
    tcp_port, udp_port = free_tcp_port(), free_udp_port()
    target_process("--tcp-port", str(tcp_port), "--udp-port", str(udp_port))
    wait_for_port(tcp_port)
    return tcp_port, udp_port


def write(directory: Path, text: str) -> Path:
    path = directory / "gateway.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_impaired_udp_pings_by_the_cli(horde_cli: HordeCli, target_process: Callable[..., int]) -> None:
    _, udp_port = gateway_ports(target_process)
    plan = write(
        horde_cli.tmp_path,
        f"""\
        version: 1
        name: gateway
        target: {{base_url: "udp://127.0.0.1:{udp_port}"}}
        scenarios:
          - name: robots
            network: {{delay_ms: 20, loss_percent: 10, seed: 7}}
            steps:
              - {{type: ping, name: rtt, reply_seq: "pong (\\\\d+)", timeout_ms: 150,
                  think_time: {{type: constant, duration_ms: 5}}}}
            workload: {{type: closed, start_vus: 10, stages: [{{duration_s: 3, vus: 10}}]}}
        graceful_stop_s: 1
        """,
    )
    summary_path = horde_cli.tmp_path / "summary.json"
    result = horde_cli.run("run", str(plan), "--summary-json", str(summary_path), timeout=60)
    assert "Traceback" not in result.stderr, result.stderr
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    rtt = summary["steps"]["rtt"]
    pings = rtt["requests"]
    lost = rtt["errors_by_kind"].get("lost", 0)
    assert pings > 200, rtt
    assert set(rtt["errors_by_kind"]) <= {"lost"}, rtt["errors_by_kind"]
    # Answered when neither way lost it: 0.9 * 0.9; 5 standard deviations either way.
    expected, sd = pings * 0.19, math.sqrt(pings * 0.19 * 0.81)
    assert abs(lost - expected) <= 5 * sd, (lost, pings)
    # 20 ms each way, plus loopback and timer granularity.
    assert 40.0 <= rtt["latency_ms"]["p50"] <= 45.0, rtt["latency_ms"]
    assert rtt["responses"] == pings - lost, "lost pings are counted, never timed"
    messages = rtt["messages"]
    assert messages["sent"] == pings
    assert messages["received"] == pings - lost
    assert 0 < messages["datagrams_sent"] < messages["sent"], "10 % of the pings never left"
    assert messages["sent_per_s"] > 0
    assert "messages:" in result.stdout and "rtt: sent" in result.stdout, result.stdout
    assert "lost" in result.stdout
    # The stored run gives the same figures back.
    shown = horde_cli.run("show", summary["run_id"], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["steps"]["rtt"]["messages"] == messages
    # And so does the HTML report, in its messages table.
    report = horde_cli.tmp_path / "report.html"
    written = horde_cli.run("report", summary["run_id"], "--output", str(report))
    assert written.returncode == 0, written.stderr
    html = readable(report.read_text())
    assert 'id="section-messages"' in html and 'data-step="rtt"' in html
    assert f"<td>{messages['datagrams_sent']}</td>" in html
    # Its message charts beside the HTTP ones, on the run's time axis, from the stored seconds.
    figures = page_figures(html)
    traffic, trouble, rtt_chart = figures["chart-messages"], figures["chart-message-losses"], figures["chart-rtt"]
    assert list(figures).index("chart-messages") == list(figures).index("chart-distribution") + 1
    assert all(chart["layout"]["meta"] == "time-axis" for chart in (traffic, trouble, rtt_chart))
    by_name = {trace["name"]: trace for chart in (traffic, trouble, rtt_chart) for trace in chart["data"]}
    assert list(by_name) == [
        "messages sent/s",
        "messages received/s",
        "datagrams out/s",
        "datagrams in/s",
        "lost replies/s",
        "late replies/s",
        "KCP resends/s",
        "p50",
        "p90",
        "p95",
        "p99",
        "max",
    ]
    # The full seconds' rates add up to the summary's counts, less its short final interval at most.
    seconds = len(by_name["messages sent/s"]["x"])
    assert seconds >= 3 and by_name["messages sent/s"]["x"] == by_name["lost replies/s"]["x"]
    for name, count in (
        ("messages sent/s", messages["sent"]),
        ("datagrams out/s", messages["datagrams_sent"]),
        ("lost replies/s", lost),
    ):
        assert 0.8 * count <= sum(by_name[name]["y"]) <= count * 1.01, (name, by_name[name]["y"], count)
    assert min(by_name["lost replies/s"]["y"]) > 0 and max(by_name["KCP resends/s"]["y"]) == 0
    # 20 ms each way: every second's median round trip is 40 ms and a little.
    assert all(40.0 <= p50 <= 46.0 for p50 in by_name["p50"]["y"]), by_name["p50"]["y"]
    # (A plain HTTP run draws none of them: tests/test_report.py holds its list.)


def test_a_bad_message_plan_is_located(horde_cli: HordeCli) -> None:
    plan = write(
        horde_cli.tmp_path,
        """\
        version: 1
        target: {base_url: "tcp://127.0.0.1:7000", framing: {type: length, bytes: 3}}
        scenarios:
          - name: robots
            network: {loss_percent: 10}
            steps:
              - {type: ping, name: rtt, text: "ping"}
              - {type: send, name: move}
            workload: {type: closed, stages: [{duration_s: 1, vus: 1}]}
        """,
    )
    result = horde_cli.run("validate", str(plan))
    assert result.returncode == ExitCode.INVALID_INPUT, (result.stdout, result.stderr)
    output = result.stdout + result.stderr
    for located in (
        "target.framing.bytes",
        "scenarios[0].steps[0]",
        "the ping must carry its number",
        "scenarios[0].steps[1]",
        "needs exactly one of 'text', 'hex', 'base64' or 'json'",
    ):
        assert located in output, output


def _peer_run(horde_cli: HordeCli, base_url: str) -> tuple[int, str, dict[str, Any]]:
    """A second of a VU saying hello and pinging ``base_url`` by the CLI: its exit code, its
    output, its summary."""
    plan = write(
        horde_cli.tmp_path,
        f"""\
        version: 1
        name: unanswered
        target: {{base_url: "{base_url}"}}
        scenarios:
          - name: robots
            steps:
              - {{type: send, name: hello, text: "hello {{{{ seq }}}}"}}
              - {{type: ping, name: rtt, reply_seq: "pong (\\\\d+)", timeout_ms: 200}}
            workload: {{type: closed, start_vus: 1, stages: [{{duration_s: 1, vus: 1}}]}}
        graceful_stop_s: 1
        """,
    )
    summary_path = horde_cli.tmp_path / "summary.json"
    result = horde_cli.run("run", str(plan), "--summary-json", str(summary_path), timeout=60)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout, json.loads(summary_path.read_text())


def test_closed_udp_and_kcp_ports_end_the_run_as_a_dead_target(horde_cli: HordeCli) -> None:
    """Issue 36: the kernel's ICMP port unreachable is a refusal, not loss: the run that got not
    one message back ends as a dead HTTP target does (exit 7), saying why."""
    for scheme in ("udp", "kcp"):
        base_url = f"{scheme}://127.0.0.1:{free_udp_port()}"
        code, out, summary = _peer_run(horde_cli, base_url)
        assert code == ExitCode.NO_CONNECTION, (scheme, out)
        assert set(summary["errors_by_kind"]) == {"refused"}, (scheme, summary["errors_by_kind"])
        assert summary["messages"]["received"] == 0
        said = next(line for line in out.splitlines() if line.startswith("!!"))
        assert said.startswith("!! the target never answered: ") and "not one came back (refused " in said, said
        assert f"{base_url} is closed: an ICMP port unreachable came back" in said, said


def test_a_silent_tcp_peer_ends_the_run_as_a_dead_target(horde_cli: HordeCli) -> None:
    """A peer that accepts and never answers: its pings time out (TCP loses nothing: late, not
    lost), and the run ends with exit 7, saying nothing came from it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # the kernel accepts; nothing ever reads or answers
        base_url = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        code, out, summary = _peer_run(horde_cli, base_url)
    assert code == ExitCode.NO_CONNECTION, out
    assert set(summary["errors_by_kind"]) == {"timeout"}, summary["errors_by_kind"]
    assert summary["connections_opened"] == 1 and summary["messages"]["received"] == 0
    said = next(line for line in out.splitlines() if line.startswith("!!"))
    assert said.startswith("!! the target never answered: ") and f"nothing has come from {base_url}" in said, said


def test_capacity_in_players_counts_messages(horde_cli: HordeCli, target_process: Callable[..., int]) -> None:
    tcp_port, _ = gateway_ports(target_process)
    plan = write(
        horde_cli.tmp_path,
        f"""\
        version: 1
        target: {{base_url: "tcp://127.0.0.1:{tcp_port}"}}
        scenarios:
          - name: robots
            steps:
              - {{type: ping, name: rtt, reply_seq: "pong (\\\\d+)", think_time: {{type: constant, duration_ms: 10}}}}
            workload: {{type: closed, start_vus: 4, stages: [{{duration_s: 2, vus: 4}}]}}
        """,
    )
    summary_path = horde_cli.tmp_path / "summary.json"
    result = horde_cli.run("run", str(plan), "--per-user-rate", "43", "--summary-json", str(summary_path), timeout=60)
    assert result.returncode == 0, result.stderr
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    capacity = summary["capacity"]
    messages = summary["messages"]
    # The maximum is the run's messages a second, both ways; players = that / 43 (the report's arithmetic).
    assert capacity["rate_unit"] == "messages/s"
    assert capacity["max_messages_per_s"] == round(messages["sent_per_s"] + messages["received_per_s"], 3)
    assert capacity["users_supported"] == math.floor(capacity["max_messages_per_s"] / 43)
    assert "users supported at 43 messages/s each" in result.stdout, result.stdout


def test_target_response_time_on_a_gateway_says_when_t_is_out_of_reach(
    horde_cli: HordeCli, target_process: Callable[..., int]
) -> None:
    # Pings over loopback to the built-in gateway answer in well under a millisecond at any of
    # the allowed levels: the steering climbs to the plan's max and says T was not reached
    # there (never "held"), with the messages a second it measured at the highest level.
    tcp_port, _ = gateway_ports(target_process)
    plan = write(
        horde_cli.tmp_path,
        f"""\
        version: 1
        target: {{base_url: "tcp://127.0.0.1:{tcp_port}"}}
        scenarios:
          - name: robots
            steps:
              - {{type: ping, name: rtt, reply_seq: "pong (\\\\d+)", think_time: {{type: constant, duration_ms: 10}}}}
            workload: {{type: closed, start_vus: 1, stages: [{{duration_s: 1, vus: 1}}]}}
        steer: {{type: target_response_time, target_ms: 20, max: 12, duration_s: 25}}
        """,
    )
    summary_path = horde_cli.tmp_path / "summary.json"
    result = horde_cli.run("run", str(plan), "--summary-json", str(summary_path), timeout=90)
    assert result.returncode == 0, result.stderr
    capacity = json.loads(summary_path.read_text())["capacity"]
    assert capacity["outcome"] == "not_reached" and capacity["limit"] == "max", capacity["sentence"]
    assert capacity["highest_under_target"]["level"] == 12 and capacity["max_rps"] is None
    assert "T not reached" in result.stdout and "max sustainable" not in result.stdout


def test_a_websocket_chat_by_the_cli(horde_cli: HordeCli, target_process: Callable[..., int]) -> None:
    # The WebSocket example against `horde target`: 4 chatters in 2 rooms (each message to both
    # members of its room), 4 pingers on /ws/delay/10 (each answer 10 ms after its ping).
    port = target_process()
    plan = Path(__file__).resolve().parents[2] / "examples" / "gateway" / "websocket.yaml"
    summary_path = horde_cli.tmp_path / "summary.json"
    result = horde_cli.run(
        "run",
        str(plan),
        "--base-url",
        f"ws://127.0.0.1:{port}",
        "-p",
        "users=4",
        "-p",
        "rooms=2",
        "-p",
        "duration=2",
        "--summary-json",
        str(summary_path),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:] + result.stdout[-2000:]
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    steps = summary["steps"]
    assert summary["errors"] == 0, summary["errors_by_kind"]
    assert steps["login"]["requests"] == 4 and steps["join"]["requests"] == 4
    said = steps["say"]["messages"]
    # 5 a second each for 2 s; every one comes back twice (both members), the last few perhaps
    # still on their way when the run ends.
    assert said["sent"] >= 4 * 5 * 2 - 4, said
    assert 2 * said["sent"] - 8 <= said["received"] <= 2 * said["sent"], said
    rtt = steps["rtt"]
    assert rtt["requests"] > 40 and rtt["messages"]["received"] == rtt["requests"], rtt
    assert 10.0 <= rtt["latency_ms"]["p50"] <= 14.0, rtt["latency_ms"]
    assert "messages:" in result.stdout and "say: sent" in result.stdout, result.stdout


def test_try_shows_what_message_steps_sent_and_received(
    horde_cli: HordeCli, target_process: Callable[..., int]
) -> None:
    # One VU of each scenario of the WebSocket example: the upgrade each connection made, the
    # chatter's messages out and the room's back (8 each way kept, the rest counted), the ping
    # and its answer; the login's token redacted in the upgrade as everywhere.
    port = target_process()
    plan = Path(__file__).resolve().parents[2] / "examples" / "gateway" / "websocket.yaml"
    done = horde_cli.run("try", str(plan), "--base-url", f"ws://127.0.0.1:{port}", "-p", "frames=20", timeout=60)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    out = done.stdout
    join = out[out.index("── chatters › join") : out.index("── chatters › say")]
    assert re.search(r"^> \(WebSocket upgrade at 127\.0\.0\.1:\d+/ws/rooms/room-0\)$", join, re.M), join
    assert "(not sent)" not in join and "(no response)" not in out
    say = out[out.index("── chatters › say") : out.index("scenario pingers")]
    sent = re.findall(r"^> say 0 (\d+)$", say, re.M)
    assert sent == [str(n) for n in range(1, 9)], say
    assert re.search(r"^> … and \d+ more$", say, re.M) and re.findall(r"^< say 0 (\d+)$", say, re.M)[:2] == [
        "1",
        "2",
    ], say
    rtt = out[out.index("── pingers › rtt") :]
    assert re.search(r"^> ping \d+$", rtt, re.M) and re.search(r"^< ping \d+$", rtt, re.M), rtt
    assert re.search(r"^  ok in \d+\.\d+ ms$", rtt, re.M), rtt
