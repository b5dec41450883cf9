"""Tests of horde.store against SQLite and a real PostgreSQL (see conftest.py)."""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, select, update

from conftest import PYTHON_SRC, free_tcp_port
from horde.errors import ExitCode, RunNotFound, StoreUnavailable
from horde.store import (
    DEFAULT_STORE_PATH,
    RunRecord,
    Store,
    default_store_path,
    redact_url,
    resolve_store_url,
)
from horde.store.schema import runs

RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty store: a SQLite file in tmp_path, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.sqlite'}"
    url: str = request.getfixturevalue("postgres_database")
    return url


def make_plan(name: str = "quickstart") -> dict[str, Any]:
    """A plan whose keys are deliberately not in sorted order, to check order is kept."""
    return {
        "version": 1,
        "name": name,
        "target": {"base_url": "http://127.0.0.1:8080", "headers": {"x-b": "2", "x-a": "1"}},
        "scenarios": [
            {
                "name": "browse",
                "steps": [{"name": "home", "method": "GET", "path": "/", "body": None}],
                "workload": {"type": "closed", "start_vus": 0, "stages": [{"duration_s": 5.5, "vus": 50}]},
            }
        ],
        "graceful_stop_s": 5,
    }


def make_snapshot(second: int, *, final: bool = False) -> dict[str, Any]:
    """A snapshot in the engine's shape, with several steps, error kinds and real bytes."""
    return {
        "second": second,
        "elapsed_s": second + 0.000123,
        "interval_s": 1.0 if not final else 0.4371,
        "timestamp": 1763819000.123456 + second,
        "final": final,
        "steps": [
            # Not in (scenario, step) order: the list must come back in the order given.
            {
                "scenario": "browse",
                "step": "search",
                "requests": 120 * second,
                "ok": 117,
                "errors": {"status_503": 1, "timeout": 1, "reset": second},
                "bytes_sent": 9000,
                "bytes_received": 3_000_000_000,  # > 2**31
                "histogram": os.urandom(300),
            },
            {
                "scenario": "browse",
                "step": "home",
                "requests": 10,
                "ok": 10,
                "errors": {},
                "bytes_sent": 1,
                "bytes_received": 2,
                "histogram": os.urandom(300),
            },
            {
                "scenario": "api",
                "step": "home",
                "requests": 3,
                "ok": 0,
                "errors": {"refused": 2, "status_500": 1},
                "bytes_sent": 0,
                "bytes_received": 0,
                "histogram": b"\x00\x01\xff",
            },
        ],
        "active_vus": 50,
        "busy_vus": 12,
        "iterations": 118,
        "dropped_arrivals": 0,
        "connections_opened": 3,
        "target_vus": 50,
        "target_rate_per_s": None,
        "cpu_percent": 23.5,
        "timer_lateness_p99_ms": 0.1 + 0.2,
    }


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def set_run_owner(url: str, run_id: str, *, pid: int, host: str | None = None) -> None:
    """Pretend another process (or host) created the run, as if it crashed."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            values: dict[str, Any] = {"pid": pid}
            if host is not None:
                values["host"] = host
            conn.execute(update(runs).where(runs.c.run_id == run_id).values(**values))
    finally:
        engine.dispose()


def new_run(store: Store, name: str = "quickstart") -> str:
    return store.create_run(plan=make_plan(name), plan_name=name, parameters={"vus": 50}, tags={"env": "test"})


# -- round trip --------------------------------------------------------------------------------


def test_round_trip(store_url: str) -> None:
    plan = make_plan()
    parameters = {"vus": 50, "rate": 12.5, "nested": {"z": 1, "a": [1, 2]}}
    tags = {"commit": "abc123", "env": "ci", "ünïcode": "✓"}
    sent = [make_snapshot(1), make_snapshot(2), make_snapshot(3, final=True)]
    summary = {"requests": 399, "p99_ms": 12.25, "errors": {"timeout": 3}}
    before = datetime.now(timezone.utc)

    with Store.open(store_url) as store:
        run_id = store.create_run(plan=plan, plan_name="quickstart", parameters=parameters, tags=tags)
        assert RUN_ID.match(run_id), run_id
        running = store.get_run(run_id)
        assert running.status == "running"
        assert running.ended_at is None and running.summary is None
        for snapshot in sent:
            store.add_snapshot(run_id, snapshot)
        store.finish_run(run_id, status="finished", summary=summary)

    # A new handle, so nothing can come from a cache.
    with Store.open(store_url) as store:
        record = store.get_run(run_id)
        got = store.snapshots(run_id)

    assert record.run_id == run_id
    assert record.plan_name == "quickstart"
    assert record.plan == plan
    assert list(record.plan) == list(plan)
    assert list(record.plan["target"]["headers"]) == ["x-b", "x-a"]
    assert record.parameters == parameters
    assert record.tags == tags
    assert record.status == "finished"
    assert record.summary == summary
    assert record.host == socket.gethostname()
    assert record.pid == os.getpid()
    assert record.started_at.tzinfo is not None
    assert record.started_at.utcoffset() == timedelta(0)
    assert before - timedelta(seconds=1) <= record.started_at <= datetime.now(timezone.utc)
    assert record.ended_at is not None and record.ended_at >= record.started_at
    assert run_id.startswith(record.started_at.strftime("%Y%m%d-%H%M%S"))

    assert got == sent
    assert [s["second"] for s in got] == [1, 2, 3]
    assert all(type(step["histogram"]) is bytes for s in got for step in s["steps"])
    assert [(st["scenario"], st["step"]) for st in got[0]["steps"]] == [
        ("browse", "search"),
        ("browse", "home"),
        ("api", "home"),
    ]

    # The plan's JSON text keeps the order it was given in (not sorted).
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            plan_json = conn.execute(select(runs.c.plan_json).where(runs.c.run_id == run_id)).scalar_one()
    finally:
        engine.dispose()
    assert plan_json == json.dumps(plan)
    assert plan_json.index('"version"') < plan_json.index('"name"') < plan_json.index('"target"')


def test_unknown_snapshot_keys_are_kept(store_url: str) -> None:
    snapshot = make_snapshot(1)
    snapshot["future_gauge"] = {"b": 2, "a": [1, 2]}
    snapshot["steps"][0]["future_counter"] = 7
    with Store.open(store_url) as store:
        run_id = new_run(store)
        store.add_snapshot(run_id, snapshot)
        assert store.snapshots(run_id) == [snapshot]


def test_snapshot_errors(store_url: str) -> None:
    with Store.open(store_url) as store:
        run_id = new_run(store)
        store.add_snapshot(run_id, make_snapshot(1))
        with pytest.raises(ValueError, match="second 1"):
            store.add_snapshot(run_id, make_snapshot(1))
        with pytest.raises(RunNotFound):
            store.add_snapshot("20000101-000000-0000", make_snapshot(1))
        with pytest.raises(ValueError, match="timestamp"):
            store.add_snapshot(run_id, {k: v for k, v in make_snapshot(2).items() if k != "timestamp"})
        with pytest.raises(ValueError, match="interval_s"):
            store.add_snapshot(run_id, {**make_snapshot(2), "interval_s": None})
        doubled = make_snapshot(2)
        doubled["steps"].append(dict(doubled["steps"][0]))
        with pytest.raises(ValueError, match="twice"):
            store.add_snapshot(run_id, doubled)
        with pytest.raises(RunNotFound):
            store.snapshots("20000101-000000-0000")
        with pytest.raises(RunNotFound):
            store.finish_run("20000101-000000-0000", status="finished", summary=None)
        with pytest.raises(ValueError, match="status"):
            store.finish_run(run_id, status="running", summary=None)
        # The rejected snapshots left nothing behind.
        assert [s["second"] for s in store.snapshots(run_id)] == [1]
        assert store.get_run(run_id).status == "running"


def test_every_final_status(store_url: str) -> None:
    with Store.open(store_url) as store:
        for status in ("finished", "interrupted", "aborted", "failed"):
            run_id = new_run(store)
            store.finish_run(run_id, status=status, summary=None)
            record = store.get_run(run_id)
            assert (record.status, record.summary) == (status, None)
            assert record.ended_at is not None


# -- lookups -----------------------------------------------------------------------------------


def shortest_unique_prefix(run_id: str, others: list[str]) -> str:
    for length in range(1, len(run_id) + 1):
        prefix = run_id[:length]
        if not any(o.startswith(prefix) for o in others if o != run_id):
            return prefix
    raise AssertionError("ids are unique")


def test_list_and_lookup(store_url: str) -> None:
    with Store.open(store_url) as store:
        with pytest.raises(RunNotFound) as empty:
            store.get_run("last")
        assert "horde runs" in (empty.value.hint or "")
        assert store.list_runs() == []

        ids = [new_run(store, f"plan{i}") for i in range(4)]
        assert len(set(ids)) == 4

        listed = store.list_runs()
        assert [r.run_id for r in listed] == ids[::-1]
        assert all(isinstance(r, RunRecord) for r in listed)
        assert [r.run_id for r in store.list_runs(limit=2)] == ids[:1:-1]

        assert store.get_run("last").run_id == ids[-1]
        assert store.get_run(" LAST ").run_id == ids[-1]
        for run_id in ids:
            assert store.get_run(run_id).run_id == run_id
            prefix = shortest_unique_prefix(run_id, ids)
            assert store.get_run(prefix).run_id == run_id
            assert store.get_run(run_id.upper()).run_id == run_id

        # All four start with the year.
        with pytest.raises(RunNotFound, match="ambiguous") as ambiguous:
            store.get_run(ids[0][:2])
        assert ids[0] in ambiguous.value.message
        assert "horde runs" in (ambiguous.value.hint or "")

        for missing in ("ffff", "2099", "", "%", "_", ids[0] + "0"):
            with pytest.raises(RunNotFound) as not_found:
                store.get_run(missing)
            assert "horde runs" in (not_found.value.hint or "")
            assert not_found.value.exit_code == ExitCode.INVALID_INPUT


def test_run_ids_are_unique_within_a_second(store_url: str) -> None:
    with Store.open(store_url) as store:
        ids = [new_run(store) for _ in range(40)]
    assert len(set(ids)) == 40
    assert all(RUN_ID.match(run_id) for run_id in ids)


# -- abandoned runs and crashes ----------------------------------------------------------------


def test_abandoned_run_is_aborted_on_open(store_url: str) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Store.open(store_url) as store:
            dead_id = new_run(store, "dead")
            store.add_snapshot(dead_id, make_snapshot(1))
            live_id = new_run(store, "live")
            elsewhere_id = new_run(store, "elsewhere")
            done_id = new_run(store, "done")
            store.finish_run(done_id, status="finished", summary={"ok": True})
        gone = dead_pid()
        set_run_owner(store_url, dead_id, pid=gone)
        set_run_owner(store_url, live_id, pid=live.pid)
        # A pid on another machine says nothing about this one's processes.
        set_run_owner(store_url, elsewhere_id, pid=gone, host="some-other-host")
        set_run_owner(store_url, done_id, pid=gone)

        with Store.open(store_url) as store:
            dead = store.get_run(dead_id)
            assert dead.status == "aborted"
            # Ended when it was last seen: at its last snapshot.
            assert dead.ended_at == datetime.fromtimestamp(make_snapshot(1)["timestamp"], timezone.utc)
            assert store.get_run(live_id).status == "running"
            assert store.get_run(live_id).ended_at is None
            assert store.get_run(elsewhere_id).status == "running"
            assert store.get_run(done_id).status == "finished"
    finally:
        live.kill()
        live.wait()


CRASHING_CHILD = textwrap.dedent(
    """
    import os, sys
    from horde.store import Store
    sys.path.insert(0, {tests!r})
    from test_store import make_snapshot

    store = Store.open({url!r})
    run_id = store.create_run(plan={{"version": 1}}, plan_name="crash", parameters={{}}, tags={{}})
    print(run_id, os.getpid(), flush=True)
    store.add_snapshot(run_id, make_snapshot(1))
    store.add_snapshot(run_id, make_snapshot(2))
    os._exit(9)  # no close, no commit of anything pending, no atexit
    """
)


def test_crash_keeps_committed_snapshots(store_url: str) -> None:
    script = CRASHING_CHILD.format(url=store_url, tests=str(Path(__file__).parent))
    env = {**os.environ, "PYTHONPATH": str(PYTHON_SRC)}
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert child.returncode == 9, child.stderr
    run_id, child_pid = child.stdout.split()
    assert RUN_ID.match(run_id), child.stdout + child.stderr

    with Store.open(store_url) as store:
        record = store.get_run(run_id)
        assert record.status == "aborted"
        assert record.pid == int(child_pid)
        assert [s["second"] for s in store.snapshots(run_id)] == [1, 2]


# -- SQLite specifics --------------------------------------------------------------------------


def test_sqlite_reader_does_not_block_writer(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with Store.open(str(path)) as store:
        run_id = new_run(store)
        store.add_snapshot(run_id, make_snapshot(1))
        reader = sqlite3.connect(path, isolation_level=None)
        try:
            assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            # An open read transaction, as `horde runs` in another terminal would hold.
            reader.execute("BEGIN")
            assert reader.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 1
            started = time.monotonic()
            store.add_snapshot(run_id, make_snapshot(2))
            store.finish_run(run_id, status="finished", summary=None)
            assert time.monotonic() - started < 2
            # The reader keeps its consistent view until it ends its transaction.
            assert reader.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 1
            reader.execute("COMMIT")
            assert reader.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 2
        finally:
            reader.close()


def test_tables_and_index(store_url: str) -> None:
    with Store.open(store_url):
        pass
    with Store.open(store_url):  # opening an existing store is harmless
        pass
    engine = create_engine(store_url)
    try:
        inspector = inspect(engine)
        assert {"runs", "snapshots", "snapshot_steps"} <= set(inspector.get_table_names())
        indexed = [ix["column_names"] for ix in inspector.get_indexes("runs")]
        assert ["started_at"] in indexed
        assert "extra_json" in {c["name"] for c in inspector.get_columns("snapshots")}
    finally:
        engine.dispose()


# -- unavailable stores ------------------------------------------------------------------------


def test_unavailable_sqlite_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    path = blocker / "sub" / "runs.sqlite"
    with pytest.raises(StoreUnavailable) as caught:
        Store.open(str(path))
    err = caught.value
    assert err.exit_code == 3
    assert f"sqlite:///{path}" in err.message
    assert err.hint and "writable" in err.hint and "HORDE_STORE" in err.hint


def test_a_store_path_in_a_missing_folder_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    # A mistyped --store must not leave a tree of folders behind it.
    path = tmp_path / "nonexistent" / "dir" / "x.sqlite"
    with pytest.raises(StoreUnavailable) as caught:
        Store.open(str(path))
    assert caught.value.exit_code == 3
    assert f"the folder {path.parent} does not exist" in caught.value.message
    assert caught.value.hint and "only the default store's folder" in caught.value.hint
    assert not (tmp_path / "nonexistent").exists()


def test_a_new_sqlite_store_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with Store.open(str(path)):
        pass
    assert path.stat().st_mode & 0o077 == 0, oct(path.stat().st_mode)


def test_unavailable_sqlite_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"this is not a SQLite database" * 100)
    with pytest.raises(StoreUnavailable) as caught:
        Store.open(str(path))
    assert str(path) in caught.value.message
    assert caught.value.hint


def test_unavailable_postgres_is_fast_and_redacted() -> None:
    port = free_tcp_port()  # nothing listens there
    url = f"postgresql://horde:sekret@127.0.0.1:{port}/horde?connect_timeout=3"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        Store.open(url)
    assert time.monotonic() - started < 10
    err = caught.value
    assert err.exit_code == 3
    text_shown = f"{err.message}\n{err.hint}\n{err}"
    assert "sekret" not in text_shown
    assert f"postgresql+psycopg://horde:***@127.0.0.1:{port}/horde" in err.message
    assert err.hint and "PostgreSQL server running" in err.hint and "--store" in err.hint


def test_unsupported_store_kind() -> None:
    with pytest.raises(StoreUnavailable) as caught:
        Store.open("mysql://root:sekret@localhost/horde")
    assert "sekret" not in caught.value.message
    assert caught.value.hint


# -- URLs --------------------------------------------------------------------------------------


def test_resolve_store_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("HORDE_STORE", raising=False)
    default = f"sqlite:///{tmp_path / 'xdg' / 'horde' / 'runs.sqlite'}"
    assert resolve_store_url(None) == default
    assert default_store_path() == tmp_path / "xdg" / "horde" / "runs.sqlite"

    monkeypatch.setenv("HORDE_STORE", "postgres://u:p@db/h")
    assert resolve_store_url(None) == "postgresql+psycopg://u:p@db/h"
    # The flag beats the environment.
    assert resolve_store_url("postgresql://u@db/x") == "postgresql+psycopg://u@db/x"
    assert resolve_store_url("postgresql+psycopg://u@db/y") == "postgresql+psycopg://u@db/y"
    assert resolve_store_url("sqlite:////abs/runs.db") == "sqlite:////abs/runs.db"

    # A bare path is a SQLite file, made absolute.
    monkeypatch.chdir(tmp_path)
    assert resolve_store_url("rel/runs.sqlite") == f"sqlite:///{tmp_path / 'rel' / 'runs.sqlite'}"
    assert resolve_store_url("/abs/runs.sqlite") == "sqlite:////abs/runs.sqlite"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_store_url("~/r.sqlite") == f"sqlite:///{tmp_path / 'home' / 'r.sqlite'}"

    # Empty counts as unset.
    monkeypatch.setenv("HORDE_STORE", "")
    assert resolve_store_url("") == default
    # XDG_DATA_HOME must be absolute to count.
    monkeypatch.setenv("XDG_DATA_HOME", "relative")
    assert default_store_path() == tmp_path / "home" / ".local" / "share" / "horde" / "runs.sqlite"
    assert DEFAULT_STORE_PATH.name == "runs.sqlite"


def test_default_store_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("HORDE_STORE", raising=False)
    with Store.open() as store:
        new_run(store)
        assert str(tmp_path) in store.display_url
    assert (tmp_path / "horde" / "runs.sqlite").is_file()


def test_redact_url() -> None:
    assert redact_url("postgresql+psycopg://u:sekret@h:5/d") == "postgresql+psycopg://u:***@h:5/d"
    assert "sekret" not in redact_url("postgresql+psycopg://u@h/d?password=sekret&sslmode=require")
    assert redact_url("postgresql+psycopg://u@h/d") == "postgresql+psycopg://u@h/d"
    assert "sekret" not in redact_url("::not a url::://u:sekret@h")
    assert "se/kret" not in redact_url("postgresql+psycopg://u:se/kret@h/d")
    assert redact_url("sqlite:////tmp/a b/r.sqlite") == "sqlite:////tmp/a b/r.sqlite"
    with Store.open("sqlite:///:memory:") as store:
        assert store.display_url == "sqlite:///:memory:"


def test_processes_opening_a_new_store_at_once_all_get_it(tmp_path: Path) -> None:
    # A run and a dashboard (or a watcher) creating the same new SQLite store at the same
    # instant: switching it to WAL takes a lock SQLite does not wait for; the store retries.
    import threading

    failures: list[str] = []
    for trial in range(20):
        url = f"sqlite:///{tmp_path / f'runs-{trial}.sqlite'}"

        def open_it(url: str = url) -> None:
            try:
                with Store.open(url) as store:
                    store.list_runs()
            except Exception as error:  # noqa: BLE001 - any failure is the finding
                failures.append(repr(error))

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    assert failures == []


def test_a_store_this_user_may_only_read_is_read_and_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A teammate's store: readable, neither it nor its folder writable by this user. Root may
    # write anything, so the test tells the store what an ordinary user's access() would say;
    # the read-only open (mode=ro) then holds even for root. tests/test_cli.py runs `horde runs`
    # and `horde show` on such a store as a user that really may not write it.
    folder = tmp_path / "shared"
    folder.mkdir()
    url = f"sqlite:///{folder / 'runs.sqlite'}"
    with Store.open(url) as store:
        run_id = store.create_run(plan=make_plan(), plan_name="quickstart", parameters={}, tags={"build": "7"})
        store.add_snapshot(run_id, make_snapshot(1))
        store.add_snapshot(run_id, make_snapshot(2, final=True))
        store.finish_run(run_id, status="finished", summary={"requests": 3})
        written = store.snapshots(run_id)
    before = (folder / "runs.sqlite").read_bytes()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, **kw: False if mode & os.W_OK else real_access(path, mode, **kw)
    )
    with Store.open(url) as store:
        assert store.read_only
        assert [record.run_id for record in store.list_runs()] == [run_id]
        assert store.get_run("last").tags == {"build": "7"}
        assert store.snapshots(run_id) == written
        with pytest.raises(StoreUnavailable) as refused:
            store.create_run(plan=make_plan(), plan_name="quickstart", parameters={}, tags={})
    assert "readonly" in refused.value.message and "may only read the store" in (refused.value.hint or "")
    assert refused.value.exit_code == ExitCode.STORE_UNAVAILABLE
    assert (folder / "runs.sqlite").read_bytes() == before
