"""The scenario language of the plan (python/horde/plan/steps.py and its validators): steps by
type, wire names, nesting, located mistakes with hints, Python models and the schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from horde import _engine
from horde.errors import PlanInvalid
from horde.plan import problems as plan_problems
from horde.plan import (
    HttpStep,
    LoopStep,
    ParallelStep,
    Scenario,
    plan_from_dict,
    plan_json_schema,
    plan_step,
    plan_to_json,
)
from test_plan import locations, minimal, only_problem


def language() -> dict[str, Any]:
    """A valid plan using the scenario language; the cases below break one thing each."""
    return {
        "version": 1,
        "parameters": {"vus": 2},
        "target": {"base_url": "http://127.0.0.1:8080"},
        "scenarios": [
            {
                "name": "player",
                "feeders": [{"name": "users", "path": "/data/users.csv"}],
                "setup": [
                    {
                        "name": "login",
                        "method": "POST",
                        "path": "/login",
                        "json": {"user": "{{ users.login }}"},
                        "extract": [{"var": "token", "from": "json", "expression": "$.token"}],
                    }
                ],
                "steps": [
                    {
                        "type": "choice",
                        "branches": [
                            {"weight": 70, "steps": [{"name": "city", "method": "GET", "path": "/city"}]},
                            {
                                "weight": 30,
                                "steps": [
                                    {
                                        "type": "group",
                                        "name": "build",
                                        "steps": [
                                            {
                                                "name": "buildings",
                                                "method": "GET",
                                                "path": "/b",
                                                "checks": [{"type": "status", "in": [200]}],
                                            },
                                        ],
                                    }
                                ],
                            },
                        ],
                    },
                    {
                        "type": "loop",
                        "count": 2,
                        "steps": [{"type": "think", "think_time": {"type": "constant", "duration_ms": 1}}],
                    },
                    {"type": "if", "condition": "token", "then": [{"type": "end_iteration"}]},
                ],
                "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 2}]},
            }
        ],
    }


def test_the_language_round_trips_with_wire_names() -> None:
    plan = plan_from_dict(language())
    wire = json.loads(plan_to_json(plan))
    scenario = wire["scenarios"][0]
    assert scenario["feeders"] == [{"name": "users", "path": "/data/users.csv", "format": "csv", "mode": "circular"}]
    assert scenario["setup"][0]["extract"] == [
        {"var": "token", "from": "json", "expression": "$.token", "pick": "first", "default": None}
    ]
    loop = scenario["steps"][1]
    assert loop == {
        "type": "loop",
        "count": 2,
        "while": None,
        "max_iterations": 1000,
        "for_each": None,
        "as": None,
        "steps": [{"type": "think", "think_time": {"type": "constant", "duration_ms": 1.0}}],
    }
    assert scenario["steps"][2] == {"type": "if", "condition": "token", "then": [{"type": "end_iteration"}], "else": []}
    assert scenario["steps"][0]["branches"][1]["steps"][0]["steps"][0]["checks"] == [{"type": "status", "in": [200]}]
    assert plan_from_dict(wire) == plan
    assert plan_to_json(plan_from_dict(wire)) == plan_to_json(plan)


def test_a_step_without_type_is_http_and_type_http_may_be_written() -> None:
    data = language()
    data["scenarios"][0]["steps"].append({"type": "http", "name": "typed", "method": "GET", "path": "/t"})
    steps = plan_from_dict(data).scenarios[0].steps
    assert isinstance(steps[3], HttpStep) and steps[3].type == "http"
    assert isinstance(plan_from_dict(minimal()).scenarios[0].steps[0], HttpStep)


def at(*keys: Any) -> Callable[[dict[str, Any]], Any]:
    def node(data: dict[str, Any]) -> Any:
        found: Any = data
        for key in keys:
            found = found[key]
        return found

    return node


PLAYER = at("scenarios", 0)
CHOICE = at("scenarios", 0, "steps", 0)
BRANCH_0 = at("scenarios", 0, "steps", 0, "branches", 0)
GROUP = at("scenarios", 0, "steps", 0, "branches", 1, "steps", 0)
LOOP = at("scenarios", 0, "steps", 1)
IF = at("scenarios", 0, "steps", 2)
LOGIN = at("scenarios", 0, "setup", 0)
EXTRACTOR = at("scenarios", 0, "setup", 0, "extract", 0)
FEEDER = at("scenarios", 0, "feeders", 0)


def change(node: Callable[[dict[str, Any]], Any], **values: Any) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        target = node(data)
        for key, value in values.items():
            key = key.rstrip("_")
            if value is ...:
                del target[key]
            else:
                target[key] = value

    return apply


def append(node: Callable[[dict[str, Any]], Any], key: str, item: Any) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        node(data)[key].append(item)

    return apply


def nest(depth: int) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        step: dict[str, Any] = {"name": "deep", "method": "GET", "path": "/"}
        for level in range(depth - 1):
            step = {"type": "group", "name": f"g{level}", "steps": [step]}
        data["scenarios"][0]["steps"] = [step]

    return apply


SC = "scenarios[0]"
LANGUAGE_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str, str, str]] = {
    "duplicate name across setup and a group": (
        change(GROUP, name="login"),
        f"{SC}.steps[0].branches[1].steps[0].name",
        "duplicate step name 'login' (also at setup[0])",
        "across setup, steps and teardown",
    ),
    "duplicate name in teardown": (
        change(PLAYER, teardown=[{"name": "city", "method": "GET", "path": "/"}]),
        f"{SC}.teardown[0].name",
        "duplicate step name 'city' (also at steps[0].branches[0].steps[0])",
        "its own name",
    ),
    "body and json": (change(LOGIN, body="x"), f"{SC}.setup[0].json", "either 'body' or 'json'", "Content-Type"),
    "json NaN": (change(LOGIN, json_={"x": float("nan")}), f"{SC}.setup[0].json", "not a JSON number", "finite"),
    "path with a template is fine, a space outside is not": (
        change(LOGIN, path="/a/{{ x y }} b"),
        f"{SC}.setup[0].path",
        "spaces",
        "inside {{ }} spaces are fine",
    ),
    "extractor without expression": (
        change(EXTRACTOR, expression=...),
        f"{SC}.setup[0].extract[0].expression",
        "an extractor from 'json' needs an expression",
        "'$.items[0].id'",
    ),
    "status extractor with expression": (
        change(EXTRACTOR, from_="status"),
        f"{SC}.setup[0].extract[0].expression",
        "takes no expression",
        "remove 'expression'",
    ),
    "header extractor with a bad name": (
        change(EXTRACTOR, from_="header", expression="set cookie"),
        f"{SC}.setup[0].extract[0].expression",
        "not a valid header name",
        "response header's name",
    ),
    "extractor var reserved": (
        change(EXTRACTOR, var="params"),
        f"{SC}.setup[0].extract[0].var",
        "a name templates already use",
        "reserved",
    ),
    "extractor var not a name": (
        change(EXTRACTOR, var="1st"),
        f"{SC}.setup[0].extract[0].var",
        "not a valid variable name",
        "letters, digits",
    ),
    "extractor var named like a feeder": (
        change(EXTRACTOR, var="users"),
        f"{SC}.setup[0].extract[0].var",
        "has the name of feeder 'users'",
        "rename",
    ),
    "extractor from unknown": (
        change(EXTRACTOR, from_="xml"),
        f"{SC}.setup[0].extract[0].from",
        "'json', 'regex', 'header' or 'status'",
        "where the value comes from",
    ),
    "status check out of range": (
        change(at("scenarios", 0, "steps", 0, "branches", 1, "steps", 0, "steps", 0, "checks", 0), in_=[200, 99]),
        f"{SC}.steps[0].branches[1].steps[0].steps[0].checks[0].in[1]",
        "must be 100 or more",
        "accepted status",
    ),
    "check type unknown": (
        change(at("scenarios", 0, "steps", 0, "branches", 1, "steps", 0, "steps", 0, "checks", 0), type="latency"),
        f"{SC}.steps[0].branches[1].steps[0].steps[0].checks[0].type",
        "unknown type 'latency'",
        "'status', 'json', 'body_contains', 'body_matches'",
    ),
    "branch weight zero": (change(BRANCH_0, weight=0), f"{SC}.steps[0].branches[0].weight", "greater than 0", "share"),
    "choice without branches": (
        change(CHOICE, branches=[]),
        f"{SC}.steps[0].branches",
        "must not be empty",
        "branches",
    ),
    "group without steps": (
        change(GROUP, steps=[]),
        f"{SC}.steps[0].branches[1].steps[0].steps",
        "must not be empty",
        "group",
    ),
    "loop without kind": (
        change(LOOP, count=...),
        f"{SC}.steps[1]",
        "needs one of 'count', 'while' or 'for_each'",
        "count: N",
    ),
    "loop with two kinds": (change(LOOP, while_="x"), f"{SC}.steps[1].while", "also has 'count'", "keep one"),
    "for_each without as": (change(LOOP, count=..., for_each="items"), f"{SC}.steps[1].as", "needs 'as'", "as: item"),
    "as without for_each": (change(LOOP, as_="item"), f"{SC}.steps[1].as", "has no for_each", "remove 'as'"),
    "for_each with braces": (
        change(LOOP, count=..., for_each="{{ items }}", as_="x"),
        f"{SC}.steps[1].for_each",
        "not a variable name",
        "without {{ }}",
    ),
    "loop count negative": (change(LOOP, count=-1), f"{SC}.steps[1].count", "0 or more", "repeat"),
    "max_iterations zero": (
        change(LOOP, count=..., while_="x", max_iterations=0),
        f"{SC}.steps[1].max_iterations",
        "1 or more",
        "while loop",
    ),
    "condition with braces": (
        change(IF, condition="{{ token }}"),
        f"{SC}.steps[2].condition",
        "an expression, not a template",
        "without {{ }}",
    ),
    "unknown step type": (
        change(IF, type="when"),
        f"{SC}.steps[2].type",
        "unknown type 'when'",
        "'http', 'sql', 'connect', 'send', 'receive', 'ping', 'stream', 'close', 'group', 'parallel', 'choice', 'loop', 'if', "
        "'think', 'end_iteration'",
    ),
    "control-flow keys without a type": (
        change(LOOP, type=...),
        f"{SC}.steps[1]",
        "missing 'type'",
        "add 'type': one of 'http'",
    ),
    "key of another step type": (
        change(LOGIN, count=3),
        f"{SC}.setup[0].count",
        "unknown key 'count'",
        "belongs to type 'loop'",
    ),
    "think step without think time": (
        change(at("scenarios", 0, "steps", 1, "steps", 0), think_time=...),
        f"{SC}.steps[1].steps[0].think_time",
        "is required but missing",
        "the pause",
    ),
    "feeder without format and an unknown extension": (
        change(FEEDER, path="users.txt"),
        f"{SC}.feeders[0].format",
        "is required but missing",
        ".csv, .jsonl or .ndjson",
    ),
    "feeder mode unknown": (
        change(FEEDER, mode="sequential"),
        f"{SC}.feeders[0].mode",
        "'circular', 'random' or 'unique'",
        "each iteration",
    ),
    "feeder name reserved": (
        change(FEEDER, name="vu"),
        f"{SC}.feeders[0].name",
        "a name templates already use",
        "reserved",
    ),
    "feeder twice": (
        append(PLAYER, "feeders", {"name": "users", "path": "b.jsonl"}),
        f"{SC}.feeders[1].name",
        "duplicate feeder name 'users'",
        "its own name",
    ),
    "scenario weight zero": (change(PLAYER, weight=0), f"{SC}.weight", "greater than 0", "share"),
    "scenario weight huge": (change(PLAYER, weight=1e7), f"{SC}.weight", "at most 1e+06", "share"),
    "scenario header": (
        change(PLAYER, headers={"a b": "1"}),
        f"{SC}.headers.a b",
        "not a valid header name",
        "x-request-id",
    ),
    "pacing in the open model": (
        change(
            PLAYER, pacing_s=1, workload={"type": "open", "stages": [{"duration_s": 1, "rate_per_s": 1}], "max_vus": 1}
        ),
        f"{SC}.pacing_s",
        "pacing applies to the closed model",
        "remove pacing_s",
    ),
    "pacing zero": (change(PLAYER, pacing_s=0), f"{SC}.pacing_s", "greater than 0", "every this many seconds"),
    "steps nested too deep": (nest(17), f"{SC}.steps[0]" + ".steps[0]" * 16, "more than 16 deep", "flatten"),
}


@pytest.mark.parametrize("case", list(LANGUAGE_CASES))
def test_language_mistakes_are_located_with_a_hint(case: str) -> None:
    mutate, location, message, hint = LANGUAGE_CASES[case]
    data = language()
    mutate(data)
    problem = only_problem(data)
    assert problem.location == location
    assert message in problem.message
    assert problem.hint is not None and hint in problem.hint, problem.hint


def test_nesting_up_to_the_limit_is_fine() -> None:
    data = language()
    nest(16)(data)
    plan_from_dict(data)


def test_a_branch_may_be_empty_and_an_if_may_have_only_else() -> None:
    data = language()
    BRANCH_0(data)["steps"] = []
    IF(data)["then"] = []
    IF(data)["else"] = [{"type": "end_iteration"}]
    plan_from_dict(data)


def test_every_language_problem_is_listed_at_once() -> None:
    data = language()
    for mutate in (
        change(GROUP, name="login"),
        change(LOGIN, body="x"),
        change(LOOP, while_="x"),
        change(BRANCH_0, weight=-1),
    ):
        mutate(data)
    assert locations(data) == [
        f"{SC}.setup[0].json",
        f"{SC}.steps[0].branches[0].weight",
        f"{SC}.steps[0].branches[1].steps[0].name",
        f"{SC}.steps[1].while",
    ]


def test_step_models_from_python() -> None:
    step = plan_step(
        {"type": "loop", "for_each": "items", "as": "item", "steps": [{"name": "a", "method": "GET", "path": "/"}]}
    )
    assert isinstance(step, LoopStep) and step.as_ == "item" and step.for_each == "items"
    assert step.model_dump()["as"] == "item"  # wire names, whatever the attribute is called
    with pytest.raises(ValidationError) as caught:
        plan_step({"type": "if", "condition": "x", "then": [], "else": "no"})
    (issue,) = plan_problems.describe_validation_error(caught.value)
    assert issue.path == "else" and issue.message.startswith("must be a list")


def test_language_schema() -> None:
    definitions = plan_json_schema()["$defs"]
    steps = definitions["Scenario"]["properties"]["steps"]["items"]["oneOf"]
    assert {ref["$ref"].rsplit("/", 1)[1] for ref in steps} == {
        "HttpStep",
        "SqlStep",
        "GroupStep",
        "ParallelStep",
        "ChoiceStep",
        "LoopStep",
        "IfStep",
        "ThinkStep",
        "EndIterationStep",
        "ConnectStep",
        "SendStep",
        "ReceiveStep",
        "PingStep",
        "StreamStep",
        "CloseStep",
    }
    # An HTTP step may leave its type out; the others say it.
    assert "type" not in definitions["HttpStep"]["required"]
    for name in ("GroupStep", "ChoiceStep", "LoopStep", "IfStep", "ThinkStep", "EndIterationStep", "StatusCheck"):
        assert "type" in definitions[name]["required"], name
    assert set(definitions["LoopStep"]["properties"]) == {
        "type",
        "count",
        "while",
        "max_iterations",
        "for_each",
        "as",
        "steps",
    }
    assert "from" in definitions["Extractor"]["required"]
    assert "format" not in definitions["Feeder"]["required"]
    assert definitions["HttpStep"]["properties"]["json"].get("description")
    assert "JsonValue" not in definitions


# --- parallel groups ----------------------------------------------------------------------------

PARALLEL_MISTAKES: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "think time on a request": (
        {"name": "css", "method": "GET", "path": "/a.css", "think_time": {"type": "constant", "duration_ms": 5}},
        "think_time",
        "takes no think time",
        "add {type: think, ...} after the group",
    ),
    "think step": (
        {"type": "think", "think_time": {"type": "constant", "duration_ms": 5}},
        "type",
        "a think step inside a parallel group",
        "move the think step out",
    ),
    "nested group": (
        {"type": "group", "name": "inner", "steps": [{"name": "x", "method": "GET", "path": "/"}]},
        "type",
        "holds http steps only, not 'group'",
        "a loop, if or choice may hold the whole group",
    ),
    "nested loop": (
        {"type": "loop", "count": 2, "steps": [{"name": "x", "method": "GET", "path": "/"}]},
        "type",
        "holds http steps only, not 'loop'",
        "a loop, if or choice may hold the whole group",
    ),
}


def parallel_plan(*steps: dict[str, Any], base_url: str = "http://127.0.0.1:8080", **target: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "target": {"base_url": base_url, **target},
        "scenarios": [
            {
                "name": "s",
                "steps": [
                    {"name": "home", "method": "GET", "path": "/"},
                    {
                        "type": "parallel",
                        "name": "page",
                        "steps": [{"name": "js", "method": "GET", "path": "/a.js"}, *steps],
                    },
                ],
                "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]},
            }
        ],
    }


@pytest.mark.parametrize("case", list(PARALLEL_MISTAKES))
def test_a_parallel_group_holds_requests_only_on_both_sides(case: str) -> None:
    step, key, message, hint = PARALLEL_MISTAKES[case]
    data = parallel_plan(step)
    problem = only_problem(data)
    assert problem.location == f"{SC}.steps[1].steps[1].{key}"
    assert message in problem.message
    assert problem.hint is not None and hint in problem.hint, problem.hint
    # The engine's validator finds the same problem at the same place, in the same words.
    engine = _engine.validate_plan(json.dumps(data))
    assert [path for path, _, _ in engine] == [problem.location], engine
    assert message in engine[0][1]


def test_parallel_group_names_and_bounds_agree_on_both_sides() -> None:
    data = parallel_plan({"name": "home", "method": "GET", "path": "/b.js"}, parallel_connections=0)
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(data)
    locations = sorted(problem.location for problem in caught.value.problems)
    assert locations == ["scenarios[0].steps[1].steps[1].name", "target.parallel_connections"], caught.value.problems
    assert sorted(path for path, _, _ in _engine.validate_plan(json.dumps(data))) == locations
    empty = parallel_plan()
    empty["scenarios"][0]["steps"][1]["steps"] = []
    assert only_problem(empty).location == f"{SC}.steps[1].steps"
    assert [path for path, _, _ in _engine.validate_plan(json.dumps(empty))] == [f"{SC}.steps[1].steps"]


@pytest.mark.parametrize(
    ("base_url", "words"),
    [
        ("postgresql://horde@127.0.0.1:5432/horde", "a postgresql:// target takes sql steps"),
        ("tcp://127.0.0.1:9000", "against a message target use send, receive or ping"),
    ],
)
def test_a_parallel_group_needs_an_http_target_on_both_sides(base_url: str, words: str) -> None:
    data = parallel_plan(base_url=base_url)
    data["scenarios"][0]["steps"] = data["scenarios"][0]["steps"][1:]
    problem = only_problem(data)
    assert (problem.location, words in problem.message) == (f"{SC}.steps[0].type", True), problem
    engine = _engine.validate_plan(json.dumps(data))
    assert (f"{SC}.steps[0].type", True) in [(path, words in message) for path, message, _ in engine], engine


def test_a_parallel_group_round_trips_and_counts_its_requests_as_steps() -> None:
    data = parallel_plan(
        {
            "name": "css",
            "method": "GET",
            "path": "/a.css",
            "extract": [{"var": "etag", "from": "header", "expression": "etag"}],
        },
        http_version="2",
    )
    plan = plan_from_dict(data)
    group = plan.scenarios[0].steps[1]
    assert isinstance(group, ParallelStep) and [step.name for step in group.steps] == ["js", "css"]
    assert [step.name for step in plan.scenarios[0].all_steps() if step.type == "http"] == ["home", "js", "css"]
    assert plan.target.parallel_connections == 6
    assert _engine.validate_plan(plan_to_json(plan)) == []
    assert plan_from_dict(json.loads(plan_to_json(plan))) == plan
