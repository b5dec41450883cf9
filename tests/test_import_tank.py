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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recording_target import RecordingTarget, recording_target  # noqa: F401  (the fixture)

FIXTURES = Path(__file__).parent / "fixtures" / "import" / "tank"


@pytest.mark.parametrize(
    "name", ["load.yaml", "instances.yaml", "uripost.yaml", "pandora.yaml", "many.yaml", "tank_pandora.yaml"]
)
def test_each_fixture_converts_to_a_plan_that_loads_as_written(name: str, tmp_path: Path) -> None:
    conversion = convert_tank(FIXTURES / name)
    written = tmp_path / "plan.yaml"
    written.write_text(plan_yaml(conversion, written.name))
    for file, text in conversion.files.items():
        (tmp_path / file).parent.mkdir(exist_ok=True)
        (tmp_path / file).write_text(text)
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
    return _run_plan(plan_from_dict(data))


def _run_plan(plan: Any) -> Counter[str]:
    """Runs the plan; its requests counted by step, over every snapshot (each holds its interval's)."""
    from horde.engine.run import Run

    counts: Counter[str] = Counter()
    with Run.start(plan, workers=1) as run:
        for snapshot in run:
            for entry in snapshot["steps"]:
                counts[entry["step"]] += entry["requests"]
    return counts


def test_the_plan_sends_the_ammo_s_requests_in_its_tags_mix(recording_target: RecordingTarget) -> None:  # noqa: F811
    """What arrives at the recording target: the ammo's requests, with their headers, in the
    tags' shares of the ammo (catalog 4, item 2, cart 1, home 3 of 10) within 1 point."""
    data = convert_tank(FIXTURES / "load.yaml").plan
    data["target"]["base_url"] = recording_target.base_url
    data["scenarios"][0]["workload"] = {"type": "closed", "start_vus": 8, "stages": [{"duration_s": 3, "vus": 8}]}
    data.pop("autostop")
    _run(data)
    received = recording_target.requests()
    # Enough that 1 point is more than 3 standard deviations of a share (0.5 / sqrt(n) at most).
    assert len(received) > 10_000, len(received)
    tag_of = {"/catalog": "catalog", "/item/42": "item", "/cart": "cart", "/": "home"}
    shares = {tag: 100.0 * count / len(received) for tag, count in Counter(tag_of[r.path] for r in received).items()}
    intended = {"catalog": 40.0, "item": 20.0, "cart": 10.0, "home": 30.0}
    assert all(abs(shares[tag] - intended[tag]) <= 1.0 for tag in intended), shares
    pages = Counter(r.query for r in received if r.path == "/catalog")
    assert abs(100.0 * pages[(("page", "1"),)] / sum(pages.values()) - 75.0) <= 1.5, pages
    assert all(r.method == "GET" and r.headers["user-agent"] == "tank-fixture" for r in received)
    assert all(r.headers["accept"] == "application/json" for r in received)
    assert all(r.headers.get("x-client") == "mobile" for r in received if r.path in ("/cart", "/"))
    assert not any("x-client" in r.headers for r in received if r.path.startswith(("/catalog", "/item")))


def test_uripost_and_raw_ammo_send_their_bodies(recording_target: RecordingTarget) -> None:  # noqa: F811
    for name in ("uripost.yaml", "instances.yaml"):
        recording_target.clear()
        data = convert_tank(FIXTURES / name).plan
        data["target"]["base_url"] = recording_target.base_url
        data["scenarios"][0]["workload"] = {"type": "closed", "start_vus": 2, "stages": [{"duration_s": 0.5, "vus": 2}]}
        if name == "uripost.yaml":
            assert data["parameters"] == {"pass": ""}  # the ammo's password is not in the plan
            data["parameters"]["pass"] = "b"
        _run(data)
        received = recording_target.requests()
        assert len(received) > 20
        if name == "uripost.yaml":
            assert {r.body for r in received} == {b"user=a&pass=b", b"q=horde\nmore", b"q=tank"}
            assert all(r.method == "POST" for r in received)
            assert all(r.headers["content-type"] == "application/x-www-form-urlencoded" for r in received)
            assert all(r.headers["user-agent"] == "tank" for r in received)
        else:
            assert {(r.method, r.path, r.body) for r in received} == {
                ("GET", "/health", b""), ("POST", "/orders", b'{"item": 42, "qty": 1}'),
            }  # fmt: skip
            assert all(r.headers["content-type"] == "application/json" for r in received if r.method == "POST")


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


def test_many_distinct_requests_are_a_feeder_sent_in_the_ammo_s_order(
    recording_target: RecordingTarget,  # noqa: F811
    tmp_path: Path,
) -> None:
    conversion = convert_tank(FIXTURES / "many.yaml")
    assert not conversion.of(Outcome.APPROXIMATED)  # one feeder: the file's order is kept
    data = conversion.plan
    data["target"]["base_url"] = recording_target.base_url
    data["scenarios"][0]["workload"] = {"type": "closed", "start_vus": 1, "stages": [{"duration_s": 0.5, "vus": 1}]}
    for file, text in conversion.files.items():
        (tmp_path / file).parent.mkdir(exist_ok=True)
        (tmp_path / file).write_text(text)
    (tmp_path / "plan.json").write_text(json.dumps(data))
    _run_plan(load_plan(tmp_path / "plan.json"))
    received = recording_target.requests()
    ammo = [line.split(" ")[0] for line in (FIXTURES / "catalog.uri").read_text().splitlines()[1:]]
    sent = [r.path + ("?" + "&".join(f"{k}={v}" for k, v in r.query) if r.query else "") for r in received]
    assert len(sent) > 130
    assert sent == [ammo[i % len(ammo)] for i in range(len(sent))]


# Configs of tank's and pandora's shapes with any value in any place: a plan that validates, or a
# located InvalidInput, never another exception.
anyv = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 20000000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.lists(st.text(max_size=5), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def maybe(strat: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(strat, anyv)


sched = st.lists(
    st.sampled_from(
        [
            "line(1, 5, 2s)",
            "const(3,1s)",
            "step(1, 9, 2, 1s)",
            "line(0,0,1ms)",
            "const(0.5, 1m)",
            "step(5,1,1,1)",
            "line(1e3, 5, 1s)",
            "const(,1s)",
            "const(1, 1h30m)",
        ]
    ),
    min_size=1,
    max_size=3,
).map(" ".join)
phantom = st.fixed_dictionaries(
    {
        "address": maybe(st.sampled_from(["127.0.0.1:8080", "[::1]:80", "host", "h:443", "http://x:1/p", "a:b"])),
        "load_profile": maybe(
            st.fixed_dictionaries(
                {"load_type": maybe(st.sampled_from(["rps", "instances", "stpd_file"])), "schedule": maybe(sched)}
            )
        ),
        "instances": maybe(st.integers(0, 5000)),
        "ssl": anyv,
        "uris": maybe(
            st.lists(
                st.sampled_from(["/", "/a tag", "/{{x}}", "http://h/p?q=1", "bad", "/a?token=secret1"]), max_size=3
            )
        ),
        "headers": maybe(
            st.lists(
                st.sampled_from(["[Host: h]", "[Authorization: Bearer abcd]", "[X: y]", "[bad", "[: v]"]), max_size=3
            )
        ),
        "timeout": maybe(st.sampled_from(["5s", "1m", "0"])),
    }
)
pool = st.fixed_dictionaries(
    {
        "id": anyv,
        "gun": maybe(
            st.fixed_dictionaries(
                {
                    "type": maybe(st.sampled_from(["http", "grpc", "http2"])),
                    "target": maybe(st.sampled_from(["127.0.0.1:8080", "h:443"])),
                }
            )
        ),
        "ammo": maybe(
            st.fixed_dictionaries(
                {
                    "type": maybe(st.sampled_from(["uri", "http/json", "raw", "uripost", "zzz"])),
                    "file": maybe(st.just("shop.uri")),
                }
            )
        ),
        "rps": maybe(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "type": maybe(st.sampled_from(["line", "const", "step", "once", "unlimited", "x"])),
                        "from": anyv,
                        "to": anyv,
                        "ops": anyv,
                        "duration": maybe(st.sampled_from(["1s", "2m", "0s"])),
                        "step": anyv,
                        "times": anyv,
                    }
                ),
                max_size=3,
            )
        ),
        "startup": maybe(st.fixed_dictionaries({"type": maybe(st.sampled_from(["once", "x"])), "times": anyv})),
    }
)
auto = st.fixed_dictionaries(
    {
        "autostop": maybe(
            st.lists(
                st.sampled_from(
                    [
                        "time(1s,2s)",
                        "http(5xx,10%,5s)",
                        "http(2xx,1%,1)",
                        "net(xx,5,1)",
                        "quantile(95,1s,10s)",
                        "quantile(101,1s,1s)",
                        "limit(1m)",
                        "http(5xx,,)",
                        "time(x)",
                        "zzz",
                        "net(110, 200%, 1s)",
                        "http(404,5%,0)",
                    ]
                ),
                max_size=4,
            )
        )
    }
)
doc = st.one_of(
    st.fixed_dictionaries({"phantom": phantom, "autostop": maybe(auto)}),
    st.fixed_dictionaries({"pools": maybe(st.lists(pool, max_size=2))}),
    st.fixed_dictionaries(
        {
            "pandora": st.fixed_dictionaries(
                {
                    "enabled": st.just(True),
                    "config_content": maybe(st.fixed_dictionaries({"pools": st.lists(pool, max_size=2)})),
                }
            )
        }
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc)
def test_the_config_reader_raises_only_invalid_input(tmp_path_factory: pytest.TempPathFactory, document: Any) -> None:
    folder = tmp_path_factory.mktemp("tank")
    (folder / "shop.uri").write_text("[Host: h]\n/a tag\n/b\n")
    (folder / "load.yaml").write_text(json.dumps(document))
    try:
        conversion = convert_tank(folder / "load.yaml")
    except InvalidInput:
        return
    plan_from_dict(conversion.plan)


def test_a_criterion_on_one_tag_is_not_converted_and_says_how_to_scope_a_rule() -> None:
    outcome, rule, note = autostop_rule("quantile(95, 100ms, 10s, checkout)")
    assert (outcome, rule) == (Outcome.NOT_CONVERTED, None) and "step: NAME" in note and "checkout" in note


def test_a_feeder_holds_no_credential_and_the_step_sends_the_parameter(
    recording_target: RecordingTarget,  # noqa: F811
    tmp_path: Path,
) -> None:
    lines = [f"/item/{n}?access_token=t0k3n-secret&page={n % 3}" for n in range(60)]
    (tmp_path / "ammo.uri").write_text("\n".join(lines) + "\n")
    posts = b"".join(
        f"{len(b)} /login\n".encode() + b + b"\n"
        for b in (f"user=u{n}&password=pw-{n}-secret".encode() for n in range(60))
    )
    (tmp_path / "post.ammo").write_bytes(posts)
    for ammo, kind in (("ammo.uri", "uri"), ("post.ammo", "uripost")):
        (tmp_path / "load.yaml").write_text(
            f"phantom:\n  address: {recording_target.base_url.removeprefix('http://')}\n"
            f"  load_profile: {{load_type: instances, schedule: 'const(1, 1s)'}}\n  ammofile: {ammo}\n  ammo_type: {kind}\n"
        )
        conversion = convert_tank(tmp_path / "load.yaml")
        written = plan_yaml(conversion) + "".join(conversion.files.values())
        assert "t0k3n" not in written and "pw-" not in written
        if kind == "uripost":
            assert [f.element for f in conversion.of(Outcome.NOT_CONVERTED)] == [
                "body field password of 60 POST requests"
            ]
            continue
        for file, text in conversion.files.items():
            (tmp_path / file).parent.mkdir(exist_ok=True)
            (tmp_path / file).write_text(text)
        (tmp_path / "plan.yaml").write_text(plan_yaml(conversion))
        _run_plan(load_plan(tmp_path / "plan.yaml", {"access_token": "given"}))
        received = recording_target.requests()
        assert len(received) > 60
        assert [r.path for r in received[:60]] == [line.split("?")[0] for line in lines]
        assert all(
            dict(r.query) == {"page": str(int(r.path.rsplit("/", 1)[1]) % 3), "access_token": "given"} for r in received
        )


def test_tank_driving_pandora_from_its_config_file() -> None:
    conversion = convert_tank(FIXTURES / "tank_pandora.yaml")
    assert [scenario["name"] for scenario in conversion.plan["scenarios"]] == ["api", "static"]
    assert [rule["when"] for rule in conversion.plan["autostop"]] == ["p99 > 2000ms", "errors.status_503 > 2%"]
    located = {f.element: f.location for f in conversion.findings}
    assert located["rps line"] == "pandora.yaml:14" and located["section phantom"] == "tank_pandora.yaml:2"
