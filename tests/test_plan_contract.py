"""The plan contract, checked from both sides: pydantic (python/horde/plan) and the engine
(crates/horde-plan, through horde._engine.validate_plan) accept the same plans and reject the
same mistakes at the same location, in the same words; and the bounds pydantic checks are the
engine's own (horde._engine.plan_bounds)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from horde import _engine
from horde.errors import PlanInvalid
from horde.plan import plan_from_dict, plan_to_json
from horde.plan.loader import load_plan
from ruamel.yaml import YAML

PLANS = Path(__file__).resolve().parent / "plans"

EXAMPLES = sorted(
    path
    for path in (Path(__file__).resolve().parent.parent / "examples").rglob("plan.*")
    if path.suffix in {".yaml", ".yml", ".json", ".py"}
)

VALID: dict[str, Any] = {
    "version": 1,
    "target": {"base_url": "http://127.0.0.1:8080", "headers": {"accept": "text/plain"}},
    "scenarios": [
        {
            "name": "browse",
            "steps": [
                {
                    "name": "home",
                    "method": "GET",
                    "path": "/",
                    "think_time": {"type": "uniform", "min_ms": 1, "max_ms": 2},
                },
                {"name": "post", "method": "POST", "path": "/items", "body": "{}"},
            ],
            "workload": {
                "type": "open",
                "start_rate_per_s": 5,
                "stages": [{"duration_s": 2, "rate_per_s": 10}],
                "max_vus": 4,
            },
        }
    ],
}


def test_there_are_examples() -> None:
    assert EXAMPLES, "examples/ holds at least one plan"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.parent.name) + "/" + p.name)
def test_every_example_passes_both_sides(path: Path) -> None:
    plan = load_plan(path)
    assert _engine.validate_plan(plan_to_json(plan)) == []


def test_a_valid_plan_passes_both_sides_as_written_and_canonical() -> None:
    plan = plan_from_dict(VALID)
    assert _engine.validate_plan(json.dumps(VALID)) == []  # defaults left out
    assert _engine.validate_plan(plan_to_json(plan)) == []  # every default written out


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID)
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


# (a mistake, the path both sides must report)
MISTAKES = [
    (_with(["version"], 2), "version"),
    (_with(["target", "base_url"], "ftp://x"), "target.base_url"),
    (_with(["target", "connect_timeout_ms"], 0), "target.connect_timeout_ms"),
    (_with(["target", "base_url"], "http://user:pw@127.0.0.1:8080"), "target.base_url"),
    (_with(["scenarios", 0, "steps", 0, "method"], "get"), "scenarios[0].steps[0].method"),
    (_with(["scenarios", 0, "steps", 1, "path"], "items"), "scenarios[0].steps[1].path"),
    (_with(["scenarios", 0, "steps", 1, "name"], "home"), "scenarios[0].steps[1].name"),
    (
        _with(["scenarios", 0, "steps", 0, "think_time"], {"type": "uniform", "min_ms": 5, "max_ms": 1}),
        "scenarios[0].steps[0].think_time.max_ms",
    ),
    (_with(["scenarios", 0, "workload", "max_vus"], 0), "scenarios[0].workload.max_vus"),
    (
        _with(["scenarios", 0, "steps", 0, "think_time"], {"type": "normal", "mean_ms": 5, "stddev_ms": -1}),
        "scenarios[0].steps[0].think_time.stddev_ms",
    ),
    (_with(["scenarios", 0, "workload", "stages", 0, "duration_s"], 0), "scenarios[0].workload.stages[0].duration_s"),
    (_with(["scenarios", 0, "workload", "stages", 0, "rate_per_s"], -1), "scenarios[0].workload.stages[0].rate_per_s"),
    (_with(["target", "base_url"], "127.0.0.1:8080"), "target.base_url"),
    (_with(["target", "base_url"], "HTTP://127.0.0.1:8080"), "target.base_url"),
    (_with(["target", "base_url"], "http://127.0.0.1:8080?x=1"), "target.base_url"),
    (_with(["scenarios", 0, "steps", 0, "method"], "FETCH"), "scenarios[0].steps[0].method"),
]

#: Each mistake file in tests/plans/ that both sides can read (the rest are refused before
#: either side sees a plan: bad syntax, a duplicate key, a Python module).
MISTAKE_FILES = ["bad_values.yaml", "bad_values.json", "bad_unknown_key.yaml"]

#: Places where the two sides still word a semantic problem differently, each with why (types,
#: unknown keys and missing keys are pydantic's to word: the engine stops at the first of them,
#: in serde's words). Empty is the goal: a new entry is a regression.
WORDED_DIFFERENTLY: set[str] = set()


def _both_sides(data: Any) -> tuple[dict[str, str], dict[str, list[str]]]:
    try:
        plan_from_dict(data)
        pydantic: dict[str, str] = {}
    except PlanInvalid as refused:
        pydantic = {problem.location: problem.message for problem in refused.problems}
    engine: dict[str, list[str]] = {}
    for path, message, _ in _engine.validate_plan(json.dumps(data)):
        engine.setdefault(path, []).append(message)
    return pydantic, engine


#: How the engine words where decoding stopped (a type, a missing or unknown key): serde's.
_SERDE_STOPPED = re.compile(r" at line \d+ column \d+$")


def _read(name: str) -> Any:
    path = PLANS / name
    return YAML(typ="safe").load(path) if path.suffix == ".yaml" else json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("data", "path"), MISTAKES, ids=[f"{path}@{index}" for index, (_, path) in enumerate(MISTAKES)]
)
def test_each_mistake_is_worded_the_same_by_both_sides(data: dict[str, Any], path: str) -> None:
    pydantic, engine = _both_sides(data)
    if path in WORDED_DIFFERENTLY:
        pytest.skip("still worded differently (WORDED_DIFFERENTLY says why)")
    assert pydantic[path] in engine[path], (pydantic[path], engine[path])


@pytest.mark.parametrize("name", MISTAKE_FILES)
def test_each_mistake_file_is_worded_the_same_where_both_sides_see_it(name: str) -> None:
    pydantic, engine = _both_sides(_read(name))
    assert pydantic, "each file holds a mistake"
    semantic = {path: messages for path, messages in engine.items() if not _SERDE_STOPPED.search(" ".join(messages))}
    for path in sorted(set(pydantic) & set(semantic) - WORDED_DIFFERENTLY):
        assert pydantic[path] in engine[path], (path, pydantic[path], engine[path])


@pytest.mark.parametrize("name", MISTAKE_FILES)
def test_each_problem_of_a_mistake_file_says_where_and_what_to_do(name: str) -> None:
    with pytest.raises(PlanInvalid) as caught:
        load_plan(PLANS / name)
    for problem in caught.value.problems:
        assert problem.location and problem.message and problem.hint, problem


def test_pydantic_checks_the_engine_s_bounds() -> None:
    from horde.plan import bounds

    engine = _engine.plan_bounds()
    assert engine["MAX_VUS"] == bounds.MAX_VUS == 10_000_000  # known answer: docs/plan-reference.md
    for name, value in engine.items():
        if hasattr(bounds, name):
            assert getattr(bounds, name) == value, name


@pytest.mark.parametrize(("data", "path"), MISTAKES, ids=[path for _, path in MISTAKES])
def test_each_mistake_is_rejected_by_both_sides_at_the_same_place(data: dict[str, Any], path: str) -> None:
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(data)
    assert path in [problem.location for problem in caught.value.problems]
    engine_paths = [problem_path for problem_path, _, _ in _engine.validate_plan(json.dumps(data))]
    assert path in engine_paths, engine_paths


@pytest.mark.parametrize(
    ("where", "path"),
    [
        ([], "colour"),
        (["target"], "target.colour"),
        (["scenarios", 0, "steps", 0], "scenarios[0].steps[0].colour"),
        (["scenarios", 0, "workload"], "scenarios[0].workload.colour"),
    ],
)
def test_unknown_keys_are_rejected_by_both_sides(where: list[Any], path: str) -> None:
    data = copy.deepcopy(VALID)
    node: Any = data
    for key in where:
        node = node[key]
    node["colour"] = "red"
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(data)
    assert path in [problem.location for problem in caught.value.problems]
    (engine_problem,) = _engine.validate_plan(json.dumps(data))
    # serde stops at the first unknown key; it names it, and where it is.
    assert engine_problem[0].endswith("colour") and "unknown field" in engine_problem[1], engine_problem


def test_run_start_refuses_what_the_engine_refuses() -> None:
    from horde.engine.run import engine_problems

    assert engine_problems(json.dumps(_with(["version"], 3)))[0].location == "version"


@pytest.mark.parametrize(
    ("path", "keys", "value"),
    [
        ("scenarios[0].workload.stages[0].duration_s", ["scenarios", 0, "workload", "stages", 0, "duration_s"], 1e9),
        ("scenarios[0].workload.stages[0].rate_per_s", ["scenarios", 0, "workload", "stages", 0, "rate_per_s"], 1e10),
        ("scenarios[0].workload.max_vus", ["scenarios", 0, "workload", "max_vus"], 10**12),
        ("target.request_timeout_ms", ["target", "request_timeout_ms"], 1e300),
        ("graceful_stop_s", ["graceful_stop_s"], 1e6),
        ("scenarios[0].steps[0].think_time.max_ms", ["scenarios", 0, "steps", 0, "think_time", "max_ms"], 1e12),
    ],
)
def test_upper_bounds_are_the_same_on_both_sides(path: str, keys: list[Any], value: Any) -> None:
    data = _with(keys, value)
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(data)
    problem = next(p for p in caught.value.problems if p.location == path)
    assert "at most" in problem.message
    assert path in [problem_path for problem_path, _, _ in _engine.validate_plan(json.dumps(data))]
