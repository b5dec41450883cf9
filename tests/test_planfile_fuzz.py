"""Seeded fuzzing of plan files: whatever bytes a plan file holds, loading it gives a Plan or a
PlanInvalid with located problems, never another exception (no traceback reaches a user)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from horde.errors import PlanInvalid
from horde.plan import Plan
from horde.plan.loader import load_plan

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart" / "plan.yaml"
TOKENS = [
    b":",
    b"-",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\n",
    b"  ",
    b"'",
    b'"',
    b"&a",
    b"*a",
    b"!!python/object",
    b"\t",
    b"version",
    b"type",
    b"open",
    b"1e999",
    b"-1",
    b"null",
    b"~",
    b"\xff",
    b"#",
    b"%",
    b"|",
]


def mutate(data: bytes, rng: random.Random) -> bytes:
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        position = rng.randrange(len(buffer) + 1)
        choice = rng.random()
        if choice < 0.3 and buffer:
            del buffer[position : position + rng.randint(1, 8)]
        elif choice < 0.7:
            buffer[position:position] = rng.choice(TOKENS)
        elif buffer:
            buffer[min(position, len(buffer) - 1)] = rng.randrange(256)
    return bytes(buffer)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_mutated_plan_files_never_crash(tmp_path: Path, suffix: str) -> None:
    rng = random.Random(20261122)
    if suffix == ".yaml":
        seed = QUICKSTART.read_bytes()
    else:
        # The quickstart as written, in JSON: a dump with every default key would put most
        # mutations into keys with one valid value (each transport's knobs, the HTTP version),
        # and fewer and fewer would stay valid as the plan grows keys.
        seed = json.dumps(YAML(typ="safe").load(QUICKSTART.read_text()), indent=1).encode()
    target = tmp_path / f"plan{suffix}"
    outcomes = {"valid": 0, "invalid": 0}
    for _ in range(400):
        target.write_bytes(mutate(seed, rng))
        try:
            plan = load_plan(target)
        except PlanInvalid as error:
            outcomes["invalid"] += 1
            assert error.problems, "an invalid plan names at least one problem"
            assert all(str(target) in problem.location or problem.location for problem in error.problems)
        else:
            assert isinstance(plan, Plan)
            outcomes["valid"] += 1
    # The mutations must have exercised both paths, or the test proves nothing.
    assert outcomes["invalid"] > 50 and outcomes["valid"] > 5, outcomes


# -- structured fuzzing (hypothesis): any JSON value at any place of a plan ------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=30,
)
_PLACES = [
    ("name",),
    ("target",),
    ("target", "base_url"),
    ("scenarios",),
    ("scenarios", 0, "steps"),
    ("scenarios", 0, "steps", 0, "json"),
    ("scenarios", 0, "steps", 0, "path"),
    ("scenarios", 0, "workload"),
    ("scenarios", 0, "workload", "stages", 0, "vus"),
    ("thresholds",),
    ("steer",),
    ("parameters",),
    ("scenarios", 0, "feeders"),
]


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(place=st.sampled_from(_PLACES), value=_JSON_VALUES, as_yaml=st.booleans())
def test_any_value_at_any_place_gives_a_plan_or_located_problems(
    tmp_path: Path, place: tuple[Any, ...], value: Any, as_yaml: bool
) -> None:
    data: Any = {
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
    node = data
    for key in place[:-1]:
        node = node[key]
    node[place[-1]] = value
    # JSON is YAML: the same text goes through both readers.
    target = tmp_path / ("plan.yaml" if as_yaml else "plan.json")
    target.write_text(json.dumps(data, allow_nan=True))
    try:
        load_plan(target)
    except PlanInvalid as error:
        assert error.problems and all(problem.location for problem in error.problems)
