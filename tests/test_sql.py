"""The postgres transport against a real PostgreSQL (the conftest's initdb server): a weighted
query mix whose counts the database itself reports, errors counted by kind (a unique violation,
a bad statement, backends terminated mid-run, a server restarted mid-run: its own throwaway
server) while the run goes on, a pool keeping a transaction's connection across steps, and an
open model's achieved rate."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import _PG_SUPERUSER, _as_postgres_user, free_tcp_port
from horde.engine.run import Run, Snapshot
from postgres_cluster import _start, initdb, required_bindir
from horde.plan import plan_from_dict
from horde.results.summary import summarise

#: The seed's statement mix: 83 % select, 3 % insert, 11.6 % update, 1.6 % delete.
WEIGHTS = {"select": 83.0, "insert": 3.0, "update": 11.6, "delete": 1.6}


def libpq_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def run_to_end(plan: dict[str, Any], timeout_s: float = 30.0, during: Any = None) -> list[Snapshot]:
    snapshots: list[Snapshot] = []
    deadline = time.monotonic() + timeout_s
    with Run.start(plan_from_dict(plan), workers=1) as run:
        for snapshot in run:
            snapshots.append(snapshot)
            if during is not None:
                during(snapshot)
            assert time.monotonic() < deadline, "the run did not end in time"
    return snapshots


def totals(snapshots: list[Snapshot]) -> dict[str, dict[str, Any]]:
    by_step: dict[str, dict[str, Any]] = {}
    for snapshot in snapshots:
        for step in snapshot["steps"]:
            entry = by_step.setdefault(step["step"], {"requests": 0, "ok": 0, "errors": {}, "rows": 0})
            entry["requests"] += int(step["requests"])
            entry["ok"] += int(step["ok"])
            entry["rows"] += int(step.get("rows", 0))
            for kind, count in step["errors"].items():
                entry["errors"][kind] = entry["errors"].get(kind, 0) + int(count)
    return by_step


def plan_of(url: str, steps: list[dict[str, Any]], *, vus: int = 4, duration_s: float = 3.0) -> dict[str, Any]:
    return {
        "version": 1,
        "name": "sql",
        "target": {"base_url": libpq_url(url)},
        "scenarios": [
            {
                "name": "db",
                "steps": steps,
                "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": duration_s, "vus": vus}]},
            }
        ],
        "graceful_stop_s": 2,
    }


def table_counts(connection: psycopg.Connection[Any]) -> dict[str, tuple[int, int, int, int, int]]:
    rows = connection.execute(
        "SELECT relname, coalesce(idx_scan, 0), n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables"
    ).fetchall()
    return {row[0]: (row[1], row[2], row[3], row[4], row[5]) for row in rows}


def test_a_weighted_mix_is_what_the_database_counts(postgres_database: str) -> None:
    with psycopg.connect(libpq_url(postgres_database), autocommit=True) as connection:
        connection.execute("CREATE TABLE profile (id int PRIMARY KEY, name text NOT NULL)")
        connection.execute("INSERT INTO profile SELECT g, 'player ' || g FROM generate_series(1, 1000) g")
        connection.execute("CREATE TABLE player (id int PRIMARY KEY, score int NOT NULL) WITH (fillfactor = 70)")
        connection.execute("INSERT INTO player SELECT g, 0 FROM generate_series(1, 1000) g")
        connection.execute("CREATE TABLE event (id bigserial PRIMARY KEY, player_id int NOT NULL)")
        connection.execute("CREATE TABLE doomed (id bigint PRIMARY KEY)")
        connection.execute("INSERT INTO doomed SELECT g FROM generate_series(1, 200000) g")
        connection.execute("CREATE SEQUENCE doomed_next")
        connection.execute("ANALYZE")
        before = table_counts(connection)
    steps: list[dict[str, Any]] = [
        {
            "type": "choice",
            "branches": [
                {
                    "weight": WEIGHTS["select"],
                    "steps": [
                        {
                            "type": "sql",
                            "name": "select",
                            "mode": "prepared",
                            "query": "SELECT name FROM profile WHERE id = $1",
                            "params": ["{{ random_int(1, 1000) }}"],
                            "extract": [{"var": "name", "from": "column", "column": "name"}],
                            "checks": [{"type": "row_count", "equals": 1}],
                        }
                    ],
                },
                {
                    "weight": WEIGHTS["insert"],
                    "steps": [
                        {
                            "type": "sql",
                            "name": "insert",
                            "mode": "extended",
                            "query": "INSERT INTO event (player_id) VALUES ($1)",
                            "params": ["{{ vu }}"],
                            "checks": [{"type": "row_count", "equals": 1}],
                        }
                    ],
                },
                {
                    "weight": WEIGHTS["update"],
                    "steps": [
                        {
                            "type": "sql",
                            "name": "update",
                            "mode": "simple",
                            "query": "UPDATE player SET score = score + 1 WHERE id = $1",
                            "params": ["{{ random_int(1, 1000) }}"],
                            "checks": [{"type": "row_count", "equals": 1}],
                        }
                    ],
                },
                {
                    "weight": WEIGHTS["delete"],
                    "steps": [
                        {
                            "type": "sql",
                            "name": "delete",
                            "mode": "prepared",
                            "query": "DELETE FROM doomed WHERE id = (SELECT nextval('doomed_next'))",
                            "checks": [{"type": "row_count", "equals": 1}],
                        }
                    ],
                },
            ],
        }
    ]
    snapshots = run_to_end(plan_of(postgres_database, steps))
    found = totals(snapshots)
    for name in WEIGHTS:
        assert found[name]["errors"] == {}, found
        # Each statement returned or changed exactly one row (its check says so).
        assert found[name]["rows"] == found[name]["ok"] > 0, found
    summary = summarise(snapshots, run_id="sql", status="completed")
    assert summary["steps"]["select"]["rows"] == found["select"]["ok"] and summary["steps"]["select"]["rows_per_s"] > 0
    assert "rows" not in summary  # the run's totals count requests; rows belong to steps
    horde_counts = {name: found[name]["ok"] for name in WEIGHTS}
    # A backend flushes its statistics when it exits (the run's connections are closed by now).
    deadline = time.monotonic() + 10
    with psycopg.connect(libpq_url(postgres_database), autocommit=True) as connection:
        while True:
            after = table_counts(connection)
            database_counts = {
                "select": after["profile"][0] - before["profile"][0],
                "insert": after["event"][1] - before["event"][1],
                "update": after["player"][2] - before["player"][2],
                "delete": after["doomed"][4] - before["doomed"][4],
            }
            if database_counts == horde_counts or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        hot_updates = after["player"][3] - before["player"][3]
    assert database_counts == horde_counts
    total = sum(database_counts.values())
    assert total > 2000, f"too few statements for the shares to mean anything: {database_counts}"
    weight_total = sum(WEIGHTS.values())
    for name, weight in WEIGHTS.items():
        share = 100 * database_counts[name] / total
        assert abs(share - 100 * weight / weight_total) < 2.5, (name, share, database_counts)
    # score is in no index and the pages have room: most updates are HOT.
    assert hot_updates > 0.8 * database_counts["update"]


def test_sql_errors_and_dropped_connections_are_counted_by_kind(postgres_database: str) -> None:
    with psycopg.connect(libpq_url(postgres_database), autocommit=True) as connection:
        connection.execute("CREATE TABLE once (id int PRIMARY KEY)")
    steps: list[dict[str, Any]] = [
        {
            "type": "sql",
            "name": "read",
            "query": "SELECT $1::int AS n",
            "params": ["{{ vu }}"],
            "checks": [{"type": "row_count", "equals": 1}],
        },
        {"type": "sql", "name": "duplicate", "query": "INSERT INTO once VALUES (1)"},
        {"type": "sql", "name": "bad", "query": "SELECT * FROM no_such_table"},
        {
            "type": "sql",
            "name": "transfer",
            "statements": [{"query": "SELECT 1"}, {"query": "UPDATE once SET id = id WHERE id = 1"}],
        },
        {"type": "think", "think_time": {"type": "constant", "duration_ms": 5}},
    ]
    terminated = threading.Event()

    def terminate_backends(snapshot: Snapshot) -> None:
        if snapshot["second"] == 2 and not terminated.is_set():
            terminated.set()
            with psycopg.connect(libpq_url(postgres_database), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'horde'")

    snapshots = run_to_end(plan_of(postgres_database, steps, vus=3, duration_s=4.0), during=terminate_backends)
    found = totals(snapshots)
    assert terminated.is_set()
    assert found["duplicate"]["errors"].get("sql_unique_violation", 0) >= found["duplicate"]["requests"] - 1 - 3
    assert found["bad"]["errors"].get("sql_other", 0) > 0
    dropped = sum(entry["errors"].get("sql_connection_failure", 0) for entry in found.values())
    assert 1 <= dropped <= 3, found
    # The run went on: reads succeeded after the backends were terminated.
    late_ok = sum(
        int(step["ok"])
        for snapshot in snapshots
        if snapshot["second"] >= 3
        for step in snapshot["steps"]
        if step["step"] == "read"
    )
    assert late_ok > 0
    assert found["transfer"]["ok"] > 0


def test_a_pool_keeps_a_transaction_spanning_steps_on_one_connection(postgres_database: str) -> None:
    with psycopg.connect(libpq_url(postgres_database), autocommit=True) as connection:
        connection.execute("CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL)")
        connection.execute("INSERT INTO account SELECT g, 100 FROM generate_series(1, 20) g")
    # A transfer in four steps with a think between them, while 6 VUs share 2 connections: a
    # step landing on another VU's connection would see another transaction id (or none). Debits
    # lock rows 1-10 and credits 11-20, always in that order: no deadlock (a deadlock's victim
    # stopped by the run's end before its COMMIT would hand its aborted transaction back to the
    # pool, which the next BEGIN then fails on; the engine should drop such a connection).
    steps: list[dict[str, Any]] = [
        {"type": "sql", "name": "begin", "query": "BEGIN"},
        {
            "type": "sql",
            "name": "debit",
            "query": "UPDATE account SET balance = balance - 1 WHERE id = $1 RETURNING txid_current() AS xid",
            "params": ["{{ random_int(1, 10) }}"],
            "extract": [{"var": "xid", "from": "column", "column": "xid"}],
            "checks": [{"type": "row_count", "equals": 1}],
        },
        {"type": "think", "think_time": {"type": "constant", "duration_ms": 5}},
        {
            "type": "sql",
            "name": "credit",
            "query": "UPDATE account SET balance = balance + 1 WHERE id = $1 AND txid_current() = $2::bigint",
            "params": ["{{ random_int(11, 20) }}", "{{ xid }}"],
            "checks": [{"type": "row_count", "equals": 1}],
        },
        {"type": "sql", "name": "commit", "query": "COMMIT"},
    ]
    plan = plan_of(postgres_database, steps, vus=6, duration_s=3.0)
    plan["target"]["connections"] = {"pool": 2}
    seen: list[int] = []

    def count_connections(snapshot: Snapshot) -> None:
        with psycopg.connect(libpq_url(postgres_database), autocommit=True) as admin:
            row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'horde'").fetchone()
            seen.append(int(row[0]) if row else 0)

    found = totals(run_to_end(plan, during=count_connections))
    # The run's end stops VUs between steps, so a transaction can be left open (its connection is
    # then closed, never lent again); a step of another VU waiting on its row locks meanwhile is
    # cut at the grace's end.
    cut = sum(found[name]["errors"].pop("cut", 0) for name in found)
    assert cut <= 6, found
    for name in ("begin", "debit", "credit", "commit"):
        assert found[name]["errors"] == {}, found
    assert found["credit"]["ok"] > 100, found
    assert max(seen) <= 2, seen
    with psycopg.connect(libpq_url(postgres_database), autocommit=True) as connection:
        assert connection.execute("SELECT sum(balance) FROM account").fetchone() == (2000,)


def test_an_open_model_keeps_its_rate_against_postgres(postgres_database: str) -> None:
    rate, duration_s = 200, 4
    plan = plan_of(
        postgres_database,
        [
            {
                "type": "sql",
                "name": "tick",
                "mode": "prepared",
                "query": "SELECT $1::int AS n",
                "params": ["{{ vu }}"],
                "checks": [{"type": "row_count", "equals": 1}],
            }
        ],
    )
    plan["scenarios"][0]["workload"] = {
        "type": "open",
        "start_rate_per_s": rate,
        "max_vus": 20,
        "stages": [{"duration_s": duration_s, "rate_per_s": rate}],
    }
    snapshots = run_to_end(plan)
    found = totals(snapshots)
    assert found["tick"]["errors"] == {}, found
    assert abs(found["tick"]["ok"] - rate * duration_s) <= 0.02 * rate * duration_s, found
    per_second = [
        sum(int(step["ok"]) for step in snapshot["steps"])
        for snapshot in snapshots
        if 1 <= snapshot["second"] < duration_s
    ]
    assert per_second and all(abs(count - rate) <= 0.05 * rate for count in per_second), per_second


@pytest.fixture
def restartable_server() -> Iterator[tuple[str, list[str]]]:
    """A throwaway server of this test's own (the session's is shared): its URL and the
    ``pg_ctl restart`` command line."""
    bindir = required_bindir()
    prefix = _as_postgres_user()
    workdir = Path(tempfile.mkdtemp(prefix="horde-pg-restart-"))
    datadir = workdir / "data"
    try:
        initdb(prefix, bindir, workdir, datadir)
        port = free_tcp_port()
        _start(prefix, bindir, datadir, workdir, port, ["fsync=off", "full_page_writes=off", "max_connections=20"])
        # pg_ctl restart reuses the options the server was started with (postmaster.opts).
        restart = [
            *prefix,
            str(bindir / "pg_ctl"),
            "--pgdata",
            str(datadir),
            "--log",
            str(workdir / "restart.log"),
            "--mode",
            "fast",
            "--wait",
            "--timeout",
            "60",
            "restart",
        ]
        yield f"postgresql://{_PG_SUPERUSER}@127.0.0.1:{port}/postgres", restart
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "--pgdata", str(datadir), "--mode", "immediate", "--wait", "stop"],
            cwd=workdir,
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_server_restart_mid_run_is_counted_and_the_run_goes_on(restartable_server: tuple[str, list[str]]) -> None:
    url, restart = restartable_server
    steps: list[dict[str, Any]] = [
        {
            "type": "sql",
            "name": "read",
            "query": "SELECT $1::int AS n",
            "params": ["{{ vu }}"],
            "checks": [{"type": "row_count", "equals": 1}],
        },
        {"type": "think", "think_time": {"type": "constant", "duration_ms": 5}},
    ]
    restarted: list[subprocess.CompletedProcess[str]] = []

    def restart_server() -> None:
        restarted.append(subprocess.run(restart, capture_output=True, text=True, timeout=60, check=False))

    # The restart on a thread of its own: the run's seconds keep coming while pg_ctl waits.
    restarter = threading.Thread(target=restart_server)

    def restart_at_second_2(snapshot: Snapshot) -> None:
        if snapshot["second"] == 2 and not restarter.is_alive() and not restarted:
            restarter.start()

    snapshots = run_to_end(plan_of(url, steps, vus=3, duration_s=7.0), during=restart_at_second_2)
    restarter.join(timeout=60)
    assert restarted and restarted[0].returncode == 0, restarted
    found = totals(snapshots)
    errors = found["read"]["errors"]
    # Each VU's connection was dropped by the shutdown (sql_connection_failure, as are connects
    # the shutting-down server turned away), and connecting was refused while it was down.
    assert set(errors) <= {"sql_connection_failure", "refused"}, errors
    assert errors["sql_connection_failure"] >= 3, errors
    by_second = {
        snapshot["second"]: sum(int(step["ok"]) for step in snapshot["steps"] if step["step"] == "read")
        for snapshot in snapshots
    }
    assert by_second.get(1, 0) > 0
    # Reads succeeded again at the end, on new connections to the restarted server.
    assert by_second.get(6, 0) > 0, by_second


def test_try_shows_each_statement_its_parameters_rows_and_sqlstate(postgres_database: str, tmp_path: Path) -> None:
    from conftest import HordeCli

    with psycopg.connect(libpq_url(postgres_database), autocommit=True) as connection:
        connection.execute("CREATE TABLE once (id int PRIMARY KEY, who text)")
        connection.execute("INSERT INTO once VALUES (1, 'first')")
    steps: list[dict[str, Any]] = [
        {
            "type": "sql",
            "name": "read",
            "query": "SELECT who FROM once WHERE id = $1",
            "params": ["1"],
            "extract": [{"var": "who", "from": "column", "column": "who"}],
            "checks": [{"type": "row_count", "equals": 1}],
        },
        {"type": "sql", "name": "duplicate", "query": "INSERT INTO once VALUES ($1, $2)", "params": ["1", "{{ who }}"]},
        # The server's message quotes the value: a credential's is redacted there too.
        {"type": "sql", "name": "cast", "query": "SELECT $1::int", "params": ["{{ params.db_password }}"]},
    ]
    horde_cli = HordeCli(tmp_path)
    plan = tmp_path / "sql.json"
    plan.write_text(
        __import__("json").dumps(
            {**plan_of(postgres_database, steps, vus=1), "parameters": {"db_password": "pw-s3cr3t-1"}}
        )
    )
    done = horde_cli.run("try", str(plan))
    lines = done.stdout.splitlines()
    assert done.returncode == 8, done.stdout + done.stderr
    assert "> SELECT who FROM once WHERE id = $1" in lines and '>   $1 = "1"' in lines
    assert "< 1 row(s); first row: who = \"first\"" in lines, done.stdout
    assert "  who = first" in lines and "  ✓ row_count == 1" in lines
    assert '>   $2 = "first"' in lines
    assert any(line.startswith("  sql_unique_violation in ") and "SQLSTATE 23505" in line for line in lines), (
        done.stdout
    )
    assert any(line.startswith("  sql_other in ") and "SQLSTATE 22P02" in line for line in lines), done.stdout
    assert "pw-s3cr3t-1" not in done.stdout + done.stderr and '>   $1 = "<redacted>"' in lines


@pytest.fixture
def password_server() -> Iterator[str]:
    """A throwaway server of this test's own whose pg_hba.conf asks three roles for their
    passwords by SCRAM-SHA-256, MD5 and in clear text (trust for the superuser that makes them):
    its superuser URL."""
    bindir = required_bindir()
    prefix = _as_postgres_user()
    workdir = Path(tempfile.mkdtemp(prefix="horde-pg-login-"))
    datadir = workdir / "data"
    try:
        initdb(prefix, bindir, workdir, datadir)
        hba = datadir / "pg_hba.conf"
        hba.write_text(
            "host all scram_user 127.0.0.1/32 scram-sha-256\nhost all md5_user 127.0.0.1/32 md5\n"
            "host all clear_user 127.0.0.1/32 password\n" + hba.read_text()
        )
        port = free_tcp_port()
        _start(prefix, bindir, datadir, workdir, port, ["fsync=off", "max_connections=20"])
        url = f"postgresql://{_PG_SUPERUSER}@127.0.0.1:{port}/postgres"
        with psycopg.connect(url, autocommit=True) as connection:
            for role, encryption in (
                ("scram_user", "scram-sha-256"),
                ("md5_user", "md5"),
                ("clear_user", "scram-sha-256"),
            ):
                connection.execute(f"SET password_encryption = '{encryption}'")
                connection.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw-{role}'")
        yield url
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "--pgdata", str(datadir), "--mode", "immediate", "--wait", "stop"],
            cwd=workdir,
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(workdir, ignore_errors=True)


def test_logins_by_scram_md5_and_clear_password_and_a_wrong_one_counted(
    password_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[dict[str, Any]] = [
        {
            "type": "sql",
            "name": "who",
            "mode": "prepared",
            "query": "SELECT current_user::text AS who",
            "checks": [{"type": "row_count", "equals": 1}],
        }
    ]
    for role in ("scram_user", "md5_user", "clear_user"):
        monkeypatch.setenv("HORDE_TEST_PGPASSWORD", f"pw-{role}")
        plan = plan_of(
            password_server.replace(f"{_PG_SUPERUSER}@", f"{role}@"),
            [{**steps[0], "checks": [{"type": "column", "column": "who", "equals": role}]}],
            vus=2,
            duration_s=1.0,
        )
        plan["target"]["password_env"] = "HORDE_TEST_PGPASSWORD"
        found = totals(run_to_end(plan))
        assert found["who"]["errors"] == {} and found["who"]["ok"] > 10, (role, found)
    monkeypatch.setenv("HORDE_TEST_PGPASSWORD", "not-the-password")
    plan = plan_of(password_server.replace(f"{_PG_SUPERUSER}@", "scram_user@"), steps, vus=1, duration_s=1.0)
    plan["target"]["password_env"] = "HORDE_TEST_PGPASSWORD"
    snapshots = run_to_end(plan)
    found = totals(snapshots)
    # SQLSTATE 28P01 (invalid_password): a login refused is a failed connect, no session opened.
    assert found["who"]["ok"] == 0 and set(found["who"]["errors"]) == {"sql_login_failed"}, found
    assert sum(snapshot["connections_opened"] for snapshot in snapshots) == 0
    details = [
        detail["message"]
        for snapshot in snapshots
        for step in snapshot["steps"]
        for detail in step.get("error_details", [])
    ]
    assert details and all(
        message.startswith("login refused: SQLSTATE 28P01 (invalid_password): password authentication failed")
        for message in details
    ), details


def test_a_wrong_password_ends_the_run_as_no_connection_saying_why(password_server: str, tmp_path: Path) -> None:
    """The README's exit 7: not one connection opened, and why (the server's SQLSTATE, named)."""
    from conftest import HordeCli

    horde_cli = HordeCli(tmp_path)
    horde_cli.env["HORDE_TEST_PGPASSWORD"] = "not-the-password"
    plan = plan_of(
        password_server.replace(f"{_PG_SUPERUSER}@", "md5_user@"),
        [{"type": "sql", "name": "who", "query": "SELECT current_user"}],
        vus=2,
        duration_s=1.0,
    )
    plan["target"]["password_env"] = "HORDE_TEST_PGPASSWORD"
    path = tmp_path / "wrong-password.json"
    path.write_text(__import__("json").dumps(plan))
    summary_path = tmp_path / "summary.json"
    done = horde_cli.run("run", str(path), "--summary-json", str(summary_path))
    assert done.returncode == 7, done.stdout + done.stderr
    assert "no connection could be opened" in done.stdout, done.stdout
    assert "SQLSTATE 28P01 (invalid_password)" in done.stdout, done.stdout
    summary = __import__("json").loads(summary_path.read_text())
    assert summary["connections_opened"] == 0 and set(summary["errors_by_kind"]) == {"sql_login_failed"}, summary


def test_a_statement_past_its_timeout_is_cancelled_on_the_server(postgres_database: str) -> None:
    """``request_timeout_ms`` drops the connection and asks the server to cancel the statement
    (a CancelRequest with the backend's key): no backend is left running it."""
    marker = "horde_cancel_probe"
    steps: list[dict[str, Any]] = [{"type": "sql", "name": "sleep", "query": f"SELECT pg_sleep(5) AS {marker}"}]
    plan = plan_of(postgres_database, steps, vus=3, duration_s=1.0)
    plan["target"]["request_timeout_ms"] = 200
    snapshots = run_to_end(plan)
    found = totals(snapshots)
    assert found["sleep"]["ok"] == 0 and set(found["sleep"]["errors"]) == {"timeout"}, found
    assert found["sleep"]["errors"]["timeout"] >= 6, found
    query = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND state = 'active' AND pid <> pg_backend_pid()"
    with psycopg.connect(libpq_url(postgres_database), autocommit=True) as connection:
        # The cancels go out as each statement times out; the last ones a moment after the run.
        deadline = time.monotonic() + 1.0
        running = connection.execute(query, (f"%{marker}%",)).fetchone()[0]  # type: ignore[index]
        while running and time.monotonic() < deadline:
            time.sleep(0.05)
            running = connection.execute(query, (f"%{marker}%",)).fetchone()[0]  # type: ignore[index]
    assert running == 0, f"{running} backends still run pg_sleep (5 s each) after the run"
