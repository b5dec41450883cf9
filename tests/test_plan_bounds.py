"""Hostile plan files, kept as regression cases: each is refused with a located problem and a
hint (PlanInvalid: exit 2), never a traceback, and quickly: the bounds of horde.plan.bounds."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from horde.errors import PlanInvalid
from horde.plan.bounds import MAX_DEPTH, MAX_PLAN_BYTES, MAX_PROBLEMS, shape_problems
from horde.plan.builder import http, plan, scenario, closed, stage
from horde.plan.loader import load_plan

BASE: dict[str, Any] = {
    "version": 1,
    "name": "p",
    "target": {"base_url": "http://127.0.0.1:1"},
    "scenarios": [
        {
            "name": "s",
            "steps": [{"name": "g", "method": "GET", "path": "/"}],
            "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]},
        }
    ],
}


def _with_body(body: str) -> str:
    """The base plan as JSON text with ``body`` (raw JSON text) as its step's JSON body."""
    return json.dumps(BASE).replace('"path": "/"}', f'"path": "/", "json": {body}}}')


def _refused(path: Path) -> tuple[PlanInvalid, float]:
    started = time.perf_counter()
    with pytest.raises(PlanInvalid) as caught:
        load_plan(path)
    return caught.value, time.perf_counter() - started


CASES = {
    "nested 600 deep in JSON": ("plan.json", _with_body("[" * 600 + "]" * 600), "nest deeper than 64"),
    "nested 100,000 deep in JSON": ("plan.json", _with_body("[" * 100_000 + "]" * 100_000), None),
    "an integer of 5,000 digits": ("plan.json", _with_body("9" * 5000), "4300 digits"),
    "a lone surrogate escape": (
        "plan.json",
        json.dumps(BASE).replace('"name": "p"', '"name": "\\ud800"'),
        "lone surrogate",
    ),
    "a YAML alias bomb": (
        "plan.yaml",
        "\n".join(
            ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
            + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
        )
        + "\nversion: 1\n",
        "more than 200,000 values",
    ),
    "nested 2,000 deep in YAML": ("plan.yaml", "version: 1\nx: " + "[" * 2000 + "]" * 2000 + "\n", None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_plan_is_refused_with_a_located_problem_in_well_under_a_second(tmp_path: Path, case: str) -> None:
    name, text, message = CASES[case]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    error, seconds = _refused(path)
    assert error.problems and all(problem.location.startswith(str(path)) for problem in error.problems)
    assert all(problem.hint for problem in error.problems)
    if message is not None:
        assert message in str(error.problems[0])
    assert seconds < 1.0, f"{case}: {seconds:.2f} s"


def test_a_plan_file_past_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    plan_data = dict(
        BASE,
        scenarios=[
            dict(
                BASE["scenarios"][0],
                steps=[{"name": f"g{i}", "method": "GET", "path": f"/item/{i}"} for i in range(12_000)],
            )
        ],
    )
    path.write_text(json.dumps(plan_data))
    assert path.stat().st_size > MAX_PLAN_BYTES
    error, seconds = _refused(path)
    assert f"holds at most {MAX_PLAN_BYTES:,}" in str(error.problems[0]) and seconds < 1.0


def test_thousands_of_unknown_keys_list_the_first_few_and_count_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**BASE, **{f"k{i}": i for i in range(15_000)}}))
    error, seconds = _refused(path)
    assert len(error.problems) == MAX_PROBLEMS + 1
    assert "unknown key 'k0'" in str(error.problems[0])
    assert "and 14,950 more problems" in str(error.problems[-1])
    assert seconds < 2.0, f"{seconds:.2f} s"


def test_a_plan_at_the_bound_still_loads(tmp_path: Path) -> None:
    # The bounds are for hostile input: a plan of a few thousand steps, nested bodies of a
    # realistic depth, loads.
    body: Any = {"leaf": 1}
    for _ in range(MAX_DEPTH - 10):
        body = {"n": body}
    path = tmp_path / "plan.json"
    plan_data = dict(
        BASE,
        scenarios=[
            dict(
                BASE["scenarios"][0],
                steps=[
                    {"name": f"g{i}", "method": "POST", "path": f"/item/{i}", **({"json": body} if i == 0 else {})}
                    for i in range(2_000)
                ],
            )
        ],
    )
    path.write_text(json.dumps(plan_data))
    assert path.stat().st_size < MAX_PLAN_BYTES
    assert len(load_plan(path).scenarios[0].steps) == 2_000


def test_the_python_builder_is_bounded_too() -> None:
    deep: Any = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(PlanInvalid) as caught:
        plan(
            "deep",
            base_url="http://127.0.0.1:1",
            scenarios=[scenario("s", steps=[http.post("p", "/", json=deep)], workload=closed([stage(1, vus=1)]))],
        )
    assert "nest deeper" in str(caught.value.problems[0])


def test_the_shape_walk_stops_at_the_bound_without_recursion() -> None:
    bomb: list[Any] = ["x"] * 10
    for _ in range(30):  # 10**30 values if expanded
        bomb = [bomb] * 10
    started = time.perf_counter()
    (problem,) = shape_problems({"a": bomb}, max_depth=100)
    assert "more than" in problem[1] and time.perf_counter() - started < 1.0


# --- JSON held in text: a `body:` string, --body, -p, a feeder row, a recorded response ------
# Each is decoded somewhere (to find its secrets, to read a parameter's value): nested past the
# plan's bound it is refused where it is written, and where it is only read it is never a
# RecursionError.

DEEP_TEXT = "[" * 100_000 + "]" * 100_000


def _horde(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from horde.cli import main

    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


def _text_body_plan(tmp_path: Path, body: str, parameters: dict[str, Any] | None = None) -> Path:
    data = dict(
        BASE, scenarios=[dict(BASE["scenarios"][0], steps=[{"name": "g", "method": "POST", "path": "/", "body": body}])]
    )
    if parameters is not None:
        data["parameters"] = parameters
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return path


def test_a_body_string_holding_json_nested_past_the_bound_is_refused_where_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HORDE_STORE", str(tmp_path / "runs.sqlite"))
    path = _text_body_plan(tmp_path, DEEP_TEXT)
    for command in ("validate", "run"):
        started = time.perf_counter()
        code, output = _horde(capsys, command, str(path), *(["--duration", "1s"] if command == "run" else []))
        assert code == 2, output
        assert f"{path}: scenarios[0].steps[0].body: holds JSON text nested deeper than {MAX_DEPTH} levels" in output
        assert time.perf_counter() - started < 2.0


def test_a_body_string_at_the_bound_and_text_with_brackets_still_load(tmp_path: Path) -> None:
    body = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_plan(_text_body_plan(tmp_path, body)).scenarios[0].steps[0].body == body  # type: ignore[union-attr]
    text = "tags: " + "[" * 1000
    assert load_plan(_text_body_plan(tmp_path, text)).scenarios[0].steps[0].body == text  # type: ignore[union-attr]


def test_a_url_body_nested_past_the_bound_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HORDE_STORE", str(tmp_path / "runs.sqlite"))
    deep = "[" * 20_000 + "]" * 20_000
    for command in ("run", "try"):
        code, output = _horde(
            capsys,
            command,
            "--url",
            "http://127.0.0.1:1/",
            "-X",
            "POST",
            "--body",
            deep,
            *(["--duration", "1s"] if command == "run" else []),
        )
        assert code == 2, output
        assert "scenarios[0].steps[0].body: holds JSON text nested deeper than" in output


def test_a_parameter_given_nested_json_is_refused_not_decoded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _text_body_plan(tmp_path, "{{ params.b }}", parameters={"n": 1, "b": "x"})
    code, output = _horde(capsys, "validate", str(path), "-p", "n=" + "[" * 5000)
    assert code == 2 and "parameter 'n' takes a number" in output, output
    assert "(5,000 characters)" in output and "[" * 100 not in output  # quoted by its start
    code, output = _horde(capsys, "validate", str(path), "-p", "b=" + "[" * 5000 + "]" * 5000)
    assert code == 2 and "scenarios[0].steps[0].body: holds JSON text nested deeper than" in output, output


def test_json_text_only_read_is_never_a_recursion_error(tmp_path: Path) -> None:
    from horde.plan.feeders import check_feeder_file
    from horde.plan.redaction import redact_exchange

    exchange = {
        "transport": "http",
        "request": "POST / HTTP/1.1",
        "request_body": DEEP_TEXT,
        "response": "HTTP/1.1 200 OK",
        "response_body": DEEP_TEXT,
        "vars": [],
        "checks": [],
    }
    shown = redact_exchange(exchange, set())
    assert shown["response_body"] == DEEP_TEXT
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"a": 1}\n' + DEEP_TEXT + "\n")
    fault = check_feeder_file(str(rows), "jsonl")
    assert fault is not None and "line 2" in fault.message
