"""Secrets stay out of stored plans: header values carrying credentials are redacted."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from conftest import HordeCli
from horde.plan.redaction import (
    REDACTED,
    feeder_secret_values,
    is_secret_header,
    redact_plan,
    redact_url_password,
    redact_values,
    secret_names,
    secret_values,
)
from horde.store import Store


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "authorization",
        "Proxy-Authorization",
        "Cookie",
        "Set-Cookie",
        "X-Api-Key",
        "api-key",
        "X-Auth-Token",
        "X-CSRF-Token",
        "Client-Secret",
        "X-Password",
        "X-APIKEY",
        "X-Session-Id",
    ],
)
def test_secret_headers(name: str) -> None:
    assert is_secret_header(name)


@pytest.mark.parametrize("name", ["Accept", "Content-Type", "User-Agent", "X-Request-Id", "Cache-Control", "Host"])
def test_ordinary_headers(name: str) -> None:
    assert not is_secret_header(name)


def test_redact_plan_replaces_target_and_step_secrets_and_keeps_the_rest() -> None:
    plan: dict[str, Any] = {
        "version": 1,
        "target": {"base_url": "http://h", "headers": {"Authorization": "Bearer abc", "Accept": "*/*"}},
        "scenarios": [
            {
                "name": "s",
                "steps": [
                    {"name": "a", "path": "/", "headers": {"Cookie": "sid=1", "X-Api-Key": "k", "X-Trace": "t"}},
                    {"name": "b", "path": "/"},  # no headers key: left as it is
                ],
            },
        ],
    }
    original = json.loads(json.dumps(plan))
    redacted = redact_plan(plan)
    assert plan == original  # the input is not modified
    assert redacted["target"]["headers"] == {"Authorization": REDACTED, "Accept": "*/*"}
    assert redacted["scenarios"][0]["steps"][0]["headers"] == {
        "Cookie": REDACTED,
        "X-Api-Key": REDACTED,
        "X-Trace": "t",
    }
    assert "headers" not in redacted["scenarios"][0]["steps"][1]
    assert list(redacted) == list(plan)  # key order kept
    assert "abc" not in json.dumps(redacted) and "sid=1" not in json.dumps(redacted)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://me:pw@127.0.0.1:8080/api", f"http://me:{REDACTED}@127.0.0.1:8080/api"),
        ("https://me:p@ss@h/", f"https://me:{REDACTED}@h/"),
        ("http://me@h:1", "http://me@h:1"),  # a user name alone is no secret
        ("http://h:1/x", "http://h:1/x"),
        ("http://[::1", "http://[::1"),
    ],  # unparsable: left to the plan's own check
)
def test_redact_url_password(url: str, expected: str) -> None:
    assert redact_url_password(url) == expected


def test_redact_plan_redacts_a_password_in_the_base_url() -> None:
    redacted = redact_plan({"target": {"base_url": "http://u:hunter2@h:1"}, "scenarios": []})
    assert redacted["target"]["base_url"] == f"http://u:{REDACTED}@h:1"


def test_redact_plan_tolerates_partial_plans() -> None:
    assert redact_plan({}) == {}
    assert redact_plan({"target": {}, "scenarios": [{"name": "s"}]}) == {"target": {}, "scenarios": [{"name": "s"}]}


def test_a_run_stores_its_plan_with_secrets_redacted(horde_cli: HordeCli, builtin_target: Any) -> None:
    result = horde_cli.run(
        "run",
        "--url",
        f"http://127.0.0.1:{builtin_target.port}/delay/5",
        "--vus",
        "1",
        "--duration",
        "1s",
        "--workers",
        "1",
        "-H",
        "Authorization: Bearer s3cr3t",
        "-H",
        "X-Auth-Token: t0k3n",
        "-H",
        "Accept: text/plain",
        "--summary-json",
        str(horde_cli.tmp_path / "summary.json"),
    )
    assert result.returncode == 0, result.stderr
    run_id = json.loads((horde_cli.tmp_path / "summary.json").read_text())["run_id"]
    with Store.open(horde_cli.store_url) as store:
        plan = store.get_run(run_id).plan
    headers = plan["scenarios"][0]["steps"][0]["headers"]
    assert headers == {"Authorization": REDACTED, "X-Auth-Token": REDACTED, "Accept": "text/plain"}
    # Nowhere in the store's file, nor in what the command printed.
    with sqlite3.connect(horde_cli.store_path) as db:
        dump = "\n".join(db.iterdump())
    assert "s3cr3t" not in dump and "t0k3n" not in dump
    assert REDACTED in dump
    assert "s3cr3t" not in result.stdout + result.stderr


def test_headers_are_redacted_at_every_depth_and_at_scenario_level() -> None:
    secret = {"Authorization": "Bearer s3cr3t"}
    plan = {
        "target": {"headers": {}},
        "scenarios": [
            {
                "headers": dict(secret),
                "setup": [{"name": "a", "headers": dict(secret)}],
                "steps": [
                    {"type": "group", "steps": [{"name": "b", "headers": dict(secret)}]},
                    {"type": "choice", "branches": [{"weight": 1, "steps": [{"name": "c", "headers": dict(secret)}]}]},
                    {
                        "type": "if",
                        "then": [{"name": "d", "headers": dict(secret)}],
                        "else": [{"name": "e", "headers": dict(secret)}],
                    },
                    {"type": "loop", "steps": [{"name": "f", "headers": dict(secret)}]},
                ],
                "teardown": [{"name": "g", "headers": dict(secret)}],
            }
        ],
    }
    redacted = redact_plan(plan)
    assert "s3cr3t" not in repr(redacted)
    assert repr(redacted).count(REDACTED) == 8
    assert "s3cr3t" in repr(plan), "the original is left alone"


def test_a_shown_exchange_loses_credentials_and_later_ones_the_token_a_login_returned() -> None:
    from horde.plan.redaction import redact_exchange

    secrets: set[str] = {"env-secret-1"}
    login = {
        "transport": "http",
        "request": "POST /login?sig=abc123 HTTP/1.1\r\nX-Api-Key: k-9999\r\nAccept: */*",
        "request_body": '{"user": "me", "password": "hunter22"}',
        "response": "HTTP/1.1 200 OK\r\nSet-Cookie: s=1",
        "response_body": '{"access_token": "tok-777777", "id": 4}',
        "detail": None,
        "checks": [],
        "vars": [{"name": "session_key", "value": "v-1"}, {"name": "id", "value": "4"}],
    }
    shown = redact_exchange(login, secrets)
    assert shown["request"] == ("POST /login?sig=<redacted> HTTP/1.1\nX-Api-Key: <redacted>\nAccept: */*")
    assert json.loads(shown["request_body"]) == {"user": "me", "password": REDACTED}
    assert "tok-777777" not in shown["response_body"] and "Set-Cookie: <redacted>" in shown["response"]
    assert shown["vars"] == [{"name": "session_key", "value": REDACTED}, {"name": "id", "value": "4"}]
    # The token the login answered is a secret from now on, wherever it shows.
    later = {
        "transport": "http",
        "request": "GET /me?t=tok-777777 HTTP/1.1",
        "request_body": "",
        "response": "",
        "response_body": "",
        "detail": "status 500 for tok-777777 and env-secret-1",
        "checks": [{"check": "status in [200]", "passed": False, "why": "tok-777777"}],
        "vars": [],
    }
    shown = redact_exchange(later, secrets)
    assert "tok-777777" not in json.dumps(shown) and "env-secret-1" not in json.dumps(shown)


def test_error_details_lose_the_plans_secret_values_before_they_are_stored() -> None:
    from horde.control.observers import redact_error_details as _redact_error_details

    snapshot: Any = {
        "steps": [
            {
                "step": "login",
                "error_details": [
                    {
                        "kind": "sql_other",
                        "message": 'SQLSTATE 22P02: invalid input syntax for type integer: "pw-s3cr3t"',
                        "count": 2,
                    }
                ],
            },
            {"step": "home"},
        ]
    }
    _redact_error_details(snapshot, frozenset({"pw-s3cr3t"}))
    assert snapshot["steps"][0]["error_details"][0]["message"].endswith('integer: "<redacted>"')
    assert snapshot["steps"][1] == {"step": "home"}


def test_a_one_time_code_in_a_query_and_a_credential_object_in_a_body_are_secrets() -> None:
    plan = {
        "target": {"base_url": "http://h"},
        "scenarios": [
            {
                "name": "s",
                "steps": [
                    {"name": "cb", "method": "GET", "path": "/cb?code=ONE-TIME-1&page=2"},
                    {
                        "name": "j",
                        "method": "POST",
                        "path": "/",
                        "json": {"credentials": {"user": "USER-77", "keys": ["KEY-88"]}},
                    },
                    {"name": "t", "method": "POST", "path": "/", "body": '{"auth": [{"k": "TEXT-99"}]}'},
                ],
            }
        ],
    }
    assert secret_values(plan, environ={}) >= {"ONE-TIME-1", "USER-77", "KEY-88", "TEXT-99"}
    shown = json.dumps(redact_plan(plan))
    assert not any(value in shown for value in ("ONE-TIME-1", "USER-77", "KEY-88", "TEXT-99")), shown
    steps = redact_plan(plan)["scenarios"][0]["steps"]
    assert steps[0]["path"] == "/cb?code=<redacted>&page=2" and steps[1]["json"] == {"credentials": "<redacted>"}


def test_a_cookie_fed_by_a_parameter_of_any_name_is_a_secret_and_so_is_the_parameter() -> None:
    # `-p c=...` into `Cookie: "sid={{ params.c }}"`: substituted before the plan is redacted.
    cookie = "sid=ck-123456; PHPSESSID=php-98765; lang=en"
    plan = {
        "parameters": {"c": "ck-123456", "page": "ck-1"},
        "target": {"base_url": "http://h", "headers": {"Cookie": cookie}},
        "scenarios": [{"name": "s", "steps": [{"name": "g", "method": "GET", "path": "/?v=ck-123456"}]}],
    }
    secrets = secret_values(plan, environ={})
    assert {"ck-123456", "php-98765"} <= secrets and "ck-1" not in secrets
    shown = json.dumps(redact_plan(plan, secrets=secrets))
    assert "ck-123456" not in shown and "php-98765" not in shown and '"page": "ck-1"' in shown


def test_a_feeders_secret_fields_are_secrets(tmp_path: Any) -> None:
    users = tmp_path / "users.csv"
    users.write_text('login,Password,note\nann,pw-ann-1,"a, b"\nbob,pw-bob-2,x\n')
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"login": "ann", "api_key": "key-ann-1", "credentials": {"pin": "pin-4444"}}\n\nnot json\n')
    plain = tmp_path / "plain.csv"
    plain.write_text("login,city\nann,Paris-1234\n")
    assert feeder_secret_values(str(users), "csv") == {"pw-ann-1", "pw-bob-2"}
    assert feeder_secret_values(str(rows), "jsonl") == {"key-ann-1", "pin-4444"}
    assert feeder_secret_values(str(plain), "csv") == frozenset()
    assert feeder_secret_values(str(tmp_path / "absent.csv"), "csv") == frozenset()
    plan = {
        "scenarios": [
            {
                "name": "s",
                "feeders": [{"name": "u", "path": str(users), "format": "csv"}],
                "steps": [{"name": "pw-ann-1 page", "method": "GET", "path": "/"}],
            }
        ]
    }
    assert {"pw-ann-1", "pw-bob-2"} <= secret_values(plan, environ={})
    assert not secret_values(plan, environ={}, feeders=False)
    # A name that happens to hold a row's password is the plan's word, not refused for it.
    assert secret_names(plan, secret_values(plan, environ={})) == []


def test_many_secrets_are_found_as_one_pattern_finds_them() -> None:
    # Past a few hundred values (a feeder's), texts are searched through a set, not a pattern.
    many = frozenset(f"pw-{index:06d}" for index in range(5000)) | {"pw-000001-long", "tok-9"}
    text = {"m": "a pw-000001-longer pw-004999 pw-0049 tok-9tok-9 pw-00499", "pw-000007": ["x pw-000002"]}
    assert redact_values(text, many) == {
        "m": "a <redacted>er <redacted> pw-0049 <redacted><redacted> pw-00499",
        "<redacted>": ["x <redacted>"],
    }
    few = frozenset({"pw-000001", "pw-000001-long", "pw-004999", "tok-9", "pw-000007", "pw-000002"})
    assert redact_values(text, few) == redact_values(text, many)


def test_a_failed_checks_details_lose_an_echoed_feeder_password(tmp_path: Any) -> None:
    from horde.control.observers import redact_error_details as _redact_error_details

    users = tmp_path / "users.csv"
    users.write_text("login,password\n" + "".join(f"u{index},pw-{index:06d}\n" for index in range(1000)))
    plan = {
        "parameters": {"token": "tok-31337"},
        "scenarios": [{"name": "s", "feeders": [{"name": "users", "path": str(users), "format": "csv"}], "steps": []}],
    }
    checked = 'body does not contain "ok" (body "`pw-000731` is not valid")'
    answered = '400 Bad Request — body "`pw-000002` is not valid"'
    snapshot: Any = {
        "steps": [
            {
                "step": "login",
                "error_details": [
                    {"kind": "check_failed", "message": checked, "count": 1},
                    {"kind": "status_400", "message": answered, "count": 1},
                ],
                "checks": [{"check": 'body contains "tok-31337"', "passes": 0, "failures": 2}],
            }
        ]
    }
    _redact_error_details(snapshot, secret_values(plan, environ={}))
    step = snapshot["steps"][0]
    assert [detail["message"] for detail in step["error_details"]] == [
        checked.replace("pw-000731", "<redacted>"),
        answered.replace("pw-000002", "<redacted>"),
    ]
    assert step["checks"][0]["check"] == 'body contains "<redacted>"'
