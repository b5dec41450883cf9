"""Reading plan files (python/horde/planfile.py): every problem located in the file."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from horde.errors import PlanInvalid, Problem
from horde.plan import ClosedModel, plan_from_dict, plan_to_json
from horde.plan.feeders import ROWS_CHECKED
from horde.plan.loader import PLAN_FILE_NAMES, load_plan, load_plan_file, parse_path

PLANS = Path(__file__).parent / "plans"
QUICKSTART = Path(__file__).parents[1] / "examples" / "quickstart"


def problems_of(path: str | Path) -> list[Problem]:
    with pytest.raises(PlanInvalid) as caught:
        load_plan(path)
    assert caught.value.source is not None
    return caught.value.problems


def locations(path: Path) -> list[str]:
    prefix = f"{path}:"
    found = []
    for problem in problems_of(path):
        assert problem.location.startswith(prefix), problem.location
        assert problem.hint, problem
        found.append(problem.location[len(prefix) :])
    return found


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


MINIMAL_YAML = """\
version: 1
target:
  base_url: http://127.0.0.1:8080
scenarios:
  - name: browse
    steps:
      - {name: home, method: GET, path: /}
    workload: {type: closed, stages: [{duration_s: 1, vus: 1}]}
"""


# --- YAML ----------------------------------------------------------------------------------------


def test_unknown_keys_are_located_at_their_lines() -> None:
    path = PLANS / "bad_unknown_key.yaml"
    assert locations(path) == [
        "4: duration",
        "7: target.timeout_ms",
        "14: scenarios[0].steps[0].pth",
    ]
    problems = problems_of(path)
    assert problems[0].message == "unknown key 'duration'"
    assert problems[0].hint == (
        "allowed keys here: version, name, parameters, target, scenarios, graceful_stop_s, thresholds, autostop, steer, generators, monitors"
    )
    assert str(problems[2]) == (f"{path}:14: scenarios[0].steps[0].pth: unknown key 'pth'")


def test_bad_values_are_located_at_their_lines() -> None:
    path = PLANS / "bad_values.yaml"
    assert locations(path) == [
        "4: target.base_url",
        "6: target.headers.bad name",
        "11: scenarios[0].steps[0].method",
        "12: scenarios[0].steps[0].path",
        "16: scenarios[0].steps[0].think_time.max_ms",
        "17: scenarios[0].steps[1].name",
        "23: scenarios[0].workload.stages[0].duration_s",
        "24: scenarios[0].workload.stages[0].vus",
        # A missing key points at its parent mapping: the step that lacks a method.
        "27: scenarios[1].steps[0].method",
        "30: scenarios[1].steps[0].think_time.type",
        "33: scenarios[1].workload.type",
    ]
    by_path = {p.location.split(": ", 1)[1]: p for p in problems_of(path)}
    assert by_path["scenarios[1].workload.type"].hint == "use one of: 'closed', 'open'"
    assert by_path["scenarios[0].steps[0].path"].message == "'home' must start with '/'"


def test_missing_keys_point_at_the_parent_mapping(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "plan.yaml",
        """\
# a comment first
version: 1
target:
  headers: {}
scenarios:
  - name: browse
    steps:
      - {name: home, method: GET}
    workload:
      type: open
      stages: [{duration_s: 1, rate_per_s: 1}]
""",
    )
    assert locations(path) == [
        "3: target.base_url",
        "8: scenarios[0].steps[0].path",
        "9: scenarios[0].workload.max_vus",
    ]


def test_missing_top_level_key_points_at_the_document(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.yaml", "\n# the plan\nversion: 1\nname: x\n")
    assert locations(path) == ["3: target", "3: scenarios"]


def test_yaml_syntax_error_is_located() -> None:
    path = PLANS / "bad_syntax.yaml"
    (problem,) = problems_of(path)
    assert problem.location == f"{path}:8"
    assert problem.message.startswith("YAML syntax error: expected ',' or ']'")
    assert "line 6" in problem.message
    assert problem.hint is not None and "indentation" in problem.hint


def test_tab_indentation_gets_its_own_hint(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.yaml", "version: 1\ntarget:\n\tbase_url: http://h\n")
    (problem,) = problems_of(path)
    assert problem.location == f"{path}:3"
    assert problem.hint == "indent with spaces, not tabs"


def test_duplicate_key_is_located() -> None:
    path = PLANS / "bad_duplicate_key.yaml"
    (problem,) = problems_of(path)
    assert problem.location == f"{path}:4"
    assert problem.message == 'found duplicate key "base_url"'
    assert problem.hint is not None and "line 3" in problem.hint


def test_empty_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.yml", "# nothing yet\n")
    (problem,) = problems_of(path)
    assert problem.location == str(path)
    assert "empty" in problem.message
    assert problem.hint is not None and "quickstart" in problem.hint


def test_yaml_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.yaml", "\n- version: 1\n")
    (problem,) = problems_of(path)
    assert problem.location == f"{path}:2"
    assert problem.message == "must be a mapping (got a list)"


def test_yaml_values_become_plain_python(tmp_path: Path) -> None:
    path = write(
        tmp_path, "plan.yaml", MINIMAL_YAML.replace("path: /}", "path: /, body: \"x\"}") + "graceful_stop_s: 0x10\n"
    )
    plan = load_plan(path)
    step = plan.scenarios[0].steps[0]
    assert type(step.body) is str and type(plan.graceful_stop_s) is float
    assert plan.graceful_stop_s == 16
    json.loads(plan_to_json(plan))


def test_yaml_number_where_text_is_expected(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.yaml", MINIMAL_YAML.replace("name: browse", "name: 2024"))
    (problem,) = problems_of(path)
    assert problem.location == f"{path}:5: scenarios[0].name"
    assert problem.message == "must be text (got the number 2024)"
    assert problem.hint == 'quote the value, e.g. "2024"'


# --- JSON ----------------------------------------------------------------------------------------


def test_json_syntax_error_is_located_by_line_and_column() -> None:
    path = PLANS / "bad_syntax.json"
    (problem,) = problems_of(path)
    assert problem.location == f"{path}:3:50"
    assert problem.message.startswith("JSON syntax error: ")
    assert problem.hint is not None and "trailing commas" in problem.hint


def test_json_plan_problems_are_located() -> None:
    path = PLANS / "bad_values.json"
    assert locations(path) == [
        "8: scenarios[0].steps[0].path",
        "10: scenarios[0].workload.max_vus",
    ]


def test_json_duplicate_key(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.json", '{"version": 1,\n "version": 1}\n')
    (problem,) = problems_of(path)
    assert problem.location == f"{path}:2"
    assert problem.message == "duplicate key 'version'"


def test_json_plan_loads(tmp_path: Path) -> None:
    plan = load_plan(QUICKSTART)
    path = write(tmp_path, "plan.json", plan_to_json(plan))
    assert load_plan(path) == plan


# --- Python --------------------------------------------------------------------------------------


def test_python_module_plan() -> None:
    plan = load_plan(PLANS / "plan_module.py")
    assert plan.name == "from-python"
    assert not any(name.startswith("_horde_plan_") for name in sys.modules)


def test_python_module_with_a_dict_plan(tmp_path: Path) -> None:
    data = json.loads(plan_to_json(load_plan(QUICKSTART)))
    path = write(tmp_path, "dict_plan.py", f"plan = {data!r}\n")
    assert load_plan(path) == plan_from_dict(data)


def test_python_module_that_fails_reports_the_line() -> None:
    path = PLANS / "broken_module.py"
    (problem,) = problems_of(path)
    assert problem.location == f"{path}:5"
    assert problem.message == "KeyError: 'rat'"
    assert problem.hint is not None


def test_python_module_with_an_invalid_model() -> None:
    path = PLANS / "bad_model_module.py"
    (problem,) = problems_of(path)
    assert problem.location == f"{path}:5: HttpStep.method"
    assert problem.message == "method 'get' must be upper case"
    assert problem.hint == "write 'GET'"


def test_python_module_syntax_error(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.py", "x = 1\nplan = (\n")
    (problem,) = problems_of(path)
    assert problem.location.startswith(f"{path}:")
    assert problem.message.startswith("Python syntax error")


def test_python_module_without_plan() -> None:
    (problem,) = problems_of(PLANS / "no_plan_module.py")
    assert problem.message == "the module defines no `plan`"
    assert problem.hint is not None and "define a module-level `plan = Plan(...)`" in problem.hint


def test_python_module_with_the_wrong_plan(tmp_path: Path) -> None:
    (problem,) = problems_of(write(tmp_path, "plan.py", "plan = ['x']\n"))
    assert problem.message == "`plan` is a list, not a Plan"


def test_python_module_plan_is_validated_again(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "plan.py",
        f"""\
from horde.plan.loader import load_plan
plan = load_plan({str(QUICKSTART)!r})
plan.scenarios[0].steps[0].path = "no-slash"  # pydantic does not check assignments
""",
    )
    (problem,) = problems_of(path)
    assert problem.location == "scenarios[0].steps[0].path"


# --- directories and files -----------------------------------------------------------------------


def test_directory_lookup_finds_the_quickstart() -> None:
    plan = load_plan(QUICKSTART)
    assert plan == load_plan(QUICKSTART / "plan.yaml")
    assert plan == load_plan(str(QUICKSTART))


def test_directory_lookup_order(tmp_path: Path) -> None:
    plan = load_plan(QUICKSTART)
    write(tmp_path, "plan.json", plan_to_json(plan.model_copy(update={"name": "json"})))
    assert load_plan(tmp_path).name == "json"
    write(tmp_path, "plan.yml", MINIMAL_YAML + "name: yml\n")
    assert load_plan(tmp_path).name == "yml"


def test_directory_without_a_plan(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path)
    assert problem.location == str(tmp_path)
    assert problem.hint is not None
    for name in PLAN_FILE_NAMES:
        assert name in problem.hint


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    (problem,) = problems_of(path)
    assert problem.location == str(path)
    assert problem.message == "no such file or directory"
    assert problem.hint is not None and ".yaml" in problem.hint


def test_unknown_extension(tmp_path: Path) -> None:
    (problem,) = problems_of(write(tmp_path, "plan.toml", "version = 1\n"))
    assert "'.toml'" in problem.message
    assert problem.hint is not None and ".json" in problem.hint


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    (problem,) = problems_of(path)
    assert "UTF-8" in problem.message


def test_quickstart_is_what_its_comments_say() -> None:
    plan = load_plan(QUICKSTART)
    assert plan.target.base_url == "http://127.0.0.1:8080"
    (scenario,) = plan.scenarios
    assert scenario.name == "browse"
    assert [(s.name, s.method, s.path) for s in scenario.steps] == [
        ("home", "GET", "/"),
        ("item", "GET", "/delay/5"),
    ]
    assert all(s.think_time is not None and s.think_time.type == "constant" for s in scenario.steps)
    workload = scenario.workload
    assert isinstance(workload, ClosedModel) and workload.start_vus == 0
    assert [(s.duration_s, s.vus) for s in workload.stages] == [(5, 20), (15, 20)]
    assert sum(s.duration_s for s in workload.stages) == 20


def test_python_module_with_an_invalid_plan(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "plan.py",
        """\
from horde.plan import Plan

plan = Plan(
    version=1,
    target={"base_url": "http://h", "verify": False},
    scenarios=[],
)
""",
    )
    problems = problems_of(path)
    assert [p.location for p in problems] == [
        f"{path}:3: target.verify",
        f"{path}:3: scenarios",
    ]


# --- feeders ---------------------------------------------------------------------------------------

FEEDER_PLAN = """\
version: 1
target:
  base_url: http://127.0.0.1:8080
scenarios:
  - name: s
    feeders:
      - name: rows
        path: {path}
        mode: {mode}
    steps:
      - {{name: home, method: GET, path: "/{{{{ rows }}}}"}}
    workload: {{type: closed, stages: [{{duration_s: 1, vus: {vus}}}]}}
"""


def feeder_plan(
    tmp_path: Path, data_name: str, data: str | bytes | None, *, mode: str = "circular", vus: int = 2
) -> Path:
    if data is not None:
        target = tmp_path / data_name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            target.write_bytes(data)
        else:
            target.write_text(data, encoding="utf-8")
    return write(tmp_path, "plan.yaml", FEEDER_PLAN.format(path=data_name, mode=mode, vus=vus))


def feeder_problem(path: Path) -> Problem:
    (problem,) = problems_of(path)
    return problem


def test_feeder_paths_become_absolute_relative_to_the_plan_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan_path = feeder_plan(tmp_path / "plans", "data/rows.csv", "a,b\n1,2\n")
    monkeypatch.chdir(tmp_path)  # elsewhere than the plan's folder
    feeder = load_plan(plan_path).scenarios[0].feeders[0]
    assert feeder.path == str(tmp_path / "plans" / "data" / "rows.csv")
    assert (feeder.format, feeder.mode) == ("csv", "circular")  # the format from the extension
    absolute = tmp_path / "plans" / "data" / "rows.csv"
    write(tmp_path / "plans", "plan.yaml", FEEDER_PLAN.format(path=absolute, mode="random", vus=1))
    assert load_plan(plan_path).scenarios[0].feeders[0].path == str(absolute)


def test_a_jsonl_feeder_with_blank_lines(tmp_path: Path) -> None:
    plan = load_plan(feeder_plan(tmp_path, "rows.jsonl", '{"a": 1}\n\n{"a": 2}\n'))
    assert plan.scenarios[0].feeders[0].format == "jsonl"


def test_a_csv_feeder_with_a_byte_order_mark_and_quoted_fields(tmp_path: Path) -> None:
    from horde.plan.feeders import count_rows, feeder_columns

    plan = load_plan(feeder_plan(tmp_path, "rows.csv", '\ufefflogin,city\nann,"Paris, France"\nbob,"multi\nline"\n\n'))
    path = plan.scenarios[0].feeders[0].path
    # The mark is no part of the first field's name; a quoted comma or line break is no new field
    # or row; the blank last line is no row.
    assert feeder_columns(path, "csv") == ["login", "city"]
    assert count_rows(path, "csv") == 2


@pytest.mark.parametrize(
    ("name", "data", "message", "hint"),
    [
        ("missing.csv", None, "feeder file 'missing.csv' no such file", "relative to the plan file's folder"),
        ("empty.csv", "", "feeder file 'empty.csv' is empty", "header row"),
        ("header-only.csv", "login,password\n", "has a header row but no rows", "add at least one row"),
        (
            "no-header.csv",
            "ann,42\nbob,43\n",
            "the first row (line 1) looks like data, not a header: field '42' is a number",
            "add a header row",
        ),
        ("empty-field.csv", "login,,password\na,b,c\n", "has an empty field name (field 2)", "name every field"),
        ("twice.csv", "login,login\na,b\n", "names field 'login' twice", "its own name"),
        ("short-row.csv", "a,b\n1,2\n3,4\n5\n", "line 4 has 1 field(s); the header row has 2", "quote a value"),
        ("open-quote.csv", 'a,b\n1,"2\n', "is not valid CSV", "close every quoted field"),
        ("latin1.csv", b"a,b\ncaf\xe9,1\n", "is not UTF-8 text", "UTF-8"),
        ("rows.jsonl", '{"a": 1}\n[1, 2]\n', "line 2 is not a JSON object (it is list)", "one JSON object a line"),
        ("rows.ndjson", '{"a": 1}\n\n{"a": \n', "line 3 is not valid JSON", "one JSON object a line"),
        ("nothing.jsonl", "\n\n", "has no rows", "one JSON object a line"),
        ("folder.csv/", None, "is a directory", "data file's path"),
    ],
)
def test_a_bad_feeder_file_is_located_at_its_path(
    tmp_path: Path, name: str, data: str | bytes | None, message: str, hint: str
) -> None:
    if name.endswith("/"):
        (tmp_path / name).mkdir()
        name = name.rstrip("/")
    path = feeder_plan(tmp_path, name, data)
    problem = feeder_problem(path)
    assert problem.location == f"{path}:8: scenarios[0].feeders[0].path"
    assert message in problem.message
    assert problem.hint is not None and hint in problem.hint


def test_only_the_first_rows_are_checked(tmp_path: Path) -> None:
    rows = "".join(f"u{n},{n}\n" for n in range(ROWS_CHECKED))
    load_plan(feeder_plan(tmp_path, "rows.csv", "login,n\n" + rows + "bad\n"))  # the engine reports row 102
    problem = feeder_problem(feeder_plan(tmp_path, "rows.csv", "login,n\n" + rows[:-5] + "bad\n"))
    assert f"line {ROWS_CHECKED + 1} has 1 field(s)" in problem.message


def test_an_unreadable_feeder_file(tmp_path: Path) -> None:
    path = feeder_plan(tmp_path, "secret.csv", "a\n1\n")
    (tmp_path / "secret.csv").chmod(0)
    try:
        if os.access(tmp_path / "secret.csv", os.R_OK):
            pytest.skip("this user reads any file (root)")
        assert "cannot be read" in feeder_problem(path).message
    finally:
        (tmp_path / "secret.csv").chmod(0o644)


def test_a_feeder_problem_is_listed_with_the_other_problems(tmp_path: Path) -> None:
    path = feeder_plan(tmp_path, "missing.csv", None)
    path.write_text(path.read_text().replace("method: GET", "method: get"))
    assert locations(path) == ["8: scenarios[0].feeders[0].path", "11: scenarios[0].steps[0].method"]


def test_a_unique_feeder_needs_a_row_for_each_vu(tmp_path: Path) -> None:
    path = feeder_plan(tmp_path, "users.csv", "login\na\nb\nc\n", mode="unique", vus=4)
    problem = feeder_problem(path)
    assert problem.location == f"{path}:9: scenarios[0].feeders[0].mode"
    assert (
        problem.message
        == "unique feeder 'rows' has 3 row(s) but scenario 's' runs up to 4 VUs; each VU needs its own row"
    )
    assert problem.hint is not None and "circular or random" in problem.hint
    load_plan(feeder_plan(tmp_path, "users.csv", "login\na\nb\nc\n", mode="unique", vus=3))
    load_plan(feeder_plan(tmp_path, "users.csv", "login\na\nb\nc\n", mode="random", vus=4))
    # The open model's peak is its max_vus.
    path = feeder_plan(tmp_path, "users.jsonl", '{"a": 1}\n{"a": 2}\n', mode="unique")
    path.write_text(
        path.read_text().replace(
            "{type: closed, stages: [{duration_s: 1, vus: 2}]}",
            "{type: open, stages: [{duration_s: 1, rate_per_s: 100}], max_vus: 5}",
        )
    )
    assert "has 2 row(s) but scenario 's' runs up to 5 VUs" in feeder_problem(path).message


def test_more_vus_from_the_command_line_than_unique_rows(tmp_path: Path) -> None:
    from horde.errors import InvalidInput
    from horde.plan.overrides import apply_overrides

    plan = load_plan(feeder_plan(tmp_path, "users.csv", "login\na\nb\n", mode="unique", vus=2))
    assert apply_overrides(plan, vus=2, duration_s=5).scenarios[0].feeders[0].mode == "unique"
    with pytest.raises(InvalidInput) as caught:
        apply_overrides(plan, vus=3)
    assert (
        caught.value.message
        == "unique feeder 'rows' has 2 row(s) but scenario 's' runs up to 3 VUs; each VU needs its own row"
    )
    assert caught.value.hint is not None and "lower --vus" in caught.value.hint


def test_rows_are_counted_once_per_version_of_the_file(tmp_path: Path) -> None:
    from horde.plan.feeders import count_rows

    data = tmp_path / "rows.csv"
    data.write_text('h\n1\n"2\n2"\n\n3\n')
    assert count_rows(str(data), "csv") == 3
    data.write_text("h\n1\n")
    assert count_rows(str(data), "csv") == 1
    assert count_rows(str(tmp_path / "nope.csv"), "csv") is None
    data.write_text('{"a": 1}\n \n{"a": 2}\n')
    assert count_rows(str(data), "jsonl") == 2


# --- locating problems found later (by the engine) --------------------------------------------------


def test_locate_maps_a_path_to_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.yaml", MINIMAL_YAML)
    loaded = load_plan_file(path)
    assert loaded.locate("scenarios[0].steps[0].path") == f"{path}:7: scenarios[0].steps[0].path"
    assert loaded.locate("scenarios[0].workload.stages[0].vus") == f"{path}:8: scenarios[0].workload.stages[0].vus"
    # A key the file leaves out (a default): the line of the deepest part it writes.
    assert loaded.locate("scenarios[0].weight") == f"{path}:5: scenarios[0].weight"
    assert loaded.located([Problem("target.base_url", "m", hint="h")]) == [
        Problem(f"{path}:3: target.base_url", "m", hint="h")
    ]
    assert load_plan_file(PLANS / "plan_module.py").locate("scenarios[0].name") == "scenarios[0].name"
    json_path = write(tmp_path, "plan.json", plan_to_json(load_plan(path)))
    assert load_plan_file(json_path).locate("scenarios[0].name") == f"{json_path}:1: scenarios[0].name"


def test_parse_path() -> None:
    assert parse_path("") == ()
    assert parse_path("scenarios[0].steps[1].branches[2].steps[0].extract[3].expression") == (
        "scenarios",
        0,
        "steps",
        1,
        "branches",
        2,
        "steps",
        0,
        "extract",
        3,
        "expression",
    )
    assert parse_path("target.headers.x-api-key") == ("target", "headers", "x-api-key")


def test_validate_and_run_place_the_engines_problems_on_their_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from horde import _engine
    from horde.cli import main

    probe = _engine.validate_plan(plan_to_json(load_plan(QUICKSTART)))
    if probe:
        pytest.skip(f"the engine predates the scenario language (it says {probe[0]}); rebuild it: make setup")
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path,
        "plan.yaml",
        MINIMAL_YAML.replace(
            "- {name: home, method: GET, path: /}",
            '- {name: home, method: GET, path: "/{{ missing }}",\n'
            '         extract: [{var: x, from: json, expression: "$[?"}]}',
        ),
    )
    monkeypatch.setenv("HORDE_STORE", str(tmp_path / "runs.sqlite"))
    for command in ("validate", "run"):
        code = main([command, "plan.yaml"])
        err = capsys.readouterr().err
        assert code == 2
        assert "plan.yaml:7: scenarios[0].steps[0].path: unknown variable 'missing'" in err
        assert "plan.yaml:8: scenarios[0].steps[0].extract[0].expression: invalid JSONPath" in err
    assert not (tmp_path / "runs.sqlite").exists()  # refused before the store was opened


@pytest.mark.parametrize(
    "name,data",
    [("users.csv", "id,login,password\n1,ann,x\n"), ("users.jsonl", '{"id": 1, "login": "ann", "password": "x"}\n')],
)
def test_a_template_reading_a_field_its_feeder_lacks_is_located_with_the_fields(
    tmp_path: Path, name: str, data: str
) -> None:
    (tmp_path / name).write_text(data)
    plan = write(
        tmp_path,
        "plan.yaml",
        textwrap.dedent(f"""\
        version: 1
        name: feeders
        target: {{base_url: "http://127.0.0.1:1"}}
        scenarios:
          - name: s
            feeders: [{{name: users, path: {name}}}]
            steps:
              - name: login
                method: POST
                path: "/login/{{{{ users.id }}}}"
                json: {{user: "{{{{ users.logn }}}}", pass: "{{{{ users.password }}}}"}}
            workload: {{type: closed, stages: [{{duration_s: 1, vus: 1}}]}}
        """),
    )
    (problem,) = problems_of(plan)
    assert problem.location == f"{plan}:11: scenarios[0].steps[0].json.user"
    assert "feeder 'users' has no field 'logn'" in problem.message
    assert problem.hint and "did you mean 'users.login'?" in problem.hint and "id, login, password" in problem.hint
