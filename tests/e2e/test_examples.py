"""Every example runs: the quickstart and the game showcase, through the real `horde` command
against the built-in target, with their results checked action by action."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from conftest import HordeCli
from horde.plan import plan_to_json
from horde.plan.loader import load_plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_summary(horde_cli: HordeCli, *args: str) -> dict[str, Any]:
    summary_path = horde_cli.tmp_path / "summary.json"
    done = horde_cli.run("run", *args, "--summary-json", str(summary_path), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    return summary


def test_the_game_plan_reads_the_same_in_yaml_and_python() -> None:
    assert plan_to_json(load_plan(EXAMPLES / "game" / "plan.yaml")) == plan_to_json(load_plan(EXAMPLES / "game" / "plan_builder.py"))


def test_the_game_example_plays_every_action(horde_cli: HordeCli, target_process: Callable[..., int]) -> None:
    port = target_process()
    players, devices, ramp_up, duration = 12, 3, 1, 3
    summary = run_summary(
        horde_cli, str(EXAMPLES / "game"), "--base-url", f"http://127.0.0.1:{port}",
        "-p", f"players={players}", "-p", f"devices={devices}", "-p", f"ramp_up={ramp_up}", "-p", f"duration={duration}",
    )
    steps = summary["steps"]
    # Every player registered and logged in exactly once (setup), and every action was played.
    assert steps["register"]["requests"] == players
    assert steps["login"]["requests"] == players
    for action in ("city", "buildings", "collect", "resources", "construct", "telemetry"):
        assert steps[action]["requests"] > 0, action
    assert steps["build"]["kind"] == "group"
    assert steps["build"]["requests"] == steps["buildings"]["requests"]
    # Nothing failed: 409s of register and construct are expected by the plan's checks.
    assert summary["errors"] == 0, summary["errors_by_kind"]
    # The weighted mix: city (40) is played more than resources (10).
    assert steps["city"]["requests"] > steps["resources"]["requests"]
    # Devices write once a second each, whatever the response time: 3 devices x 4 s of stages.
    telemetry = steps["telemetry"]["requests"]
    assert devices * (ramp_up + duration) - devices <= telemetry <= devices * (ramp_up + duration) + devices
    # The stored run keeps the parameters it ran with.
    shown = horde_cli.run("show", summary["run_id"], "--json")
    assert json.loads(shown.stdout)["steps"]["city"]["requests"] == steps["city"]["requests"]


def test_the_quickstart_example_runs(horde_cli: HordeCli, target_process: Callable[..., int]) -> None:
    port = target_process()
    summary = run_summary(horde_cli, str(EXAMPLES / "quickstart"), "--base-url", f"http://127.0.0.1:{port}", "--duration", "3s", "--ramp-up", "1s")
    assert summary["errors"] == 0
    assert set(summary["steps"]) == {"home", "item"}
    assert summary["steps"]["item"]["latency_ms"]["p50"] >= 5.0  # /delay/5
