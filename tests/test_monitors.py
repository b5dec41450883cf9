"""Monitors against real parts: this machine's /proc, a real node_exporter (Debian package
prometheus-node-exporter) scraped on loopback, a real PostgreSQL primary with a streaming standby
(tests/postgres_cluster.py) under an update-heavy load; figures checked against what each part
reports itself, and the diagnosis firing for the seed's hot_standby_feedback case."""

from __future__ import annotations

import json
import random
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest

from conftest import HordeCli, free_tcp_port
from horde.monitors import Diagnosis, monitors_block
from horde.monitors.host import HostSource
from horde.monitors.postgres import PostgresSource
from horde.monitors.prometheus import PrometheusSource
from horde.plan import HostMonitor, PostgresMonitor, PrometheusMonitor
from horde.plan.monitor_figures import HOST_FIGURES, NODE_EXPORTER_FIGURES, POSTGRES_FIGURES, figure_matches
from horde.store import MonitorSample, Store
from node_exporter import node_exporter as running_node_exporter
from node_exporter import start_node_exporter, stop
from postgres_cluster import PostgresPair, postgres_pair


@pytest.fixture(scope="module")
def node_exporter() -> Iterator[str]:
    with running_node_exporter() as url:
        yield url


def _send_over_loopback(size: int) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        received = 0

        def receive() -> None:
            nonlocal received
            connection, _ = server.accept()
            with connection:
                while chunk := connection.recv(1 << 16):
                    received += len(chunk)

        thread = threading.Thread(target=receive)
        thread.start()
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"x" * size)
        thread.join(timeout=10)
        assert received == size


def test_a_node_exporter_scrape_gives_this_machines_host_figures(node_exporter: str) -> None:
    monitor = PrometheusMonitor(
        name="node",
        url=node_exporter,
        node_exporter=True,
        series=[
            {"name": "node_network_receive_bytes_total", "labels": {"device": "lo"}},
            {"name": "node_cpu_seconds_total", "labels": {"mode": "~idle|user"}, "sum": True},
            {"name": "node_filefd_maximum"},
        ],
    )
    remote, local = PrometheusSource(monitor), HostSource(HostMonitor(name="gen"))
    remote.open()
    local.open()
    first = time.monotonic()
    remote.read(first), local.read(first)
    _send_over_loopback(5_000_000)
    second = time.monotonic()
    scraped, read = remote.read(second), local.read(second)
    # Figures node_exporter reads from the same /proc files: equal.
    for figure in ("memory.total_bytes", "cpu.count", "files.max"):
        assert scraped[figure] == read[figure], figure
    # A counter becomes its rate: the 5 MB sent over loopback, and little else, in the interval.
    received = scraped["node_network_receive_bytes_total"] * (second - first)
    assert 5_000_000 <= received <= 7_000_000
    assert 5_000_000 <= read["net.lo.rx_bytes_per_s"] * (second - first) <= 7_000_000
    assert scraped["node_filefd_maximum"] == read["files.max"]  # a gauge stays its value
    assert 0 <= scraped["cpu.busy_percent"] <= 100 and "node_cpu_seconds_total" in scraped
    assert scraped["tcp.time_wait"] >= 0 and read["tcp.time_wait"] >= 0
    assert_listed(HOST_FIGURES, read)
    assert_listed(
        NODE_EXPORTER_FIGURES,
        scraped,
        kept=("node_network_receive_bytes_total", "node_cpu_seconds_total", "node_filefd_maximum"),
    )
    assert "tcp.close_wait" in read and "tcp.close_wait" not in scraped  # node_exporter gives two states


def assert_listed(figures: tuple[str, ...], values: dict[str, float], kept: tuple[str, ...] = ()) -> None:
    """Every figure a real reading gave is in its source's list (the list the plan check uses)."""
    unlisted = [
        key
        for key in values
        if not any(figure_matches(figure, key) for figure in figures) and not key.startswith(kept or ("\0",))
    ]
    assert not unlisted


class _Exporter(BaseHTTPRequestHandler):
    body = ""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        data = type(self).body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_counters_become_rates_across_a_reset_and_gauges_stay_values() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        source = PrometheusSource(
            PrometheusMonitor(
                name="app",
                url=url,
                series=[{"name": "requests_total", "labels": {"code": "~2.."}}, {"name": "queue_depth"}],
            )
        )
        readings = []
        for instant, (count, depth) in enumerate([(100, 7), (150, 9), (20, 3)]):
            _Exporter.body = (
                f'# TYPE requests_total counter\nrequests_total{{code="200"}} {count}\n'
                f'requests_total{{code="500"}} 999\n# TYPE queue_depth gauge\nqueue_depth {depth}\n'
            )
            readings.append(source.read(float(instant) * 2))
        assert readings[0] == {"queue_depth": 7.0}  # a counter's first reading is only its base
        assert readings[1] == {"requests_total.200": 25.0, "queue_depth": 9.0}
        assert readings[2] == {"requests_total.200": 10.0, "queue_depth": 3.0}  # reset: 20 counted since
    finally:
        server.shutdown()


def _leave_time_waits(server: socket.socket, count: int) -> None:
    """``count`` loopback connections to ``server`` opened and closed, each leaving a time-wait
    socket (for the kernel's 60 s)."""
    port = server.getsockname()[1]
    for _ in range(count):
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        client.close()  # the side that closes first keeps the time-wait
        accepted.close()


def test_time_wait_sockets_are_counted_as_the_kernel_counts_them() -> None:
    source = HostSource(HostMonitor(name="gen"))
    before = source.read(time.monotonic())["tcp.time_wait"]
    with socket.create_server(("127.0.0.1", 0)) as server:
        _leave_time_waits(server, 200)
        after = source.read(time.monotonic())["tcp.time_wait"]
        kernel = int(Path("/proc/net/sockstat").read_text().split("tw ")[1].split()[0])
    assert after >= before + 150
    assert abs(after - kernel) <= 20


def test_time_wait_sockets_piling_up_are_diagnosed_from_real_sockets() -> None:
    monitor = HostMonitor(
        name="gen", diagnosis={"time_wait_window_s": 2, "time_wait_growth_per_s": 100, "time_wait_min": 300}
    )
    source, diagnosis = HostSource(monitor), Diagnosis([monitor])
    source.read(time.monotonic())
    counts = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        for second in (1, 2, 3):
            if second > 1:
                _leave_time_waits(server, 400)
            values = source.read(time.monotonic())
            counts.append(values["tcp.time_wait"])
            found = diagnosis.observe(MonitorSample("gen", second, float(second), time.time(), values))
            assert bool(found) == (second == 3)  # once the window's 2 s are seen, not before
    (finding,) = diagnosis.findings
    assert (finding.rule, finding.second, finding.metric) == ("time_wait", 1, "tcp.time_wait")
    growth = (counts[2] - counts[0]) / 2
    assert growth >= 300  # 800 new time-wait sockets over the window's 2 s (others come and go)
    assert finding.message == (
        f"gen: time-wait sockets piling up: from {counts[0]:,.0f} to {counts[2]:,.0f} in 2 s "
        f"(+{growth:,.0f}/s) from second 1"
    )


def test_an_interface_past_its_link_speed_is_diagnosed_saturated() -> None:
    """Real loopback traffic judged against a link of 8 Mbit/s (1 MB/s): 2 MB each half second
    is 4 MB/s, four times the link, for the rule's 2 s."""
    monitor = HostMonitor(name="gen", interfaces=["lo"], interval_s=1, diagnosis={"link_speed_mbps": 8, "nic_for_s": 2})
    source, diagnosis = HostSource(monitor), Diagnosis([monitor])
    start = time.monotonic()
    source.read(start)
    readings = []
    for second in (1, 2):
        _send_over_loopback(2_000_000)
        time.sleep(max(0.0, start + second * 0.5 - time.monotonic()))
        values = source.read(time.monotonic())
        readings.append(values)
        diagnosis.observe(MonitorSample("gen", second, float(second), time.time(), values))
    for values in readings:
        busiest = max(values["net.lo.rx_bytes_per_s"], values["net.lo.tx_bytes_per_s"])
        assert values["net.lo.link_mbps"] == 8
        assert values["net.lo.link_percent"] == pytest.approx(100 * busiest * 8 / 1e6 / 8)
        assert values["net.lo.link_percent"] > 300
    (finding,) = diagnosis.findings
    assert (finding.rule, finding.subject, finding.second, finding.metric) == (
        "nic_saturated",
        "lo",
        1,
        "net.lo.link_percent",
    )
    worst = max(values["net.lo.link_percent"] for values in readings)
    assert finding.message == (
        f"gen: interface lo saturated: above 90 % of its 8 Mbit/s for 2 s from second 1 (up to {worst:.0f} %)"
    )


def test_sockets_are_counted_by_state_as_proc_net_tcp_lists_them() -> None:
    """The netlink count (established and time-wait from the kernel's own counters, the rest
    from a sock_diag dump) equals /proc/net/tcp's lines by state, fin-wait-2 mini-sockets included."""
    netlink, from_files = HostSource(HostMonitor(name="gen")), HostSource(HostMonitor(name="gen"))
    from_files._netlink = False
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        held = []
        for number in range(300):
            client = socket.create_connection(("127.0.0.1", port))
            accepted, _ = server.accept()
            held += [client, accepted]
            if number % 3 == 0:
                client.close()  # the client waits in fin-wait-2 (a mini-socket), the server in close-wait
            elif number % 3 == 1:
                client.close()
                accepted.close()  # the client ends in time-wait
        time.sleep(0.3)
        for _ in range(10):  # other processes' sockets come and go: the same count twice running
            first, listed, again = netlink._tcp(), from_files._tcp(), netlink._tcp()
            if first == again == listed:
                break
        assert first == listed == again
        assert listed["tcp.close_wait"] >= 100 and listed["tcp.fin_wait2"] >= 100 and listed["tcp.established"] >= 200
        assert netlink._netlink  # sock_diag was allowed: the counts came from it
        for sock in held:
            sock.close()


@pytest.fixture(scope="module")
def pair() -> Iterator[PostgresPair]:
    yield from postgres_pair()


def _replayed(pair: PostgresPair, lsn: str) -> None:
    """Waits until the standby has replayed the primary's WAL up to ``lsn`` (a busy machine may
    keep it a moment behind): what the test then reads there exists."""
    deadline = time.monotonic() + 30
    with psycopg.connect(pair.standby, autocommit=True) as standby:
        while standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone() != (True,):
            assert time.monotonic() < deadline, f"the standby did not replay up to {lsn}"
            time.sleep(0.02)


def test_a_primary_and_its_standby_under_updates_with_a_long_standby_transaction(pair: PostgresPair) -> None:
    with psycopg.connect(pair.primary, autocommit=True) as primary:
        primary.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        primary.execute("CREATE TABLE items (id int PRIMARY KEY, hits int NOT NULL, score int NOT NULL)")
        primary.execute("CREATE INDEX items_score ON items (score)")
        primary.execute("INSERT INTO items SELECT i, 0, 0 FROM generate_series(1, 2000) i")
        primary.execute("SELECT pg_stat_statements_reset()")
        created = primary.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    _replayed(pair, str(created[0]) if created else "0/0")
    monitor = PostgresMonitor(
        name="pg",
        dsn=pair.primary,
        diagnosis={
            "xmin_age_limit": 300,
            "xmin_for_s": 3,
            "dead_tuples_min": 500,
            "dead_tuples_growth_per_s": 20,
            "dead_tuples_window_s": 4,
            "lag_window_s": 4,
            "lag_min_bytes": 50_000,
        },
    )
    source = PostgresSource(monitor)
    source.open()
    # The standby: a long transaction (its snapshot is what hot_standby_feedback reports), and
    # replay paused, so the lag can only grow while the primary writes.
    # The standby has the extension in its replicated catalogue, not its library loaded: its
    # statement mix comes from the tuple counters, and each reading still succeeds.
    standby_source = PostgresSource(PostgresMonitor(name="standby", dsn=pair.standby))
    standby_source.open()
    on_standby = standby_source.read(time.monotonic())
    assert on_standby["statements.from_pg_stat_statements"] == 0.0 and on_standby["in_recovery"] == 1.0
    assert_listed(POSTGRES_FIGURES, on_standby)
    standby_source.close()
    standby = psycopg.connect(pair.standby, autocommit=True)
    standby.execute("SELECT pg_wal_replay_pause()")
    reader = psycopg.connect(pair.standby)
    reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    reader.execute("SELECT count(*) FROM items").fetchone()
    updates = 0
    stop = threading.Event()

    def load() -> None:
        nonlocal updates
        chance = random.Random(7)
        with psycopg.connect(pair.primary, autocommit=True) as connection:
            while not stop.is_set():
                row = chance.randint(1, 2000)
                # Half touch an indexed column (no HOT update possible), half not.
                column = "score" if chance.random() < 0.5 else "hits"
                connection.execute(f"UPDATE items SET {column} = {column} + 1 WHERE id = %s", (row,))
                updates += 1

    diagnosis = Diagnosis([monitor])
    samples: list[MonitorSample] = []
    start = time.monotonic()
    source.read(start)
    worker = threading.Thread(target=load)
    worker.start()
    try:
        for second in range(1, 11):
            time.sleep(max(0.0, start + second - time.monotonic()))
            now = time.monotonic()
            sample = MonitorSample("pg", second, now - start, time.time(), source.read(now))
            samples.append(sample)
            diagnosis.observe(sample)
    finally:
        stop.set()
        worker.join(timeout=10)
    time.sleep(1.2)  # PostgreSQL publishes a backend's statistics at most once a second
    now = time.monotonic()
    last = source.read(now)
    with psycopg.connect(pair.primary, autocommit=True) as primary:
        dead, hot, updated = primary.execute(
            "SELECT n_dead_tup, n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'items'"
        ).fetchone()
        standby_name, xmin_age, lag_bytes = primary.execute(
            "SELECT application_name, age(backend_xmin), pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) "
            "FROM pg_stat_replication"
        ).fetchone()
        update_calls = primary.execute(
            "SELECT sum(calls) FROM pg_stat_statements WHERE query ILIKE 'UPDATE items%'"
        ).fetchone()[0]
    reader.close()
    standby.execute("SELECT pg_wal_replay_resume()")
    standby.close()
    source.close()

    assert updates > 200, "the load did too little to judge anything"
    assert_listed(POSTGRES_FIGURES, last)
    # Figures as PostgreSQL reports them at the same moment.
    assert last["tables.public.items.dead_tuples"] == dead > 500
    assert last["replication." + standby_name.replace(" ", "_") + ".xmin_age"] == pytest.approx(xmin_age, abs=5)
    assert last["replication_lag_bytes"] == pytest.approx(float(lag_bytes), abs=64_000) and lag_bytes > 50_000
    assert last["standby_xmin_age"] >= 300 and last["statements.from_pg_stat_statements"] == 1.0
    # Rates add up to the counts: the statement mix's updates over the run are the updates sent.
    intervals = (
        [samples[0].elapsed_s]
        + [b.elapsed_s - a.elapsed_s for a, b in zip(samples, samples[1:])]
        + [now - start - samples[-1].elapsed_s]
    )
    counted = sum(
        values.get("statements.update_per_s", 0.0) * interval
        for values, interval in zip([s.values or {} for s in samples] + [last], intervals)
    )
    assert counted == pytest.approx(float(update_calls), rel=0.01) and update_calls == updates
    assert 0 < last.get("hot_update_percent", 50) <= 100 and 0 < hot < updated
    assert all(0 <= (s.values or {}).get("cache_hit_percent", 100) <= 100 for s in samples)
    # Each hit share comes with the blocks it is a share of, which weigh it over the run.
    assert all("blocks.accessed_per_s" in (s.values or {}) for s in samples if "cache_hit_percent" in (s.values or {}))
    # The diagnosis: the seed's hot_standby_feedback case, dead tuples, and a lag that only grows.
    rules = {finding.rule: finding for finding in diagnosis.findings}
    assert {"standby_feedback", "dead_tuples", "replication_lag"} <= set(rules), [f.message for f in diagnosis.findings]
    assert (
        "holds back vacuum" in rules["standby_feedback"].message and "from second" in rules["standby_feedback"].message
    )
    assert rules["dead_tuples"].subject == "public.items"


_DATABASE_COUNTERS = (
    "SELECT xact_commit + xact_rollback, xact_rollback, tup_fetched, temp_bytes, deadlocks "
    "FROM pg_stat_database WHERE datname = 'figures'"
)


def test_postgres_figures_add_up_to_what_postgresql_counts(pair: PostgresPair) -> None:
    """A known load on a database of its own (selects, inserts, updates, deletes, a sort that
    spills, a lock waited on, a deadlock): the monitor's figures over the readings against
    PostgreSQL's own counters, read from another database so that reading them counts nowhere."""
    observer = psycopg.connect(pair.primary, autocommit=True)
    # An autovacuum worker visits every database each second (the pair's naptime) and counts its
    # own transactions there, between any two readings: the server's autovacuum is off meanwhile.
    observer.execute("ALTER SYSTEM SET autovacuum = off")
    observer.execute("SELECT pg_reload_conf()")
    try:
        _figures_add_up(pair, observer)
    finally:
        observer.execute("ALTER SYSTEM RESET autovacuum")
        observer.execute("SELECT pg_reload_conf()")
        observer.close()


def _figures_add_up(pair: PostgresPair, observer: psycopg.Connection[tuple[object, ...]]) -> None:
    def connected(count: int) -> None:
        """Waits until ``count`` connections are left on the database. A backend publishes what
        it counted as it exits, before it leaves pg_stat_activity: what the ones that closed
        did is then counted."""
        deadline = time.monotonic() + 10
        while observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = 'figures' AND backend_type = 'client backend'"
        ).fetchone() != (count,):
            assert time.monotonic() < deadline, "connections to the database did not end"
            time.sleep(0.02)

    def autovacuum_stopped() -> bool:
        # A new backend reads the reloaded setting; the observer's own may not have yet.
        with psycopg.connect(pair.primary, autocommit=True) as fresh:
            setting = fresh.execute("SHOW autovacuum").fetchone()
        workers = observer.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")
        return setting == ("off",) and workers.fetchone() == (0,)

    deadline = time.monotonic() + 10
    while not autovacuum_stopped():
        assert time.monotonic() < deadline, "autovacuum did not stop"
        time.sleep(0.05)
    observer.execute("CREATE DATABASE figures")
    dsn = pair.dsn(pair.primary_port, "figures")
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("CREATE EXTENSION pg_stat_statements")
        # Not vacuumed nor analysed by autovacuum meanwhile: a worker's own transactions would count.
        setup.execute(
            "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL) WITH (autovacuum_enabled = off)"
        )
        setup.execute("INSERT INTO accounts SELECT i, 100 FROM generate_series(1, 1000) i")
    connected(0)
    source = PostgresSource(PostgresMonitor(name="pg", dsn=dsn))
    source.open()
    readings: list[tuple[float, dict[str, float]]] = []

    def published() -> None:
        # A backend publishes its statistics at most once a second: the monitor's connection is
        # asked to publish at once, so what PostgreSQL counts next holds all the monitor did.
        assert source._connection is not None
        source._connection.execute("SELECT pg_stat_force_next_flush()")

    def read() -> dict[str, float]:
        now = time.monotonic()
        readings.append((now, source.read(now)))
        published()
        return readings[-1][1]

    source.read(time.monotonic())  # its caches warmed: each reading then fetches as many catalogue rows
    published()
    read()
    base = observer.execute(_DATABASE_COUNTERS).fetchone()
    sent = {"select": 0, "insert": 0, "update": 0, "delete": 0}
    chance = random.Random(11)
    with psycopg.connect(dsn, autocommit=True) as load:
        for number in range(1, 1201):
            verb = chance.choices(list(sent), weights=[50, 20, 20, 10])[0]
            if verb == "select":
                load.execute("SELECT balance FROM accounts WHERE id = %s", (chance.randint(1, 1000),)).fetchone()
            elif verb == "insert":
                load.execute("INSERT INTO accounts VALUES (%s, 0)", (1000 + number,))
            elif verb == "update":
                load.execute("UPDATE accounts SET balance = balance + 1 WHERE id = %s", (chance.randint(1, 1000),))
            else:
                load.execute("DELETE FROM accounts WHERE id = %s", (chance.randint(3, 1000),))  # 1 and 2 stay
            sent[verb] += 1
        # A sort far past work_mem spills to a temporary file.
        load.execute("SET work_mem = '64kB'")
        assert (
            len(load.execute("SELECT i FROM generate_series(1, 100000) i ORDER BY md5(i::text)").fetchall()) == 100_000
        )
    read()
    # Two transactions each holding the row the other wants: a waits (a lock not granted), then
    # b asks too, and PostgreSQL ends one of them as a deadlock.
    first, second = psycopg.connect(dsn, autocommit=True), psycopg.connect(dsn, autocommit=True)
    for connection, row in ((first, 1), (second, 2)):
        connection.execute("SET deadlock_timeout = '100ms'")
        connection.execute("BEGIN")
        connection.execute("UPDATE accounts SET balance = balance - 1 WHERE id = %s", (row,))
    outcomes: list[str] = []

    def cross(connection: psycopg.Connection[tuple[object, ...]], row: int) -> None:
        try:
            connection.execute("UPDATE accounts SET balance = balance - 1 WHERE id = %s", (row,))
            outcomes.append("updated")
        except psycopg.errors.DeadlockDetected:
            outcomes.append("deadlock")
        connection.execute("ROLLBACK")

    waiter = threading.Thread(target=cross, args=(first, 2))
    waiter.start()
    deadline = time.monotonic() + 10
    while observer.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone() != (1,):
        assert time.monotonic() < deadline, "the update did not wait on the lock"
        time.sleep(0.02)
    waiting = read()["locks_waiting"]
    assert waiting == observer.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0] == 1
    cross(second, 1)
    waiter.join(timeout=10)
    first.close()
    second.close()
    assert sorted(outcomes) == ["deadlock", "updated"]
    connected(1)  # the monitor's own
    read()
    last = observer.execute(_DATABASE_COUNTERS).fetchone()
    source.close()

    def counted(figure: str) -> float:
        """A rate's figure over every interval: what the monitor says happened since the base."""
        return sum(
            values.get(figure, 0.0) * (now - before) for (before, _), (now, values) in zip(readings, readings[1:])
        )

    transactions, rollbacks, fetched, temp_bytes, deadlocks = (after - before for after, before in zip(last, base))
    statements = sum(sent.values())
    # Each of the monitor's readings counts the same few transactions of its own, published
    # after the reading: they cancel out.
    assert counted("transactions_per_s") == pytest.approx(transactions, abs=3), (
        counted("transactions_per_s"),
        transactions,
    )
    assert transactions >= statements
    assert counted("rollbacks_per_s") == pytest.approx(rollbacks) and rollbacks == 2  # the deadlock's two
    assert counted("rows.fetched_per_s") == pytest.approx(fetched, abs=300)
    assert fetched >= sent["select"]  # live rows fetched by index scans: the selects' rows, the updates' ...
    assert counted("temp_bytes_per_s") == pytest.approx(temp_bytes) and temp_bytes > 1_000_000
    assert sum(values["deadlocks"] for _, values in readings[1:]) == deadlocks == 1
    # The statement mix from pg_stat_statements: each verb's calls, the monitor's own reads among
    # the selects (with the sort's); the deadlock's updates that completed among the updates.
    assert all(values["statements.from_pg_stat_statements"] == 1.0 for _, values in readings)
    assert counted("statements.insert_per_s") == pytest.approx(sent["insert"])
    assert counted("statements.delete_per_s") == pytest.approx(sent["delete"])
    assert counted("statements.update_per_s") == pytest.approx(sent["update"] + 3)
    assert sent["select"] + 1 <= counted("statements.select_per_s") <= sent["select"] + 1 + 12 * len(readings)


def _fresh_database(pair: PostgresPair, name: str) -> str:
    """A database of its own on the primary, with pg_stat_statements, so that nothing else's
    statements or rows count in it."""
    with psycopg.connect(pair.primary, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    dsn = pair.dsn(pair.primary_port, name)
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("CREATE EXTENSION pg_stat_statements")
    return dsn


#: Statements as applications send them (comments first, WITH), each with its kind as
#: PostgreSQL tags it, and how many times it is sent.
_KINDS_SENT = [
    ("/* app: web, route: /items */ SELECT count(*) FROM items", (), "select", 3),
    ("-- refill one row\nUPDATE items SET hits = hits + 1 WHERE id = 1", (), "update", 4),
    (
        "WITH chosen AS (SELECT id FROM items WHERE id <= 2) "
        "UPDATE items SET hits = hits + 1 FROM chosen WHERE items.id = chosen.id",
        (),
        "update",
        2,
    ),
    (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) SELECT sum(i) FROM n",
        (),
        "select",
        2,
    ),
    (
        "WITH gone AS (DELETE FROM items WHERE id = %s RETURNING *) INSERT INTO archive SELECT * FROM gone",
        (11,),
        "insert",
        5,
    ),
    ("WITH \"odd ) name\" AS MATERIALIZED (SELECT ')' AS p) DELETE FROM archive WHERE id = %s", (11,), "delete", 1),
    ("/* outer /* nested */ still a comment */ INSERT INTO archive VALUES (%s, 0)", (900,), "insert", 2),
    ("(SELECT 1) UNION ALL (SELECT 2)", (), "select", 1),
    ("VALUES (1), (2)", (), "select", 1),
    ("EXPLAIN SELECT 1", (), "other", 1),
    ("   -- a comment, then a delete\n   DELETE FROM archive WHERE id = %s", (900,), "delete", 2),
]


def test_the_statement_mix_counts_statements_by_their_kind_as_postgresql_tags_them(pair: PostgresPair) -> None:
    dsn = _fresh_database(pair, "kinds")
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("CREATE TABLE items (id int PRIMARY KEY, hits int NOT NULL)")
        setup.execute("CREATE TABLE archive (id int, hits int NOT NULL)")
        setup.execute("INSERT INTO items SELECT i, 0 FROM generate_series(1, 20) i")
    source = PostgresSource(PostgresMonitor(name="pg", dsn=dsn))
    source.open()
    source.read(100.0)
    sent = {"select": 0, "insert": 0, "update": 0, "delete": 0, "other": 0}
    with psycopg.connect(dsn, autocommit=True) as load:
        for statement, first_ids, kind, times in _KINDS_SENT:
            for time_ in range(times):
                # Another row each time.
                load.execute(statement, tuple(first_id + time_ for first_id in first_ids) or None)
                sent[kind] += 1
    counted = source.read(101.0)  # one second later: each rate is a count
    source.close()
    with psycopg.connect(dsn, autocommit=True) as check:
        archived = check.execute("SELECT count(*) FROM archive").fetchone()
    assert archived == (4,)  # rows 11 to 15 moved there, 11 deleted again; 900 and 901 inserted and deleted
    assert counted["statements.from_pg_stat_statements"] == 1.0
    for kind in ("insert", "update", "delete", "other"):
        assert counted[f"statements.{kind}_per_s"] == sent[kind], kind
    # The monitor's own reads are selects too: a few more than were sent.
    assert sent["select"] <= counted["statements.select_per_s"] <= sent["select"] + 12


def test_the_hot_share_of_a_run_is_postgresqls_hot_updates_over_its_updates(pair: PostgresPair) -> None:
    """Three readings of a known load: 200 updates that can be HOT, then 600 that cannot (an
    indexed column), then 100 of each. The run's share is PostgreSQL's own over the run, not the
    mean of the three readings' shares."""
    dsn = _fresh_database(pair, "hot")
    with psycopg.connect(dsn, autocommit=True) as setup:
        # Room on each page for new versions; no autovacuum or autoanalyze to count updates of its own.
        setup.execute(
            "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL, tag int NOT NULL) "
            "WITH (fillfactor = 50, autovacuum_enabled = off)"
        )
        setup.execute("CREATE INDEX accounts_tag ON accounts (tag)")
        setup.execute("INSERT INTO accounts SELECT i, 0, 0 FROM generate_series(1, 1000) i")
    source = PostgresSource(PostgresMonitor(name="pg", dsn=dsn))
    source.open()

    def counters(connection: psycopg.Connection[tuple[object, ...]]) -> tuple[int, int]:
        row = connection.execute(
            "SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'accounts'"
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])  # type: ignore[call-overload]

    samples = [MonitorSample("pg", 0, 0.0, 0.0, source.read(100.0))]
    with psycopg.connect(dsn, autocommit=True) as load:
        base = counters(load)
        for second, (plain, indexed) in enumerate([(200, 0), (0, 600), (100, 100)], 1):
            for number in range(plain):
                load.execute("UPDATE accounts SET balance = balance + 1 WHERE id = %s", (number % 1000 + 1,))
            for number in range(indexed):
                load.execute("UPDATE accounts SET tag = tag + 1 WHERE id = %s", (number % 1000 + 1,))
            load.execute("SELECT pg_stat_force_next_flush()")  # published before the reading
            samples.append(MonitorSample("pg", second, float(second), 0.0, source.read(100.0 + second)))
        hot, updated = (after - before for after, before in zip(counters(load), base))
    source.close()
    assert updated == 1000 and 0 < hot <= 300
    shares = [sample.values["hot_update_percent"] for sample in samples[1:] if sample.values]
    block = monitors_block({"pg": "postgres"}, set(), {"pg": samples}, [], [])
    figure = block["sources"]["pg"]["figures"]["hot_update_percent"]
    assert figure["mean"] == pytest.approx(100.0 * hot / updated, abs=0.01)
    assert abs(sum(shares) / len(shares) - 100.0 * hot / updated) > 10  # what a plain mean would have said


def test_the_cache_hit_share_of_a_run_is_its_hits_over_its_blocks_accessed() -> None:
    """Two seconds as a PostgreSQL reading gives them: 990 hits of 1,000 blocks, then 5 of 10.
    The run's share is 995 of 1,010 blocks (98.515 %), not the readings' plain mean (74.5 %)."""
    readings = [
        MonitorSample("pg", 1, 1.0, 0.0, {"cache_hit_percent": 99.0, "blocks.accessed_per_s": 1000.0}),
        MonitorSample("pg", 2, 2.0, 0.0, {"cache_hit_percent": 50.0, "blocks.accessed_per_s": 10.0}),
    ]
    block = monitors_block({"pg": "postgres"}, set(), {"pg": readings}, [], [])
    figure = block["sources"]["pg"]["figures"]["cache_hit_percent"]
    assert figure["mean"] == pytest.approx(100.0 * 995 / 1010, abs=0.001)
    assert (figure["max"], figure["last"]) == (99.0, 50.0)


def test_a_run_with_monitors_stores_them_on_its_time_axis(
    horde_cli: HordeCli, node_exporter: str, target_process: object
) -> None:
    port = target_process()  # type: ignore[operator]
    horde_cli.store_path.parent.mkdir(parents=True, exist_ok=True)
    result = horde_cli.run(
        "run",
        "--url",
        f"http://127.0.0.1:{port}/",
        "--rate",
        "100",
        "--duration",
        "4s",
        "--monitor",
        "gen=host",
        "--monitor",
        f"node={node_exporter}",
        "--monitor",
        "gone=postgresql://horde@127.0.0.1:1/none",
        "--summary-json",
        "summary.json",
    )
    assert result.returncode == 0, result.stderr
    assert "warning: monitor gone: cannot connect" in result.stdout + result.stderr
    summary = json.loads((horde_cli.tmp_path / "summary.json").read_text())
    sources = summary["monitors"]["sources"]
    assert sources["gen"]["samples"] >= 4 and sources["node"]["samples"] >= 4 and sources["gen"]["gaps"] == 0
    assert sources["gone"]["samples"] == 0 and sources["gone"]["gaps"] >= 4  # a gap, not a failed run
    with Store.open(horde_cli.store_url) as store:
        stored = store.monitor_samples(summary["run_id"])
        snapshots = store.snapshots(summary["run_id"])
    seconds = [sample.second for sample in stored["gen"]]
    assert seconds[:4] == [1, 2, 3, 4]  # sample N at second N, as the snapshots
    by_second = {snapshot["second"]: snapshot for snapshot in snapshots}
    for sample in stored["gen"][:4]:
        # Read within a fraction of a second of the end of the snapshot of the same second.
        assert abs(sample.timestamp - float(by_second[sample.second]["timestamp"])) < 0.5
    assert stored["node"][0].values and "cpu.busy_percent" in stored["node"][-1].values  # type: ignore[operator]
    shown = horde_cli.run("show", summary["run_id"], "--json")
    assert json.loads(shown.stdout)["monitors"]["sources"]["gen"]["samples"] == sources["gen"]["samples"]


def _stored_node_samples(store_path: Path) -> list[tuple[int, bool]]:
    """(second, is a gap) of monitor 'node''s samples stored so far (read while the run writes)."""
    try:
        with closing(sqlite3.connect(f"file:{store_path}?mode=ro", uri=True, timeout=1)) as database:
            rows = database.execute(
                "SELECT second, values_json IS NULL FROM monitor_samples WHERE monitor = 'node' ORDER BY second"
            ).fetchall()
    except sqlite3.Error:
        return []  # not made yet, or busy: asked again
    return [(int(second), bool(gap)) for second, gap in rows]


def test_an_exporter_stopped_mid_run_is_a_gap_then_its_series_resumes(
    horde_cli: HordeCli, target_process: object
) -> None:
    """node_exporter is stopped once its first sample is stored and started again on the same
    port after two gaps: the run succeeds, its series shows the gap and resumes."""
    port = target_process()  # type: ignore[operator]
    exporter_port = free_tcp_port()
    processes = [start_node_exporter(exporter_port)]
    done = threading.Event()
    events: list[str] = []

    def outage() -> None:
        while not done.is_set() and not any(not gap for _, gap in _stored_node_samples(horde_cli.store_path)):
            time.sleep(0.05)
        stop(processes[0])
        events.append("stopped")
        while not done.is_set() and sum(gap for _, gap in _stored_node_samples(horde_cli.store_path)) < 2:
            time.sleep(0.05)
        processes.append(start_node_exporter(exporter_port))
        events.append("started")

    driver = threading.Thread(target=outage)
    driver.start()
    try:
        result = horde_cli.run(
            "run",
            "--url",
            f"http://127.0.0.1:{port}/",
            "--rate",
            "50",
            "--duration",
            "6s",
            "--monitor",
            f"node=http://127.0.0.1:{exporter_port}/metrics",
            "--summary-json",
            "summary.json",
        )
    finally:
        done.set()
        driver.join(timeout=20)
        for process in processes:
            stop(process)
    assert events == ["stopped", "started"], events
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((horde_cli.tmp_path / "summary.json").read_text())
    assert summary["status"] == "finished"
    node = summary["monitors"]["sources"]["node"]
    assert node["gaps"] >= 2 and "cannot scrape" in node["first_gap"]["reason"]
    with Store.open(horde_cli.store_url) as store:
        samples = store.monitor_samples(summary["run_id"])["node"]
    gaps = [sample.second for sample in samples if sample.is_gap]
    before = [sample for sample in samples if sample.second < gaps[0]]
    after = [sample for sample in samples if sample.second > gaps[-1]]
    assert gaps == list(range(gaps[0], gaps[-1] + 1))  # one outage: seconds in a row
    assert before and all(not sample.is_gap for sample in before)
    assert after and all(sample.values for sample in after)
    # The rates after the gap are measured over it: still shares and byte counts, not garbage.
    for sample in after:
        values = sample.values or {}
        assert 0 <= values["cpu.busy_percent"] <= 100 and values["net.lo.rx_bytes_per_s"] >= 0
    assert node["samples"] == len(before) + len(after)
