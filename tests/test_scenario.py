"""The Python builder (python/horde/scenario.py): the same scenario written in YAML and in Python
gives the same plan JSON, byte for byte; every piece lowers to plain plan data; problems are
located; parameters reach a Python plan the way they reach a YAML one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from horde import (
    branch,
    check,
    choice,
    closed,
    constant,
    end_iteration,
    exponential,
    extract,
    feeder,
    group,
    http,
    loop,
    open_model,
    param,
    plan,
    scenario,
    stage,
    think,
    uniform,
    when,
)
from horde.errors import InvalidInput, PlanInvalid
from horde.plan import (
    STEP_TYPES,
    ChoiceStep,
    HttpStep,
    LoopStep,
    Plan,
    ThinkStep,
    iter_steps,
    plan_from_dict,
    plan_to_json,
)
from horde.plan.parameters import explicit_parameters
from horde.plan.loader import load_plan

PLANS = Path(__file__).parent / "plans"
YAML_PLAN = PLANS / "scenario_language.yaml"
PYTHON_PLAN = PLANS / "scenario_language.py"


@pytest.fixture(scope="module")
def engine_reads_scenarios() -> None:
    """Skips when the native engine predates the scenario language (it refuses the new keys)."""
    from horde import _engine

    minimal = plan(
        "probe",
        base_url="http://127.0.0.1:8080",
        scenarios=[scenario("s", steps=[group("g", http.get("a", "/"))], workload=closed([stage(1, vus=1)]))],
    )
    problems = _engine.validate_plan(plan_to_json(minimal))
    if problems:
        pytest.skip(f"the engine predates the scenario language (it says {problems[0]}); rebuild it: make setup")


@pytest.fixture(autouse=True)
def _no_parameter_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("HORDE_PARAM_"):
            monkeypatch.delenv(name)


# --- YAML and Python: one plan -------------------------------------------------------------------


def test_yaml_and_python_give_the_same_plan_json() -> None:
    from_yaml = plan_to_json(load_plan(YAML_PLAN))
    from_python = plan_to_json(load_plan(PYTHON_PLAN))
    assert from_yaml == from_python


def test_they_stay_the_same_with_parameters_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORDE_PARAM_THINK_MS", "400")
    params = {"vus": "3", "city_id": "lyon", "insecure": "true"}
    from_yaml = load_plan(YAML_PLAN, params)
    assert plan_to_json(from_yaml) == plan_to_json(load_plan(PYTHON_PLAN, params))
    assert from_yaml.parameters == {"vus": 3, "duration_s": 10, "think_ms": 400, "city_id": "lyon", "insecure": True}
    assert from_yaml.target.insecure is True
    player = from_yaml.scenarios[0]
    assert [stage.vus for stage in player.workload.stages] == [3, 3]  # type: ignore[union-attr]
    city = next(s for s in player.all_steps() if isinstance(s, HttpStep) and s.name == "city")
    assert city.path == "/game/city/lyon?vu={{ vu }}"  # the runtime template is left alone
    assert city.think_time is not None and city.think_time.model_dump() == {
        "type": "uniform",
        "min_ms": 100.0,
        "max_ms": 400.0,
    }


def test_the_two_files_use_every_construct_of_the_language() -> None:
    loaded = load_plan(YAML_PLAN)
    wire = json.loads(plan_to_json(loaded))
    steps = [step for s in loaded.scenarios for step in s.all_steps()]
    # SQL steps need a postgresql:// target (tests/test_sql.py uses them), message steps a
    # tcp://, udp:// or kcp:// one (tests/test_plan_message.py, tests/e2e/test_gateway.py).
    assert {step.type for step in steps} == set(STEP_TYPES) - {
        "sql",
        "connect",
        "send",
        "receive",
        "ping",
        "stream",
        "close",
    }
    https = [step for step in steps if isinstance(step, HttpStep)]
    assert {e.from_ for step in https for e in step.extract} == {"json", "regex", "header", "status"}
    assert {e.pick for step in https for e in step.extract} == {"first", "random", "all"}
    assert {c.type for step in https for c in step.checks} == {"status", "json", "body_contains", "body_matches"}
    assert {step.method for step in https} >= {"GET", "POST", "PUT", "DELETE"}
    assert any(step.json_ is not None for step in https) and any(step.body is not None for step in https)
    think_times = {
        step.think_time.type for step in steps if isinstance(step, (HttpStep, ThinkStep)) and step.think_time
    }
    assert think_times == {"constant", "uniform", "exponential"}
    loops = [step for step in steps if isinstance(step, LoopStep)]
    assert {(l.count is not None, l.while_ is not None, l.for_each is not None) for l in loops} == {
        (True, False, False),
        (False, True, False),
        (False, False, True),
    }
    assert any(len(b.steps) == 0 for step in steps if isinstance(step, ChoiceStep) for b in step.branches)
    assert {s.workload.type for s in loaded.scenarios} == {"closed", "open"}
    assert {(f.format, f.mode) for s in loaded.scenarios for f in s.feeders} == {("csv", "unique"), ("jsonl", "random")}
    player = wire["scenarios"][0]
    assert player["weight"] == 3.0 and player["headers"] and player["setup"] and player["teardown"]
    assert wire["scenarios"][1]["pacing_s"] == 1.0
    # Wire names, not Python attribute names.
    text = plan_to_json(loaded)
    for key in ('"from":', '"while":', '"as":', '"else":', '"in":', '"json":'):
        assert key in text, key
    for attribute in ("from_", "while_", "as_", "else_", "in_", "json_"):
        assert f'"{attribute}"' not in text


def test_builder_called_directly_equals_the_yaml_it_mirrors(tmp_path: Path) -> None:
    # A plan the engine accepts: the engine's rules are checked as the plan is read (the condition
    # reads a builtin, not a variable no step sets).
    (tmp_path / "plan.yaml").write_text("""\
version: 1
name: direct
parameters: {rate: 5}
target: {base_url: "http://127.0.0.1:8080"}
scenarios:
  - name: s
    steps:
      - {name: a, method: GET, path: "/a", checks: [{type: status, in: [200]}]}
      - type: if
        condition: "iteration > 1"
        then: [{type: think, think_time: {type: constant, duration_ms: 5}}]
    workload: {type: open, stages: [{duration_s: 3, rate_per_s: "{{ params.rate }}"}], max_vus: 4}
""")
    built = plan(
        "direct",
        base_url="http://127.0.0.1:8080",
        parameters={"rate": 5},
        scenarios=[
            scenario(
                "s",
                steps=[http.get("a", "/a", checks=[check.status(200)]), when("iteration > 1", think(5))],
                workload=open_model([stage(3, rate_per_s=param("rate"))], max_vus=4),
            ),
        ],
    )
    assert isinstance(built, Plan)
    assert plan_to_json(built) == plan_to_json(load_plan(tmp_path / "plan.yaml"))


@pytest.mark.usefixtures("engine_reads_scenarios")
def test_the_engine_accepts_the_plan() -> None:
    from horde import _engine

    assert _engine.validate_plan(plan_to_json(load_plan(PYTHON_PLAN))) == []


# --- the pieces ----------------------------------------------------------------------------------


def test_pieces_lower_to_plain_plan_data() -> None:
    step = http.post(
        "buy",
        "/shop/{{ item }}",
        json={"n": param("count"), "tags": ("a", "b")},
        headers={"x-a": "1"},
        think_time=exponential(20),
        extract=[extract.status("code")],
        checks=[check.body_contains("ok")],
    )
    assert step.lower() == {
        "type": "http",
        "name": "buy",
        "method": "POST",
        "path": "/shop/{{ item }}",
        "headers": {"x-a": "1"},
        "json": {"n": "{{ params.count }}", "tags": ["a", "b"]},
        "think_time": {"type": "exponential", "mean_ms": 20},
        "extract": [{"var": "code", "from": "status"}],
        "checks": [{"type": "body_contains", "text": "ok"}],
    }
    # lower() gives a copy: changing it does not change the piece.
    copy = step.lower()
    copy["json"]["n"] = 1
    assert step.lower()["json"]["n"] == "{{ params.count }}"
    assert type(step.lower()["json"]["n"]) is str  # a Param lowers to plain text
    assert step == http.post(
        "buy",
        "/shop/{{ item }}",
        json={"n": param("count"), "tags": ["a", "b"]},
        headers={"x-a": "1"},
        think_time=exponential(20),
        extract=[extract.status("code")],
        checks=[check.body_contains("ok")],
    )
    assert http.head("h", "/").lower()["method"] == "HEAD"
    assert http.options("o", "/").lower()["method"] == "OPTIONS"
    assert http.patch("p", "/", body="x").lower()["body"] == "x"
    assert loop(end_iteration(), count=0).lower() == {"type": "loop", "count": 0, "steps": [{"type": "end_iteration"}]}
    assert think(uniform(1, 2)).lower()["think_time"] == {"type": "uniform", "min_ms": 1, "max_ms": 2}
    assert constant(param("t")).lower() == {"type": "constant", "duration_ms": "{{ params.t }}"}
    assert feeder("rows", "x.ndjson").lower() == {"name": "rows", "path": "x.ndjson"}
    assert "StepSpec(" in repr(end_iteration())


def test_param() -> None:
    reference = param("vus")
    assert reference == "{{ params.vus }}" and reference.name == "vus" and repr(reference) == "param('vus')"
    assert f"/a?n={param('n')}" == "/a?n={{ params.n }}"
    with pytest.raises(ValueError, match="not a valid parameter name"):
        param("two words")


def test_a_stage_takes_one_level() -> None:
    with pytest.raises(TypeError, match="one of vus= .* or rate_per_s="):
        stage(1)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        stage(1, vus=1, rate_per_s=2)  # type: ignore[call-overload]


# --- problems ------------------------------------------------------------------------------------


def one_scenario(*steps: Any, **plan_options: Any) -> Plan:
    return plan(
        "p",
        base_url="http://127.0.0.1:8080",
        scenarios=[scenario("s", steps=list(steps), workload=closed([stage(1, vus=1)]))],
        **plan_options,
    )


def test_problems_are_located_by_path_with_hints() -> None:
    with pytest.raises(PlanInvalid) as caught:
        one_scenario(
            http.get("a", "no-slash"),
            group("g", http.get("a", "/dup")),
            loop(http.get("b", "/b"), count=2, while_="x"),  # type: ignore[call-overload]
            choice(branch(0, http.get("c", "/c"))),
        )
    problems = caught.value.problems
    assert [p.location for p in problems] == [
        "scenarios[0].steps[0].path",
        "scenarios[0].steps[1].steps[0].name",
        "scenarios[0].steps[2].while",
        "scenarios[0].steps[3].branches[0].weight",
    ]
    assert all(p.hint for p in problems)
    assert "also at steps[0]" in problems[1].message
    assert str(caught.value) == "the plan in plan 'p' has 4 problems"


def test_an_unknown_parameter_is_located_and_lists_the_known_ones() -> None:
    with pytest.raises(PlanInvalid) as caught:
        one_scenario(http.get("a", f"/a?n={param('limt')}"), parameters={"limit": 5, "vus": 1})
    (problem,) = caught.value.problems
    assert problem.location == "scenarios[0].steps[0].path"
    assert problem.message == "unknown parameter 'limt'"
    assert problem.hint is not None and "did you mean 'limit'?" in problem.hint and "limit, vus" in problem.hint


def test_parameter_values_come_from_p_then_the_environment_then_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    def vus() -> int:
        built = plan(
            "p",
            base_url="http://h",
            parameters={"vus": 2},
            scenarios=[scenario("s", steps=[http.get("a", "/")], workload=closed([stage(1, vus=param("vus"))]))],
        )
        assert built.parameters["vus"] == built.scenarios[0].workload.stages[0].vus  # type: ignore[union-attr]
        return built.scenarios[0].workload.stages[0].vus  # type: ignore[union-attr]

    assert vus() == 2
    monkeypatch.setenv("HORDE_PARAM_VUS", "5")
    assert vus() == 5
    with explicit_parameters({"vus": "7", "other": "ignored by a plan without it"}):
        assert vus() == 7
    monkeypatch.setenv("HORDE_PARAM_VUS", "many")
    with pytest.raises(InvalidInput) as caught:
        vus()
    assert caught.value.message == "HORDE_PARAM_VUS=many: parameter 'vus' takes a number (its default is 2)"


def test_a_python_plan_takes_p_values(tmp_path: Path) -> None:
    loaded = load_plan(PYTHON_PLAN, {"vus": "3"})
    assert loaded.parameters["vus"] == 3
    assert [stage.vus for stage in loaded.scenarios[0].workload.stages] == [3, 3]  # type: ignore[union-attr]
    # More VUs than the unique feeder has rows (4): refused before any run, both numbers named.
    with pytest.raises(PlanInvalid) as caught:
        load_plan(PYTHON_PLAN, {"vus": "9"})
    (problem,) = caught.value.problems
    assert problem.location == "scenarios[0].feeders[0].mode"
    assert "has 4 row(s) but scenario 'player' runs up to 9 VUs" in problem.message
    with pytest.raises(InvalidInput) as refused:
        load_plan(PYTHON_PLAN, {"vu": "9"})
    assert refused.value.message == "-p vu: the plan has no parameter 'vu'"
    assert refused.value.hint is not None and "vus" in refused.value.hint


def test_a_python_plan_that_ignores_p_is_refused(tmp_path: Path) -> None:
    module = tmp_path / "plan.py"
    module.write_text("""\
from horde.plan import plan_from_dict
plan = plan_from_dict({"version": 1, "parameters": {"vus": 1}, "target": {"base_url": "http://h"},
    "scenarios": [{"name": "s", "steps": [{"name": "a", "method": "GET", "path": "/"}],
                   "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}}]})
""")
    assert load_plan(module).parameters == {"vus": 1}
    with pytest.raises(InvalidInput) as caught:
        load_plan(module, {"vus": "4"})
    assert "did not take it" in caught.value.message
    assert caught.value.hint is not None and "horde.plan(" in caught.value.hint


def test_a_python_plan_with_a_builder_mistake_lists_paths(tmp_path: Path) -> None:
    module = tmp_path / "plan.py"
    module.write_text("""\
from horde import plan, scenario, http, closed, stage
plan = plan("p", base_url="http://h", scenarios=[
    scenario("s", steps=[http.get("a", "/a"), http.get("a", "/b")], workload=closed([stage(1, vus=1)]))])
""")
    with pytest.raises(PlanInvalid) as caught:
        load_plan(module)
    assert [p.location for p in caught.value.problems] == ["scenarios[0].steps[1].name"]


# --- running it ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("engine_reads_scenarios")
def test_a_builder_plan_runs_in_the_engine(builtin_target: Any) -> None:
    from horde.engine.run import Run

    built = plan(
        "smoke",
        base_url=f"http://127.0.0.1:{builtin_target.port}",
        graceful_stop_s=1,
        scenarios=[
            scenario(
                "s",
                setup=[http.get("hello", "/", extract=[extract.status("code")])],
                steps=[
                    group("pair", http.get("home", "/"), http.get("slow", "/delay/1")),
                    choice(branch(1, http.get("left", "/")), branch(1, http.get("right", "/"))),
                    loop(http.get("again", "/"), count=2),
                    when("code == 200", think(1), else_=[end_iteration()]),
                ],
                workload=closed([stage(1, vus=2)], start_vus=2),
            )
        ],
    )
    seen: set[str] = set()
    with Run.start(built, workers=1) as run:
        for snapshot in run:
            seen |= {entry["step"] for entry in snapshot["steps"] if entry["requests"]}
    assert {"hello", "pair", "home", "slow", "again"} <= seen
    assert seen & {"left", "right"}


def test_plan_from_dict_of_the_builder_lowering_is_the_same_plan() -> None:
    built = load_plan(PYTHON_PLAN)
    assert plan_from_dict(json.loads(plan_to_json(built))) == built
    assert all(step is not None for s in built.scenarios for step in iter_steps(s.steps))
