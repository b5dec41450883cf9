"""Monitors: each monitor's samples of a run, one row per monitor per second (``schema_version`` 2).

A sample's figures are one JSON object (``{"cpu.user_percent": 12.5, ...}``): the figures a
source gives depend on what it watches (a host's interfaces, a database's tables, the series a
scrape keeps), and JSON in TEXT keeps them exactly on SQLite and PostgreSQL alike. A second a
source could not be read has a row with ``error`` and no figures: a gap, with its reason.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "monitor_samples",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("monitor", sa.String(64), primary_key=True),
        sa.Column("second", sa.Integer, primary_key=True),
        sa.Column("elapsed_s", sa.Double, nullable=False),
        sa.Column("timestamp", sa.Double, nullable=False),
        sa.Column("values_json", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], ondelete="CASCADE"),
    )


def downgrade() -> None:
    op.drop_table("monitor_samples")
