"""horde.plan.overrides: the command line's flags applied to a plan, and every error they can raise."""

from __future__ import annotations

from typing import Any

import pytest

from horde.errors import ExitCode, InvalidInput, PlanInvalid
from horde.plan.overrides import (
    STEER_MAX_VUS,
    SteerFlags,
    apply_overrides,
    apply_steer_flags,
    spread_rate,
    spread_vus,
    url_plan,
)
from horde.cli.arguments import parse_duration, parse_header, parse_tag
from horde.plan import Plan, plan_from_dict


def plan_with(*workloads: dict[str, Any], base_url: str = "http://127.0.0.1:8080") -> Plan:
    return plan_from_dict(
        {
            "version": 1,
            "name": "p",
            "target": {"base_url": base_url, "headers": {"accept": "text/plain"}},
            "scenarios": [
                {"name": f"s{index}", "steps": [{"name": "home", "method": "GET", "path": "/"}], "workload": workload}
                for index, workload in enumerate(workloads)
            ],
        }
    )


CLOSED = {"type": "closed", "start_vus": 2, "stages": [{"duration_s": 5, "vus": 20}, {"duration_s": 10, "vus": 8}]}
OPEN = {
    "type": "open",
    "start_rate_per_s": 0,
    "stages": [{"duration_s": 4, "rate_per_s": 30}, {"duration_s": 6, "rate_per_s": 50}],
    "max_vus": 40,
}


def workloads(plan: Plan) -> list[dict[str, Any]]:
    return [scenario["workload"] for scenario in plan.model_dump(mode="json")["scenarios"]]


# -- parse_duration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("1m30s", 90.0),
        ("250ms", 0.25),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("1.5", 1.5),
        ("1.5s", 1.5),
        (" 30S ", 30.0),
        ("0", 0.0),
        ("2m0.5s", 120.5),
        ("1s500ms", 1.5),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["abc", "", "  ", "5 m", "1m 30s", "10x", "s", "1.2.3s", "ms5", "-1s", "1e3s", "--5"])
def test_parse_duration_refuses_what_is_not_a_duration(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_duration(text, flag="--ramp-up")
    error = caught.value
    assert error.exit_code == ExitCode.INVALID_INPUT
    assert error.message == f"--ramp-up: '{text}' is not a duration"
    assert error.hint is not None and "30s" in error.hint and "500ms" in error.hint


@pytest.mark.parametrize("text", ["-5", "nan", "inf", "-inf", "-0.5"])
def test_parse_duration_refuses_negative_and_non_finite_numbers(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_duration(text)
    assert caught.value.message == f"--duration: '{text}' must be a positive duration"
    assert caught.value.hint == "for example 30s"


# -- parse_header / parse_tag --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "header"),
    [
        ("Accept: text/plain", ("Accept", "text/plain")),
        ("X-A:b", ("X-A", "b")),
        ("  X-A :  b c ", ("X-A", "b c")),
        ("Authorization: Bearer a:b", ("Authorization", "Bearer a:b")),
        ("X-Empty:", ("X-Empty", "")),
    ],
)
def test_parse_header(text: str, header: tuple[str, str]) -> None:
    assert parse_header(text) == header


@pytest.mark.parametrize("text", ["nocolon", ": value", "   : x", ""])
def test_parse_header_errors(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_header(text)
    assert caught.value.message == f"-H: '{text}' is not a header"
    assert caught.value.hint is not None and "Name: value" in caught.value.hint


def test_parse_tag() -> None:
    assert parse_tag("build=1234") == ("build", "1234")
    assert parse_tag(" env = ci=1 ") == ("env", "ci=1")
    for bad in ("x", "=y", ""):
        with pytest.raises(InvalidInput) as caught:
            parse_tag(bad)
        assert caught.value.message == f"--tag: '{bad}' is not key=value"
        assert caught.value.hint == "for example --tag build=1234"


# -- url_plan ------------------------------------------------------------------------------------


def test_url_plan_builds_a_valid_one_step_plan() -> None:
    data = url_plan(
        "https://example.test:8443/api/items?page=2#frag",
        method="post",
        headers=[("X-A", "1"), ("Accept", "*/*")],
        body='{"a": 1}',
    )
    plan = plan_from_dict(data)
    assert plan.target.base_url == "https://example.test:8443"
    [scenario] = plan.scenarios
    [step] = scenario.steps
    assert step.method == "POST"
    assert step.path == "/api/items?page=2"
    assert step.name == "POST /api/items?page=2"
    assert step.headers == {"X-A": "1", "Accept": "*/*"}
    assert step.body == '{"a": 1}'
    assert data["scenarios"][0]["workload"] == {
        "type": "closed",
        "start_vus": 10,
        "stages": [{"duration_s": 10, "vus": 10}],
    }


def test_url_plan_without_a_path_asks_for_root() -> None:
    data = url_plan("http://127.0.0.1:8080", method="GET", headers=[], body=None)
    assert data["scenarios"][0]["steps"][0]["path"] == "/"
    assert data["target"]["base_url"] == "http://127.0.0.1:8080"


@pytest.mark.parametrize(
    "url", ["ftp://x", "127.0.0.1:8080", "http://", "http:///path", "x", "", "http://[::1", "mailto:a@b"]
)
def test_url_plan_refuses_what_is_not_an_http_url(url: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        url_plan(url, method="GET", headers=[], body=None)
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert caught.value.message == f"--url: '{url}' is not an http(s) URL with a host"
    assert caught.value.hint == "for example --url http://127.0.0.1:8080/"


def test_url_plan_with_a_bad_method_fails_validation_with_a_location() -> None:
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(url_plan("http://h/", method="FETCH", headers=[], body=None), source="--url")
    assert any(problem.location.endswith("scenarios[0].steps[0].method") for problem in caught.value.problems)


# -- apply_overrides -----------------------------------------------------------------------------


def test_no_flags_keep_the_plan() -> None:
    plan = plan_with(CLOSED, OPEN)
    assert apply_overrides(plan) == plan


def test_vus_makes_every_scenario_closed_for_the_plan_length() -> None:
    plan = apply_overrides(plan_with(CLOSED, OPEN), vus=7)
    # Without --duration each scenario keeps its own total length (15 s and 10 s); the 7 VUs are
    # spread over the two scenarios by weight (1 and 1): 4 + 3.
    assert workloads(plan) == [
        {"type": "closed", "start_vus": 4, "stages": [{"duration_s": 15.0, "vus": 4}]},
        {"type": "closed", "start_vus": 3, "stages": [{"duration_s": 10.0, "vus": 3}]},
    ]


def test_rate_makes_every_scenario_open() -> None:
    plan = apply_overrides(plan_with(CLOSED, OPEN), rate=25, duration_s=3)
    first, second = workloads(plan)
    # The rate is spread over the two scenarios by weight (1 and 1).
    assert first == {
        "type": "open",
        "start_rate_per_s": 12.5,
        "stages": [{"duration_s": 3.0, "rate_per_s": 12.5}],
        "max_vus": 13,
        "arrivals": "uniform",
    }
    # An open scenario keeps its own max_vus unless --max-vus is given.
    assert second == {
        "type": "open",
        "start_rate_per_s": 12.5,
        "stages": [{"duration_s": 3.0, "rate_per_s": 12.5}],
        "max_vus": 40,
        "arrivals": "uniform",
    }
    assert workloads(apply_overrides(plan_with(CLOSED), rate=2.5))[0]["max_vus"] == 10  # at least 10


def test_max_vus_caps_the_open_model() -> None:
    [workload] = workloads(apply_overrides(plan_with(CLOSED), rate=100, max_vus=3))
    assert workload["max_vus"] == 3
    [workload] = workloads(apply_overrides(plan_with(OPEN), max_vus=5))
    assert workload["max_vus"] == 5
    assert workload["stages"] == [{"duration_s": 10.0, "rate_per_s": 50.0}]  # the plan's peak, held


def test_max_vus_without_rate_on_a_closed_plan_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        apply_overrides(plan_with(CLOSED), max_vus=5)
    assert "open model only" in caught.value.message
    assert caught.value.hint and "--rate" in caught.value.hint


def test_duration_alone_keeps_each_model_and_its_peak_level() -> None:
    closed, open_ = workloads(apply_overrides(plan_with(CLOSED, OPEN), duration_s=4))
    assert closed == {"type": "closed", "start_vus": 20, "stages": [{"duration_s": 4.0, "vus": 20}]}
    assert open_ == {
        "type": "open",
        "start_rate_per_s": 50.0,
        "stages": [{"duration_s": 4.0, "rate_per_s": 50.0}],
        "max_vus": 40,
        "arrivals": "uniform",
    }


def test_ramp_up_is_the_first_part_of_the_duration() -> None:
    [workload] = workloads(apply_overrides(plan_with(CLOSED), vus=10, duration_s=30, ramp_up_s=5))
    assert workload == {
        "type": "closed",
        "start_vus": 0,
        "stages": [{"duration_s": 5.0, "vus": 10}, {"duration_s": 25.0, "vus": 10}],
    }
    [workload] = workloads(apply_overrides(plan_with(OPEN), ramp_up_s=2))
    assert workload["start_rate_per_s"] == 0.0
    assert workload["stages"] == [{"duration_s": 2.0, "rate_per_s": 50.0}, {"duration_s": 8.0, "rate_per_s": 50.0}]


def test_base_url_override_keeps_the_workload() -> None:
    plan = apply_overrides(plan_with(CLOSED), base_url="https://other.test:9443/prefix")
    assert plan.target.base_url == "https://other.test:9443/prefix"
    assert workloads(plan) == workloads(plan_with(CLOSED))
    assert plan.target.headers == {"accept": "text/plain"}


@pytest.mark.parametrize(
    ("flags", "message", "hint"),
    [
        (
            {"vus": 5, "rate": 5.0},
            "--vus and --rate cannot be used together",
            "--vus for a closed model, --rate for an open one",
        ),
        ({"vus": -1}, "--vus must be 0 or more (got -1)", None),
        ({"rate": 0.0}, "--rate must be more than 0 (got 0.0)", None),
        ({"rate": -3.0}, "--rate must be more than 0 (got -3.0)", None),
        ({"max_vus": 0}, "--max-vus must be at least 1 (got 0)", None),
        ({"duration_s": 0.0}, "--duration must be more than 0", "for example --duration 30s"),
        (
            {"duration_s": 5.0, "ramp_up_s": 5.0},
            "--ramp-up (5 s) must be shorter than the duration (5 s)",
            "the ramp-up is the first part of --duration",
        ),
        (
            {"ramp_up_s": 20.0},
            "--ramp-up (20 s) must be shorter than the duration (15 s)",
            "the ramp-up is the first part of --duration",
        ),
    ],
)
def test_apply_overrides_errors(flags: dict[str, Any], message: str, hint: str | None) -> None:
    with pytest.raises(InvalidInput) as caught:
        apply_overrides(plan_with(CLOSED), **flags)
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert caught.value.message == message
    assert caught.value.hint == hint


def test_a_bad_base_url_override_is_a_located_plan_problem() -> None:
    with pytest.raises(PlanInvalid) as caught:
        apply_overrides(plan_with(CLOSED), base_url="ftp://nope")
    assert caught.value.source == "the plan with the command line's overrides"
    assert [problem.location for problem in caught.value.problems] == ["target.base_url"]


def test_vus_zero_is_allowed() -> None:
    [workload] = workloads(apply_overrides(plan_with(CLOSED), vus=0, duration_s=1))
    assert workload == {"type": "closed", "start_vus": 0, "stages": [{"duration_s": 1.0, "vus": 0}]}


# -- spreading one level over weighted scenarios -------------------------------------------------


def weighted(*weights: float) -> Plan:
    plan = plan_with(*[CLOSED] * len(weights))
    data = plan.model_dump(mode="json")
    for scenario, weight in zip(data["scenarios"], weights):
        scenario["weight"] = weight
    return plan_from_dict(data)


@pytest.mark.parametrize(
    ("vus", "weights", "shares"),
    [
        (10, [1], [10]),
        (10, [70, 20, 10], [7, 2, 1]),
        (10, [1, 1, 1], [4, 3, 3]),
        (10, [3, 1], [8, 2]),
        (1, [1, 1], [1, 0]),
        (0, [5, 1], [0, 0]),
        (100, [0.955, 0.045], [96, 4]),
        (7, [1, 2, 4], [1, 2, 4]),
        (5, [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]),
    ],
)
def test_spread_vus_is_exact_by_largest_remainder(vus: int, weights: list[float], shares: list[int]) -> None:
    assert spread_vus(vus, weights) == shares


def test_spread_vus_always_adds_up() -> None:
    import random

    rng = random.Random(7)
    for _ in range(500):
        weights = [rng.uniform(0.01, 100) for _ in range(rng.randint(1, 8))]
        vus = rng.randint(0, 10_000)
        shares = spread_vus(vus, weights)
        assert sum(shares) == vus and min(shares) >= 0
        exact = [vus * w / sum(weights) for w in weights]
        assert all(abs(share - value) < 1 for share, value in zip(shares, exact))


def test_vus_and_rate_are_spread_by_weight() -> None:
    plan = weighted(3, 1)
    assert [w["stages"] for w in workloads(apply_overrides(plan, vus=10, duration_s=5))] == [
        [{"duration_s": 5.0, "vus": 8}],
        [{"duration_s": 5.0, "vus": 2}],
    ]
    opened = workloads(apply_overrides(plan, rate=100, max_vus=9, duration_s=5))
    assert [w["stages"][0]["rate_per_s"] for w in opened] == [75.0, 25.0]
    assert [w["max_vus"] for w in opened] == [7, 2]  # the cap spread too (largest remainder)
    # Each scenario keeps at least one VU of cap.
    assert [w["max_vus"] for w in workloads(apply_overrides(weighted(100, 1), rate=10, max_vus=2))] == [2, 1]
    assert spread_rate(10.0, [1, 3]) == [2.5, 7.5]


def steered(flags: SteerFlags, **quick_flags: Any) -> Any:
    plan = plan_from_dict(url_plan("http://127.0.0.1:8080/", method="GET", headers=[], body=None), source="--url")
    plan = apply_overrides(plan, **quick_flags)
    return apply_steer_flags(plan, flags, quick=True, vus_given="vus" in quick_flags)


def test_find_max_without_start_or_step_is_a_search() -> None:
    plan = steered(SteerFlags(find_max=True))
    assert plan.steer is not None and plan.steer.type == "find_max"
    assert plan.steer.start is None and plan.steer.step is None and plan.steer.searching
    assert plan.steer.step_length_s == 5.0 and plan.steer.precision_percent == 3.0
    assert plan.scenarios[0].workload.type == "open" and plan.scenarios[0].workload.max_vus == STEER_MAX_VUS
    stepped = steered(SteerFlags(find_max=True, step=50.0, step_duration_s=10.0))
    assert stepped.steer.step == 50.0 and not stepped.steer.searching and stepped.steer.step_length_s == 10.0
    precise = steered(SteerFlags(find_max=True, start=200.0, precision_percent=1.0))
    assert precise.steer.start == 200.0 and precise.steer.precision_percent == 1.0


def test_steering_flags_that_apply_are_taken_and_conflicts_refused() -> None:
    # --max-vus caps the open model a steered --url plan becomes (it used to be refused).
    capped = steered(SteerFlags(find_max=True, max_vus=150))
    assert capped.scenarios[0].workload.max_vus == 150
    held = steered(SteerFlags(target_response_ms=40.0, limit=300.0, max_vus=150))
    assert held.steer.max == 300.0 and held.scenarios[0].workload.max_vus == 150
    with pytest.raises(InvalidInput, match="--precision belongs to find-max's search") as refused:
        steered(SteerFlags(find_max=True, step=50.0, precision_percent=2.0))
    assert refused.value.hint and "drop --step" in refused.value.hint
    with pytest.raises(InvalidInput, match="belong to --find-max"):
        steered(SteerFlags(target_response_ms=40.0, precision_percent=2.0))
    with pytest.raises(InvalidInput, match="steer the load"):
        steered(SteerFlags(precision_percent=2.0))
    with pytest.raises(PlanInvalid) as invalid:
        steered(SteerFlags(find_max=True, start=500.0, limit=100.0))
    (problem,) = invalid.value.problems
    assert problem.location == "steer.start" and "start (500) is above limit (100)" in problem.message


def test_no_flag_returns_the_plan_itself_unchecked_again() -> None:
    plan = plan_with(CLOSED)
    assert apply_overrides(plan) is plan
    assert apply_overrides(plan, insecure=False) is plan
    # any flag still gives a new, checked plan
    changed = apply_overrides(plan, insecure=True)
    assert changed is not plan and changed.target.insecure
