"""`horde run` end to end, in a subprocess: the summary it writes, what the store keeps, and
`horde show` / `horde runs` reading it back with the same numbers."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import HordeCli, free_tcp_port
from horde.errors import ExitCode
from horde.store import Store

FIGURES = {"requests", "errors", "rps", "latency_ms"}
LATENCY = {"p50", "p90", "p95", "p99", "max"}


def write_plan(directory: Path, port: int) -> Path:
    path = directory / "plan.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: e2e
        target:
          base_url: http://127.0.0.1:{port}
        scenarios:
          - name: browse
            steps:
              - name: home
                method: GET
                path: /
                think_time: {{type: constant, duration_ms: 5}}
              - name: item
                method: GET
                path: /delay/5
            workload: {{type: closed, start_vus: 3, stages: [{{duration_s: 2, vus: 3}}]}}
          - name: broken
            steps:
              - name: gone
                method: GET
                path: /status/404
                think_time: {{type: constant, duration_ms: 20}}
            workload: {{type: closed, start_vus: 1, stages: [{{duration_s: 2, vus: 1}}]}}
        graceful_stop_s: 2
        """)
    )
    return path


def assert_figures(figures: dict[str, Any]) -> None:
    assert FIGURES <= set(figures)
    assert isinstance(figures["requests"], int) and isinstance(figures["errors"], int)
    assert isinstance(figures["rps"], float)
    assert LATENCY <= set(figures["latency_ms"])
    latency = figures["latency_ms"]
    assert latency["p50"] <= latency["p90"] <= latency["p95"] <= latency["p99"] <= latency["max"]


def assert_same_numbers(shown: dict[str, Any], summary: dict[str, Any]) -> None:
    for key in ("run_id", "status", "duration_s", "requests", "errors", "rps", "errors_by_kind", "iterations"):
        assert shown[key] == summary[key], key
    for key in LATENCY:
        assert shown["latency_ms"][key] == summary["latency_ms"][key], key
    assert set(shown["steps"]) == set(summary["steps"])
    for name, figures in summary["steps"].items():
        for key in ("requests", "errors", "rps"):
            assert shown["steps"][name][key] == figures[key], (name, key)
        for key in LATENCY:
            assert shown["steps"][name]["latency_ms"][key] == figures["latency_ms"][key], (name, key)
    assert shown == summary  # and everything else too


def run_horde(horde_cli: HordeCli, *args: str, timeout: float = 60) -> dict[str, Any]:
    """`horde run ARGS --summary-json F`; returns the summary written to F."""
    summary_path = horde_cli.tmp_path / f"summary-{len(list(horde_cli.tmp_path.glob('summary-*')))}.json"
    result = horde_cli.run("run", *args, "--summary-json", str(summary_path), timeout=timeout)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    summary["_stdout"] = result.stdout
    return summary


def stored(horde_cli: HordeCli, run_id: str, store_url: str | None = None) -> Any:
    with Store.open(store_url or horde_cli.store_url) as store:
        return store.get_run(run_id)


def show_json(horde_cli: HordeCli, ref: str, *extra: str) -> dict[str, Any]:
    result = horde_cli.run("show", ref, "--json", *extra)
    assert result.returncode == 0, result.stderr
    shown: dict[str, Any] = json.loads(result.stdout)
    return shown


def test_run_a_plan_then_show_and_list_it(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = write_plan(horde_cli.tmp_path, builtin_target.port)
    summary = run_horde(horde_cli, str(plan), "--workers", "1", "--tag", "build=42")
    stdout = summary.pop("_stdout")
    run_id = summary["run_id"]

    # The documented fields.
    assert summary["status"] == "finished"
    assert summary["duration_s"] == pytest.approx(2.0, abs=0.5)
    assert_figures(summary)
    assert set(summary["steps"]) == {"home", "item", "gone"}
    for figures in summary["steps"].values():
        assert_figures(figures)
    assert {"cpu_percent_max", "timer_lateness_p99_ms"} <= set(summary["generator"])
    # Known answers: 404s are errors of their kind, the rest succeed.
    assert summary["steps"]["gone"]["errors"] == summary["steps"]["gone"]["requests"] > 0
    assert summary["errors_by_kind"] == {"status_404": summary["steps"]["gone"]["requests"]}
    assert summary["steps"]["home"]["errors"] == summary["steps"]["item"]["errors"] == 0
    assert summary["errors"] == summary["steps"]["gone"]["requests"]
    assert summary["requests"] == sum(figures["requests"] for figures in summary["steps"].values())
    assert summary["steps"]["item"]["latency_ms"]["p50"] >= 5
    assert f"horde show {run_id}" in stdout and "e2e" in stdout

    # `horde show RUN --json` recomputes the very same numbers from the store.
    assert_same_numbers(show_json(horde_cli, run_id), summary)
    assert_same_numbers(show_json(horde_cli, "last"), summary)
    assert_same_numbers(show_json(horde_cli, run_id[:-2]), summary)  # a unique prefix

    record = stored(horde_cli, run_id)
    assert record.status == "finished"
    assert record.summary == summary
    assert record.tags == {"build": "42"}
    assert record.parameters == {"workers": 1}
    assert record.plan["name"] == "e2e"

    # `horde show last` as a table, and `horde runs`.
    result = horde_cli.run("show", "last")
    assert result.returncode == 0, result.stderr
    assert f"run {run_id} — finished" in result.stdout
    assert "home" in result.stdout and "gone" in result.stdout
    result = horde_cli.run("runs")
    assert result.returncode == 0, result.stderr
    assert run_id in result.stdout and "finished" in result.stdout and "build=42" in result.stdout
    result = horde_cli.run("runs", "--json")
    [listed] = json.loads(result.stdout)
    assert (listed["run_id"], listed["plan"], listed["status"], listed["tags"]) == (
        run_id,
        "e2e",
        "finished",
        {"build": "42"},
    )


def test_quick_url_closed_and_open(horde_cli: HordeCli, builtin_target: Any) -> None:
    url = f"http://127.0.0.1:{builtin_target.port}/delay/10"
    closed = run_horde(horde_cli, "--url", url, "--vus", "5", "--duration", "2s", "--workers", "1")
    assert closed["status"] == "finished"
    assert closed["errors"] == 0
    # 5 VUs x ~90 requests/s each (10 ms + overhead), for 2 s.
    assert 400 < closed["requests"] <= 1005
    assert set(closed["steps"]) == {"GET /delay/10"}
    workload = stored(horde_cli, closed["run_id"]).plan["scenarios"][0]["workload"]
    assert workload == {"type": "closed", "start_vus": 5, "stages": [{"duration_s": 2.0, "vus": 5}]}

    opened = run_horde(horde_cli, "--url", url, "--rate", "50", "--duration", "2s", "--workers", "1")
    assert opened["status"] == "finished"
    assert opened["errors"] == 0 and opened["dropped_arrivals"] == 0
    assert opened["requests"] == pytest.approx(100, abs=3)
    record = stored(horde_cli, opened["run_id"])
    assert record.plan["scenarios"][0]["workload"] == {
        "type": "open",
        "start_rate_per_s": 50.0,
        "stages": [{"duration_s": 2.0, "rate_per_s": 50.0}],
        "max_vus": 50,
        "arrivals": "uniform",
    }
    assert record.parameters == {"rate": 50.0, "duration_s": 2.0, "workers": 1}
    assert_same_numbers(show_json(horde_cli, opened["run_id"]), {k: v for k, v in opened.items() if k != "_stdout"})


def test_flags_override_the_plan(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = write_plan(horde_cli.tmp_path, builtin_target.port)
    summary = run_horde(horde_cli, str(plan), "--vus", "4", "--duration", "1s", "--workers", "1")
    assert summary["duration_s"] == pytest.approx(1.0, abs=0.5)
    assert summary["peak_vus"] == 4  # spread over the two scenarios by weight (1 and 1): 2 + 2
    record = stored(horde_cli, summary["run_id"])
    for scenario in record.plan["scenarios"]:
        assert scenario["workload"] == {"type": "closed", "start_vus": 2, "stages": [{"duration_s": 1.0, "vus": 2}]}
    assert record.parameters == {"vus": 4, "duration_s": 1.0, "workers": 1}


def test_a_dead_target_is_data_not_a_crash(horde_cli: HordeCli) -> None:
    port = free_tcp_port()  # nothing listens there
    summary_path = horde_cli.tmp_path / "summary.json"
    result = horde_cli.run(
        "run",
        "--url",
        f"http://127.0.0.1:{port}/",
        "--vus",
        "1",
        "--duration",
        "2s",
        "--workers",
        "1",
        "--summary-json",
        str(summary_path),
    )
    # Not a crash: the run is stored and summed up; no connection at all has its own exit code.
    assert result.returncode == ExitCode.NO_CONNECTION, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    summary = json.loads(summary_path.read_text())
    stdout = result.stdout
    assert "no connection could be opened" in stdout
    assert summary["status"] == "finished"
    assert summary["requests"] > 0
    assert summary["errors"] == summary["requests"]
    assert summary["error_percent"] == 100.0
    assert set(summary["errors_by_kind"]) == {"refused"}
    assert "EVERY REQUEST FAILED" in stdout
    assert "errors by kind: refused" in stdout


@pytest.mark.postgres
def test_run_and_show_with_a_postgresql_store(horde_cli: HordeCli, builtin_target: Any, postgres_database: str) -> None:
    summary = run_horde(
        horde_cli,
        "--url",
        f"http://127.0.0.1:{builtin_target.port}/delay/5",
        "--vus",
        "2",
        "--duration",
        "1s",
        "--workers",
        "1",
        "--store",
        postgres_database,
    )
    stdout = summary.pop("_stdout")
    assert summary["requests"] > 0 and summary["errors"] == 0
    assert "postgresql+psycopg://" in stdout
    assert_same_numbers(show_json(horde_cli, summary["run_id"], "--store", postgres_database), summary)
    assert_same_numbers(show_json(horde_cli, "last", "--store", postgres_database), summary)
    result = horde_cli.run("runs", "--json", "--store", postgres_database)
    assert [run["run_id"] for run in json.loads(result.stdout)] == [summary["run_id"]]
    assert not horde_cli.store_path.exists()  # the default store was not touched
    assert stored(horde_cli, summary["run_id"], postgres_database).summary == summary
