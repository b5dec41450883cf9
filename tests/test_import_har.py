"""horde import of a HAR recording: steps in order with the recorded think times, static assets
and other hosts left out with a finding each, secrets as parameters never written, reused values
extracted; the plan run against the recording target sends the recording's requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from horde.conversion import Outcome
from horde.conversion.har import convert_har
from horde.conversion.plan_yaml import plan_yaml
from horde.errors import InvalidInput
from horde.plan import plan_from_dict
from hypothesis import given, settings
from hypothesis import strategies as st
from recording_target import RecordingTarget, recording_target  # noqa: F401  (the fixture)

HAR = Path(__file__).parent / "fixtures" / "import" / "har" / "shop.har"


def test_steps_think_times_and_left_out_entries() -> None:
    conversion = convert_har(HAR)
    steps = conversion.plan["scenarios"][0]["steps"]
    assert [s["name"] for s in steps] == [
        "GET /", "POST /api/login", "GET /api/users/4711/orders", "POST /api/orders", "GET /api/orders/ord-992", "GET /api/partner",
    ]  # fmt: skip
    assert [s.get("think_time", {}).get("duration_ms") for s in steps] == [1950, 1000, 1000, 500, 300, None]
    assert {f.location for f in conversion.of(Outcome.APPROXIMATED)} == {
        "shop.har: log.entries[1]",
        "shop.har: log.entries[2]",
        "shop.har: log.entries[4]",
    }
    assert [f.location for f in conversion.of(Outcome.NOT_CONVERTED)] == ["shop.har: log.entries[3]"]
    kept = convert_har(HAR, keep_static=True).plan["scenarios"][0]["steps"]
    assert len(kept) == 9  # the script Chromium typed as one, whatever its MIME type, too


def test_no_secret_of_the_recording_is_written() -> None:
    text = plan_yaml(convert_har(HAR))
    for secret in ("fixture-password", "tok-7f3a9c", "fixture-partner-key", "yes-all", "abc123"):
        assert secret not in text
    assert set(convert_har(HAR).plan["parameters"]) == {"cookie_consent", "password", "x_api_key", "api_key"}


def test_the_plan_replays_the_recording_with_its_extractions(recording_target: RecordingTarget) -> None:  # noqa: F811
    from horde.engine.run import Run

    recording_target.answer(
        "/api/login", '{"token": "live-token-1", "user": {"id": 5150}}', headers={"Set-Cookie": "sid=s-77; Path=/"}
    )
    recording_target.answer("/api/orders", '{"ok": true}', status=201, headers={"Location": "/api/orders/ord-5"})
    data = convert_har(HAR).plan
    data["target"]["base_url"] = recording_target.base_url
    data["parameters"] = {name: f"given-{name}" for name in data["parameters"]}
    text = plan_yaml(convert_har(HAR))
    assert "{{ params.password }}" in text
    for scenario in data["scenarios"]:
        for key, value in list(scenario.get("headers", {}).items()):
            scenario["headers"][key] = value.replace("{{ params.cookie_consent }}", "given-consent")
        for step in scenario["steps"]:
            step.pop("think_time", None)
            for key, value in list(step.get("headers", {}).items()):
                step["headers"][key] = value.replace("{{ params.x_api_key }}", "given-key")
            step["path"] = step["path"].replace("{{ params.api_key }}", "given-key")
            if "body" in step:
                step["body"] = step["body"].replace("{{ params.password }}", "given-password")
        scenario["workload"] = {"type": "closed", "start_vus": 1, "stages": [{"duration_s": 0.5, "vus": 1}]}
    data.pop("parameters")
    with Run.start(plan_from_dict(data), workers=1) as run:
        for _ in run:
            pass
    received = recording_target.requests()[:6]
    assert [(r.method, r.path) for r in received] == [
        ("GET", "/"), ("POST", "/api/login"), ("GET", "/api/users/5150/orders"), ("POST", "/api/orders"),
        ("GET", "/api/orders/ord-5"), ("GET", "/api/partner"),
    ]  # fmt: skip
    assert received[2].headers["authorization"] == "Bearer live-token-1"
    assert "sid=s-77" in received[2].headers.get("cookie", "")
    assert received[1].body == b'{"user": "demo", "password": "given-password"}'
    assert received[5].headers["x-api-key"] == "given-key" and received[5].query == (("api_key", "given-key"),)
    assert all(r.headers["user-agent"] == "Mozilla/5.0 fixture" for r in received)


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8))
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
_entry = st.fixed_dictionaries(
    {
        "startedDateTime": st.sampled_from(["2026-03-01T10:00:00.000Z", "yesterday", 5]),
        "time": st.one_of(st.integers(-5, 100), st.text(max_size=3)),
        "request": st.one_of(
            _json,
            st.fixed_dictionaries(
                {
                    "method": st.sampled_from(["GET", "POST", "TRACE", 3]),
                    "url": st.sampled_from(
                        [
                            "http://127.0.0.1:8080/a?token=xyzw",
                            "https://other/x.png",
                            "nope",
                            "http://127.0.0.1:8080/{{x}}",
                        ]
                    ),
                    "headers": _json,
                    "cookies": _json,
                    "postData": _json,
                }
            ),
        ),
        "response": _json,
    }
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_entry, max_size=4))
def test_the_har_reader_raises_only_invalid_input(
    tmp_path_factory: pytest.TempPathFactory, entries: list[object]
) -> None:
    path = tmp_path_factory.mktemp("har") / "fuzz.har"
    path.write_text(json.dumps({"log": {"entries": entries}}))
    try:
        conversion = convert_har(path)
    except InvalidInput:
        return
    plan_from_dict(conversion.plan)


def test_the_written_plan_loads_as_the_conversion_holds_it(tmp_path: Path) -> None:
    from horde.plan import plan_to_json
    from horde.plan.loader import load_plan

    conversion = convert_har(HAR)
    (tmp_path / "plan.yaml").write_text(plan_yaml(conversion))
    (tmp_path / "plan.json").write_text(json.dumps(conversion.plan))
    assert plan_to_json(load_plan(tmp_path / "plan.yaml")) == plan_to_json(load_plan(tmp_path / "plan.json"))


def test_the_target_is_the_page_s_host_not_the_first_request_s(tmp_path: Path) -> None:
    document = json.loads(HAR.read_text())
    entries = document["log"]["entries"]
    entries.insert(0, {**entries[3], "startedDateTime": "2026-03-01T09:59:59.000Z"})  # analytics first
    (tmp_path / "visit.har").write_text(json.dumps(document))
    conversion = convert_har(tmp_path / "visit.har")
    assert conversion.plan["target"]["base_url"] == "http://127.0.0.1:8080"
    assert [f.location for f in conversion.of(Outcome.NOT_CONVERTED)] == [
        "visit.har: log.entries[0]",
        "visit.har: log.entries[4]",
    ]
