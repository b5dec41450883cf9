"""The ``postgres`` source: a PostgreSQL server's own statistics, read over one connection.

Its figures are :data:`horde.plan.monitor_figures.POSTGRES_FIGURES` (rates per second over the
interval since the last reading; the database is the DSN's): transactions, the statement mix
(from ``pg_stat_statements`` when the extension is installed in the database, each statement by
its kind as PostgreSQL tags it: :func:`statement_kind`; else from the tuple counters: rows
returned by scans stand for selects), rows, cache hits, HOT updates, temp
bytes, deadlocks, dead tuples and autovacuum per followed table, connections, locks waiting, and
on a primary each standby's lag and the xmin it holds back.

The password comes from the environment variable the monitor names (or libpq's own), read when
the run starts; it is never stored. Table names keep only letters, digits and ``_``.
"""

from __future__ import annotations

import os
import re
from typing import Any

import psycopg
from psycopg.rows import dict_row

from horde.monitors.source import CounterRates, SourceUnavailable
from horde.plan.monitors import PostgresMonitor

#: Tables followed when the monitor names none: the most dead tuples first.
MAX_TABLES = 50

_DATABASE = """
SELECT xact_commit, xact_rollback, blks_read, blks_hit, tup_returned, tup_fetched, tup_inserted, tup_updated,
       tup_deleted, temp_bytes, deadlocks
FROM pg_stat_database WHERE datname = current_database()"""
_TABLES = """
SELECT schemaname, relname, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count, autoanalyze_count
FROM pg_stat_user_tables ORDER BY n_dead_tup DESC, relid"""
_CONNECTIONS = """
SELECT coalesce(state, 'other') AS state, count(*) AS connections FROM pg_stat_activity
WHERE backend_type = 'client backend' GROUP BY 1"""
_REPLICATION = """
SELECT coalesce(nullif(application_name, ''), client_addr::text, pid::text) AS standby,
       extract(epoch FROM write_lag)::float8 AS write_lag_s, extract(epoch FROM flush_lag)::float8 AS flush_lag_s,
       extract(epoch FROM replay_lag)::float8 AS replay_lag_s,
       pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::float8 AS replay_lag_bytes,
       age(backend_xmin)::float8 AS xmin_age
FROM pg_stat_replication"""
# Without the texts (showtext false): reading them each second would read the whole file they
# are kept in; a statement's text is read once, when its queryid is first seen.
_STATEMENTS = """
SELECT queryid, sum(calls)::float8 AS calls FROM pg_stat_statements(false)
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY 1"""
_STATEMENT_TEXTS = """
SELECT DISTINCT ON (queryid) queryid, query FROM pg_stat_statements(true)
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid = ANY(%s)"""
_VERBS = ("select", "insert", "update", "delete")
#: The most statements' kinds kept (pg_stat_statements keeps 5,000 by default; one that comes
#: back after the cache was emptied has its text read again).
MAX_KINDS = 50_000
#: A statement's main word and its kind: the command tag PostgreSQL gives it (VALUES and TABLE
#: are SELECTs to it).
_KINDS = {
    "select": "select",
    "values": "select",
    "table": "select",
    "insert": "insert",
    "update": "update",
    "delete": "delete",
}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


_WORD = re.compile(r"[A-Za-z_\x80-\uffff][A-Za-z0-9_$\x80-\uffff]*")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")


def _skip_quoted(text: str, start: int, quote: str, backslashes: bool) -> int:
    """The index after the quoted string or identifier opening at ``start``."""
    index = start + 1
    while index < len(text):
        if backslashes and text[index] == "\\":
            index += 2
        elif text[index] == quote:
            if text[index + 1 : index + 2] != quote:  # a doubled quote stands for one
                return index + 1
            index += 2
        else:
            index += 1
    return index


def _tokens(text: str, start: int = 0) -> tuple[list[str | tuple[int, int]], int]:
    """The tokens of ``text`` from ``start`` to the parenthesis that closes the level it is on
    (or the end), and the index after that parenthesis: words in lower case, a parenthesised
    group as (start, end) of what it holds, any other character as itself. Comments (nested
    block comments too) are skipped; strings, quoted identifiers and dollar-quoted bodies come
    as a ``'`` token, so that nothing in them counts."""
    tokens: list[str | tuple[int, int]] = []
    index = start
    while index < len(text):
        char = text[index]
        if char.isspace():
            index += 1
        elif text.startswith("--", index):
            end = text.find("\n", index)
            index = len(text) if end < 0 else end + 1
        elif text.startswith("/*", index):
            depth, index = 1, index + 2
            while index < len(text) and depth:
                if text.startswith("/*", index):
                    depth, index = depth + 1, index + 2
                elif text.startswith("*/", index):
                    depth, index = depth - 1, index + 2
                else:
                    index += 1
        elif char == "(":
            _, after = _tokens(text, index + 1)
            tokens.append((index + 1, after - 1))
            index = after
        elif char == ")":
            return tokens, index + 1
        elif char in "'\"":
            escaped = char == "'" and bool(tokens) and tokens[-1] == "e" and text[index - 1] in "eE"
            if escaped:
                tokens.pop()  # E'...': the E belongs to the string
            index = _skip_quoted(text, index, char, escaped)
            tokens.append("'")
        elif char == "$" and (tag := _DOLLAR_TAG.match(text, index)):
            end = text.find(tag.group(0), tag.end())
            index = len(text) if end < 0 else end + len(tag.group(0))
            tokens.append("'")
        elif word := _WORD.match(text, index):
            tokens.append(word.group(0).lower())
            index = word.end()
        else:
            tokens.append(char)
            index += 1
    return tokens, index


def statement_kind(text: str) -> str:
    r"""A statement's kind as PostgreSQL tags it: ``select``, ``insert``, ``update``, ``delete``
    or ``other``. Comments before it do not count, nor what a ``WITH`` defines before its main
    statement (a data-modifying CTE included: the statement is tagged by its main part).

    >>> statement_kind("/* app: game */ SELECT 1"), statement_kind("-- refill\nUPDATE t SET a = 1")
    ('select', 'update')
    >>> statement_kind("WITH gone AS (DELETE FROM t RETURNING *) INSERT INTO old SELECT * FROM gone")
    'insert'
    >>> statement_kind('WITH RECURSIVE "a)" (n) AS NOT MATERIALIZED (SELECT \')\') DELETE FROM t')
    'delete'
    >>> statement_kind("(SELECT 1) UNION (SELECT 2)"), statement_kind("EXPLAIN UPDATE t SET a = 1")
    ('select', 'other')
    """
    tokens, _ = _tokens(text)
    while tokens and isinstance(tokens[0], tuple):  # (SELECT ...) UNION ...: its first part's kind
        begin, end = tokens[0]
        tokens, _ = _tokens(text[begin:end])
        text = text[begin:end]
    if tokens[:1] != ["with"]:
        first = tokens[0] if tokens else ""
        return _KINDS.get(first, "other") if isinstance(first, str) else "other"
    index = 2 if tokens[1:2] == ["recursive"] else 1
    while index < len(tokens):
        # name [(columns)] AS [NOT] [MATERIALIZED] (body) [SEARCH ... SET col] [CYCLE ... USING col]
        index += 1
        if index < len(tokens) and isinstance(tokens[index], tuple):
            index += 1
        while index < len(tokens) and tokens[index] in ("as", "not", "materialized"):
            index += 1
        index += 1  # the body
        for clause, last in (("search", "set"), ("cycle", "using")):
            if index < len(tokens) and tokens[index] == clause:
                while index < len(tokens) and tokens[index] != last:
                    index += 1
                index += 2
        if index < len(tokens) and tokens[index] == ",":
            index += 1
            continue
        break
    if index >= len(tokens):
        return "other"
    main = tokens[index]
    if isinstance(main, tuple):
        return statement_kind(text[main[0] : main[1]])
    return _KINDS.get(main, "other")


class PostgresSource:
    kind = "postgres"

    def __init__(self, monitor: PostgresMonitor) -> None:
        self.name = monitor.name
        self._monitor = monitor
        self._connection: psycopg.Connection[dict[str, Any]] | None = None
        self._rates = CounterRates()
        self._has_statements = False
        #: Each statement's kind by its queryid, its text read once.
        self._kinds: dict[int, str] = {}
        self._max_connections = 0.0
        self._tables = set(monitor.tables)

    def _connect(self) -> psycopg.Connection[dict[str, Any]]:
        password = os.environ.get(self._monitor.password_env) if self._monitor.password_env else None
        options: dict[str, Any] = {
            "connect_timeout": self._monitor.connect_timeout_s,
            "autocommit": True,
            "application_name": "horde-monitor",
            "row_factory": dict_row,
        }
        if password is not None:
            options["password"] = password
        try:
            connection = psycopg.connect(self._monitor.dsn, **options)
            # A statistics read that hangs (a locked catalogue) must not stall the monitor for long.
            connection.execute("SET statement_timeout = 2000")
            self._has_statements = (
                connection.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone()
                is not None
            )
            if self._has_statements:
                # A standby has the extension in its (replicated) catalogue without the library
                # loaded, and the view then refuses every read: the tuple counters stand in.
                try:
                    connection.execute("SELECT 1 FROM pg_stat_statements LIMIT 1").fetchall()
                except psycopg.errors.ObjectNotInPrerequisiteState:
                    self._has_statements = False
            row = connection.execute("SELECT current_setting('max_connections')::float8 AS m").fetchone()
            self._max_connections = float(row["m"]) if row else 0.0
        except psycopg.Error as error:
            raise SourceUnavailable(f"cannot connect to {self._monitor.dsn}: {_first_line(error)}") from error
        return connection

    def open(self) -> None:
        self._connection = self._connect()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def read(self, now: float) -> dict[str, float]:
        if self._connection is None or self._connection.closed:
            self._connection = self._connect()
        try:
            return self._read(self._connection, now)
        except psycopg.Error as error:
            self.close()  # the next reading reconnects
            raise SourceUnavailable(f"reading {self._monitor.dsn} failed: {_first_line(error)}") from error

    def _rate(self, key: str, value: Any, now: float) -> float | None:
        return None if value is None else self._rates.rate(key, float(value), now)

    def _read(self, connection: psycopg.Connection[dict[str, Any]], now: float) -> dict[str, float]:
        values: dict[str, float] = {"connections.max": self._max_connections}
        database = connection.execute(_DATABASE).fetchone() or {}
        rates = {key: self._rate(key, database.get(key), now) for key in database}
        if rates.get("xact_commit") is not None and rates.get("xact_rollback") is not None:
            values["commits_per_s"] = rates["xact_commit"] or 0.0
            values["rollbacks_per_s"] = rates["xact_rollback"] or 0.0
            values["transactions_per_s"] = values["commits_per_s"] + values["rollbacks_per_s"]
        for column, figure in (
            ("tup_returned", "rows.returned_per_s"),
            ("tup_fetched", "rows.fetched_per_s"),
            ("tup_inserted", "rows.inserted_per_s"),
            ("tup_updated", "rows.updated_per_s"),
            ("tup_deleted", "rows.deleted_per_s"),
            ("temp_bytes", "temp_bytes_per_s"),
        ):
            if rates.get(column) is not None:
                values[figure] = rates[column] or 0.0
        hit, read = rates.get("blks_hit"), rates.get("blks_read")
        if hit is not None and read is not None:
            # What the hit share is a share of: the summary weighs each reading's share by it.
            values["blocks.accessed_per_s"] = hit + read
            if hit + read > 0:
                values["cache_hit_percent"] = 100.0 * hit / (hit + read)
        deadlocks = self._rates.delta("deadlocks.count", float(database.get("deadlocks") or 0))
        if deadlocks is not None:
            values["deadlocks"] = deadlocks
        values.update(self._statements(connection, values, now))
        values.update(self._tables_read(connection, now))
        values.update(self._connections(connection))
        values.update(self._replication(connection))
        return values

    def _statements(
        self, connection: psycopg.Connection[dict[str, Any]], values: dict[str, float], now: float
    ) -> dict[str, float]:
        mix: dict[str, float] = {}
        if self._has_statements:
            calls = {verb: 0.0 for verb in (*_VERBS, "other")}
            rows = connection.execute(_STATEMENTS).fetchall()
            self._learn_kinds(connection, [row["queryid"] for row in rows])
            for row in rows:
                # No queryid: another user's statement, hidden from a role without pg_read_all_stats.
                verb = self._kinds.get(row["queryid"], "other")
                calls[verb] += float(row["calls"] or 0)
            for verb, count in calls.items():
                rate = self._rates.rate(f"statements.{verb}", count, now)
                if rate is not None:
                    mix[f"statements.{verb}_per_s"] = rate
            mix["statements.from_pg_stat_statements"] = 1.0
            return mix
        for verb, figure in (
            ("select", "rows.returned_per_s"),
            ("insert", "rows.inserted_per_s"),
            ("update", "rows.updated_per_s"),
            ("delete", "rows.deleted_per_s"),
        ):
            if figure in values:
                mix[f"statements.{verb}_per_s"] = values[figure]
        mix["statements.from_pg_stat_statements"] = 0.0
        return mix

    def _learn_kinds(self, connection: psycopg.Connection[dict[str, Any]], queryids: list[int | None]) -> None:
        """The kind of each statement not seen before, from its text (a queryid's statements all
        have one kind: the command is part of what PostgreSQL hashes into it)."""
        new = [queryid for queryid in queryids if queryid is not None and queryid not in self._kinds]
        if not new:
            return
        if len(self._kinds) + len(new) > MAX_KINDS:
            self._kinds.clear()
            new = [queryid for queryid in queryids if queryid is not None]
        for row in connection.execute(_STATEMENT_TEXTS, (new,)).fetchall():
            self._kinds[row["queryid"]] = statement_kind(str(row["query"] or ""))

    def _tables_read(self, connection: psycopg.Connection[dict[str, Any]], now: float) -> dict[str, float]:
        values: dict[str, float] = {"dead_tuples": 0.0, "live_tuples": 0.0}
        updates = hot = 0.0
        autovacuum = autoanalyze = 0.0
        complete = True
        followed = 0
        for row in connection.execute(_TABLES).fetchall():
            qualified = f"{row['schemaname']}.{row['relname']}"
            if self._tables and qualified not in self._tables and row["relname"] not in self._tables:
                continue
            dead, live = float(row["n_dead_tup"] or 0), float(row["n_live_tup"] or 0)
            values["dead_tuples"] += dead
            values["live_tuples"] += live
            prefix = f"tables.{_safe(row['schemaname'])}.{_safe(row['relname'])}"
            moved = {
                what: self._rates.delta(f"{prefix}.{what}", float(row[column] or 0))
                for what, column in (
                    ("updates", "n_tup_upd"),
                    ("hot", "n_tup_hot_upd"),
                    ("autovacuum", "autovacuum_count"),
                    ("autoanalyze", "autoanalyze_count"),
                )
            }
            growth = self._rates.rate(f"{prefix}.dead", dead, now)
            if any(value is None for value in moved.values()):
                complete = False
            updates += moved["updates"] or 0.0
            hot += moved["hot"] or 0.0
            autovacuum += moved["autovacuum"] or 0.0
            autoanalyze += moved["autoanalyze"] or 0.0
            if self._tables or followed < MAX_TABLES:
                followed += 1
                values[f"{prefix}.dead_tuples"] = dead
                values[f"{prefix}.live_tuples"] = live
                if growth is not None:
                    values[f"{prefix}.dead_tuples_per_s"] = growth
                if moved["autovacuum"] is not None:
                    values[f"{prefix}.autovacuum_runs"] = moved["autovacuum"] or 0.0
                    values[f"{prefix}.autoanalyze_runs"] = moved["autoanalyze"] or 0.0
        if complete:
            values["autovacuum_runs"] = autovacuum
            values["autoanalyze_runs"] = autoanalyze
            if updates > 0:
                values["hot_update_percent"] = 100.0 * hot / updates
            growth_total = self._rates.rate("dead_tuples", values["dead_tuples"], now)
            if growth_total is not None:
                values["dead_tuples_per_s"] = growth_total
        return values

    def _connections(self, connection: psycopg.Connection[dict[str, Any]]) -> dict[str, float]:
        values = {
            "connections.active": 0.0,
            "connections.idle": 0.0,
            "connections.idle_in_transaction": 0.0,
            "connections.other": 0.0,
        }
        for row in connection.execute(_CONNECTIONS).fetchall():
            state = _safe(str(row["state"]).replace(" (aborted)", "_aborted"))
            key = f"connections.{state}" if f"connections.{state}" in values else "connections.other"
            values[key] += float(row["connections"])
        values["connections.total"] = sum(values.values())
        waiting = connection.execute("SELECT count(*)::float8 AS n FROM pg_locks WHERE NOT granted").fetchone()
        values["locks_waiting"] = float(waiting["n"]) if waiting else 0.0
        return values

    def _replication(self, connection: psycopg.Connection[dict[str, Any]]) -> dict[str, float]:
        recovery = (
            connection.execute(
                "SELECT pg_is_in_recovery() AS r, extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS d"
            ).fetchone()
            or {}
        )
        if recovery.get("r"):
            values = {"in_recovery": 1.0}
            if recovery.get("d") is not None:
                values["replay_delay_s"] = float(recovery["d"])
            return values
        values = {"in_recovery": 0.0}
        worst: dict[str, float] = {}
        for row in connection.execute(_REPLICATION).fetchall():
            prefix = f"replication.{_safe(str(row['standby']))}"
            for column in ("write_lag_s", "flush_lag_s", "replay_lag_s", "replay_lag_bytes", "xmin_age"):
                if row[column] is not None:
                    values[f"{prefix}.{column}"] = float(row[column])
            # An idle standby's lag times are NULL (nothing to replay): no lag, not unknown.
            lag_s = float(row["replay_lag_s"] or 0.0)
            worst["replication_lag_s"] = max(worst.get("replication_lag_s", 0.0), lag_s)
            worst["replication_lag_bytes"] = max(
                worst.get("replication_lag_bytes", 0.0), float(row["replay_lag_bytes"] or 0.0)
            )
            if row["xmin_age"] is not None:
                worst["standby_xmin_age"] = max(worst.get("standby_xmin_age", 0.0), float(row["xmin_age"]))
        values.update(worst)
        values["standbys"] = float(len(connection.execute("SELECT 1 FROM pg_stat_replication").fetchall()))
        return values


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
