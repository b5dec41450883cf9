"""Alembic's entry point for the store: migrations run on the connection the store hands over.

:func:`horde.store.migration.upgrade_store` opens one connection, begins one transaction (the
whole upgrade is atomic: SQLite and PostgreSQL both have transactional DDL) and passes it in
``config.attributes["connection"]``; there is no offline (SQL script) mode.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("the store's migrations run only through horde.store.migration.upgrade_store")
# The caller's transaction spans every revision: a failure leaves the store as it was.
context.configure(connection=connection, transaction_per_migration=False)
with context.begin_transaction():
    context.run_migrations()
