"""Plan parameters (python/horde/plan_parameters.py, planfile.py, `horde run/validate -p`): values
from -p, then HORDE_PARAM_NAME, then the default; `{{ params.NAME }}` substituted before the plan
is checked; every mistake located or explained with a hint."""

from __future__ import annotations

import doctest
import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from horde.errors import ExitCode, InvalidInput, PlanInvalid
from horde.cli.arguments import parse_param, parse_params
from horde.plan.parameters import (
    apply_parameters,
    parse_parameter_value,
    resolve_parameters,
    substitute_parameters,
)
from horde.plan.loader import load_plan

PLAN_YAML = """\
version: 1
name: "ci-{{ params.build }}"
parameters:
  vus: 10
  duration_s: 30
  target_response_ms: 50.5
  build: "local"
  insecure: false
target:
  base_url: http://127.0.0.1:8080
  insecure: "{{ params.insecure }}"
  headers: {x-build: "{{ params.build }}"}
scenarios:
  - name: s
    steps:
      - name: home
        method: GET
        path: "/search?limit={{ params.vus }}&slow={{ params.insecure }}&t={{ params.target_response_ms }}&id={{ vu }}"
        body: "{{ params.vus * 2 }}"
    workload:
      type: closed
      stages:
        - {duration_s: "{{ params.duration_s }}", vus: "{{ params.vus }}"}
"""


@pytest.fixture(autouse=True)
def _no_parameter_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("HORDE_PARAM_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- values --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "default", "value"),
    [
        ("10", 1, 10),
        ("1.5", 1, 1.5),
        ("-3", 1, -3),
        ("1e3", 1, 1000.0),
        ("true", False, True),
        ("false", 1, False),
        ("abc", None, "abc"),
        ("10", "text default", "10"),
        ("true", "x", "true"),
        ("NaN", 1, "NaN"),
        ("Infinity", 1, "Infinity"),
        ("null", 1, "null"),
        ("[1]", 1, "[1]"),
        ('"quoted"', 1, '"quoted"'),
        ("", 1, ""),
        (" 7 ", 1, 7),
    ],
)
def test_parse_parameter_value(text: str, default: Any, value: Any) -> None:
    parsed = parse_parameter_value(text, default)
    assert parsed == value and type(parsed) is type(value)


def test_values_come_from_explicit_then_environment_then_default() -> None:
    declared = {"a": 1, "b": 2, "c": 3}
    environ = {"HORDE_PARAM_B": "20", "HORDE_PARAM_C": "30", "HORDE_PARAM_UNDECLARED": "x"}
    assert resolve_parameters(declared, {"c": "300"}, environ=environ) == {"a": 1, "b": 20, "c": 300}
    # Values from Python code are taken as they are.
    assert resolve_parameters({"a": 1.5}, {"a": 2}, environ={}) == {"a": 2}


@pytest.mark.parametrize(
    ("declared", "explicit", "environ", "message", "hint"),
    [
        (
            {"vus": 10},
            {"vus": "ten"},
            {},
            "-p vus=ten: parameter 'vus' takes a number (its default is 10)",
            "-p vus=10",
        ),
        (
            {"on": False},
            {"on": "1"},
            {},
            "-p on=1: parameter 'on' takes a boolean (true or false) (its default is false)",
            "-p on=false",
        ),
        (
            {"n": 1.5},
            {},
            {"HORDE_PARAM_N": "true"},
            "HORDE_PARAM_N=true: parameter 'n' takes a number (its default is 1.5)",
            "-p n=1.5",
        ),
        (
            {"vus": 10},
            {"vsu": "1"},
            {},
            "-p vsu: the plan has no parameter 'vsu'",
            "this plan's parameters: vus; did you mean 'vus'?",
        ),
        (
            {},
            {"vus": "1"},
            {},
            "-p vus: the plan has no parameter 'vus'",
            "this plan declares no parameters; add e.g. `parameters: {vus: DEFAULT}` to it",
        ),
    ],
)
def test_bad_values_are_refused_with_a_hint(
    declared: dict[str, Any], explicit: dict[str, Any], environ: dict[str, str], message: str, hint: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        resolve_parameters(declared, explicit, environ=environ)
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert caught.value.message == message
    assert caught.value.hint is not None and hint in caught.value.hint


def test_substitution_keeps_types_formats_in_text_and_leaves_other_templates() -> None:
    values = {"n": 5, "f": 0.5, "on": True, "s": "a b"}
    data = {
        "whole": ["{{ params.n }}", "{{params.f}}", " {{ params.on }} ", "{{ params.s }}"],
        "inside": "/x?n={{ params.n }}&f={{ params.f }}&on={{ params.on }}&s={{ params.s }}",
        "runtime": ["{{ item }}", "{{ params.n * 2 }}", "{{ params['n'] }}", "{% if x %}y{% endif %}"],
        "{{ params.n }}": "keys are not substituted",
        "numbers": [1, 2.5, None, False],
    }
    result = substitute_parameters(data, values)
    assert result.data == {
        "whole": [5, 0.5, True, "a b"],
        "inside": "/x?n=5&f=0.5&on=true&s=a b",
        "runtime": ["{{ item }}", "{{ params.n * 2 }}", "{{ params['n'] }}", "{% if x %}y{% endif %}"],
        "{{ params.n }}": "keys are not substituted",
        "numbers": [1, 2.5, None, False],
    }
    assert result.unknown == []
    assert result.origins == {("whole", 0): "n", ("whole", 1): "f", ("whole", 2): "on", ("whole", 3): "s"}
    assert data["whole"][0] == "{{ params.n }}"  # the input is not changed


def test_unknown_references_are_listed_and_left_in_place() -> None:
    result = substitute_parameters({"a": ["{{ params.x }}", "/{{ params.y }}/{{ params.n }}"]}, {"n": 1})
    assert result.data == {"a": ["{{ params.x }}", "/{{ params.y }}/1"]}
    assert result.unknown == [(("a", 0), "x"), (("a", 1), "y")]


def test_apply_parameters_records_the_values_used_and_skips_the_defaults() -> None:
    data = {"parameters": {"n": 1, "label": "{{ params.n }}"}, "x": "{{ params.n }}"}
    result = apply_parameters(data, {"n": "4"})
    assert result.data == {"parameters": {"n": 4, "label": "{{ params.n }}"}, "x": 4}


# --- in plan files -------------------------------------------------------------------------------


def test_a_yaml_plan_with_parameters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, PLAN_YAML)
    plan = load_plan(path)
    assert plan.name == "ci-local"
    assert plan.parameters == {
        "vus": 10,
        "duration_s": 30,
        "target_response_ms": 50.5,
        "build": "local",
        "insecure": False,
    }
    step = plan.scenarios[0].steps[0]
    assert step.path == "/search?limit=10&slow=false&t=50.5&id={{ vu }}"  # type: ignore[union-attr]
    assert step.body == "{{ params.vus * 2 }}"  # type: ignore[union-attr]  # rendered by the engine
    assert plan.target.headers == {"x-build": "local"}
    assert plan.target.insecure is False
    stage = plan.scenarios[0].workload.stages[0]
    assert (stage.duration_s, stage.vus) == (30, 10)  # type: ignore[union-attr]

    monkeypatch.setenv("HORDE_PARAM_VUS", "20")
    monkeypatch.setenv("HORDE_PARAM_BUILD", "1234")
    plan = load_plan(path, {"duration_s": "5", "insecure": "true"})
    assert plan.parameters == {
        "vus": 20,
        "duration_s": 5,
        "target_response_ms": 50.5,
        "build": "1234",
        "insecure": True,
    }
    assert plan.name == "ci-1234" and plan.target.insecure is True
    stage = plan.scenarios[0].workload.stages[0]
    assert (stage.duration_s, stage.vus) == (5, 20)  # type: ignore[union-attr]


def test_a_json_plan_with_parameters(tmp_path: Path) -> None:
    from ruamel.yaml import YAML

    data = YAML(typ="safe").load(PLAN_YAML)
    path = write(tmp_path, json.dumps(data, indent=1), "plan.json")
    assert load_plan(path, {"vus": "3"}).scenarios[0].workload.stages[0].vus == 3  # type: ignore[union-attr]


def test_unknown_parameters_are_located_with_the_known_ones(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        PLAN_YAML.replace('vus: "{{ params.vus }}"', 'vus: "{{ params.vu }}"').replace(
            "x-build: \"{{ params.build }}\"", "x-build: \"b{{ params.bild }}\""
        ),
    )
    with pytest.raises(PlanInvalid) as caught:
        load_plan(path)
    problems = caught.value.problems
    assert [(p.location, p.message) for p in problems] == [
        (f"{path}:12: target.headers.x-build", "unknown parameter 'bild'"),
        (f"{path}:23: scenarios[0].workload.stages[0].vus", "unknown parameter 'vu'"),
    ]
    assert problems[0].hint == (
        "did you mean 'build'? declared parameters: build, duration_s, insecure, target_response_ms, vus; "
        "add 'bild' under 'parameters' with a default"
    )


def test_an_unknown_parameter_is_listed_with_the_other_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path, PLAN_YAML.replace("method: GET", "method: get").replace("{{ params.duration_s }}", "{{ params.d }}")
    )
    with pytest.raises(PlanInvalid) as caught:
        load_plan(path)
    assert [p.location.split(": ", 1)[1] for p in caught.value.problems] == [
        "scenarios[0].steps[0].method",
        "scenarios[0].workload.stages[0].duration_s",
    ]


def test_a_bad_value_in_a_field_names_its_parameter(tmp_path: Path) -> None:
    path = write(tmp_path, PLAN_YAML)
    with pytest.raises(PlanInvalid) as caught:
        load_plan(path, {"vus": "2.5"})
    (problem,) = caught.value.problems
    assert problem.location == f"{path}:23: scenarios[0].workload.stages[0].vus"
    assert "integer" in problem.message
    assert problem.hint is not None and problem.hint.endswith("(the value comes from parameter 'vus')")


def test_a_template_where_a_number_goes_says_what_is_substituted(tmp_path: Path) -> None:
    path = write(tmp_path, PLAN_YAML.replace('vus: "{{ params.vus }}"', 'vus: "{{ params.vus * 2 }}"'))
    with pytest.raises(PlanInvalid) as caught:
        load_plan(path)
    (problem,) = caught.value.problems
    assert problem.location.endswith("scenarios[0].workload.stages[0].vus")
    assert problem.hint is not None and "exactly '{{ params.NAME }}'" in problem.hint


def test_an_unquoted_template_in_yaml_says_to_quote_it(tmp_path: Path) -> None:
    path = write(tmp_path, PLAN_YAML.replace('vus: "{{ params.vus }}"', "vus: {{ params.vus }}"))
    with pytest.raises(PlanInvalid) as caught:
        load_plan(path)
    (problem,) = caught.value.problems
    assert problem.location == f"{path}:23: scenarios[0].workload.stages[0].vus"
    assert problem.message == "{{ params.vus }} is read by YAML as a mapping, not as text"
    assert problem.hint == 'quote it: "{{ params.vus }}" (YAML reads { } as a mapping)'


def test_bad_parameter_declarations_are_located(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        PLAN_YAML.replace("  build: \"local\"\n", "  build: \"local\"\n  VUS: 1\n  bad name: 2\n  list: [1]\n").replace(
            "{{ params.build }}", "b"
        ),
    )
    with pytest.raises(PlanInvalid) as caught:
        load_plan(path)
    assert [(p.location.split(": ", 1)[1], p.message) for p in caught.value.problems] == [
        ("parameters.VUS", "parameter 'VUS' differs from 'vus' only in case"),
        ("parameters.bad name", "'bad name' is not a valid parameter name"),
        ("parameters.list", "parameter 'list' must be a number, text or true/false (got a list)"),
    ]


def test_p_for_an_undeclared_parameter(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_plan(write(tmp_path, PLAN_YAML), {"threads": "4"})
    assert caught.value.message == "-p threads: the plan has no parameter 'threads'"
    assert caught.value.hint == "this plan's parameters: build, duration_s, insecure, target_response_ms, vus"


# --- -p on the command line ----------------------------------------------------------------------


def test_parse_param() -> None:
    assert parse_param("a=1") == ("a", "1")
    assert parse_param(" a =x=y") == ("a", "x=y")
    assert parse_param("a=") == ("a", "")
    for bad in ("a", "=1", ""):
        with pytest.raises(InvalidInput) as caught:
            parse_param(bad)
        assert caught.value.message == f"-p: '{bad}' is not NAME=VALUE"
    with pytest.raises(InvalidInput) as caught:
        parse_params(["a=1", "a=2"])
    assert caught.value.message == "-p a is given twice"


@pytest.fixture
def horde_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Any:
    from horde.cli import main

    (tmp_path / "store").mkdir()
    monkeypatch.setenv("HORDE_STORE", str(tmp_path / "store" / "runs.sqlite"))
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_validate_with_parameters(tmp_path: Path, horde_main: Any) -> None:
    write(tmp_path, PLAN_YAML)
    code, out, err = horde_main("validate", "plan.yaml", "-p", "vus=3", "--param", "build=7")
    assert code == ExitCode.OK, err
    assert "plan.yaml: valid — 1 scenario(s), 1 step(s), 30 s of stages" in out
    assert 'parameters: vus=3, duration_s=30, target_response_ms=50.5, build="7", insecure=false' in out


@pytest.mark.parametrize(
    ("args", "error", "hint"),
    [
        (["-p", "nope=1"], "error: -p nope: the plan has no parameter 'nope'", "hint: this plan's parameters: build,"),
        (["-p", "vus"], "error: -p: 'vus' is not NAME=VALUE", "hint: for example -p vus=100"),
        (
            ["-p", "vus=lots"],
            "error: -p vus=lots: parameter 'vus' takes a number (its default is 10)",
            "hint: give a number",
        ),
    ],
)
def test_bad_p_is_a_clean_error(tmp_path: Path, horde_main: Any, args: list[str], error: str, hint: str) -> None:
    write(tmp_path, PLAN_YAML)
    for command in ("validate", "run"):
        code, out, err = horde_main(command, "plan.yaml", *args)
        assert code == ExitCode.INVALID_INPUT
        assert "Traceback" not in err
        lines = err.splitlines()
        assert lines[0] == error and lines[1].startswith(hint), err


def test_p_with_url_is_refused(horde_main: Any) -> None:
    code, _, err = horde_main("run", "--url", "http://127.0.0.1:9/", "-p", "a=1")
    assert code == ExitCode.INVALID_INPUT
    assert "error: -p sets a plan file's parameters; --url has none" in err


def test_run_with_parameters_stores_the_values_used(tmp_path: Path, horde_main: Any, builtin_target: Any) -> None:
    write(tmp_path, PLAN_YAML.replace("8080", str(builtin_target.port)).replace("/search?", "/?"))
    code, out, err = horde_main(
        "run", "plan.yaml", "-p", "vus=2", "-p", "duration_s=1", "--workers", "1", "--summary-json", "summary.json"
    )
    assert code == ExitCode.OK, err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["requests"] > 0
    from horde.store import Store

    with Store.open(str(tmp_path / "store" / "runs.sqlite")) as store:
        record = store.get_run(summary["run_id"])
    assert record.plan["parameters"] == {
        "vus": 2,
        "duration_s": 1,
        "target_response_ms": 50.5,
        "build": "local",
        "insecure": False,
    }
    assert record.plan["scenarios"][0]["workload"]["stages"] == [{"duration_s": 1.0, "vus": 2}]
    assert record.parameters == {"workers": 1, "params": {"vus": "2", "duration_s": "1"}}


def test_docstring_examples_run() -> None:
    for name in ("horde.plan.parameters", "horde.plan.overrides", "horde.plan.steps", "horde.plan.loader"):
        results = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
        assert results.attempted >= 1, name
        assert results.failed == 0, name
