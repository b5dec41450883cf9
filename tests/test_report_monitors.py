"""A PostgreSQL monitor's charts in the report and the dashboard, from known samples of the
seed's load (a select-heavy mix, each select scanning hundreds of rows): the statement mix as
shares of each second's statements, rows a second on an axis of their own, dead tuples with the
autovacuum runs and the HOT share, and the standby's lag and xmin age, each on a chart of its own
rather than behind a menu."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from horde.monitors import monitors_block
from horde.report import render_run_report
from horde.report.charts import monitor_charts
from horde.report.series import monitor_series
from horde.results.stored_run import load_run
from horde.store import MonitorSample, Store
from horde.web import create_app
from recorded_runs import get, plan_dict, record_run

PG_CHARTS = (
    "chart-monitor-pg",
    "chart-monitor-pg-statements",
    "chart-monitor-pg-tables",
    "chart-monitor-pg-replication",
    "chart-monitor-pg-rows",
)
#: Each second's statements by kind (the seed's mix: mostly selects), a sum of 1,000.
MIX = {"select": 700.0, "insert": 60.0, "update": 200.0, "delete": 30.0, "other": 10.0}
#: Autovacuum ran in these seconds' intervals, taking the dead tuples back down.
VACUUMED = (4, 8)


def pg_samples(seconds: int = 10) -> list[MonitorSample]:
    """A postgres monitor's readings of the seed's load: ~800,000 rows returned a second."""
    samples = []
    for second in range(1, seconds + 1):
        dead = 40.0 + 500 * ((second - 1) % 4)
        values = {
            "transactions_per_s": 1000.0,
            "statements.from_pg_stat_statements": 1.0,
            **{f"statements.{kind}_per_s": rate * (1 + 0.1 * (second % 2)) for kind, rate in MIX.items()},
            "rows.returned_per_s": 800_000.0 + 1000 * second,
            "rows.fetched_per_s": 5000.0,
            "rows.inserted_per_s": 60.0,
            "rows.updated_per_s": 200.0,
            "rows.deleted_per_s": 30.0,
            "hot_update_percent": 70.0 + second,
            "dead_tuples": dead,
            "tables.public.items.dead_tuples": dead,
            "autovacuum_runs": 1.0 if second in VACUUMED else 0.0,
            "tables.public.items.autovacuum_runs": 1.0 if second in VACUUMED else 0.0,
            "replication.walreceiver.replay_lag_bytes": 1000.0 * second,
            "replication_lag_bytes": 1000.0 * second,
            "replication.walreceiver.xmin_age": 100.0 * second,
            "standby_xmin_age": 100.0 * second,
            "connections.total": 12.0,
            "connections.max": 100.0,
        }
        samples.append(MonitorSample("pg", second, float(second), 1_700_000_000.0 + second, values))
    return samples


def _names(figure: dict[str, Any]) -> list[str]:
    return [trace["name"] for trace in figure["data"]]


def test_a_postgres_monitor_has_its_statement_mix_in_percent_and_rows_on_their_own() -> None:
    samples = pg_samples()
    series = monitor_series({"monitors": [{"name": "pg", "type": "postgres"}]}, {"pg": samples})
    charts = monitor_charts(series, [])
    assert list(charts) == list(PG_CHARTS)

    mix = charts["chart-monitor-pg-statements"]
    assert _names(mix) == ["select %", "insert %", "update %", "delete %", "other %", "statements/s"]
    assert mix["layout"]["yaxis"]["range"] == [0, 100]
    assert "% of each second's statements" in mix["layout"]["title"]["text"]
    shares = [trace for trace in mix["data"] if trace.get("stackgroup") == "mix"]
    for index, sample in enumerate(samples):
        assert sum(trace["y"][index] for trace in shares) == pytest.approx(100.0)
        assert shares[0]["y"][index] == pytest.approx(70.0)  # 700 of 1,000 statements are selects
    assert mix["data"][-1]["y"][0] == pytest.approx(1100.0) and mix["data"][-1]["yaxis"] == "y2"

    rows = charts["chart-monitor-pg-rows"]
    assert _names(rows) == [f"rows {what}/s" for what in ("returned", "fetched", "inserted", "updated", "deleted")]
    assert rows["data"][0]["y"][0] == 801_000.0
    # The menu chart: rows a second are a group of their own, never on the statements' axis.
    main = charts["chart-monitor-pg"]
    shown_first = [trace["name"] for trace in main["data"] if trace["visible"]]
    assert "statements.select_per_s" in shown_first
    assert not any(name.startswith("rows.") for name in shown_first)
    buttons = {button["label"]: button for button in main["layout"]["updatemenus"][0]["buttons"]}
    chosen = buttons["rows per second"]["args"][0]["visible"]
    rows_group = [trace["name"] for trace, shown in zip(main["data"], chosen) if shown]
    assert rows_group == ["rows.returned_per_s", "rows.fetched_per_s"]

    tables = charts["chart-monitor-pg-tables"]
    assert _names(tables) == ["dead tuples (followed tables)", "autovacuum ran", "HOT updates, % of updates"]
    ran = tables["data"][1]
    assert ran["x"] == [float(second) for second in VACUUMED] and ran["y"] == [1540.0, 1540.0]
    assert tables["data"][2]["yaxis"] == "y2" and tables["layout"]["yaxis2"]["range"] == [0, 100]

    standbys = charts["chart-monitor-pg-replication"]
    assert _names(standbys) == ["walreceiver replay lag (bytes)", "walreceiver xmin age (transactions)"]
    assert standbys["data"][1]["y"][-1] == 1000.0 and standbys["data"][1]["yaxis"] == "y2"
    assert all(figure["layout"]["meta"] == "time-axis" for figure in charts.values())


def test_without_pg_stat_statements_the_mix_says_it_is_of_rows() -> None:
    samples = [
        MonitorSample(
            "pg",
            second,
            float(second),
            0.0,
            {
                "statements.select_per_s": 900.0,
                "statements.update_per_s": 100.0,
                "statements.from_pg_stat_statements": 0.0,
            },
        )
        for second in (1, 2)
    ]
    series = monitor_series({"monitors": [{"name": "pg", "type": "postgres"}]}, {"pg": samples})
    mix = monitor_charts(series, [])["chart-monitor-pg-statements"]
    assert "rows (the tuple counters: pg_stat_statements is not installed)" in mix["layout"]["title"]["text"]
    assert _names(mix) == ["select %", "update %", "rows/s"] and mix["data"][0]["y"] == [90.0, 90.0]
    # No standby streams: no chart for one.
    assert "chart-monitor-pg-replication" not in monitor_charts(series, [])


@pytest.fixture(scope="module")
def monitored_run(builtin_target: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(store URL, run id): a short real run stored with a postgres monitor's samples."""
    url = f"sqlite:///{tmp_path_factory.mktemp('pg-report') / 'runs.sqlite'}"
    recorded = record_run(url, plan_dict(builtin_target.port, [get("home", "/")], vus=1, duration_s=1.0))
    with Store.open(url) as store:
        source = load_run(store, recorded)
        monitor = {"name": "pg", "type": "postgres", "dsn": "postgresql://app@db/game"}
        plan = {**source.record.plan, "monitors": [monitor]}
        run_id = store.create_run(plan=plan, plan_name="pg", parameters=source.record.parameters, tags={})
        for snapshot in source.snapshots:
            store.add_snapshot(run_id, snapshot)
        samples = pg_samples()
        store.add_monitor_samples(run_id, samples)
        block = monitors_block({"pg": "postgres"}, set(), {"pg": samples}, [], [])
        store.finish_run(run_id, status="finished", summary={**source.summary, "run_id": run_id, "monitors": block})
    return url, run_id


def test_the_report_and_the_dashboard_draw_each_postgres_chart(monitored_run: tuple[str, str]) -> None:
    url, run_id = monitored_run
    with Store.open(url) as store:
        html = render_run_report(load_run(store, run_id))
    for chart_id in PG_CHARTS:
        assert f'<div class="chart" id="{chart_id}"></div>' in html
    # The summary's HOT share is the run's, weighted by its updates (here the same each second).
    assert "hot_update_percent" in html
    with TestClient(create_app(url, token=None), base_url="http://127.0.0.1:8089") as client:
        state = client.get(f"/api/runs/{run_id}").json()
        page = client.get(f"/runs/{run_id}").text
    drawn = [chart_id for chart_id in state["figures"] if chart_id.startswith("chart-monitor-")]
    assert drawn == list(PG_CHARTS)
    assert '<div id="monitor-charts">' in page  # the page places the charts after chart-monitor-pg as they come
