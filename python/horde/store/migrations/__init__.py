"""The store's Alembic migrations: ``env.py`` and one file per schema revision under ``versions/``.

They run when a store is opened (:func:`horde.store.migration.upgrade_store`), never by hand. To
change the schema: add the next file under ``versions/`` (``script.py.mako`` is its shape) with
``down_revision`` set to the latest one, change ``horde/store/schema.py`` to match, and raise
``SCHEMA_VERSION``; ``tests/test_store_migrations.py`` checks that the two agree on SQLite and
PostgreSQL.
"""
