"""How VUs reach the target (``target.connections``, ``target.source_addresses``): both sides
of the plan contract accept the same values and refuse the same mistakes at the same place,
with a hint; a plan file locates them at their line; and a run through :class:`horde.engine.run.Run`
with a pool of 2 sends every request over at most 2 connections."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from horde import _engine
from horde.errors import PlanInvalid
from horde.plan import ConnectionPool, plan_from_dict, plan_json_schema, plan_to_json
from horde.plan.loader import load_plan
from horde.engine.run import Run
from horde.engine.target import start


def plan_data(**target: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "target": {"base_url": "http://127.0.0.1:8080", **target},
        "scenarios": [
            {
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


def engine_paths(data: dict[str, Any]) -> list[str]:
    return [path for path, _, _ in _engine.validate_plan(json.dumps(data))]


def test_per_vu_is_the_default_and_is_written_out() -> None:
    plan = plan_from_dict(plan_data())
    assert plan.target.connections == "per_vu"
    assert plan.target.source_addresses == []
    wire = json.loads(plan_to_json(plan))["target"]
    assert wire["connections"] == "per_vu" and wire["source_addresses"] == []
    assert _engine.validate_plan(plan_to_json(plan)) == []


def test_a_pool_and_source_addresses_pass_both_sides() -> None:
    data = plan_data(connections={"pool": 100}, source_addresses=["127.0.0.2", "127.0.0.3"])
    plan = plan_from_dict(data)
    assert plan.target.connections == ConnectionPool(pool=100)
    wire = json.loads(plan_to_json(plan))["target"]
    assert wire["connections"] == {"pool": 100}
    assert wire["source_addresses"] == ["127.0.0.2", "127.0.0.3"]
    assert _engine.validate_plan(plan_to_json(plan)) == []
    assert _engine.validate_plan(json.dumps(data)) == []


def test_the_schema_describes_both_forms() -> None:
    target = plan_json_schema()["$defs"]["Target"]["properties"]
    assert "pool" in target["connections"]["description"] and "per_vu" in target["connections"]["description"]
    assert "ephemeral" in target["source_addresses"]["description"]


# (target fields, the location both sides report, a word the pydantic hint holds)
MISTAKES: dict[str, tuple[dict[str, Any], str, str]] = {
    "unknown mode": ({"connections": "shared"}, "target.connections", "pool: N"),
    "empty pool": ({"connections": {"pool": 0}}, "target.connections.pool", "per_vu"),
    "huge pool": ({"connections": {"pool": 10**7}}, "target.connections.pool", "generator processes"),
    "not a name": ({"source_addresses": ["localhost"]}, "target.source_addresses[0]", "127.0.0.2"),
    "twice": ({"source_addresses": ["127.0.0.2", "127.0.0.2"]}, "target.source_addresses[1]", "once"),
    "other family": ({"source_addresses": ["::1"]}, "target.source_addresses[0]", "IPv4"),
}


@pytest.mark.parametrize("mistake", MISTAKES, ids=list(MISTAKES))
def test_both_sides_refuse_the_same_mistake_at_the_same_place(mistake: str) -> None:
    target, location, hint = MISTAKES[mistake]
    data = plan_data(**target)
    ((found_location, _, found_hint),) = pydantic_problems(data)
    assert found_location == location
    assert found_hint is not None and hint in found_hint, found_hint
    assert location in engine_paths(data)


def test_pydantic_words_a_pool_problem_once_and_lists_it_with_the_others() -> None:
    data = plan_data(connections={"pool": "many", "size": 3}, source_addresses=["127.0.0.2", "nowhere"])
    data["target"]["connect_timeout_ms"] = 0
    problems = pydantic_problems(data)
    # In the order the plan writes them.
    assert [location for location, _, _ in problems] == [
        "target.connections.pool",
        "target.connections.size",
        "target.source_addresses[1]",
        "target.connect_timeout_ms",
    ]
    assert problems[0][1] == "must be a whole number (got 'many')"
    assert problems[2][1] == "'nowhere' is not an IP address"


def test_a_plan_file_locates_the_problem_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(
        "version: 1\n"
        "target:\n"
        "  base_url: http://127.0.0.1:8080\n"
        "  connections:\n"
        "    pool: 0\n"
        "scenarios:\n"
        "  - name: s\n"
        "    steps: [{name: get, method: GET, path: /}]\n"
        "    workload: {type: closed, stages: [{duration_s: 1, vus: 1}]}\n"
    )
    with pytest.raises(PlanInvalid) as caught:
        load_plan(path)
    (problem,) = caught.value.problems
    assert problem.location == f"{path}:5: target.connections.pool"
    assert problem.message == "must be at least 1 (got 0)"
    assert problem.hint is not None and "per_vu" in problem.hint


def test_a_run_with_a_pool_of_two_uses_two_connections() -> None:
    target = start()
    try:
        data = plan_data(connections={"pool": 2})
        data["target"]["base_url"] = f"http://127.0.0.1:{target.port}"
        data["scenarios"][0]["steps"][0]["think_time"] = {"type": "constant", "duration_ms": 10}
        data["scenarios"][0]["workload"] = {"type": "closed", "start_vus": 50, "stages": [{"duration_s": 1, "vus": 50}]}
        with Run.start(plan_from_dict(data), workers=2) as run:
            snapshots = list(run)
    finally:
        target.stop()
    assert sum(snapshot["connections_opened"] for snapshot in snapshots) <= 2
    steps = [step for snapshot in snapshots for step in snapshot["steps"]]
    requests = sum(step["requests"] for step in steps)
    assert requests > 50 and sum(step["ok"] for step in steps) == requests


@pytest.mark.parametrize("module_name", ["horde.plan.target", "horde.engine.run"])
def test_docstring_examples_run(module_name: str) -> None:
    import doctest
    import importlib

    results = doctest.testmod(importlib.import_module(module_name))
    assert results.attempted >= 2 and results.failed == 0, results


# Issue 16: URLs that passed validation and then failed the run (exit 1, a failed run stored).
BAD_URLS: dict[str, tuple[str, str]] = {
    "empty port": ("http://127.0.0.1:", "empty port"),
    "upper-case scheme": ("HTTP://127.0.0.1:8080", "upper case"),
    "mixed-case scheme": ("Https://localhost", "upper case"),
    "trailing dot": ("http://example.com.:8080", "ends with a dot"),
    "space in the host": ("http://exa mple.com", "space"),
    "space before the port": ("http://localhost :8080", "space"),
    "empty label": ("http://a..b:80", "empty label"),
    "not ASCII": ("http://bücher.de", "xn--"),
    "a label starting and ending with '-'": ("http://-bad-.com/", "starts or ends with '-'"),
    "a label ending with '-'": ("http://api.bad-.com:80", "starts or ends with '-'"),
    "a last label starting with '-'": ("http://a.-b", "starts or ends with '-'"),
}


@pytest.mark.parametrize("case", BAD_URLS, ids=list(BAD_URLS))
def test_both_sides_refuse_a_url_the_engine_could_not_use(case: str) -> None:
    url, words = BAD_URLS[case]
    data = plan_data(base_url=url)
    ((location, message, hint),) = pydantic_problems(data)
    assert location == "target.base_url" and words in message, message
    assert hint
    assert engine_paths(data) == ["target.base_url"]
    (engine_message,) = [message for _, message, _ in _engine.validate_plan(json.dumps(data))]
    assert words in engine_message, engine_message


def test_the_upper_case_scheme_hint_writes_the_url_as_it_should_be() -> None:
    ((_, _, hint),) = pydantic_problems(plan_data(base_url="HTTP://127.0.0.1:8080/api"))
    assert hint == "write 'http://127.0.0.1:8080/api'"


def test_hosts_the_engine_can_use_pass_both_sides() -> None:
    for url in (
        "http://127.0.0.1:8080",
        "http://[::1]:8080/api",
        "https://my_host-1.internal",
        "http://localhost",
        "http://xn--bcher-kva.de",
        "http://a-b--c.example",
    ):
        assert pydantic_problems(plan_data(base_url=url)) == [], url
        assert engine_paths(plan_data(base_url=url)) == [], url


def test_the_response_bounds_and_the_backoff_have_defaults_written_out() -> None:
    plan = plan_from_dict(plan_data())
    wire = json.loads(plan_to_json(plan))["target"]
    assert wire["max_response_header_bytes"] == 256 * 1024
    assert wire["max_kept_body_bytes"] == 1024 * 1024
    assert wire["connect_backoff"] is True
    custom = plan_data(max_response_header_bytes=1 << 20, max_kept_body_bytes=1, connect_backoff=False)
    assert pydantic_problems(custom) == [] and engine_paths(custom) == []
    described = plan_json_schema()["$defs"]["Target"]["properties"]
    assert "headers_too_large" in described["max_response_header_bytes"]["description"]
    assert "body_too_large" in described["max_kept_body_bytes"]["description"]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("max_response_header_bytes", 1023, "1024 or more"),
        ("max_response_header_bytes", 64 * 1024 * 1024 + 1, "at most"),
        ("max_kept_body_bytes", 0, "1 or more"),
        ("max_kept_body_bytes", 2**30 + 1, "at most"),
        ("connect_backoff", "sometimes", ""),
    ],
)
def test_both_sides_refuse_response_bounds_out_of_range(field: str, value: Any, words: str) -> None:
    data = plan_data(**{field: value})
    ((location, message, _),) = pydantic_problems(data)
    assert location == f"target.{field}" and words in message, message
    assert engine_paths(data) == [f"target.{field}"]


@pytest.mark.parametrize(
    ("written", "wire"), [(None, "1.1"), ("1.1", "1.1"), (1.1, "1.1"), (2, "2"), ("2", "2"), ("auto", "auto")]
)
def test_http_version_reads_as_yaml_writes_it_and_reaches_the_engine(written: Any, wire: str) -> None:
    data = (
        plan_data(base_url="https://127.0.0.1:8443")
        if written is None
        else plan_data(base_url="https://127.0.0.1:8443", http_version=written)
    )
    assert pydantic_problems(data) == [] and engine_paths(data) == []
    assert json.loads(plan_to_json(plan_from_dict(data)))["target"]["http_version"] == wire


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"http_version": "3"}, "is not an HTTP version"),
        ({"http_version": "auto", "connections": {"pool": 4}}, "'auto' cannot be combined with connections"),
    ],
)
def test_both_sides_refuse_an_http_version_they_cannot_honour(extra: dict[str, Any], words: str) -> None:
    data = plan_data(**extra)
    ((location, message, _),) = pydantic_problems(data)
    assert location == "target.http_version" and words in message, message
    assert engine_paths(data) == ["target.http_version"]


def test_http2_settings_have_the_engine_defaults_and_reach_it() -> None:
    data = plan_data(http_version="2", http2={"max_concurrent_streams": 8})
    assert pydantic_problems(data) == [] and engine_paths(data) == []
    wire = json.loads(plan_to_json(plan_from_dict(data)))["target"]["http2"]
    assert wire == {"stream_window_bytes": 1 << 20, "connection_window_bytes": 16 << 20, "max_concurrent_streams": 8}
    assert json.loads(plan_to_json(plan_from_dict(plan_data())))["target"].get("http2") is None
    described = plan_json_schema()["$defs"]["Http2Settings"]["properties"]
    assert "SETTINGS_INITIAL_WINDOW_SIZE" in described["stream_window_bytes"]["description"]


@pytest.mark.parametrize(
    ("http2", "field", "words"),
    [
        ({"stream_window_bytes": 0}, "stream_window_bytes", "1 or more"),
        ({"stream_window_bytes": 2**31}, "stream_window_bytes", "at most"),
        ({"connection_window_bytes": 65534}, "connection_window_bytes", "65535 or more"),
        ({"connection_window_bytes": 2**31}, "connection_window_bytes", "at most"),
        ({"max_concurrent_streams": 0}, "max_concurrent_streams", "1 or more"),
    ],
)
def test_both_sides_bound_the_http2_settings_by_rfc_9113(http2: dict[str, Any], field: str, words: str) -> None:
    data = plan_data(http_version="auto", base_url="https://127.0.0.1:8443", http2=http2)
    ((location, message, _),) = pydantic_problems(data)
    assert location == f"target.http2.{field}" and words in message, message
    assert engine_paths(data) == [f"target.http2.{field}"]


def test_both_sides_refuse_http2_settings_for_an_http1_target() -> None:
    data = plan_data(http2={"stream_window_bytes": 65535})
    ((location, message, _),) = pydantic_problems(data)
    assert location == "target.http2" and "need http_version '2' or 'auto'" in message, message
    assert engine_paths(data) == ["target.http2"]
