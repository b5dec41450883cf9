"""The plan contract (python/horde/plan/): models, validators, located errors, JSON, schema. The
scenario language has tests of its own (test_plan_language.py)."""

from __future__ import annotations

import copy
import doctest
import importlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from horde.plan import problems as plan_problems
from horde.errors import ExitCode, PlanInvalid, Problem
from horde.plan import (
    METHODS,
    ClosedModel,
    ClosedStage,
    HttpStep,
    LoopStep,
    OpenModel,
    Plan,
    Scenario,
    Target,
    UniformThinkTime,
    plan_from_dict,
    plan_json_schema,
    plan_to_json,
)

# The example of ARCHITECTURE.md, "The plan contract (version 1)", with every key written out.
ARCHITECTURE_EXAMPLE: dict[str, Any] = {
    "version": 1,
    "name": "quickstart",
    "target": {
        "base_url": "http://127.0.0.1:8080",
        "headers": {"accept": "application/json"},
        "connect_timeout_ms": 5000,
        "request_timeout_ms": 30000,
        "insecure": False,
    },
    "scenarios": [
        {
            "name": "browse",
            "steps": [
                {
                    "name": "home",
                    "method": "GET",
                    "path": "/",
                    "headers": {},
                    "body": None,
                    "think_time": {"type": "constant", "duration_ms": 100},
                },
            ],
            "workload": {
                "type": "closed",
                "start_vus": 0,
                "stages": [{"duration_s": 5, "vus": 50}, {"duration_s": 15, "vus": 50}],
            },
        }
    ],
    "graceful_stop_s": 5,
}


def with_language_defaults(first_slice: dict[str, Any]) -> dict[str, Any]:
    """A first-slice plan as plan_to_json writes it now: with the scenario language's defaults,
    the target's instances and connections, the open model's arrivals and the (empty) control
    sections."""
    data = copy.deepcopy(first_slice)
    data = {
        "version": data.pop("version"),
        "name": data.pop("name", "plan"),
        "parameters": {},
        **data,
        "thresholds": [],
        "autostop": [],
        "steer": None,
        "generators": None,
        "monitors": [],
    }
    data["target"] = {
        **data["target"],
        "instances": [],
        "connections": "per_vu",
        "source_addresses": [],
        "max_response_header_bytes": 256 * 1024,
        "max_kept_body_bytes": 1024 * 1024,
        "connect_backoff": True,
        "parallel_connections": 6,
        "http_version": "1.1",
        "password_env": None,
        "password_file": None,
        "ca_file": None,
        "framing": None,
        "kcp": None,
        "http2": None,
    }
    for index, scenario in enumerate(data["scenarios"]):
        if scenario["workload"]["type"] == "open":
            scenario["workload"] = {**scenario["workload"], "arrivals": "uniform"}
        steps = [
            {"type": "http", **step, "json": None, "extract": [], "checks": [], "on_check_failure": "continue"}
            for step in scenario["steps"]
        ]
        data["scenarios"][index] = {
            "name": scenario["name"],
            "weight": 1.0,
            "headers": {},
            "feeders": [],
            "setup": [],
            "steps": steps,
            "teardown": [],
            "pacing_s": None,
            "workload": scenario["workload"],
            "network": None,
        }
    return data


def minimal() -> dict[str, Any]:
    """The smallest valid plan: every optional key left out."""
    return {
        "version": 1,
        "target": {"base_url": "http://127.0.0.1:8080"},
        "scenarios": [
            {
                "name": "browse",
                "steps": [{"name": "home", "method": "GET", "path": "/"}],
                "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]},
            }
        ],
    }


def problems_of(data: Any) -> list[Problem]:
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(data)
    assert caught.value.problems, "PlanInvalid must list at least one problem"
    return caught.value.problems


def locations(data: Any) -> list[str]:
    return [problem.location for problem in problems_of(data)]


def only_problem(data: Any) -> Problem:
    problems = problems_of(data)
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


# --- valid plans -------------------------------------------------------------------------------


def test_architecture_example_round_trips() -> None:
    plan = plan_from_dict(ARCHITECTURE_EXAMPLE)
    # The scenario language adds keys with defaults; plan_to_json writes every default.
    assert json.loads(plan_to_json(plan)) == with_language_defaults(ARCHITECTURE_EXAMPLE)
    # And the JSON reads back into the same plan.
    assert plan_from_dict(json.loads(plan_to_json(plan))) == plan


def test_defaults_are_explicit_in_the_json() -> None:
    wire = json.loads(plan_to_json(plan_from_dict(minimal())))
    expected = minimal()
    expected["name"] = "plan"
    expected["graceful_stop_s"] = 5
    expected["target"].update(headers={}, connect_timeout_ms=5000, request_timeout_ms=30000, insecure=False)
    expected["scenarios"][0]["steps"][0].update(headers={}, body=None, think_time=None)
    expected["scenarios"][0]["workload"]["start_vus"] = 0
    assert wire == with_language_defaults(expected)


def test_open_model_and_every_think_time_round_trip() -> None:
    data = minimal()
    data["scenarios"][0]["steps"] = [
        {
            "name": "a",
            "method": "POST",
            "path": "/a",
            "body": "{}",
            "headers": {"content-type": "application/json"},
            "think_time": {"type": "uniform", "min_ms": 10, "max_ms": 10},
        },
        {"name": "b", "method": "HEAD", "path": "/b", "think_time": {"type": "exponential", "mean_ms": 250.5}},
        {"name": "c", "method": "OPTIONS", "path": "/c?x=1", "think_time": {"type": "constant", "duration_ms": 0}},
    ]
    data["scenarios"][0]["workload"] = {
        "type": "open",
        "start_rate_per_s": 1.5,
        "max_vus": 10,
        "stages": [{"duration_s": 0.5, "rate_per_s": 0}, {"duration_s": 2, "rate_per_s": 20}],
    }
    plan = plan_from_dict(data)
    workload = plan.scenarios[0].workload
    assert isinstance(workload, OpenModel) and workload.max_vus == 10
    again = json.loads(plan_to_json(plan))
    assert again["scenarios"][0]["workload"] == {**data["scenarios"][0]["workload"], "arrivals": "uniform"}
    assert [s["think_time"] for s in again["scenarios"][0]["steps"]] == [
        s["think_time"] for s in data["scenarios"][0]["steps"]
    ]


def test_plan_to_json_is_canonical() -> None:
    first = plan_to_json(plan_from_dict(minimal()))
    assert first == plan_to_json(plan_from_dict(json.loads(first)))
    assert list(json.loads(first)) == [
        "version",
        "name",
        "parameters",
        "target",
        "scenarios",
        "graceful_stop_s",
        "thresholds",
        "autostop",
        "steer",
        "generators",
        "monitors",
    ]


def test_plan_built_in_python() -> None:
    plan = Plan(
        version=1,
        target=Target(base_url="https://example.test/api"),
        scenarios=[
            Scenario(
                name="s",
                steps=[HttpStep(name="x", method="GET", path="/x", think_time=UniformThinkTime(min_ms=1, max_ms=2))],
                workload=ClosedModel(start_vus=1, stages=[ClosedStage(duration_s=1, vus=3)]),
            )
        ],
    )
    assert plan_from_dict(json.loads(plan_to_json(plan))) == plan


def test_every_method_is_accepted() -> None:
    data = minimal()
    data["scenarios"][0]["steps"] = [{"name": method.lower(), "method": method, "path": "/"} for method in METHODS]
    assert [s.method for s in plan_from_dict(data).scenarios[0].steps] == list(METHODS)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080", "https://example.test", "http://[::1]:8080/prefix", "http://h/a/b/"],
)
def test_good_base_urls(url: str) -> None:
    data = minimal()
    data["target"]["base_url"] = url
    assert plan_from_dict(data).target.base_url == url


# --- every validator, located, with a hint -----------------------------------------------------


def set_base_url(value: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["target"]["base_url"] = value

    return change


def set_step(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["scenarios"][0]["steps"][0][key] = value

    return change


def duplicate_step_name(data: dict[str, Any]) -> None:
    steps = data["scenarios"][0]["steps"]
    steps.append({"name": "other", "method": "GET", "path": "/other"})
    steps.append({"name": "home", "method": "GET", "path": "/again"})


def duplicate_scenario_name(data: dict[str, Any]) -> None:
    data["scenarios"].append(copy.deepcopy(data["scenarios"][0]))


def uniform_range(data: dict[str, Any]) -> None:
    data["scenarios"][0]["steps"][0]["think_time"] = {"type": "uniform", "min_ms": 50, "max_ms": 5}


def no_stages(data: dict[str, Any]) -> None:
    data["scenarios"][0]["workload"]["stages"] = []


def target_header(name: str, value: str = "v") -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["target"]["headers"] = {"accept": "*/*", name: value}

    return change


STEP = "scenarios[0].steps[0]"

# (change, location, a piece of the message, a piece of the hint)
VALIDATORS: dict[str, tuple[Callable[[dict[str, Any]], None], str, str, str]] = {
    "base_url scheme": (set_base_url("ftp://127.0.0.1"), "target.base_url", "scheme 'ftp'", "http://"),
    "base_url without scheme": (
        set_base_url("127.0.0.1:8080"),
        "target.base_url",
        "no http://",
        "http://127.0.0.1:8080",
    ),
    "base_url without host": (set_base_url("http://:8080"), "target.base_url", "no host", "after the scheme"),
    "base_url empty host": (set_base_url("https://"), "target.base_url", "no host", "after the scheme"),
    "base_url bad port": (set_base_url("http://h:99999"), "target.base_url", "not a valid URL", "scheme://host"),
    "base_url query": (set_base_url("http://h/?a=1"), "target.base_url", "query", "step's path"),
    "method lower case": (set_step("method", "get"), f"{STEP}.method", "upper case", "'GET'"),
    "method unknown": (set_step("method", "FETCH"), f"{STEP}.method", "'FETCH'", "GET, HEAD, POST"),
    "path without slash": (set_step("path", "login"), f"{STEP}.path", "must start with '/'", "'/login'"),
    "path is a URL": (set_step("path", "http://h/x"), f"{STEP}.path", "must start with '/'", "base_url"),
    "path with space": (set_step("path", "/a b"), f"{STEP}.path", "spaces", "%20"),
    "target header name": (
        target_header("bad name"),
        "target.headers.bad name",
        "not a valid header name",
        "x-request-id",
    ),
    "target header colon": (
        target_header("x-a:"),
        "target.headers.x-a:",
        "not a valid header name",
        "no spaces or colons",
    ),
    "header twice": (target_header("Accept"), "target.headers.Accept", "given twice", "case-insensitive"),
    "header line break": (target_header("x-a", "1\r\nx-b: 2"), "target.headers.x-a", "line breaks", "one line"),
    "step header name": (
        set_step("headers", {"a b": "c"}),
        f"{STEP}.headers.a b",
        "not a valid header name",
        "letters, digits",
    ),
    "duplicate step name": (
        duplicate_step_name,
        "scenarios[0].steps[2].name",
        "duplicate step name 'home'",
        "its own name",
    ),
    "duplicate scenario name": (
        duplicate_scenario_name,
        "scenarios[1].name",
        "duplicate scenario name 'browse'",
        "its own name",
    ),
    "uniform min > max": (uniform_range, f"{STEP}.think_time.max_ms", "less than min_ms (50)", "swap"),
    "workload without stages": (no_stages, "scenarios[0].workload.stages", "0 s in total", "add a stage"),
}


@pytest.mark.parametrize("case", list(VALIDATORS))
def test_validator_is_located_with_a_hint(case: str) -> None:
    change, location, message, hint = VALIDATORS[case]
    data = minimal()
    change(data)
    problem = only_problem(data)
    assert problem.location == location
    assert message in problem.message
    assert problem.hint is not None and hint in problem.hint
    assert str(problem) == f"{location}: {problem.message}"


@pytest.mark.parametrize(
    ("where", "key", "value", "message"),
    [
        ("target", "connect_timeout_ms", 0, "must be greater than 0"),
        ("target", "request_timeout_ms", -1, "must be greater than 0"),
        ("plan", "graceful_stop_s", -0.5, "must be 0 or more"),
        ("plan", "graceful_stop_s", float("nan"), "finite"),
        ("stage", "duration_s", 0, "must be greater than 0"),
        ("stage", "vus", -1, "must be 0 or more"),
        ("stage", "vus", 2.5, "integer"),
        ("workload", "start_vus", -3, "must be 0 or more"),
        ("plan", "name", "", "must not be empty"),
        ("step", "name", "", "must not be empty"),
        ("scenario", "steps", [], "must not be empty"),
        ("plan", "scenarios", [], "must not be empty"),
        ("step", "body", 5, "must be text (got the number 5)"),
        ("target", "insecure", "maybe", "boolean"),
    ],
)
def test_constraints_are_located(where: str, key: str, value: Any, message: str) -> None:
    data = minimal()
    parents: dict[str, tuple[dict[str, Any], str]] = {
        "plan": (data, ""),
        "target": (data["target"], "target."),
        "scenario": (data["scenarios"][0], "scenarios[0]."),
        "step": (data["scenarios"][0]["steps"][0], f"{STEP}."),
        "workload": (data["scenarios"][0]["workload"], "scenarios[0].workload."),
        "stage": (data["scenarios"][0]["workload"]["stages"][0], "scenarios[0].workload.stages[0]."),
    }
    parent, prefix = parents[where]
    parent[key] = value
    problem = only_problem(data)
    assert problem.location == f"{prefix}{key}"
    assert message in problem.message
    assert problem.hint, "every problem has a hint"


def test_open_model_constraints() -> None:
    data = minimal()
    data["scenarios"][0]["workload"] = {
        "type": "open",
        "start_rate_per_s": -1,
        "max_vus": 0,
        "stages": [{"duration_s": 1, "rate_per_s": -2}],
    }
    # In the order the keys are written.
    assert locations(data) == [
        "scenarios[0].workload.start_rate_per_s",
        "scenarios[0].workload.max_vus",
        "scenarios[0].workload.stages[0].rate_per_s",
    ]


def test_version_must_be_1() -> None:
    data = minimal()
    data["version"] = 2
    problem = only_problem(data)
    assert problem.location == "version"
    assert "version" in problem.message and problem.hint is not None and "version: 1" in problem.hint


def test_missing_keys_say_what_to_add() -> None:
    data = minimal()
    del data["version"]
    del data["target"]["base_url"]
    del data["scenarios"][0]["steps"][0]["path"]
    problems = problems_of(data)
    assert [p.location for p in problems] == [
        "target.base_url",
        f"{STEP}.path",
        "version",
    ]
    for problem in problems:
        key = problem.location.rsplit(".", 1)[-1]
        assert problem.message == "is required but missing"
        assert problem.hint is not None and problem.hint.startswith(f"add '{key}'")


def test_unknown_keys_at_every_depth_are_all_listed() -> None:
    data = minimal()
    data["duration"] = 30
    data["target"]["timeout_ms"] = 100
    data["scenarios"][0]["steps"][0]["pth"] = "/x"
    data["scenarios"][0]["workload"]["stages"][0]["users"] = 5
    data["scenarios"][0]["steps"][0]["think_time"] = {"type": "constant", "duration_ms": 1, "x": 1}
    problems = problems_of(data)
    by_location = {p.location: p for p in problems}
    # All of them, in the order they appear in the input ("duration" was added last).
    assert list(by_location) == [
        "target.timeout_ms",
        f"{STEP}.pth",
        f"{STEP}.think_time.x",
        "scenarios[0].workload.stages[0].users",
        "duration",
    ]
    assert by_location["duration"].message == "unknown key 'duration'"
    assert by_location["duration"].hint == (
        "allowed keys here: version, name, parameters, target, scenarios, graceful_stop_s, thresholds, autostop, steer, generators, monitors"
    )
    assert by_location["target.timeout_ms"].hint is not None
    assert by_location["target.timeout_ms"].hint.startswith(
        "allowed keys here: base_url, headers, connect_timeout_ms, request_timeout_ms, insecure"
    )
    assert "did you mean 'path'?" in (by_location[f"{STEP}.pth"].hint or "")
    assert by_location[f"{STEP}.think_time.x"].hint == "allowed keys here: type, duration_ms"
    assert by_location["scenarios[0].workload.stages[0].users"].hint == ("allowed keys here: duration_s, vus")


def test_unknown_key_of_the_other_workload_type_says_so() -> None:
    data = minimal()
    data["scenarios"][0]["workload"]["max_vus"] = 10
    problem = only_problem(data)
    assert problem.location == "scenarios[0].workload.max_vus"
    assert problem.hint is not None and "'max_vus' belongs to type 'open'" in problem.hint


def test_bad_workload_type_is_located_and_lists_the_types() -> None:
    data = minimal()
    data["scenarios"][0]["workload"]["type"] = "ramp"
    problem = only_problem(data)
    assert problem.location == "scenarios[0].workload.type"
    assert problem.message == "unknown type 'ramp'"
    assert problem.hint == "use one of: 'closed', 'open'"


def test_bad_think_time_type_is_located_and_lists_the_types() -> None:
    data = minimal()
    data["scenarios"][0]["steps"][0]["think_time"] = {"type": "gaussian", "mean_ms": 3}
    problem = only_problem(data)
    assert problem.location == f"{STEP}.think_time.type"
    assert problem.hint == "use one of: 'constant', 'uniform', 'normal', 'exponential'"


def test_missing_type_is_located_and_lists_the_types() -> None:
    data = minimal()
    del data["scenarios"][0]["workload"]["type"]
    data["scenarios"][0]["steps"][0]["think_time"] = {"duration_ms": 3}
    problems = problems_of(data)
    assert [(p.location, p.message, p.hint) for p in problems] == [
        (f"{STEP}.think_time", "missing 'type'", "add 'type': one of 'constant', 'uniform', 'normal', 'exponential'"),
        ("scenarios[0].workload", "missing 'type'", "add 'type': one of 'closed', 'open'"),
    ]


def test_wrong_shapes_are_explained() -> None:
    data = minimal()
    data["target"] = "http://127.0.0.1:8080"
    data["scenarios"][0]["steps"] = {"name": "home"}
    data["scenarios"][0]["workload"] = 5
    problems = problems_of(data)
    assert [(p.location, p.message) for p in problems] == [
        ("target", "must be a mapping (got the text 'http://127.0.0.1:8080')"),
        ("scenarios[0].steps", "must be a list (got a mapping)"),
        ("scenarios[0].workload", "must be a mapping (got the number 5)"),
    ]
    assert problems[0].hint is not None and "base_url" in problems[0].hint
    assert problems[2].hint is not None and "'closed', 'open'" in problems[2].hint


def test_a_plan_that_is_not_a_mapping() -> None:
    problem = only_problem(["version", 1])
    assert problem.location == ""
    assert problem.message == "must be a mapping (got a list)"
    assert problem.hint is not None and "version, target and scenarios" in problem.hint


def test_duplicates_are_listed_with_the_other_problems() -> None:
    data = minimal()
    steps = data["scenarios"][0]["steps"]
    steps[0]["path"] = "x"
    steps.append({"name": "home", "method": "get", "path": "/"})
    data["scenarios"].append(copy.deepcopy(data["scenarios"][0]))
    data["scenarios"][1]["workload"]["type"] = "nope"
    assert locations(data) == [
        f"{STEP}.path",
        "scenarios[0].steps[1].name",
        "scenarios[0].steps[1].method",
        "scenarios[1].name",
        "scenarios[1].steps[0].path",
        "scenarios[1].steps[1].name",
        "scenarios[1].steps[1].method",
        "scenarios[1].workload.type",
    ]


def test_many_problems_at_once_each_with_a_hint_and_no_noise() -> None:
    data = minimal()
    data["version"] = "one"
    data["extra"] = True
    data["target"]["base_url"] = "localhost"
    data["scenarios"][0]["steps"][0].update(method="get", path="x", think_time={"type": "?"})
    data["scenarios"][0]["workload"]["stages"][0]["duration_s"] = "long"
    problems = problems_of(data)
    assert len(problems) == 7
    for problem in problems:
        assert problem.location, problem
        assert problem.hint, problem
        assert "pydantic.dev" not in problem.message and "pydantic.dev" not in problem.hint
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(data, source="plan.yaml")
    assert caught.value.source == "plan.yaml"
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert str(caught.value) == "the plan in plan.yaml has 7 problems"


def test_python_construction_raises_located_pydantic_errors() -> None:
    with pytest.raises(ValidationError) as caught:
        HttpStep(name="home", method="get", path="/")  # type: ignore[arg-type]
    (error,) = caught.value.errors()
    assert error["loc"] == ("method",) and error["msg"] == "method 'get' must be upper case"
    with pytest.raises(ValidationError) as caught:
        Scenario.model_validate(
            {
                "name": "s",
                "steps": [HttpStep(name="a", method="GET", path="/"), HttpStep(name="a", method="GET", path="/b")],
                "workload": {"type": "open", "stages": [], "max_vus": 1},
            }
        )
    assert [e["loc"] for e in caught.value.errors()] == [
        ("steps", 1, "name"),
        ("workload", "open", "stages"),
    ]


def test_describe_accepts_errors_of_any_model_of_the_plan() -> None:
    with pytest.raises(ValidationError) as caught:
        Target(base_url="http://h", bogus=1)  # type: ignore[call-arg]
    (issue,) = plan_problems.describe_validation_error(caught.value)
    assert (issue.path, issue.message) == ("bogus", "unknown key 'bogus'")
    assert issue.hint is not None and issue.hint.startswith("allowed keys here: base_url, headers")


# --- schema, doctests ----------------------------------------------------------------------------


def test_json_schema() -> None:
    schema = plan_json_schema()
    text = json.dumps(schema)
    assert json.loads(text) == schema
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "Horde plan (version 1)"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"version", "target", "scenarios"}
    definitions = schema["$defs"]
    assert set(definitions) == {
        "Threshold",
        "AutostopRule",
        "FindMax",
        "TargetResponseTime",
        "Generators",
        "Target",
        "ConnectionPool",
        "Http2Settings",
        "Scenario",
        "HttpStep",
        "ConstantThinkTime",
        "UniformThinkTime",
        "ExponentialThinkTime",
        "NormalThinkTime",
        "ClosedModel",
        "ClosedStage",
        "OpenModel",
        "OpenStage",
        # The scenario language's.
        "Feeder",
        "Extractor",
        "StatusCheck",
        "JsonCheck",
        "BodyContainsCheck",
        "BodyMatchesCheck",
        "GroupStep",
        "ParallelStep",
        "ChoiceStep",
        "Branch",
        "LoopStep",
        "IfStep",
        "ThinkStep",
        "EndIterationStep",
        # The postgres transport's.
        "SqlStep",
        "SqlStatement",
        "SqlExtractor",
        "SqlRowCountCheck",
        "SqlColumnCheck",
        "ConnectStep",
        "SendStep",
        "ReceiveStep",
        "PingStep",
        "StreamStep",
        "CloseStep",
        "NewlineFraming",
        "LengthFraming",
        "RawFraming",
        "Network",
        "KcpOptions",
        # The monitors'.
        "HostMonitor",
        "PrometheusMonitor",
        "PostgresMonitor",
        "Series",
        "HostDiagnosis",
        "PostgresDiagnosis",
    }
    for name, definition in definitions.items():
        assert definition["additionalProperties"] is False, name
        for key, prop in definition["properties"].items():
            assert prop.get("description"), f"{name}.{key} has no description"
    workload = definitions["Scenario"]["properties"]["workload"]
    assert workload["discriminator"]["propertyName"] == "type"
    assert set(workload["discriminator"]["mapping"]) == {"closed", "open"}
    # A file must say which type it means, though Python code may leave it out.
    assert "type" in definitions["ClosedModel"]["required"]
    assert definitions["ClosedModel"]["properties"]["stages"]["minItems"] == 1
    # A number may also be written as a parameter reference, "{{ params.NAME }}".
    duration, reference = definitions["ClosedStage"]["properties"]["duration_s"]["anyOf"]
    assert duration["exclusiveMinimum"] == 0
    assert reference["type"] == "string" and "params" in reference["pattern"]


def test_docstring_examples_run() -> None:
    # (horde.plan, the attribute of the package, is the builder's function: import the module.)
    results = doctest.testmod(importlib.import_module("horde.plan.model"), optionflags=doctest.ELLIPSIS)
    assert results.attempted >= 5
    assert results.failed == 0


def test_problem_docstring_examples_run() -> None:
    results = doctest.testmod(plan_problems, optionflags=doctest.ELLIPSIS)
    assert results.attempted >= 1
    assert results.failed == 0
