"""The store grows by migrations without losing runs.

``fixtures/store-v1.sqlite`` is a store written by Horde before migrations (commit 3418bf1,
``schema_version`` 1, made by ``fixtures/make_store_v1.py``): three short runs of the built-in
target (closed, open, all errors) with their snapshots and histograms, a queued control, and a
run whose process died. ``fixtures/store-v1-postgresql.sql`` is the schema that same Horde
created on PostgreSQL (pg_dump). Each test upgrades a copy and reads every run back.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData, create_engine, select, text

from conftest import HORDE_BIN
from horde.errors import ExitCode, StoreTooNew, StoreUnavailable
from horde.results.stored_run import load_run
from horde.store import MonitorSample, Store
from horde.store.migration import BASELINE_REVISION, HEAD_REVISION, head_revision
from horde.store.schema import metadata

FIXTURES = Path(__file__).parent / "fixtures"
V1_SQLITE = FIXTURES / "store-v1.sqlite"
V1_POSTGRES_SCHEMA = FIXTURES / "store-v1-postgresql.sql"


def _v1_copy(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite"
    shutil.copyfile(V1_SQLITE, path)
    return path


def _v1_rows() -> dict[str, list[dict[str, Any]]]:
    """Every row of the fixture, read with sqlite3 alone (no Horde code)."""
    connection = sqlite3.connect(f"file:{V1_SQLITE}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return {
            table: [dict(row) for row in connection.execute(f"SELECT * FROM {table}")]
            for table in ("runs", "snapshots", "snapshot_steps", "load_requests")
        }
    finally:
        connection.close()


def _assert_every_run_readable(store: Store) -> None:
    rows = _v1_rows()
    records = {record.run_id: record for record in store.list_runs(limit=100)}
    assert set(records) == {row["run_id"] for row in rows["runs"]}
    for row in rows["runs"]:
        record = store.get_run(row["run_id"])
        assert record.plan == json.loads(row["plan_json"])
        assert record.tags == json.loads(row["tags_json"])
        snapshots = store.snapshots(row["run_id"])
        assert [snapshot["second"] for snapshot in snapshots] == sorted(
            stored["second"] for stored in rows["snapshots"] if stored["run_id"] == row["run_id"]
        )
        steps = [step for snapshot in snapshots for step in snapshot["steps"]]
        assert sorted(bytes(step["histogram"]) for step in steps) == sorted(
            bytes(stored["histogram"]) for stored in rows["snapshot_steps"] if stored["run_id"] == row["run_id"]
        )
        if row["summary_json"] is None:
            continue
        stored_summary = json.loads(row["summary_json"])
        # horde show's recomputation from the stored histograms gives the numbers the run printed.
        recomputed = load_run(store, row["run_id"]).summary
        assert recomputed["requests"] == stored_summary["requests"] > 0
        assert recomputed["errors"] == stored_summary["errors"]
        assert recomputed["latency_ms"] == stored_summary["latency_ms"]
    assert store.control_answer(rows["load_requests"][0]["request_id"]) is None  # still queued


def _write_a_new_run(store: Store) -> None:
    run_id = store.create_run(plan={"version": 1}, plan_name="after", parameters={}, tags={})
    store.add_monitor_samples(run_id, [MonitorSample("host", 1, 1.0, 1_700_000_000.0, {"cpu.busy_percent": 3.5})])
    assert store.monitor_samples(run_id)["host"][0].values == {"cpu.busy_percent": 3.5}
    store.finish_run(run_id, status="finished", summary={"requests": 0})


def test_a_store_written_before_migrations_is_upgraded_in_place_on_sqlite(tmp_path: Path) -> None:
    path = _v1_copy(tmp_path)
    with Store.open(str(path)) as store:
        assert store.upgraded_from == BASELINE_REVISION
        _assert_every_run_readable(store)
        _write_a_new_run(store)
    with Store.open(str(path)) as store:
        assert store.upgraded_from is None  # once is enough
        assert len(store.list_runs()) == 5
    connection = sqlite3.connect(path)
    assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [(head_revision(),)]
    connection.close()


@pytest.mark.postgres
def test_a_store_written_before_migrations_is_upgraded_in_place_on_postgresql(postgres_database: str) -> None:
    admin = create_engine(postgres_database)
    old = create_engine(f"sqlite:///{V1_SQLITE}")
    try:
        with admin.begin() as connection:
            connection.exec_driver_sql(V1_POSTGRES_SCHEMA.read_text())
            target = MetaData()
            target.reflect(connection)
            source = MetaData()
            source.reflect(old)
            with old.connect() as reader:
                for name in ("runs", "snapshots", "snapshot_steps", "load_requests"):
                    rows = [dict(row) for row in reader.execute(select(source.tables[name])).mappings()]
                    if name == "runs":
                        # SQLite keeps naive UTC text; this store's PostgreSQL columns are timestamptz.
                        for row in rows:
                            for key in ("started_at", "ended_at"):
                                if row[key] is not None:
                                    row[key] = f"{row[key]}+00:00"
                    if name == "load_requests":
                        for row in rows:
                            row["requested_at"] = f"{row['requested_at']}+00:00"
                    connection.execute(target.tables[name].insert(), rows)
            connection.execute(text("SELECT setval('load_requests_request_id_seq', 10)"))
    finally:
        old.dispose()
        admin.dispose()
    with Store.open(postgres_database) as store:
        assert store.upgraded_from == BASELINE_REVISION
        _assert_every_run_readable(store)
        _write_a_new_run(store)
    with Store.open(postgres_database) as store:
        assert store.upgraded_from is None


def _schema_differences(url: str) -> list[Any]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return [
                diff
                for diff in compare_metadata(context, metadata)
                if not (isinstance(diff, tuple) and diff[0] == "remove_table" and diff[1].name == "alembic_version")
            ]
    finally:
        engine.dispose()


def test_the_migrations_build_the_schema_the_code_declares_on_sqlite(tmp_path: Path) -> None:
    new, old = f"sqlite:///{tmp_path / 'new.sqlite'}", f"sqlite:///{_v1_copy(tmp_path)}"
    for url in (new, old):
        Store.open(url).close()
        assert _schema_differences(url) == []


@pytest.mark.postgres
def test_the_migrations_build_the_schema_the_code_declares_on_postgresql(postgres_database: str) -> None:
    with Store.open(postgres_database) as store:
        assert store.upgraded_from == "empty"
    assert _schema_differences(postgres_database) == []


def test_an_old_store_this_user_may_only_read_is_refused_not_upgraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Opened read-only, it cannot be brought up to date, and this Horde's queries would not fit it.
    path = _v1_copy(tmp_path)
    before = path.read_bytes()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda where, mode, **kw: False if mode & os.W_OK else real_access(where, mode, **kw)
    )
    with pytest.raises(StoreUnavailable) as refused:
        Store.open(f"sqlite:///{path}")
    expected = f"at schema revision {BASELINE_REVISION}, older than this Horde's {HEAD_REVISION}"
    assert expected in refused.value.message
    assert "copy it somewhere writable" in (refused.value.hint or "")
    assert path.read_bytes() == before


def test_a_store_from_a_newer_horde_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = _v1_copy(tmp_path)
    Store.open(str(path)).close()
    connection = sqlite3.connect(path)
    connection.execute("UPDATE alembic_version SET version_num = '0999'")
    connection.commit()
    connection.close()
    before = path.read_bytes()
    with pytest.raises(StoreTooNew) as caught:
        Store.open(str(path))
    assert "newer Horde" in caught.value.message and "0999" in caught.value.message
    assert caught.value.exit_code == ExitCode.STORE_UNAVAILABLE and caught.value.hint
    assert path.read_bytes() == before
    # The command says so in words, with the hint and exit code 3, and no traceback.
    result = subprocess.run(
        [str(HORDE_BIN), "runs", "--store", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 3, result.stderr
    assert "newer Horde" in result.stderr and "hint:" in result.stderr and "Traceback" not in result.stderr


def test_a_store_at_the_latest_revision_opens_without_loading_alembic(tmp_path: Path) -> None:
    # The revision written out for the fast path is the scripts' own head.
    assert HEAD_REVISION == head_revision()
    path = tmp_path / "runs.sqlite"
    Store.open(str(path)).close()  # a new store: created by the migrations
    probe = (
        "import sys; from horde.store import Store; Store.open(sys.argv[1]).close(); "
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'alembic'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout
    # An old store still loads it, and is upgraded.
    old = _v1_copy(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", probe, str(old)], capture_output=True, text=True, timeout=60, check=True
    )
    assert "'alembic'" in result.stdout
    assert sqlite3.connect(old).execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD_REVISION,)]


def test_processes_opening_an_old_store_at_once_upgrade_it_once(tmp_path: Path) -> None:
    path = _v1_copy(tmp_path)
    upgraded: list[str | None] = []
    failures: list[str] = []

    def open_it() -> None:
        try:
            with Store.open(str(path)) as store:
                upgraded.append(store.upgraded_from)
                store.list_runs()
        except Exception as error:  # noqa: BLE001 - any failure is the finding
            failures.append(repr(error))

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert sorted(upgraded, key=str) == [BASELINE_REVISION, None, None, None]
