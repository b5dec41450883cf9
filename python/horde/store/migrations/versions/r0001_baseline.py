"""Baseline: the store as Horde created it before migrations (``schema_version`` 1).

Runs, their per-second snapshots and per-step histograms, and the controls queue. A store made
before migrations existed has exactly these tables and no ``alembic_version``; opening it stamps
this revision without running it (see :func:`horde.store.migration.upgrade_store`). The DDL is
written out here, not taken from ``schema.py``, so that the baseline never moves when the schema
grows.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from horde.store.schema import UTCDateTime

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("plan_name", sa.Text, nullable=False),
        sa.Column("plan_json", sa.Text, nullable=False),
        sa.Column("parameters_json", sa.Text, nullable=False),
        sa.Column("tags_json", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("ended_at", UTCDateTime, nullable=True),
        sa.Column("summary_json", sa.Text, nullable=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
    )
    op.create_index("ix_runs_started_at", "runs", ["started_at"])
    op.create_index("ix_runs_status_host", "runs", ["status", "host"])
    op.create_table(
        "snapshots",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("second", sa.Integer, primary_key=True),
        sa.Column("elapsed_s", sa.Double, nullable=False),
        sa.Column("interval_s", sa.Double, nullable=False),
        sa.Column("timestamp", sa.Double, nullable=False),
        sa.Column("final", sa.Boolean, nullable=False),
        sa.Column("active_vus", sa.BigInteger, nullable=True),
        sa.Column("busy_vus", sa.BigInteger, nullable=True),
        sa.Column("iterations", sa.BigInteger, nullable=True),
        sa.Column("dropped_arrivals", sa.BigInteger, nullable=True),
        sa.Column("connections_opened", sa.BigInteger, nullable=True),
        sa.Column("target_vus", sa.BigInteger, nullable=True),
        sa.Column("target_rate_per_s", sa.Double, nullable=True),
        sa.Column("cpu_percent", sa.Double, nullable=True),
        sa.Column("timer_lateness_p99_ms", sa.Double, nullable=True),
        sa.Column("extra_json", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE"),
    )
    op.create_table(
        "snapshot_steps",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("second", sa.Integer, primary_key=True),
        sa.Column("scenario", sa.Text, primary_key=True),
        sa.Column("step", sa.Text, primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("requests", sa.BigInteger, nullable=False),
        sa.Column("ok", sa.BigInteger, nullable=False),
        sa.Column("errors_json", sa.Text, nullable=False),
        sa.Column("bytes_sent", sa.BigInteger, nullable=False),
        sa.Column("bytes_received", sa.BigInteger, nullable=False),
        sa.Column("histogram", sa.LargeBinary, nullable=False),
        sa.Column("extra_json", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(["run_id", "second"], ["snapshots.run_id", "snapshots.second"], ondelete="CASCADE"),
    )
    op.create_table(
        "load_requests",
        sa.Column("request_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("requested_at", UTCDateTime, nullable=False),
        sa.Column("request_json", sa.Text, nullable=False),
        sa.Column("answered_at", UTCDateTime, nullable=True),
        sa.Column("answer", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE"),
    )
    op.create_index("ix_load_requests_pending", "load_requests", ["run_id", "answered_at"])


def downgrade() -> None:
    for table in ("load_requests", "snapshot_steps", "snapshots", "runs"):
        op.drop_table(table)
