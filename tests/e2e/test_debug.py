"""Issue 15, seeing exchanges: ``horde run --debug N`` prints the first N exchanges of each step
in full, and ``horde try`` runs one VU through one iteration of each scenario showing every
exchange, variable and check. Real runs against the built-in target on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from conftest import HordeCli
from horde.errors import ExitCode


def _write(horde_cli: HordeCli, plan: dict[str, Any]) -> Path:
    path = horde_cli.tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def _game_plan(port: int, password: str, *, gold: int) -> dict[str, Any]:
    credentials = {"login": "debug-{{ vu }}", "password": "pw-{{ vu }}"}
    return {
        "version": 1,
        "name": "debug",
        "target": {"base_url": f"http://127.0.0.1:{port}"},
        "scenarios": [
            {
                "name": "player",
                "setup": [
                    {
                        "name": "register",
                        "method": "POST",
                        "path": "/game/register",
                        "json": credentials,
                        "checks": [{"type": "status", "in": [201, 409]}],
                    },
                    {
                        "name": "login",
                        "method": "POST",
                        "path": "/game/login",
                        "json": {**credentials, "password": password},
                        "extract": [
                            {"var": "token", "from": "json", "expression": "$.token"},
                            {"var": "player", "from": "json", "expression": "$.player_id"},
                        ],
                    },
                ],
                "steps": [
                    {
                        "name": "city",
                        "method": "GET",
                        "path": "/game/city",
                        "headers": {"Authorization": "Bearer {{ token }}"},
                        "checks": [{"type": "json", "expression": "$.resources.gold", "equals": gold}],
                    }
                ],
                "workload": {"type": "closed", "start_vus": 3, "stages": [{"duration_s": 1, "vus": 3}]},
            }
        ],
    }


def _titles(out: str, step: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("── ") and f"› {step} " in line]


def test_debug_prints_the_first_n_exchanges_of_each_step_redacted(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = _write(horde_cli, _game_plan(builtin_target.port, "pw-{{ vu }}", gold=300))
    done = horde_cli.run("run", str(plan), "--debug", "2")
    assert done.returncode == ExitCode.OK, done.stderr
    for step in ("register", "login", "city"):
        assert len(_titles(done.stdout, step)) == 2, done.stdout
    lines = done.stdout.splitlines()
    assert sum(line == "< HTTP/1.1 200 OK" for line in lines) == 4  # login and city, twice each
    assert sum(line == "> Authorization: <redacted>" for line in lines) == 2
    assert "  ✓ json $.resources.gold == 300" in lines and "  token = <redacted>" in lines
    # The summary still follows, and nothing of the exchanges is stored.
    assert "all requests" in done.stdout
    shown = horde_cli.run("show", "last", "--json")
    assert "game/city HTTP/1.1" not in shown.stdout and "Authorization" not in shown.stdout


def test_try_shows_the_extracted_variable_and_the_failing_check_and_exits_8(
    horde_cli: HordeCli, builtin_target: Any
) -> None:
    plan = _write(horde_cli, _game_plan(builtin_target.port, "pw-{{ vu }}", gold=123456))
    done = horde_cli.run("try", str(plan))
    assert done.returncode == ExitCode.TRY_FAILED, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # One VU, one iteration: each step once, in order.
    titles = [line.split("(")[0].strip() for line in lines if line.startswith("── ")]
    assert titles == ["── player › register", "── player › login", "── player › city"]
    assert "  player = 1" in lines or any(line.startswith("  player = ") for line in lines)
    assert "  token = <redacted>" in lines
    assert "  ✗ json $.resources.gold == 123456 — json $.resources.gold: expected 123456, found 300" in lines
    assert lines[-1] == "✗ player: 3 exchange(s), 1 failed (check_failed 1)"
    # Nothing is stored by a try.
    assert horde_cli.run("runs", "--json").stdout.strip() == "[]"


def test_try_of_a_plan_whose_login_fails_says_why(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = _write(horde_cli, _game_plan(builtin_target.port, "wrong", gold=300))
    done = horde_cli.run("try", str(plan))
    assert done.returncode == ExitCode.TRY_FAILED, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "< HTTP/1.1 401 Unauthorized" in lines
    assert any(line.startswith("  status_401 in ") and "bad login or password" in line for line in lines), done.stdout
    assert "  token is not set" in lines
    # The setup ended the iteration: the behaviour never ran.
    assert not _titles(done.stdout, "city")
    assert lines[-1].startswith("✗ player: 2 exchange(s), 1 failed (status_401 1); its setup failed")


def test_try_passes_with_0_and_refuses_bad_input_with_2(horde_cli: HordeCli, builtin_target: Any) -> None:
    done = horde_cli.run("try", "--url", f"http://127.0.0.1:{builtin_target.port}/")
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "✓ url: 1 exchange(s), every step and check passed"
    assert horde_cli.run("try", "--url", "http://127.0.0.1:1/").returncode == ExitCode.NO_CONNECTION
    plan = _game_plan(builtin_target.port, "pw", gold=1)
    plan["scenarios"][0]["steps"][0]["method"] = "GETT"
    bad = horde_cli.run("try", str(_write(horde_cli, plan)))
    assert bad.returncode == ExitCode.INVALID_INPUT and "plan.yaml:" in bad.stderr and "GETT" in bad.stderr
    unknown = horde_cli.run("try", "--url", f"http://127.0.0.1:{builtin_target.port}/", "--scenario", "nope")
    assert unknown.returncode == ExitCode.INVALID_INPUT and "no scenario is named 'nope'" in unknown.stderr
    for flag in ("0", "-1", "x"):
        refused = horde_cli.run("run", "--url", f"http://127.0.0.1:{builtin_target.port}/", "--debug", flag)
        assert refused.returncode == ExitCode.INVALID_INPUT, refused.stderr
        assert "Traceback" not in refused.stderr
