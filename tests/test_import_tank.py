"""horde import of yandex-tank and pandora configs: each fixture's plan validates, every element
is a finding at its location, the plan sends the ammo's requests in the ammo's mix (a real run
against the recording target), and the parsers let only InvalidInput escape (hypothesis)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from horde.conversion import Outcome
from horde.conversion.ammo import AMMO_TYPES, parse_ammo
from horde.conversion.plan_yaml import plan_yaml
from horde.conversion.tank import autostop_rule, convert_tank, parse_schedule
from horde.errors import InvalidInput
from horde.plan import plan_from_dict, plan_to_json
from horde.plan.loader import load_plan
from hypothesis import given, settings
from hypothesis import strategies as st
from recording_target import RecordingTarget, recording_target  # noqa: F401  (the fixture)

FIXTURES = Path(__file__).parent / "fixtures" / "import" / "tank"


@pytest.mark.parametrize("name", ["load.yaml", "instances.yaml", "uripost.yaml", "pandora.yaml"])
def test_each_fixture_converts_to_a_plan_that_loads_as_written(name: str, tmp_path: Path) -> None:
    conversion = convert_tank(FIXTURES / name)
    written = tmp_path / "plan.yaml"
    written.write_text(plan_yaml(conversion, written.name))
    # The same document as JSON, read by the same loader (which puts the parameters' defaults in).
    as_json = tmp_path / "plan.json"
    as_json.write_text(json.dumps(conversion.plan))
    assert plan_to_json(load_plan(written)) == plan_to_json(load_plan(as_json))
    assert all(f.location.split(":")[0] for f in conversion.findings)


def test_what_cannot_be_converted_is_found_at_its_line() -> None:
    conversion = convert_tank(FIXTURES / "load.yaml")
    missing = {f.element: f.location for f in conversion.of(Outcome.NOT_CONVERTED)}
    assert missing == {"section telegraf": "load.yaml:27", "autostop net(xx, 25, 10)": "load.yaml:21",
                       "autostop limit(10m)": "load.yaml:24"}  # fmt: skip
    assert conversion.plan["scenarios"][0]["workload"] == {
        "type": "open", "profile": "line(1, 20, 10s) const(20, 20s) step(20, 40, 10, 5s)", "max_vus": 200,
    }  # fmt: skip
    assert [rule["when"] for rule in conversion.plan["autostop"]] == [
        "mean > 1500ms", "errors > 10%", "errors.status_404 > 5%", "errors.timeout > 1%", "p95 > 300ms",
    ]  # fmt: skip


def test_instances_are_a_closed_workload_and_raw_ammo_keeps_its_post() -> None:
    plan = convert_tank(FIXTURES / "instances.yaml").plan
    assert plan["scenarios"][0]["workload"] == {"type": "closed", "profile": "line(1, 10, 10s) const(10, 30s)"}
    branches = plan["scenarios"][0]["steps"][0]["branches"]
    order = next(b["steps"][0] for b in branches if b["steps"][0]["name"] == "order")
    assert (order["method"], order["body"], branches[0]["weight"]) == ("POST", '{"item": 42, "qty": 1}', 3)


def _run(data: dict[str, object]) -> Counter[str]:
    """Runs the plan; its requests counted by step, over every snapshot (each holds its interval's)."""
    from horde.engine.run import Run

    counts: Counter[str] = Counter()
    with Run.start(plan_from_dict(data), workers=1) as run:
        for snapshot in run:
            for entry in snapshot["steps"]:
                counts[entry["step"]] += entry["requests"]
    return counts


def test_the_plan_sends_the_ammo_in_its_tags_mix(builtin_target: Any) -> None:
    data = convert_tank(FIXTURES / "load.yaml").plan
    data["target"]["base_url"] = f"http://127.0.0.1:{builtin_target.port}"
    data["scenarios"][0]["workload"] = {"type": "closed", "start_vus": 8, "stages": [{"duration_s": 3, "vus": 8}]}
    data.pop("autostop")
    counts = _run(data)
    total = sum(counts.values())
    assert total > 5000, counts
    tags = {
        "catalog": ("catalog GET /catalog?page=1", "catalog GET /catalog?page=2"),
        "item": ("item",),
        "cart": ("cart",),
        "home": ("home",),
    }
    intended = {"catalog": 40.0, "item": 20.0, "cart": 10.0, "home": 30.0}
    for tag, steps in tags.items():
        share = 100.0 * sum(counts[step] for step in steps) / total
        assert abs(share - intended[tag]) <= 1.0, (tag, share, total)


def test_the_plan_sends_the_ammo_s_requests_methods_and_headers(recording_target: RecordingTarget) -> None:  # noqa: F811
    for name in ("load.yaml", "uripost.yaml"):
        recording_target.clear()
        data = convert_tank(FIXTURES / name).plan
        data["target"]["base_url"] = recording_target.base_url
        data["scenarios"][0]["workload"] = {"type": "closed", "start_vus": 2, "stages": [{"duration_s": 1, "vus": 2}]}
        data.pop("autostop", None)
        if name == "uripost.yaml":
            assert data["parameters"] == {"pass": ""}  # the ammo's password is not in the plan
            data["parameters"]["pass"] = "b"
        _run(data)
        received = recording_target.requests()
        assert len(received) > 20
        if name == "load.yaml":
            assert {r.path for r in received} == {"/catalog", "/item/42", "/cart", "/"}
            assert all(r.method == "GET" and r.headers["user-agent"] == "tank-fixture" for r in received)
            assert all(r.headers.get("x-client") == "mobile" for r in received if r.path in ("/cart", "/"))
            assert not any("x-client" in r.headers for r in received if r.path.startswith(("/catalog", "/item")))
        else:
            bodies = {r.body for r in received}
            assert bodies == {b"user=a&pass=b", b"q=horde\nmore", b"q=tank"}
            assert all(
                r.method == "POST" and r.headers["content-type"] == "application/x-www-form-urlencoded"
                for r in received
            )


def test_bad_input_is_located_with_a_hint(tmp_path: Path) -> None:
    config = tmp_path / "load.yaml"
    config.write_text(
        "phantom:\n  address: 127.0.0.1:80\n  load_profile:\n    load_type: rps\n    schedule: wave(1, 2, 3s)\n  uris: ['/']\n"
    )
    with pytest.raises(InvalidInput) as error:
        convert_tank(config)
    assert error.value.message.startswith("load.yaml:5: 'wave' is not a schedule function") and error.value.hint


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(AMMO_TYPES))
def test_the_ammo_parsers_raise_only_invalid_input(data: bytes, ammo_type: str) -> None:
    try:
        parse_ammo(data, ammo_type, "ammo")
    except InvalidInput:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="linestcoup(), 0123456789.msh-x%", max_size=60))
def test_the_schedule_and_autostop_parsers_raise_only_invalid_input(text: str) -> None:
    try:
        parse_schedule(text, "load.yaml:1")
    except InvalidInput:
        pass
    try:
        autostop_rule(text)
    except ValueError:
        pass


def test_a_credential_in_the_ammo_becomes_a_parameter_never_written() -> None:
    conversion = convert_tank(FIXTURES / "pandora.yaml")
    text = plan_yaml(conversion)
    assert "fixture-token" not in text and "Bearer {{ params.authorization }}" in text
    assert conversion.plan["parameters"] == {"authorization": ""}
    assert "-p authorization=..." in text
