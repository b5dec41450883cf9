"""Message plans (tcp://, udp://, kcp://) on both sides of the contract: pydantic and the engine
accept the same plans, the gateway examples included, and both refuse the same mistakes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import horde
from horde import _engine, check, closed, extract, message, scenario, stage
from horde.errors import PlanInvalid
from horde.plan import plan_from_dict, plan_to_json
from horde.plan.loader import load_plan

GATEWAY = Path(__file__).resolve().parent.parent / "examples" / "gateway"

ROBOTS: dict[str, Any] = {
    "version": 1,
    "target": {
        "base_url": "tcp://127.0.0.1:7000",
        "framing": {"type": "length", "bytes": 4, "endian": "little", "adjust": 4},
    },
    "scenarios": [
        {
            "name": "robots",
            "setup": [{"type": "connect", "name": "connect"}],
            "steps": [
                {"type": "send", "name": "join", "json": {"room": "r{{ vu % 3 }}", "seq": "{{ seq }}"}},
                {
                    "type": "receive",
                    "name": "joined",
                    "json_path": "$.room",
                    "timeout_ms": 500,
                    "extract": [{"var": "room", "from": "json", "expression": "$.room"}],
                    "checks": [{"type": "json", "expression": "$.ok", "equals": True}],
                },
                {"type": "stream", "name": "move", "base64": "bW92ZQ==", "every_ms": 50, "duration_ms": 1000},
                {"type": "ping", "name": "rtt", "text": "ping {{ seq }} {{ room }}", "reply_seq": "pong (\\d+)"},
                {"type": "close"},
            ],
            "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 2}]},
        }
    ],
}


def with_target(plan: dict[str, Any], **target: Any) -> dict[str, Any]:
    changed = copy.deepcopy(plan)
    changed["target"] = target
    return changed


@pytest.mark.parametrize("name", ["kcp.yaml", "udp.yaml", "websocket.yaml"])
def test_the_gateway_examples_pass_both_sides(name: str) -> None:
    assert _engine.validate_plan(plan_to_json(load_plan(GATEWAY / name))) == []


@pytest.mark.parametrize(
    "target",
    [
        ROBOTS["target"],
        {"base_url": "udp://127.0.0.1:7000"},
        {
            "base_url": "kcp://127.0.0.1:7000",
            "kcp": {"nodelay": True, "interval_ms": 10, "resend": 2, "no_congestion_window": True},
        },
    ],
)
def test_message_plans_pass_both_sides(target: dict[str, Any]) -> None:
    plan = with_target(ROBOTS, **target)
    if not target["base_url"].startswith("udp"):
        plan["scenarios"][0]["network"] = None
    canonical = plan_to_json(plan_from_dict(plan))
    assert _engine.validate_plan(canonical) == []


def test_the_impaired_network_passes_both_sides_for_udp_and_kcp_only() -> None:
    for scheme in ("udp", "kcp"):
        plan = with_target(ROBOTS, base_url=f"{scheme}://127.0.0.1:7000")
        plan["scenarios"][0]["network"] = {
            "delay_ms": 20,
            "jitter_ms": 5,
            "loss_percent": 10,
            "duplicate_percent": 1,
            "reorder_percent": 2,
            "seed": 9,
        }
        assert _engine.validate_plan(plan_to_json(plan_from_dict(plan))) == []
    plan = copy.deepcopy(ROBOTS)
    plan["scenarios"][0]["network"] = {"loss_percent": 10}
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(plan)
    assert [problem.location for problem in caught.value.problems] == ["scenarios[0].network"]
    assert caught.value.problems[0].message.startswith("the engine impairs its own UDP datagrams only")
    problems = {path: message for path, message, _ in _engine.validate_plan(json.dumps(plan))}
    assert problems["scenarios[0].network"].startswith("the engine impairs its own UDP datagrams only")


@pytest.mark.parametrize(
    ("change", "location"),
    [
        ({"target": {"base_url": "tcp://127.0.0.1"}}, "target.base_url"),
        (
            {"target": {"base_url": "tcp://127.0.0.1:7000", "framing": {"type": "length", "bytes": 3}}},
            "target.framing.bytes",
        ),
        ({"target": {"base_url": "kcp://127.0.0.1:7000", "kcp": {"interval_ms": 1}}}, "target.kcp.interval_ms"),
        ({"step": {"type": "ping", "name": "p", "text": "no number"}}, "scenarios[0].steps[0]"),
        ({"step": {"type": "send", "name": "s", "text": "a", "hex": "0a"}}, "scenarios[0].steps[0]"),
        ({"step": {"type": "stream", "name": "s", "text": "a", "duration_ms": 10}}, "scenarios[0].steps[0]"),
        (
            {"step": {"type": "receive", "name": "r", "checks": [{"type": "status", "in": [200]}]}},
            "scenarios[0].steps[0]",
        ),
    ],
)
def test_both_sides_refuse_the_same_mistakes(change: dict[str, Any], location: str) -> None:
    plan = copy.deepcopy(ROBOTS)
    if "target" in change:
        plan["target"] = change["target"]
    if "step" in change:
        plan["scenarios"][0]["steps"] = [change["step"]]
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(plan)
    assert any(problem.location.startswith(location) for problem in caught.value.problems), caught.value.problems
    # The engine, given the same JSON as written (no pydantic in front), refuses it too.
    problems = _engine.validate_plan(json.dumps(plan))
    assert any(path.startswith(location) for path, _, _ in problems), problems


def test_the_builder_writes_the_same_message_plan() -> None:
    built = horde.plan(
        "plan",
        base_url="tcp://127.0.0.1:7000",
        framing={"type": "length", "bytes": 4, "endian": "little", "adjust": 4},
        scenarios=[
            scenario(
                "robots",
                setup=[message.connect("connect")],
                steps=[
                    message.send("join", json={"room": "r{{ vu % 3 }}", "seq": "{{ seq }}"}),
                    message.receive(
                        "joined",
                        json_path="$.room",
                        timeout_ms=500,
                        extract=[extract.json("room", "$.room")],
                        checks=[check.json("$.ok", equals=True)],
                    ),
                    message.stream("move", base64="bW92ZQ==", every_ms=50, duration_ms=1000),
                    message.ping("rtt", "ping {{ seq }} {{ room }}", reply_seq="pong (\\d+)"),
                    message.close(),
                ],
                workload=closed([stage(1, vus=2)]),
            )
        ],
    )
    assert plan_to_json(built) == plan_to_json(plan_from_dict(ROBOTS))


CHAT: dict[str, Any] = {
    "version": 1,
    "target": {"base_url": "ws://127.0.0.1:8080", "headers": {"X-Client": "horde"}},
    "scenarios": [
        {
            "name": "chat",
            "setup": [
                {
                    "type": "http",
                    "name": "login",
                    "method": "POST",
                    "path": "/game/login",
                    "json": {"login": "u{{ vu }}", "password": "p"},
                }
            ],
            "steps": [
                {
                    "type": "connect",
                    "name": "join",
                    "path": "/ws/rooms/r{{ vu % 3 }}",
                    "headers": {"Authorization": "Bearer {{ vu }}"},
                },
                {"type": "send", "name": "say", "text": "hello {{ seq }}"},
                {"type": "send", "name": "bytes", "hex": "0a0b"},
                {"type": "receive", "name": "heard", "match": "^hello", "timeout_ms": 500},
                {"type": "ping", "name": "rtt", "reply_seq": "ping (\\d+)"},
                {"type": "ping", "name": "frame_rtt", "text": "{{ seq }}", "control_frame": True},
                {"type": "close"},
            ],
            "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 2}]},
        }
    ],
}


@pytest.mark.parametrize("base_url", ["ws://127.0.0.1:8080", "wss://chat.example/ws", "ws://[::1]:9000/a"])
def test_websocket_plans_pass_both_sides(base_url: str) -> None:
    plan = copy.deepcopy(CHAT)
    plan["target"]["base_url"] = base_url
    assert _engine.validate_plan(plan_to_json(plan_from_dict(plan))) == []


@pytest.mark.parametrize(
    ("change", "location"),
    [
        ({"target": {"base_url": "ws://127.0.0.1:8080/x?q=1"}}, "target.base_url"),
        ({"target": {"base_url": "ws://:8080"}}, "target.base_url"),
        ({"target": {"base_url": "ws://127.0.0.1:8080", "framing": {"type": "raw"}}}, "target.framing"),
        ({"target": {"base_url": "wss://127.0.0.1:8443", "kcp": {"nodelay": True}}}, "target.kcp"),
        ({"target": {"base_url": "udp://127.0.0.1:7000", "framing": {"type": "newline"}}}, "target.framing"),
        ({"network": {"delay_ms": 20}}, "scenarios[0].network"),
        ({"step": {"type": "connect", "name": "c", "path": "ws/echo"}}, "scenarios[0].steps[0]"),
        ({"step": {"type": "connect", "name": "c", "headers": {"bad name": "x"}}}, "scenarios[0].steps[0]"),
        ({"tcp": True, "step": {"type": "connect", "name": "c", "path": "/ws"}}, "scenarios[0].steps[0].path"),
        (
            {"tcp": True, "step": {"type": "connect", "name": "c", "headers": {"A": "b"}}},
            "scenarios[0].steps[0].headers",
        ),
        (
            {
                "tcp": True,
                "step": {
                    "type": "group",
                    "name": "g",
                    "steps": [{"type": "http", "name": "h", "method": "GET", "path": "/"}],
                },
            },
            "scenarios[0].steps[0].steps[0].type",
        ),
        ({"http": True, "step": {"type": "send", "name": "s", "text": "x"}}, "scenarios[0].steps[0].type"),
        (
            {"tcp": True, "step": {"type": "ping", "name": "p", "control_frame": True}},
            "scenarios[0].steps[0].control_frame",
        ),
        (
            {"step": {"type": "ping", "name": "p", "text": "{{ seq }}" + "x" * 130, "control_frame": True}},
            "scenarios[0].steps[0]",
        ),
    ],
)
def test_both_sides_refuse_the_same_websocket_mistakes(change: dict[str, Any], location: str) -> None:
    plan = copy.deepcopy(CHAT)
    plan["scenarios"][0]["setup"] = []
    if "target" in change:
        plan["target"] = change["target"]
    if change.get("tcp"):
        plan["target"] = {"base_url": "tcp://127.0.0.1:7000"}
    if change.get("http"):
        plan["target"] = {"base_url": "http://127.0.0.1:8080"}
    if "network" in change:
        plan["scenarios"][0]["network"] = change["network"]
    if "step" in change:
        plan["scenarios"][0]["steps"] = [change["step"]]
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(plan)
    assert any(problem.location.startswith(location) for problem in caught.value.problems), caught.value.problems
    problems = _engine.validate_plan(json.dumps(plan))
    assert any(path.startswith(location) for path, _, _ in problems), problems


def test_the_builder_writes_the_same_websocket_plan() -> None:
    built = horde.plan(
        "plan",
        base_url="ws://127.0.0.1:8080",
        headers={"X-Client": "horde"},
        scenarios=[
            scenario(
                "chat",
                setup=[horde.http.post("login", "/game/login", json={"login": "u{{ vu }}", "password": "p"})],
                steps=[
                    message.connect(
                        "join", path="/ws/rooms/r{{ vu % 3 }}", headers={"Authorization": "Bearer {{ vu }}"}
                    ),
                    message.send("say", "hello {{ seq }}"),
                    message.send("bytes", hex="0a0b"),
                    message.receive("heard", match="^hello", timeout_ms=500),
                    message.ping("rtt", reply_seq="ping (\\d+)"),
                    message.ping("frame_rtt", "{{ seq }}", control_frame=True),
                    message.close(),
                ],
                workload=closed([stage(1, vus=2)]),
            )
        ],
    )
    assert plan_to_json(built) == plan_to_json(plan_from_dict(CHAT))


@pytest.mark.parametrize("rate", [125000, 2500.5, "1mbit", "1Mbit/s", "500kbit", "125kB/s", "2MB", "1.5 kB/s", "8bit"])
def test_a_rate_limit_passes_both_sides(rate: Any) -> None:
    plan = with_target(ROBOTS, base_url="udp://127.0.0.1:7000")
    plan["scenarios"][0]["network"] = {"delay_ms": 20, "rate_limit": rate}
    assert _engine.validate_plan(plan_to_json(plan_from_dict(plan))) == []


@pytest.mark.parametrize("rate", ["1mb", "fast", "kB", "10 kbps", 0, -5, "0.5B/s", True, 2e12])
def test_both_sides_refuse_the_same_rate_limits(rate: Any) -> None:
    plan = with_target(ROBOTS, base_url="udp://127.0.0.1:7000")
    plan["scenarios"][0]["network"] = {"rate_limit": rate}
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(plan)
    assert [problem.location for problem in caught.value.problems] == ["scenarios[0].network.rate_limit"]
    problems = _engine.validate_plan(json.dumps(plan))
    assert [path for path, _, _ in problems] == ["scenarios[0].network.rate_limit"], problems
