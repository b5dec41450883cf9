"""`horde export`: a stored run second by second, step by step, as CSV and JSON.

One real run against the built-in target (a fast step, a step that always fails with 503, and a
group around it); the export's rows must add up to the summary `horde show` prints, and each
row's percentiles must be those of that second's stored histogram.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from horde.engine import histogram
from horde.cli import app, main
from horde.cli.results import register
from horde.errors import ExitCode
from horde.results.export import csv_columns, export_rows
from horde.results.stored_run import load_run
from horde.store import Store
from recorded_runs import get, plan_dict, record_run

register(app)


class Cli:
    """`horde` in this process, on one store, with its exit code and output."""

    def __init__(self, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.store_url, self.capsys = store_url, capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*args, "--store", self.store_url])
        out, err = self.capsys.readouterr()
        return code, out, err


@pytest.fixture(scope="module")
def stored(builtin_target: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(store URL, run id) of a 2 s run: `fast` (GET /), and a group `g` around `fail` (503)."""
    store_url = f"sqlite:///{tmp_path_factory.mktemp('export') / 'runs.sqlite'}"
    plan = plan_dict(
        builtin_target.port,
        [
            get("fast", "/"),
            {"type": "group", "name": "g", "steps": [get("fail", "/status/503")]},
        ],
        vus=2,
        duration_s=2.0,
    )
    yield store_url, record_run(store_url, plan)


@pytest.fixture
def cli(stored: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(stored[0], capsys)


def _show(cli: Cli, run_id: str) -> dict[str, Any]:
    code, out, err = cli("show", run_id, "--json")
    assert code == 0, err
    summary: dict[str, Any] = json.loads(out)
    return summary


def test_json_rows_add_up_to_the_summary_of_horde_show(cli: Cli, stored: tuple[str, str]) -> None:
    _, run_id = stored
    code, out, err = cli("export", run_id, "--format", "json")
    assert code == ExitCode.OK, err
    document = json.loads(out)
    assert document["run_id"] == run_id and document["status"] == "finished"
    assert document["error_kinds"] == ["status_503", "step_failed"]
    summary = _show(cli, run_id)
    for step in ("fast", "fail", "g"):
        rows = [row for row in document["rows"] if row["step"] == step]
        assert rows, step
        figures = summary["steps"][step]
        assert sum(row["requests"] for row in rows) == figures["requests"] > 0
        assert sum(row["errors"] for row in rows) == figures["errors"]
        assert sum(row["ok"] for row in rows) == figures["requests"] - figures["errors"]
        by_kind: dict[str, int] = {}
        for row in rows:
            assert row["errors"] == sum(row["errors_by_kind"].values())
            for kind, count in row["errors_by_kind"].items():
                by_kind[kind] = by_kind.get(kind, 0) + count
        assert by_kind == figures["errors_by_kind"]
        assert {row["kind"] for row in rows} == {figures["kind"]}
    # Known answers: every /status/503 fails with that status, every / succeeds.
    assert summary["steps"]["fail"]["errors_by_kind"] == {"status_503": summary["steps"]["fail"]["requests"]}
    assert summary["steps"]["fast"]["errors"] == 0


def test_each_row_has_its_seconds_histogram_percentiles_and_the_runs_gauges(stored: tuple[str, str]) -> None:
    store_url, run_id = stored
    with Store.open(store_url) as store:
        results = load_run(store, run_id)
    rows = export_rows(results)
    by_key = {(row["second"], row["scenario"], row["step"]): row for row in rows}
    assert len(by_key) == len(rows)
    for snapshot in results.snapshots:
        for entry in snapshot["steps"]:
            row = by_key[(snapshot["second"], entry["scenario"], entry["step"])]
            stats = histogram.stats(entry["histogram"], [50.0, 90.0, 95.0, 99.0])
            assert (row["p50_ms"], row["p90_ms"], row["p95_ms"], row["p99_ms"], row["max_ms"]) == (
                stats.percentile(50.0),
                stats.percentile(90.0),
                stats.percentile(95.0),
                stats.percentile(99.0),
                stats.max_ms,
            )
            assert row["rps"] == round(entry["requests"] / snapshot["interval_s"], 3)
            assert (row["bytes_sent"], row["bytes_received"]) == (entry["bytes_sent"], entry["bytes_received"])
            for key in (
                "elapsed_s",
                "active_vus",
                "target_vus",
                "target_rate_per_s",
                "dropped_arrivals",
                "cpu_percent",
                "timer_lateness_p99_ms",
            ):
                assert row[key] == snapshot[key], key
    assert {row["second"] for row in rows} == {s["second"] for s in results.snapshots}


def test_csv_has_one_column_per_error_kind_and_the_same_rows_as_json(cli: Cli, stored: tuple[str, str]) -> None:
    _, run_id = stored
    code, out, err = cli("export", run_id)  # csv is the default
    assert code == ExitCode.OK, err
    reader = csv.DictReader(io.StringIO(out))
    assert reader.fieldnames == csv_columns(["status_503", "step_failed"])
    csv_rows = list(reader)
    json_rows = json.loads(cli("export", run_id, "--format", "json")[1])["rows"]
    assert len(csv_rows) == len(json_rows)
    for flat, row in zip(csv_rows, json_rows):
        assert int(flat["second"]) == row["second"] and int(flat["requests"]) == row["requests"]
        if row["step"] is None:
            # A second in which no step had an outcome (often the final drain): empty step columns.
            assert flat["step"] == flat["p95_ms"] == flat["errors_status_503"] == ""
            continue
        assert flat["step"] == row["step"] and float(flat["p95_ms"]) == row["p95_ms"]
        for kind in ("status_503", "step_failed"):
            assert int(flat[f"errors_{kind}"]) == row["errors_by_kind"].get(kind, 0)


def test_output_file_and_run_id_prefixes(cli: Cli, stored: tuple[str, str], tmp_path: Path) -> None:
    _, run_id = stored
    target = tmp_path / "out" / "run.json"
    code, out, err = cli("export", run_id[:12], "-f", "json", "-o", str(target))
    assert code == ExitCode.OK, err
    assert out == ""
    assert json.loads(target.read_text())["run_id"] == run_id
    assert json.loads(cli("export", "last", "--format", "JSON")[1])["run_id"] == run_id


def test_bad_input_is_a_clean_error(cli: Cli, stored: tuple[str, str], tmp_path: Path) -> None:
    _, run_id = stored
    for args, words in (
        (("export", "nosuchrun"), "no run matches"),
        (("export", run_id, "--format", "xml"), "--format must be csv or json"),
        (("export", run_id, "-o", str(tmp_path)), "is a directory"),
    ):
        code, out, err = cli(*args)
        assert code == ExitCode.INVALID_INPUT, (args, out, err)
        assert "error:" in err and words in err and "hint:" in err and "Traceback" not in err


def test_a_second_without_any_step_still_has_a_row(stored: tuple[str, str]) -> None:
    store_url, run_id = stored
    with Store.open(store_url) as store:
        first = store.snapshots(run_id)[0]
        copy_id = store.create_run(plan={}, plan_name="gap", parameters={}, tags={})
        store.add_snapshot(copy_id, first)
        store.add_snapshot(copy_id, {**first, "second": 2, "elapsed_s": 2.0, "steps": [], "final": True})
        store.finish_run(copy_id, status="finished", summary=None)
        rows = export_rows(load_run(store, copy_id))
    empty = [row for row in rows if row["second"] == 2]
    assert len(empty) == 1
    assert empty[0]["step"] is None and empty[0]["requests"] == 0 and empty[0]["errors_by_kind"] == {}
    assert empty[0]["active_vus"] == first["active_vus"]


@pytest.mark.postgres
def test_a_run_in_postgresql_exports_and_compares_as_in_sqlite(stored: tuple[str, str], postgres_database: str) -> None:
    """The results commands use the store's public API only: a PostgreSQL store gives the same
    export, summary and comparison as SQLite for the same stored seconds."""
    from horde.results.compare import compare_runs

    store_url, run_id = stored
    with Store.open(store_url) as sqlite_store:
        source = load_run(sqlite_store, run_id)
    with Store.open(postgres_database) as pg_store:
        copy_id = pg_store.create_run(
            plan=source.record.plan, plan_name=source.record.plan_name, parameters=source.record.parameters, tags={}
        )
        for snapshot in source.snapshots:
            pg_store.add_snapshot(copy_id, snapshot)
        pg_store.finish_run(copy_id, status="finished", summary={**source.summary, "run_id": copy_id})
        copy = load_run(pg_store, copy_id[:16])
    assert export_rows(copy) == export_rows(source)
    assert {**copy.summary, "run_id": run_id} == source.summary
    assert {step.verdict for step in compare_runs(source, copy).steps} == {"no significant change"}
