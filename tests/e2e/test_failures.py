"""Issue 15: when requests fail, the run says why, and never counts what was not sent as a
result. Real runs against loopback (a port nothing listens on, the built-in target)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from conftest import HordeCli
from horde.errors import ExitCode


def _run(horde_cli: HordeCli, plan: dict[str, Any], *flags: str) -> tuple[int, str, dict[str, Any]]:
    path = horde_cli.tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    done = horde_cli.run("run", str(path), "--summary-json", "summary.json", *flags)
    assert done.returncode != ExitCode.INTERNAL, done.stderr
    return done.returncode, done.stdout, json.loads((horde_cli.tmp_path / "summary.json").read_text())


def _plan(
    base_url: str, steps: list[dict[str, Any]], setup: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    scenario: dict[str, Any] = {
        "name": "s",
        "steps": steps,
        "workload": {"type": "closed", "start_vus": 2, "stages": [{"duration_s": 1, "vus": 2}]},
    }
    if setup:
        scenario["setup"] = setup
    return {"version": 1, "name": "failures", "target": {"base_url": base_url}, "scenarios": [scenario], **extra}


def test_no_connection_is_said_first_times_nothing_and_exits_7(horde_cli: HordeCli) -> None:
    plan = _plan(
        "http://127.0.0.1:1", [{"name": "home", "method": "GET", "path": "/"}], thresholds=[{"condition": "p95 < 50ms"}]
    )
    code, out, summary = _run(horde_cli, plan)
    assert code == ExitCode.NO_CONNECTION
    first = out.splitlines()[[line.startswith("!!") for line in out.splitlines()].index(True)]
    assert first.startswith("!! no connection could be opened: all ") and "to 127.0.0.1:1" in first
    assert summary["requests"] > 0 and summary["responses"] == 0 and summary["connections_opened"] == 0
    # Not one latency was measured: the threshold fails and says why, instead of passing at 0 ms.
    verdict = summary["thresholds"][0]
    assert not verdict["passed"] and "no response was measured" in verdict["message"], verdict
    [detail] = summary["error_details"]
    assert detail["kind"] == "refused" and detail["count"] == summary["requests"]
    assert "os error 111" in detail["message"] and "127.0.0.1:1" in detail["message"]
    assert f"refused: {detail['message']} — " in out


def test_details_checks_and_a_failed_setup_on_the_built_in_target(horde_cli: HordeCli, builtin_target: Any) -> None:
    base = f"http://127.0.0.1:{builtin_target.port}"
    setup = [
        {
            "name": "login",
            "method": "GET",
            "path": "/status/401",
            "extract": [{"var": "token", "from": "json", "expression": "$.token"}],
        }
    ]
    steps = [
        {
            "name": "busy",
            "method": "GET",
            "path": "/status/503",
            "extract": [{"var": "id", "from": "json", "expression": "$.id"}],
        },
        {"name": "uses_id", "method": "GET", "path": "/{{ id }}"},
        {
            "name": "home",
            "method": "GET",
            "path": "/",
            "checks": [{"type": "status", "in": [200]}, {"type": "body_contains", "text": "zzz"}],
            "think_time": {"type": "constant", "duration_ms": 50},
        },
    ]
    code, out, failed_setup = _run(horde_cli, _plan(base, steps, setup))
    assert code == ExitCode.OK
    # The setup fails at its login: one status_401 per try, and not one behaviour step runs.
    assert set(failed_setup["steps"]) == {"login"} and failed_setup["setup_failures"] == 2
    assert failed_setup["errors_by_kind"] == {"status_401": failed_setup["requests"]}
    assert "setup failed for 2 VUs" in out
    [detail] = failed_setup["error_details"]
    assert detail["message"].startswith("HTTP/1.1 401 ") and "body " in detail["message"]

    code, out, summary = _run(horde_cli, _plan(base, steps))
    by_step = {name: figures for name, figures in summary["steps"].items()}
    messages = {detail["kind"]: detail["message"] for detail in summary["error_details"]}
    assert messages["status_503"].startswith("HTTP/1.1 503 Service Unavailable — body ")
    assert messages["template_failed"] == "path: variable 'id' is not set"
    assert messages["check_failed"].startswith('body does not contain "zzz"')
    # A request that was never sent is counted, not timed.
    assert by_step["uses_id"]["responses"] == 0 and by_step["uses_id"]["requests"] > 0
    assert "latency covers the " in out
    checks = {check["check"]: check for check in summary["checks"]}
    assert checks["status in [200]"]["failures"] == 0 and checks["status in [200]"]["pass_percent"] == 100.0
    assert checks['body contains "zzz"']["passes"] == 0 and checks['body contains "zzz"']["failures"] > 0
    assert '✗ home: body contains "zzz" — 0.00 % passed' in out

    shown = horde_cli.run("show", summary["run_id"])
    assert (
        "template_failed: path: variable 'id' is not set" in shown.stdout and "✓ home: status in [200]" in shown.stdout
    )


def test_stored_details_survive_the_store(horde_cli: HordeCli, tmp_path: Path) -> None:
    from horde.store import Store

    _run(horde_cli, _plan("http://127.0.0.1:1", [{"name": "home", "method": "GET", "path": "/"}]))
    with Store.open(horde_cli.store_url) as store:
        [record] = store.list_runs()
        stored = store.snapshots(record.run_id)
    details = [detail for second in stored for step in second["steps"] for detail in step.get("error_details", [])]
    assert details and all(detail["kind"] == "refused" for detail in details)


def test_an_unset_password_env_is_a_located_plan_problem(horde_cli: HordeCli) -> None:
    """Issue 36: the variable ``target.password_env`` names is read when the run starts; one left
    unset is the plan's problem (exit 2, located, with a hint), found by ``validate`` as by
    ``run``, never an engine that cannot start (exit 1)."""
    horde_cli.env.pop("HORDE_TEST_UNSET_PASSWORD", None)
    plan = _plan("postgresql://app@127.0.0.1:1/game", [{"type": "sql", "name": "one", "query": "SELECT 1"}])
    plan["target"]["password_env"] = "HORDE_TEST_UNSET_PASSWORD"
    path = horde_cli.tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    for command in ("validate", "run"):
        done = horde_cli.run(command, str(path))
        assert done.returncode == ExitCode.INVALID_INPUT, (command, done.stdout, done.stderr)
        assert "target.password_env: the environment variable 'HORDE_TEST_UNSET_PASSWORD' is not set" in done.stderr, (
            done.stderr
        )
        assert "hint: export it where horde runs (export HORDE_TEST_UNSET_PASSWORD=" in done.stderr, done.stderr
    horde_cli.env["HORDE_TEST_UNSET_PASSWORD"] = "set now"
    assert horde_cli.run("validate", str(path)).returncode == ExitCode.OK
