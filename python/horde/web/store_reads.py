"""The dashboard's own read-only queries on the store's tables.

``horde.store.Store`` reads whole runs; the dashboard also needs to list runs by filters
without reading every plan, and to fetch only the seconds a running run stored since it last
looked (every half second, for hours: re-reading the whole run each time would not do). These
queries run on their own connection pool, opened read-only (SQLite ``query_only``, PostgreSQL
``default_transaction_read_only``), so the dashboard cannot change a run except through the
store's own API (``Store.request_control``).

Snapshots are read by the store's own ``read_snapshots`` on this pool's connection, so they come
back in exactly the shape ``Store.snapshots`` gives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Engine, create_engine, event, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from horde.errors import StoreUnavailable
from horde.store import MonitorSample, redact_url, resolve_store_url
from horde.store.core import only_readable_sqlite_engine, read_snapshots
from horde.store.monitor_samples import read_monitor_samples
from horde.store.schema import runs
from horde.engine.snapshot import Snapshot

#: Most runs a filtered listing looks through (tags are filtered after the query: JSON in TEXT).
SCAN_LIMIT: Final = 5000
_CONNECT_TIMEOUT_S: Final = 10


@dataclass(frozen=True)
class RunFilter:
    """What the runs list is narrowed to; every field optional.

    ``plan`` matches a part of the plan name, ignoring case; ``tags`` are ``(key, value)``
    pairs, a ``None`` value meaning "has the key"; ``started_from`` is inclusive,
    ``started_before`` exclusive.
    """

    plan: str | None = None
    status: str | None = None
    tags: tuple[tuple[str, str | None], ...] = ()
    started_from: datetime | None = None
    started_before: datetime | None = None

    def matches_tags(self, tags: dict[str, str]) -> bool:
        return all(key in tags and (value is None or tags[key] == value) for key, value in self.tags)


@dataclass(frozen=True)
class RunRow:
    """One run as the runs list shows it (no plan: it can be large)."""

    run_id: str
    plan_name: str
    status: str
    started_at: datetime
    ended_at: datetime | None
    tags: dict[str, str]
    summary: dict[str, Any] | None
    host: str
    pid: int


class StoreReader:
    """Read-only queries on the store at ``store_url`` (resolved as ``Store.open`` does).

    Open the store with ``Store.open`` first: it creates the tables this reader expects.
    Thread-safe (one pooled connection per call).
    """

    def __init__(self, store_url: str | None) -> None:
        url = resolve_store_url(store_url)
        self.display_url = redact_url(url)
        self._engine = _read_only_engine(url)

    def close(self) -> None:
        self._engine.dispose()

    def find_runs(self, run_filter: RunFilter, *, limit: int = 100) -> list[RunRow]:
        """Runs matching ``run_filter``, newest first, at most ``limit`` of them."""
        query = select(
            runs.c.run_id,
            runs.c.plan_name,
            runs.c.status,
            runs.c.started_at,
            runs.c.ended_at,
            runs.c.tags_json,
            runs.c.summary_json,
            runs.c.host,
            runs.c.pid,
        )
        if run_filter.plan:
            query = query.where(func.lower(runs.c.plan_name).contains(run_filter.plan.lower(), autoescape=True))
        if run_filter.status:
            query = query.where(runs.c.status == run_filter.status)
        if run_filter.started_from is not None:
            query = query.where(runs.c.started_at >= run_filter.started_from)
        if run_filter.started_before is not None:
            query = query.where(runs.c.started_at < run_filter.started_before)
        for key, _ in run_filter.tags:
            # A cheap first cut in SQL (the key as JSON writes it); the exact test is below.
            query = query.where(runs.c.tags_json.contains(json.dumps(key), autoescape=True))
        query = query.order_by(runs.c.started_at.desc(), runs.c.run_id.desc()).limit(SCAN_LIMIT)
        found: list[RunRow] = []
        with self._guard(), self._engine.connect() as conn:
            for row in conn.execute(query):
                tags = json.loads(row.tags_json)
                if not run_filter.matches_tags(tags):
                    continue
                found.append(
                    RunRow(
                        run_id=row.run_id,
                        plan_name=row.plan_name,
                        status=row.status,
                        started_at=row.started_at,
                        ended_at=row.ended_at,
                        tags=tags,
                        summary=json.loads(row.summary_json) if row.summary_json else None,
                        host=row.host,
                        pid=int(row.pid),
                    )
                )
                if len(found) >= limit:
                    break
        return found

    def plan_names(self, *, limit: int = 200) -> list[str]:
        """The plan names of stored runs, for the filter's suggestions."""
        query = select(runs.c.plan_name).distinct().order_by(runs.c.plan_name).limit(limit)
        with self._guard(), self._engine.connect() as conn:
            return [str(name) for name in conn.execute(query).scalars()]

    def run_status(self, run_id: str) -> str | None:
        """The run's status now (None when there is no such run)."""
        with self._guard(), self._engine.connect() as conn:
            status = conn.execute(select(runs.c.status).where(runs.c.run_id == run_id)).scalar()
        return None if status is None else str(status)

    def snapshots_after(self, run_id: str, second: int) -> list[Snapshot]:
        """The run's snapshots after ``second``, in order, shaped as ``Store.snapshots`` gives them."""
        with self._guard(), self._engine.connect() as conn:
            return read_snapshots(conn, run_id, after_second=second)

    def monitor_samples_after(self, run_id: str, second: int) -> dict[str, list[MonitorSample]]:
        """The run's monitors' samples after ``second``, by monitor, as ``Store.monitor_samples`` gives them."""
        with self._guard(), self._engine.connect() as conn:
            return read_monitor_samples(conn, run_id, after_second=second)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as error:
            reason = str(getattr(error, "orig", None) or error).strip().splitlines()
            raise StoreUnavailable(
                f"cannot read the results store {self.display_url}: {reason[0] if reason else type(error).__name__}",
                hint="is the store still there (the SQLite file, the PostgreSQL server)?",
            ) from error


def _read_only_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        # A file this user may only read cannot take the -shm file a plain open makes.
        only_readable = only_readable_sqlite_engine(url)
        if only_readable is not None:
            return only_readable
        # timeout: how long to wait on a lock (a WAL checkpoint), as the writer's busy_timeout.
        engine = create_engine(url, pool_pre_ping=True, connect_args={"timeout": _CONNECT_TIMEOUT_S})
        event.listen(engine, "connect", _sqlite_read_only)
        return engine
    connect_args: dict[str, Any] = {"options": "-c default_transaction_read_only=on"}
    if "connect_timeout" not in make_url(url).query:
        connect_args["connect_timeout"] = _CONNECT_TIMEOUT_S
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


def _sqlite_read_only(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA query_only=ON")
    finally:
        cursor.close()
