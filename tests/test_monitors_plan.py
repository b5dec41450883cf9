"""The plan's monitors: their models, located problems, and monitor conditions in thresholds and
autostop; the engine takes a plan with monitors (and leaves them to the control plane)."""

from __future__ import annotations

import doctest
import re
from typing import Any

import pytest

import importlib
from horde.engine.run import checked_plan_json
from horde.errors import PlanInvalid
from horde.plan import HostMonitor, PostgresMonitor, PrometheusMonitor, parse_monitor_condition, plan_from_dict


def plan_with(**extra: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "target": {"base_url": "http://127.0.0.1:8080"},
        "scenarios": [
            {
                "name": "s",
                "steps": [{"name": "home", "method": "GET", "path": "/"}],
                "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]},
            }
        ],
        **extra,
    }


def problems(data: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    with pytest.raises(PlanInvalid) as caught:
        plan_from_dict(data)
    return [(problem.location, problem.message, problem.hint) for problem in caught.value.problems]


@pytest.mark.parametrize("module", ["monitors", "monitor_figures"])
def test_doctests(module: str) -> None:
    assert doctest.testmod(importlib.import_module(f"horde.plan.{module}")).failed == 0


def test_a_plan_with_every_kind_of_monitor_reaches_the_engine() -> None:
    plan = plan_from_dict(
        plan_with(
            monitors=[
                {"name": "gen", "type": "host"},
                {
                    "name": "node",
                    "type": "prometheus",
                    "url": "http://127.0.0.1:9100/metrics",
                    "node_exporter": True,
                    "series": [{"name": "node_network_receive_bytes_total", "labels": {"device": "~lo|eth.*"}}],
                },
                {
                    "name": "db",
                    "type": "postgres",
                    "dsn": "postgresql://app@127.0.0.1:5432/game",
                    "password_env": "PGPASSWORD",
                    "interval_s": 2,
                    "diagnosis": {"xmin_age_limit": 500},
                },
            ],
            thresholds=["monitor.db.replication_lag_s < 5 for 10s"],
            autostop=[{"when": "monitor.gen.cpu.busy_percent > 95", "window_s": 5}],
        )
    )
    assert [type(monitor) for monitor in plan.monitors] == [HostMonitor, PrometheusMonitor, PostgresMonitor]
    assert plan.monitors[2].diagnosis.xmin_age_limit == 500 and plan.monitors[2].interval_s == 2
    assert plan.thresholds[0].monitor_condition == parse_monitor_condition("monitor.db.replication_lag_s < 5 for 10s")
    assert plan.autostop[0].monitor_condition is not None and plan.autostop[0].condition is None
    assert '"monitors":[{"name":"gen"' in checked_plan_json(plan)  # the engine decodes and keeps it


def test_every_monitor_problem_is_located_with_a_hint() -> None:
    found = problems(
        plan_with(
            monitors=[
                {"name": "db", "type": "postgres", "dsn": "postgresql://app:secret@db/game"},
                {"name": "db", "type": "host"},
                {"name": "9x", "type": "host"},
                {"name": "p", "type": "prometheus", "url": "ftp://x", "series": [{"name": "x", "labels": {"a": "~("}}]},
                {"name": "q", "type": "snmp"},
            ]
        )
    )
    where = [location for location, _, _ in found]
    assert where == [
        "monitors[0].dsn",
        "monitors[1].name",
        "monitors[2].name",
        "monitors[3].url",
        "monitors[3].series[0].labels",
        "monitors[4].type",
    ]
    assert all(hint for _, _, hint in found)
    assert "password_env" in found[0][2]  # the password goes into the environment, not the plan


def test_monitor_conditions_name_a_monitor_of_the_plan() -> None:
    found = problems(
        plan_with(
            monitors=[{"name": "db", "type": "host"}],
            thresholds=["monitor.dbb.cpu.busy_percent < 90", "monitor.db.cpu < x"],
            autostop=[{"when": "monitor.db.cpu.busy_percent > 95 for 5s", "step": "home"}],
        )
    )
    assert [(location, message) for location, message, _ in found] == [
        ("thresholds[1].condition", "'monitor.db.cpu < x' is not a monitor condition"),
    ]
    found = problems(
        plan_with(
            monitors=[{"name": "db", "type": "host"}],
            thresholds=["monitor.dbb.cpu.busy_percent < 90"],
            autostop=[{"when": "monitor.db.cpu.busy_percent > 95 for 5s", "step": "home"}],
        )
    )
    assert [location for location, _, _ in found] == ["thresholds[0].condition", "autostop[0].step"]
    assert "no monitor is named 'dbb'" in found[0][1]


def test_a_condition_on_a_figure_its_monitor_never_gives_is_refused_with_close_names() -> None:
    """An autostop rule on a figure the source cannot give would never fire: the plan check
    refuses it at its place, and names the figures meant (the issue's own 'cpu_percent')."""
    found = problems(
        plan_with(
            monitors=[
                {"name": "db", "type": "host"},
                {"name": "pg", "type": "postgres", "dsn": "postgresql://app@db/game"},
                {
                    "name": "node",
                    "type": "prometheus",
                    "url": "http://10.0.0.5:9100/metrics",
                    "node_exporter": True,
                    "series": [{"name": "http_requests_total"}],
                },
                {"name": "app", "type": "prometheus", "url": "http://10.0.0.5:8080/metrics"},
            ],
            thresholds=[
                "monitor.pg.replication_lag < 5",
                "monitor.pg.cpu.busy_percent < 90",
                "monitor.pg.tables.public.items.dead_tuples < 1000",
                "monitor.app.anything_at_all < 1",
                "monitor.node.http_requests_total.500 < 1",
                "monitor.node.net.eth0.100.link_percent < 90",
            ],
            autostop=[
                {"when": "monitor.db.cpu_percent > 95 for 10s"},
                {"when": "monitor.node.tcp.close_wait > 100"},
                {"when": "monitor.db.tcp.close_wait > 100"},
                {"when": "monitor.node.disk.sda.busy_prcent > 90"},
            ],
        )
    )
    assert [(location, message) for location, message, _ in found] == [
        ("thresholds[0].condition", "monitor pg (postgres) never gives 'replication_lag'"),
        ("thresholds[1].condition", "monitor pg (postgres) never gives 'cpu.busy_percent'"),
        ("autostop[0].when", "monitor db (host) never gives 'cpu_percent'"),
        ("autostop[1].when", "monitor node (node_exporter) never gives 'tcp.close_wait'"),
        ("autostop[3].when", "monitor node (node_exporter) never gives 'disk.sda.busy_prcent'"),
    ]
    hints = [hint or "" for _, _, hint in found]
    assert hints[0].startswith("did you mean replication_lag_s, replication_lag_bytes")
    assert "not its machine's" in hints[1]
    assert hints[2].startswith("did you mean cpu.busy_percent,") and "docs/plan-reference.md" in hints[2]
    assert "tcp.established and tcp.time_wait only" in hints[3]
    assert hints[4].startswith("did you mean disk.DEV.busy_percent")


def test_every_known_figure_is_in_the_plan_reference() -> None:
    """The figures' one list and the reference the hints point to say the same names."""
    from pathlib import Path

    figures = importlib.import_module("horde.plan.monitor_figures")
    reference = (Path(__file__).parents[1] / "docs" / "plan-reference.md").read_text()
    section = reference[reference.index("**Figures**") : reference.index("**Diagnosis**")]
    listed = set(re.findall(r"`([a-z0-9_.A-Z]+)`", section))
    for name in (*figures.HOST_FIGURES, *figures.POSTGRES_FIGURES):
        assert name in listed, name
