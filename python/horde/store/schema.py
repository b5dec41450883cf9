"""The store's tables, as SQLAlchemy Core metadata shared by SQLite and PostgreSQL.

JSON goes into TEXT columns rather than a JSON type: SQLite has none, and TEXT keeps the plan
byte-for-byte as it was serialised (a PostgreSQL ``jsonb`` column would reorder its keys).
Counters are BIGINT because a busy step can move more than 2**31 bytes in one second.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Double,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.types import TypeDecorator

#: Written into every ``runs`` row, so that a later Horde can tell how a run was stored: the
#: number of the store's latest migration (``horde/store/migrations/versions/``) this Horde knows.
SCHEMA_VERSION = 2


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC ``datetime`` on every backend.

    PostgreSQL stores ``timestamptz`` and hands back aware values in the session's time zone;
    SQLite has no time zone support and hands back naive values. Both are normalised to UTC
    here, so callers always get ``tzinfo=timezone.utc``.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store keeps UTC-aware datetimes only")
        value = value.astimezone(timezone.utc)
        # SQLite's DATETIME text format has no offset; store the UTC wall time without one.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


metadata = MetaData()

#: One row per run: what was run (the plan exactly as given), how it ended, and who ran it.
runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("plan_name", Text, nullable=False),
    Column("plan_json", Text, nullable=False),
    Column("parameters_json", Text, nullable=False),
    Column("tags_json", Text, nullable=False),
    # running | finished | interrupted | aborted | failed
    Column("status", String(16), nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("ended_at", UTCDateTime, nullable=True),
    Column("summary_json", Text, nullable=True),
    # host + pid let a later open tell whether a 'running' run's process is gone.
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("schema_version", Integer, nullable=False),
    # `horde runs` lists newest first.
    Index("ix_runs_started_at", "started_at"),
    # Finding abandoned runs at open reads only the few 'running' rows.
    Index("ix_runs_status_host", "status", "host"),
)

#: One row per snapshot (normally one per second) with the run-wide gauges and counters.
snapshots = Table(
    "snapshots",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("second", Integer, primary_key=True),
    Column("elapsed_s", Double, nullable=False),
    Column("interval_s", Double, nullable=False),
    Column("timestamp", Double, nullable=False),
    Column("final", Boolean, nullable=False),
    # Nullable: a snapshot may lack a gauge (target_rate_per_s is None in the closed model).
    Column("active_vus", BigInteger, nullable=True),
    Column("busy_vus", BigInteger, nullable=True),
    Column("iterations", BigInteger, nullable=True),
    Column("dropped_arrivals", BigInteger, nullable=True),
    Column("connections_opened", BigInteger, nullable=True),
    Column("target_vus", BigInteger, nullable=True),
    Column("target_rate_per_s", Double, nullable=True),
    Column("cpu_percent", Double, nullable=True),
    Column("timer_lateness_p99_ms", Double, nullable=True),
    # Keys this version does not know (a newer engine's fields), so nothing is lost.
    Column("extra_json", Text, nullable=True),
    ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE"),
)

#: One row per step per snapshot, with the step's counters and its HDR histogram (V2 bytes).
snapshot_steps = Table(
    "snapshot_steps",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("second", Integer, primary_key=True),
    Column("scenario", Text, primary_key=True),
    Column("step", Text, primary_key=True),
    # The step's index in the snapshot's list, so the list reads back in the order it came.
    Column("position", Integer, nullable=False),
    Column("requests", BigInteger, nullable=False),
    Column("ok", BigInteger, nullable=False),
    Column("errors_json", Text, nullable=False),
    Column("bytes_sent", BigInteger, nullable=False),
    Column("bytes_received", BigInteger, nullable=False),
    # Opaque to the store: only horde.engine.histogram (the native module) reads it.
    Column("histogram", LargeBinary, nullable=False),
    Column("extra_json", Text, nullable=True),
    ForeignKeyConstraint(
        ["run_id", "second"],
        ["snapshots.run_id", "snapshots.second"],
        ondelete="CASCADE",
    ),
)

#: Controls (a stop or a re-target) asked of a running run from elsewhere (`horde retarget`, the
#: dashboard, another machine sharing a PostgreSQL store): the run's own process polls for
#: unanswered rows and answers each. The table keeps the name it has in every store written so
#: far (``load_requests``); the code calls its rows controls, as the glossary does.
controls = Table(
    "load_requests",
    metadata,
    Column("request_id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False),
    Column("requested_at", UTCDateTime, nullable=False),
    # {"vus": N} or {"rate_per_s": R}, with optional "scenarios" and "ramp_s"; or {"stop": true}
    Column("request_json", Text, nullable=False),
    Column("answered_at", UTCDateTime, nullable=True),
    # "applied: ..." or "refused: ..." in words the asker prints
    Column("answer", Text, nullable=True),
    ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE"),
    Index("ix_load_requests_pending", "run_id", "answered_at"),
)

#: One row per monitor per second of a run: the figures its source gave (JSON: ``{"cpu.user_percent":
#: 12.5, ...}``), or the reason it could not be read (a gap). ``second`` is on the snapshots' axis:
#: second N covers (N - interval, N] since the run started. Added by migration 0002.
monitor_samples = Table(
    "monitor_samples",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("monitor", String(64), primary_key=True),
    Column("second", Integer, primary_key=True),
    Column("elapsed_s", Double, nullable=False),
    Column("timestamp", Double, nullable=False),
    Column("values_json", Text, nullable=True),
    Column("error", Text, nullable=True),
    ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE"),
)

#: The columns of ``snapshots`` that hold a snapshot key of the same name.
SNAPSHOT_FIELDS: tuple[str, ...] = (
    "second",
    "elapsed_s",
    "interval_s",
    "timestamp",
    "final",
    "active_vus",
    "busy_vus",
    "iterations",
    "dropped_arrivals",
    "connections_opened",
    "target_vus",
    "target_rate_per_s",
    "cpu_percent",
    "timer_lateness_p99_ms",
)

#: Snapshot keys without which a snapshot cannot be stored (the primary key and the timeline).
SNAPSHOT_REQUIRED: tuple[str, ...] = ("second", "elapsed_s", "interval_s", "timestamp", "final")

#: The keys of one entry of a snapshot's ``steps`` list, all required.
STEP_FIELDS: tuple[str, ...] = (
    "scenario",
    "step",
    "requests",
    "ok",
    "errors",
    "bytes_sent",
    "bytes_received",
    "histogram",
)
