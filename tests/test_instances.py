"""Several instances of one target (``target.instances``): pydantic and the engine accept and
refuse the same instance lists at the same places, and a run through :class:`horde.engine.run.Run`
spreads its VUs over two built-in targets, each of which sees its share.

What a target received is read from the target itself: its game numbers players 1, 2, 3...,
so registering one more player after the run tells how many it registered during the run.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from horde import _engine
from horde.errors import PlanInvalid
from horde.plan import Plan, plan_from_dict, plan_to_json
from horde.engine.run import Run, Snapshot
from horde.engine.target import start


def plan_data(base_url: str, instances: Any, scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "version": 1,
        "target": {"base_url": base_url, "instances": instances},
        "scenarios": [
            scenario
            or {
                "name": "s",
                "steps": [{"name": "get", "method": "GET", "path": "/"}],
                "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]},
            }
        ],
    }


def pydantic_problems(data: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    try:
        plan_from_dict(data)
    except PlanInvalid as error:
        return [(problem.location, problem.message, problem.hint) for problem in error.problems]
    return []


def engine_problems(data: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return list(_engine.validate_plan(json.dumps(data)))


# --- the plan check, both sides ----------------------------------------------------------------


def test_no_instances_is_the_plan_as_before() -> None:
    plan = plan_from_dict(plan_data("http://127.0.0.1:8080", []))
    assert plan.target.instances == []
    data = plan_data("http://127.0.0.1:8080", [])
    del data["target"]["instances"]
    assert plan_from_dict(data).target.instances == []
    assert engine_problems(data) == []


@pytest.mark.parametrize(
    ("base_url", "instances"),
    [
        ("http://a:8080", ["http://b:8080", "http://c:8080"]),
        ("http://a:8080/api/", ["http://b:8080/api", "http://C:9090/api/"]),  # trailing slashes
        ("https://a", ["https://b:8443", "https://[::1]"]),
        ("http://a:8080", ["http://a:8081"]),  # same host, another port
    ],
)
def test_both_sides_accept_the_same_instances(base_url: str, instances: list[str]) -> None:
    data = plan_data(base_url, instances)
    plan = plan_from_dict(data)
    assert plan.target.instances == instances
    assert json.loads(plan_to_json(plan))["target"]["instances"] == instances
    assert engine_problems(data) == []
    assert _engine.validate_plan(plan_to_json(plan)) == []


# (instances after base_url 'http://a:8080/api', the location, the message both sides give (None
# where only pydantic's wording is checked), a piece of pydantic's hint)
MISTAKES: dict[str, tuple[list[str], str, str | None, str]] = {
    "scheme": (
        ["https://b:8080/api"],
        "target.instances[0]",
        "'https://b:8080/api' uses https:// but base_url uses http://",
        "base_url's scheme",
    ),
    "prefix": (
        ["http://b:8080/v2"],
        "target.instances[0]",
        "'http://b:8080/v2' has path prefix '/v2' but base_url has '/api'",
        "path prefix",
    ),
    "no prefix": (
        ["http://b:8080"],
        "target.instances[0]",
        "'http://b:8080' has path prefix none but base_url has '/api'",
        "path prefix",
    ),
    "base_url again": (
        ["http://A:8080/api/"],
        "target.instances[0]",
        "'http://A:8080/api/' is the same instance as base_url",
        "list each instance once",
    ),
    "given twice": (
        ["http://b/api", "http://b:80/api"],
        "target.instances[1]",
        "'http://b:80/api' is the same instance as instances[0]",
        "default",
    ),
    "credentials": (
        ["http://u:p@b:8080/api"],
        "target.instances[0]",
        "an instance must not carry credentials (user:password@)",
        "as a header",
    ),
    "no host": (["http://:8080/api"], "target.instances[0]", "'http://:8080/api' has no host", "after the scheme"),
    "port 0": (["http://b:0/api"], "target.instances[0]", "'http://b:0/api' has port 0", "listens on"),
    "not http": (
        ["ftp://b/api"],
        "target.instances[0]",
        "'ftp://b/api' uses scheme 'ftp'; only http and https are supported",
        "http://",
    ),
    "bad port": (["http://b:99999/api"], "target.instances[0]", None, "scheme://host"),
    "query": (
        ["http://b:8080/api?x=1"],
        "target.instances[0]",
        "'http://b:8080/api?x=1' has a query or fragment",
        "step's path",
    ),
}


@pytest.mark.parametrize("mistake", MISTAKES, ids=list(MISTAKES))
def test_both_sides_refuse_the_same_mistake_at_the_same_place(mistake: str) -> None:
    instances, location, message, hint = MISTAKES[mistake]
    data = plan_data("http://a:8080/api", instances)
    ((found_location, found_message, found_hint),) = pydantic_problems(data)
    assert found_location == location
    assert found_hint is not None and hint in found_hint
    engine = engine_problems(data)
    assert [path for path, _, _ in engine] == [location], engine
    if message is not None:
        assert found_message == message
        assert engine[0][1] == message


def test_every_problem_is_listed_and_a_bad_base_url_hides_none() -> None:
    data = plan_data("ftp://a", ["http://b", "http://b:80", 5, "http://"])
    problems = pydantic_problems(data)
    assert [location for location, _, _ in problems] == [
        "target.base_url",
        "target.instances[1]",
        "target.instances[2]",
        "target.instances[3]",
    ]
    assert problems[1][1] == "'http://b:80' is the same instance as instances[0]"
    # serde refuses the number while decoding, before any check.
    assert [path for path, _, _ in engine_problems(data)] == ["target.instances[2]"]
    del data["target"]["instances"][2]
    assert [path for path, _, _ in engine_problems(data)] == [
        "target.base_url",
        "target.instances[1]",
        "target.instances[2]",
    ]


def test_instances_must_be_a_list_of_urls() -> None:
    ((location, message, _),) = pydantic_problems(plan_data("http://a", "http://b"))
    assert (location, message) == ("target.instances", "must be a list (got the text 'http://b')")


# --- a run over two built-in targets -------------------------------------------------------------


def ask(port: int, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """One request straight to a target, apart from the engine: (status, JSON body)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def registrations(port: int) -> int:
    """How many players the target has registered (one more is registered to find out)."""
    status, body = ask(port, "/game/register", {"login": "probe", "password": "x"})
    assert status == 201, body
    return int(body["player_id"]) - 1


def ok_of(snapshots: list[Snapshot], step: str) -> int:
    return sum(int(entry["ok"]) for s in snapshots for entry in s["steps"] if entry["step"] == step)


def errors_of(snapshots: list[Snapshot]) -> dict[str, int]:
    errors: dict[str, int] = {}
    for snapshot in snapshots:
        for entry in snapshot["steps"]:
            for kind, count in entry["errors"].items():
                errors[kind] = errors.get(kind, 0) + count
    return errors


def test_a_run_spreads_its_vus_over_two_builtin_targets(builtin_target: Any) -> None:
    second = start(port=0)
    try:
        ports = [builtin_target.port, second.port]
        account = {"login": "vu{{ vu }}", "password": "pw"}
        scenario = {
            "name": "players",
            "setup": [
                {
                    "name": "register",
                    "method": "POST",
                    "path": "/game/register",
                    "json": account,
                    "checks": [{"type": "status", "in": [201]}],
                },
                {
                    "name": "login",
                    "method": "POST",
                    "path": "/game/login",
                    "json": account,
                    "checks": [{"type": "status", "in": [200]}],
                },
            ],
            "steps": [
                # The session cookie comes from the VU's own instance; another would answer 401.
                {"name": "city", "method": "GET", "path": "/game/city", "checks": [{"type": "status", "in": [200]}]},
                {
                    "name": "again",
                    "method": "POST",
                    "path": "/game/register",
                    "json": {"login": "vu{{ vu }}-{{ iteration }}", "password": "pw"},
                    "checks": [{"type": "status", "in": [201]}],
                    "think_time": {"type": "constant", "duration_ms": 5},
                },
            ],
            "workload": {"type": "closed", "start_vus": 4, "stages": [{"duration_s": 1.5, "vus": 4}]},
        }
        plan: Plan = plan_from_dict(
            plan_data(f"http://127.0.0.1:{ports[0]}", [f"http://127.0.0.1:{ports[1]}"], scenario)
        )
        deadline = time.monotonic() + 30
        snapshots: list[Snapshot] = []
        with Run.start(plan, workers=2) as run:
            for snapshot in run:
                snapshots.append(snapshot)
                assert time.monotonic() < deadline, "the run did not end in time"
        assert errors_of(snapshots) == {}
        assert ok_of(snapshots, "register") == ok_of(snapshots, "login") == 4

        # VU n registered at instance n mod 2, and only there.
        for vu in range(4):
            statuses = [ask(port, "/game/login", {"login": f"vu{vu}", "password": "pw"})[0] for port in ports]
            assert statuses == ([200, 401] if vu % 2 == 0 else [401, 200]), (vu, statuses)

        served = [registrations(port) for port in ports]
        again = ok_of(snapshots, "again")
        assert again >= 40
        assert sum(served) == 4 + again, served
        for count in served:
            assert abs((count - 2) / again - 0.5) < 0.1, served
    finally:
        second.stop()
