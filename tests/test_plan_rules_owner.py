"""Who owns the plan's rules: horde-plan (crates/horde-plan) is to be the one semantic rule set,
and pydantic keeps the types, defaults, unknown-key refusal, the JSON Schema and the builder.

This test walks every pydantic model of ``horde.plan`` and lists its validators. Each must be
either type-level (with the reason it is), a rule on a part of the plan the engine never reads
(``CONTROL_PLANE_S``: its one owner is the control plane), an engine rule asked as the model is
built (``ASKED_ON_BUILD``: the rule, its message and hint are horde-plan's, asked through the
binding so that a plan built in code fails where it is built). No semantic rule is written in
pydantic: a new semantic validator there fails here; write the rule in horde-plan instead.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
import uuid
from pathlib import Path

import pytest
from pydantic import BaseModel

import horde.plan  # noqa: F401  (loads the package whose modules are walked)

#: Validators that read or shape input into the model's types and defaults: pydantic's to keep.
TYPE_LEVEL = {
    "control.Threshold._parse": "parses a threshold's text form ('p95 < 300ms') into its fields",
    "control.Threshold._from_text": "accepts the text form in place of the mapping",
    "control.Threshold._keep_parsed": "keeps the parsed fields beside the text the user wrote",
    "control.AutostopRule._parse": "parses a rule's text form into its fields",
    "control.AutostopRule._from_text": "accepts the text form in place of the mapping",
    "control.AutostopRule._keep_parsed": "keeps the parsed fields beside the text the user wrote",
    "model.Feeder._infer_format": "a default: the format told from the file's extension",
    "workloads.ClosedModel._lower_profile": "a shorthand (a profile) lowered to stages before the types are read",
    "workloads.OpenModel._lower_profile": "a shorthand (a profile) lowered to stages before the types are read",
    "steps.HttpStep._check_json": "a JSON body is a JSON value: a set, bytes or NaN from Python code "
    "could not be written as the plan's JSON for the engine to check",
    "message.SendStep._check_json": "a JSON message is a JSON value (as steps.HttpStep._check_json)",
    "message.StreamStep._check_json": "a JSON message is a JSON value (as steps.HttpStep._check_json)",
    "rules.Extractor._check_default": "a default is a JSON value (as steps.HttpStep._check_json)",
    "sql.SqlExtractor._check_default": "a default is a JSON value (as steps.HttpStep._check_json)",
    "rules.JsonCheck._check_equals": "the value compared is a JSON value (as steps.HttpStep._check_json)",
    "message.Network._no_bool": "a rate is a number or a text: pydantic would read true as the number 1",
}

#: Rules on the parts of a plan the engine never reads: crates/horde-plan keeps the control plane's
#: part (thresholds, autostop, steer, generators, monitors) as opaque JSON, and the parameters
#: arrive already substituted by the plan loader. The control plane reads, judges and samples
#: them, so it is their one owner (``test_the_engine_keeps_the_control_planes_part_opaque``).
CONTROL_PLANE_S = {
    "control.TargetResponseTime._pace_bounds": "steer: a pace's range defaults",
    "model.Plan._check_monitor_names": "monitors: each name once",
    "model.Plan._check_parameters": "parameters: their names and values, substituted by the loader",
    "model.Plan._check_control_names": "thresholds and autostop: the scenarios and steps they name",
    "monitors._Monitor._check_name": "monitors: a name usable in monitor.NAME.METRIC",
    "monitors.HostMonitor._check_name": "monitors: the host monitor's name",
    "monitors.Series._check_patterns": "monitors: a series' label patterns are regular expressions",
    "monitors.PrometheusMonitor._check_name": "monitors: the exporter's name",
    "monitors.PrometheusMonitor._check_url": "monitors: the exporter's URL, and no password in it",
    "monitors.PostgresMonitor._check_name": "monitors: the database's name",
    "monitors.PostgresMonitor._check_dsn": "monitors: the database's URL, and no password in it",
}

#: Validators that ask horde-plan for a rule (message and hint included) through the binding, so
#: that building a plan in code fails at the model built; the rule itself is written once, in Rust.
#: Each names the binding it asks (``test_rules_asked_on_build_are_the_engines``).
ASKED_ON_BUILD = {
    "model.Feeder._check_name": "variable_name_problem",
    "rules.Extractor._check_var": "variable_name_problem",
    "steps.HttpStep._check_method": "method_problem",
    # Beside what it asks it reads two forms YAML writes (connections' union, http_version's
    # numbers) and whether password_env is set where horde runs, which only this machine knows.
    "target.Target._check_target": "target_problems",
    "workloads.ClosedModel._check_workload": "workload_problems",
    "workloads.OpenModel._check_workload": "workload_problems",
    # Asked of the scenario's input before its types are read, so its problems list with theirs.
    "model.Scenario._check_structure": "scenario_structure_problems",
}


def _validators() -> set[str]:
    package = sys.modules["horde.plan"]
    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"horde.plan.{info.name}")
        for model in vars(module).values():
            if not (inspect.isclass(model) and issubclass(model, BaseModel) and model.__module__ == module.__name__):
                continue
            decorators = model.__pydantic_decorators__
            for name in (*decorators.field_validators, *decorators.model_validators):
                found.add(f"{info.name}.{model.__qualname__}.{name}")
    return found


def test_each_pydantic_validator_is_type_level_the_control_planes_or_the_engines() -> None:
    found = _validators()
    unlisted = sorted(found - set(TYPE_LEVEL) - set(CONTROL_PLANE_S) - set(ASKED_ON_BUILD))
    assert unlisted == [], (
        f"semantic rules belong in crates/horde-plan (or, if type-level, in TYPE_LEVEL with why): {unlisted}"
    )


def test_the_lists_name_only_validators_that_exist() -> None:
    gone = sorted((set(TYPE_LEVEL) | set(CONTROL_PLANE_S) | set(ASKED_ON_BUILD)) - _validators())
    assert gone == [], f"moved or removed: take them off the lists {gone}"


def test_rules_asked_on_build_are_the_engines() -> None:
    """A rule asked on build is the engine's: the binding it names exists, and what the validator raises
    is what the engine's own check says of the same plan (message and hint, word for word)."""
    import json

    from pydantic import ValidationError

    from horde import _engine
    from horde.engine.run import engine_problems
    from horde.plan import MAX_STEP_DEPTH, ClosedModel, Feeder, HttpStep, OpenModel, Scenario, Target
    from horde.plan.rules import Extractor

    for name, binding in ASKED_ON_BUILD.items():
        assert callable(getattr(_engine, binding)), name
    twice = {"name": "a", "method": "GET", "path": "/"}
    nested: dict[str, object] = {"name": "leaf", "method": "GET", "path": "/"}
    for depth in range(MAX_STEP_DEPTH):
        nested = {"type": "group", "name": f"g{depth}", "steps": [nested]}
    nested_scenario = {"name": "s", "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}}
    extracting = _plan(
        {"name": "a", "method": "GET", "path": "/", "extract": [{"from": "json", "expression": "$.a", "var": "2nd"}]}
    )
    feeding = _plan({"name": "a", "method": "GET", "path": "/"})
    feeding["scenarios"][0]["feeders"] = [{"name": "vu", "path": "x.csv"}]  # type: ignore[index]
    for model, arguments, plan, field in (
        (Feeder, {"name": "vu", "path": "x.csv"}, feeding, "feeders[0].name"),
        (Extractor, {"from": "json", "expression": "$.a", "var": "2nd"}, extracting, "extract[0].var"),
        (
            HttpStep,
            {"name": "a", "method": "get", "path": "/"},
            _plan({"name": "a", "method": "get", "path": "/"}),
            "method",
        ),
        (
            HttpStep,
            {"name": "a", "method": "FETCH", "path": "/"},
            _plan({"name": "a", "method": "FETCH", "path": "/"}),
            "method",
        ),
        (Target, {"base_url": "HTTP://h"}, _target("HTTP://h"), "target.base_url"),
        (
            ClosedModel,
            {"stages": []},
            _plan({"name": "a", "method": "GET", "path": "/"}, workload={"type": "closed", "stages": []}),
            "workload.stages",
        ),
        (
            OpenModel,
            {"stages": [], "max_vus": 5},
            _plan({"name": "a", "method": "GET", "path": "/"}, workload={"type": "open", "stages": [], "max_vus": 5}),
            "workload.stages",
        ),
        (
            Target,
            {"base_url": "http://h", "instances": ["http://h:80"]},
            _target("http://h", ["http://h:80"]),
            "instances[0]",
        ),
        (Target, {"base_url": "ws://h", "kcp": {}}, _target("ws://h", kcp={}), "target.kcp"),
        (
            Scenario,
            {
                "name": "s",
                "steps": [twice, twice],
                "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]},
            },
            _plan(twice, twice),
            "steps[1].name",
        ),
        (
            Scenario,
            {**nested_scenario, "steps": [nested]},
            _plan(nested),
            "steps[0]" + ".steps[0]" * MAX_STEP_DEPTH,
        ),
    ):
        with pytest.raises(ValidationError) as caught:
            model.model_validate(arguments)
        (error,) = caught.value.errors()
        engine = [problem for problem in engine_problems(json.dumps(plan)) if problem.location.endswith(field)]
        assert len(engine) == 1, engine
        assert error["msg"] == engine[0].message
        assert (error.get("ctx") or {}).get("hint") == engine[0].hint


def test_the_static_method_type_is_the_engines_list() -> None:
    # The builder's Literal is for mypy; its values are horde-plan's METHODS, in its order.
    from typing import get_args

    from horde import _engine
    from horde.plan import METHODS
    from horde.plan.common import Method

    assert get_args(Method) == tuple(_engine.http_methods()) == METHODS


def test_the_engine_keeps_the_control_planes_part_opaque() -> None:
    """The parts CONTROL_PLANE_S's rules are on stay JSON the engine carries and never reads, and
    the engine words none of their rules: were it to read one, its rules would move there."""
    source = (Path(__file__).resolve().parents[1] / "crates" / "horde-plan" / "src" / "lib.rs").read_text()
    plan_struct = source[source.index("pub struct Plan {") :]
    plan_struct = plan_struct[: plan_struct.index("\n}")]
    for part in ("thresholds", "autostop", "steer", "monitors"):
        assert re.search(rf"pub {part}: (Vec|Option)<serde_json::Value>", plan_struct), part
    assert "pub parameters: serde_json::Map<String, serde_json::Value>" in plan_struct
    rules = "".join(
        path.read_text() for path in (Path(__file__).resolve().parents[1] / "crates" / "horde-plan").rglob("*.rs")
    )
    for wording in (
        "is not a valid monitor name",
        "is not a postgresql:// URL",
        "only in case",
        "no scenario is named",
    ):
        assert wording not in rules, wording


def test_the_walk_finds_known_validators() -> None:
    # Known answers, read from the source: a step's method and a threshold's text form.
    found = _validators()
    assert {"steps.HttpStep._check_method", "control.Threshold._parse"} <= found


# --- the engine's rules, asked by the plan layer -------------------------------------------------


def _plan(*steps: dict[str, object], workload: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "version": 1,
        "target": {"base_url": "http://127.0.0.1:8080"},
        "scenarios": [
            {
                "name": "s",
                "steps": list(steps),
                "workload": workload or {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]},
            }
        ],
    }


def _target(base_url: str, instances: list[str] | None = None, **more: object) -> dict[str, object]:
    plan = _plan({"name": "a", "method": "GET", "path": "/"})
    plan["target"] = {"base_url": base_url, "instances": instances or [], **more}
    return plan


def _problems(data: dict[str, object]) -> list[tuple[str, str, str | None]]:
    from horde.errors import PlanInvalid
    from horde.plan import plan_from_dict

    try:
        plan_from_dict(data)
    except PlanInvalid as refused:
        return [(problem.location, problem.message, problem.hint) for problem in refused.problems]
    return []


def test_an_engine_rule_is_reported_with_its_hint_when_pydantic_accepts_the_plan() -> None:
    data = _plan({"name": "a", "method": "POST", "path": "/a", "body": "x", "json": {"k": 1}})
    assert _problems(data) == [
        (
            "scenarios[0].steps[0].json",
            "a step sends either 'body' or 'json', not both",
            "keep 'json' for a JSON body (it sets Content-Type), or 'body' for any other text",
        )
    ]


def test_engine_rules_are_listed_beside_pydantic_s_type_problems() -> None:
    # Step 0 breaks an engine rule; step 1 a type the engine cannot even decode (a text timeout);
    # the workload a bound serde refuses too (-1 VUs). All three at once, none invented.
    data = _plan(
        {"name": "a", "method": "GET", "path": "a", "extract": [{"var": "token", "from": "json", "expression": "$.t"}]},
        {
            "name": "b",
            "method": "GET",
            "path": "/{{ token }}",
            "think_time": {"type": "uniform", "min_ms": "x", "max_ms": 1},
        },
        workload={"type": "closed", "stages": [{"duration_s": 1, "vus": -1}]},
    )
    found = [(location, message) for location, message, _ in _problems(data)]
    assert found[0] == ("scenarios[0].steps[0].path", "'a' must start with '/'")
    assert [location for location, _ in found] == [
        "scenarios[0].steps[0].path",
        "scenarios[0].steps[1].think_time.min_ms",
        "scenarios[0].workload.stages[0].vus",
    ], found


def test_a_step_pydantic_refuses_stands_in_without_inventing_problems() -> None:
    # The step that sets 'token' is refused (no method); the engine checks the rest, and does not
    # report 'token' as unknown in the step that reads it.
    data = _plan(
        {"name": "login", "path": "/login", "extract": [{"var": "token", "from": "json", "expression": "$.t"}]},
        {"name": "home", "method": "GET", "path": "/{{ token }}", "headers": {"X-A": "1", "x-a": "2"}},
    )
    found = [(location, message) for location, message, _ in _problems(data)]
    assert found == [
        ("scenarios[0].steps[0].method", "is required but missing"),
        ("scenarios[0].steps[1].headers.x-a", "header 'x-a' is given twice (also as 'X-A')"),
    ], found


def test_a_part_to_supply_is_no_mistake_when_a_plan_is_read() -> None:
    # horde profile writes supply(...) templates; the plan loads, and the check before a run
    # (checked_plan_json, horde validate) lists each part with its place.
    from horde.engine.run import engine_problems
    from horde.plan import plan_from_dict, plan_to_json

    data = _plan({"name": "a", "method": "POST", "path": "/a", "body": "{{ supply('the order') }}"})
    plan = plan_from_dict(data)
    assert [(p.location, p.message) for p in engine_problems(plan_to_json(plan))] == [
        ("scenarios[0].steps[0].body", "to supply: the order; put it in place of the supply(...) template")
    ]


def test_a_sql_step_s_mistakes_are_the_engine_s_with_pydantic_s_words_and_hints() -> None:
    # Known answers: the words and hints pydantic gave before the rules moved (issue 38).
    def sql_plan(*steps: dict[str, object]) -> dict[str, object]:
        data = _plan(*steps)
        data["target"] = {"base_url": "postgresql://horde@127.0.0.1:5432/horde"}
        return data

    assert _problems(sql_plan({"type": "sql", "name": "a"})) == [
        ("scenarios[0].steps[0].query", "a sql step needs 'query' (or 'statements')", "add query: 'SELECT 1'")
    ]
    assert _problems(sql_plan({"type": "sql", "name": "a", "query": "  "})) == [
        ("scenarios[0].steps[0].query", "'query' is empty", "write the SQL")
    ]
    found = _problems(
        sql_plan(
            {
                "type": "sql",
                "name": "a",
                "query": "SELECT 1",
                "statements": [{"query": "SELECT 2"}],
                "extract": [{"var": "n", "from": "column"}, {"var": "m", "from": "row_count", "column": "id"}],
                "checks": [{"type": "row_count"}, {"type": "row_count", "min": 3, "max": 1}],
            }
        )
    )
    assert found == [
        ("scenarios[0].steps[0].statements", "a step runs either 'query' or 'statements', not both", "keep one"),
        ("scenarios[0].steps[0].extract[0].column", "from: column needs 'column'", "name the column, e.g. column: id"),
        ("scenarios[0].steps[0].extract[1].column", "a row_count extractor takes no column", "remove 'column'"),
        (
            "scenarios[0].steps[0].checks[0]",
            "a row_count check needs equals, min or max",
            "e.g. {type: row_count, equals: 1}",
        ),
        ("scenarios[0].steps[0].checks[1].min", "min 3 is above max 1", "swap them"),
    ], found
    found = _problems(sql_plan({"type": "sql", "name": "a", "params": ["1"], "statements": [{"query": "SELECT $1"}]}))
    assert found == [
        (
            "scenarios[0].steps[0].params",
            "with 'statements', each statement has its own params",
            "move params into them",
        )
    ], found


def test_a_plan_is_checked_by_the_engine_once_on_its_way_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a plan asks the engine once; the check before the run asks again only for a plan a
    flag changed (the engine still checks at its own door, start_run, not counted here)."""
    from horde import _engine
    from horde.engine.run import checked_plan_json
    from horde.errors import PlanInvalid
    from horde.plan.loader import load_plan
    from horde.plan.overrides import apply_overrides

    asked: list[str] = []
    real = _engine.validate_plan

    def counted(plan_json: str) -> list[tuple[str, str, str | None]]:
        asked.append(plan_json)
        return real(plan_json)

    monkeypatch.setattr(_engine, "validate_plan", counted)
    name = f"once-{uuid.uuid4().hex}"  # a JSON no other test had checked
    path = tmp_path / "plan.yaml"
    path.write_text(
        f"version: 1\nname: {name}\ntarget: {{base_url: 'http://127.0.0.1:9'}}\n"
        "scenarios:\n  - name: s\n    steps: [{name: get, method: GET, path: /}]\n"
        "    workload: {type: closed, stages: [{duration_s: 5, vus: 2}]}\n",
        encoding="utf-8",
    )
    plan = load_plan(path)
    assert len(asked) == 1
    assert checked_plan_json(apply_overrides(plan)) == asked[0]  # no flag: nothing asked again
    assert len(asked) == 1
    checked_plan_json(apply_overrides(plan, vus=3))  # a flag changed it: the engine checks it
    assert len(asked) == 2
    # A part left to supply is no mistake on the way in, but the run's check refuses it, each time.
    marked = tmp_path / "marked.yaml"
    marked.write_text(path.read_text(encoding="utf-8").replace("path: /}", "path: '/{{ supply(\"an id\") }}'}"))
    supplied = load_plan(marked)
    for _ in range(2):
        with pytest.raises(PlanInvalid) as refused:
            checked_plan_json(supplied)
        assert [problem.message for problem in refused.value.problems][0].startswith("to supply: an id")
    assert len(asked) == 5
