"""Fuzzing the Python builder's output (issue 16's proof): whatever values a plan module passes to
``horde.plan``, ``horde.scenario``, ``horde.http``... the result is a Plan, or a PlanInvalid whose
every problem is located and has a hint (exit 2), never another exception: no traceback reaches
the user of ``horde run plan.py``. Values nested past the plan's bound (or past Python's
recursion) are refused as nesting too deep, not as a RecursionError."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horde import check, choice, branch, closed, constant, group, http, loop, plan, scenario, stage, think, when
from horde.errors import InvalidInput, PlanInvalid
from horde.plan import Plan
from horde.plan.bounds import MAX_DEPTH
from horde.plan.builder import StepSpec


class _HugeInt(int):
    """An integer past Python's 4,300 digits that hypothesis can still show in a report."""

    def __repr__(self) -> str:
        return "<an integer of over 4,300 digits>"


#: Text as a plan module may hold it: any code point (lone surrogates included), templates,
#: brackets that read as JSON, URLs' characters.
_TEXT = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=16),
    st.sampled_from(
        [
            "",
            "/",
            "/items?token=x",
            "{{ params.n }}",
            "{{ vu }}",
            "\ud800",
            "[" * 70 + "]" * 70,
            "{" * 3,
            "GET",
            "http://-bad-.com/",
            "9" * 5000,
        ]
    ),
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    _TEXT,
    st.sampled_from([4400, 5000]).map(lambda digits: _HugeInt(10**digits)),
)
_JSON = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_TEXT, children, max_size=3),
    max_leaves=12,
)
_ANY = st.one_of(_JSON, st.tuples(_SCALARS), st.frozensets(st.integers(), max_size=2))


@st.composite
def _step(draw: st.DrawFn) -> StepSpec:
    method = draw(st.one_of(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]), _TEXT))
    return http.request(
        method,  # type: ignore[arg-type]  # any text, as a plan module may write
        draw(_TEXT),
        draw(_TEXT),
        headers=draw(st.one_of(st.none(), st.dictionaries(_TEXT, _ANY, max_size=3))),
        body=draw(st.one_of(st.none(), _TEXT, _ANY)),
        json=draw(st.one_of(st.none(), _JSON)),
        think_time=draw(st.one_of(st.none(), _SCALARS.map(constant))),
        checks=draw(st.lists(st.lists(_SCALARS, max_size=2).map(lambda codes: check.status(*codes)), max_size=2)),
    )


@st.composite
def _steps(draw: st.DrawFn) -> list[StepSpec]:
    steps = draw(st.lists(_step(), min_size=0, max_size=3))
    wrap = draw(st.sampled_from(["none", "group", "loop", "when", "choice", "think"]))
    if wrap == "group":
        steps = [group(draw(_TEXT), *steps)]
    elif wrap == "loop":
        steps = [loop(*steps, count=draw(_SCALARS))]
    elif wrap == "when":
        steps = [when(draw(_TEXT), *steps)]
    elif wrap == "choice":
        steps = [choice(branch(draw(_SCALARS), *steps))]
    elif wrap == "think":
        steps = [*steps, think(draw(_SCALARS))]
    return steps


def _assert_plan_or_located(build: Any) -> None:
    try:
        result = build()
    except PlanInvalid as error:
        assert error.problems
        for problem in error.problems:
            assert problem.location and problem.message and problem.hint is not None, problem
            assert "RecursionError" not in problem.message and "maximum recursion" not in problem.message
    except InvalidInput as error:  # a parameter's value of the wrong kind: exit 2 too
        assert error.message and error.hint
    else:
        assert isinstance(result, Plan)


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    name=_TEXT,
    base_url=st.one_of(_TEXT, st.sampled_from(["http://127.0.0.1:1", "https://[::1]:8443/api"])),
    steps=_steps(),
    vus=_SCALARS.filter(lambda value: value is not None),
    duration=_SCALARS,
    parameters=st.one_of(st.none(), st.dictionaries(_TEXT, _SCALARS, max_size=2)),
    headers=st.one_of(st.none(), st.dictionaries(_TEXT, _ANY, max_size=2)),
)
def test_any_builder_values_give_a_plan_or_located_problems(
    name: Any, base_url: Any, steps: list[StepSpec], vus: Any, duration: Any, parameters: Any, headers: Any
) -> None:
    _assert_plan_or_located(
        lambda: plan(
            name,
            base_url=base_url,
            parameters=parameters,
            headers=headers,
            scenarios=[scenario(name, steps=steps, workload=closed([stage(duration, vus=vus)]))],
        )
    )


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(_step(), min_size=1, max_size=2))
def test_valid_surroundings_with_fuzzed_steps_give_a_plan_or_located_problems(steps: list[StepSpec]) -> None:
    _assert_plan_or_located(
        lambda: plan(
            "fuzz",
            base_url="http://127.0.0.1:1",
            scenarios=[scenario("s", steps=steps, workload=closed([stage(1, vus=1)]))],
        )
    )


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for index in range(depth):
        value = [value] if index % 2 else {"n": value}
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, sys.getrecursionlimit() + 10, 100_000])
@pytest.mark.parametrize("where", ["json", "headers", "body", "check"])
def test_a_builder_value_nested_past_the_bound_says_so(depth: int, where: str) -> None:
    deep = _nested(depth, "x")
    step = {
        "json": lambda: http.post("p", "/", json=deep),
        "headers": lambda: http.get("p", "/", headers={"X": deep}),
        "body": lambda: http.post("p", "/", body=deep),
        "check": lambda: http.get("p", "/", checks=[check.json("$.a", equals=deep)]),
    }[where]
    with pytest.raises(PlanInvalid) as caught:
        plan(
            "deep",
            base_url="http://127.0.0.1:1",
            scenarios=[scenario("s", steps=[step()], workload=closed([stage(1, vus=1)]))],
        )
    (problem,) = caught.value.problems
    assert problem.location.startswith("scenarios[0].steps[0]."), problem.location
    assert f"nest deeper than {MAX_DEPTH} levels" in problem.message and problem.hint


def test_a_value_that_contains_itself_says_it_nests_too_deep() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(PlanInvalid) as caught:
        plan(
            "cycle",
            base_url="http://127.0.0.1:1",
            scenarios=[
                scenario("s", steps=[http.post("p", "/", json={"a": cycle})], workload=closed([stage(1, vus=1)]))
            ],
        )
    assert "nest deeper than" in caught.value.problems[0].message
