"""How a store's tables come to match this Horde: Alembic migrations, run when a store is opened.

A store records the revision it is at in Alembic's ``alembic_version`` table. Opening it:

- at this Horde's latest revision (the usual case): nothing to do, one read;
- empty (a new file or database): every revision runs, the first one creating the tables;
- made before migrations existed (``runs`` present, no ``alembic_version``): it is the baseline
  revision, so it is stamped so and the later revisions run;
- behind: the missing revisions run;
- at a revision this Horde does not know (written by a newer Horde): refused with
  :class:`StoreTooNew`, before anything is written;
- one this user may only read, opened read-only: never upgraded, so one behind is refused
  (:func:`require_current_revision`).

An upgrade is one transaction (SQLite and PostgreSQL both have transactional DDL), so it either
happens whole or leaves the store as it was; two processes opening an old store at once upgrade
it once: on PostgreSQL the upgrade holds a transaction-scoped advisory lock, on SQLite its
transaction starts with ``BEGIN IMMEDIATE`` (the write lock, waited for), and either way the
revision is read again once the lock is held.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from horde.errors import StoreTooNew, StoreUnavailable

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

# Alembic is imported only when a store is not at HEAD_REVISION: it takes a fifth of a second to
# import, paid by every `horde run` on a store already up to date (the usual case) for nothing.

#: Where the revisions live (shipped inside the package: see pyproject's ``[tool.maturin]``).
MIGRATIONS_DIR: Final = Path(__file__).with_name("migrations")

#: The latest revision this Horde knows, written out so that a store already at it is recognised
#: without reading the revision scripts (a test checks it against them: :func:`head_revision`).
HEAD_REVISION: Final = "0002"

#: The revision a store made before migrations is at: ``schema_version`` 1.
BASELINE_REVISION: Final = "0001"

#: How long a process waits for another one's SQLite upgrade (or write) to finish.
SQLITE_UPGRADE_WAIT_MS: Final = 30_000

# Any fixed 64-bit number: the advisory lock every Horde takes while it upgrades a PostgreSQL store.
_POSTGRES_LOCK_KEY: Final = 0x686F72646531  # "horde1"


def _config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def script_directory() -> ScriptDirectory:
    """The store's revisions, as Alembic reads them."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    """The latest revision this Horde knows (``"0002"``)."""
    head = script_directory().get_current_head()
    assert head is not None
    return head


def store_revisions(connection: Connection) -> tuple[str, ...]:
    """The revisions the store says it is at: ``()`` for an empty store or one made before
    migrations (tell them apart with :func:`is_premigration_store`)."""
    from alembic.runtime.migration import MigrationContext

    return tuple(MigrationContext.configure(connection).get_current_heads())


def _recorded_revisions(connection: Connection) -> tuple[str, ...]:
    """What the store's ``alembic_version`` table holds, read without Alembic (``()`` when the
    table is absent)."""
    if not inspect(connection).has_table("alembic_version"):
        return ()
    return tuple(str(row[0]) for row in connection.execute(text("SELECT version_num FROM alembic_version")))


def is_premigration_store(connection: Connection) -> bool:
    """A store made before migrations: the ``runs`` table without ``alembic_version``."""
    tables = set(inspect(connection).get_table_names())
    return "runs" in tables and "alembic_version" not in tables


def upgrade_store(engine: Engine, url: str, *, display_url: str) -> str | None:
    """Brings the store at ``engine`` to this Horde's latest revision (see the module's text).

    Returns the revision it was at before when it was upgraded (``"0001"``, or ``"empty"`` for a
    new store), None when it was already up to date. Raises :class:`StoreTooNew` for a store at
    a revision this Horde does not know; database errors propagate (the store turns them into
    ``StoreUnavailable``).
    """
    with engine.connect() as connection:
        if _recorded_revisions(connection) == (HEAD_REVISION,):
            return None
        current = store_revisions(connection)
    scripts = script_directory()
    head = scripts.get_current_head()
    if current == (head,):
        return None
    _refuse_unknown(current, scripts, display_url)
    with _upgrade_transaction(engine, url) as connection:
        current = store_revisions(connection)
        _refuse_unknown(current, scripts, display_url)
        if current == (head,):
            return None  # another process upgraded it while this one waited for the lock
        before = current[0] if current else None
        config = _config(connection)
        from alembic import command

        if not current and is_premigration_store(connection):
            command.stamp(config, BASELINE_REVISION)
            before = BASELINE_REVISION
        command.upgrade(config, "head")
        return before or "empty"


def require_current_revision(engine: Engine, *, display_url: str) -> None:
    """For a store opened read-only, which cannot be upgraded: returns when it is at this Horde's
    revision; raises :class:`StoreTooNew` for a newer one, :class:`StoreUnavailable` for an older
    one (this Horde's queries would not fit its tables)."""
    with engine.connect() as connection:
        if _recorded_revisions(connection) == (HEAD_REVISION,):
            return
        current = store_revisions(connection)
        premigration = not current and is_premigration_store(connection)
    scripts = script_directory()
    _refuse_unknown(current, scripts, display_url)
    if current == (scripts.get_current_head(),):
        return
    at = current[0] if current else BASELINE_REVISION if premigration else "none (an empty store)"
    raise StoreUnavailable(
        f"the results store {display_url} is at schema revision {at}, older than this Horde's "
        f"{HEAD_REVISION}, and this user may only read it, so it cannot be brought up to date",
        hint="open it once as a user who may write it (any horde command upgrades it), or copy it somewhere "
        "writable and give the copy with --store",
    )


def _refuse_unknown(current: tuple[str, ...], scripts: ScriptDirectory, display_url: str) -> None:
    known = {script.revision for script in scripts.walk_revisions()}
    unknown = [revision for revision in current if revision not in known]
    if unknown:
        raise StoreTooNew(
            f"the results store {display_url} was written by a newer Horde: it is at schema revision "
            f"{', '.join(unknown)}, and this Horde knows revisions up to {scripts.get_current_head()}",
            hint="upgrade Horde (pip install --upgrade horde) to use this store, or choose another store "
            "with --store or HORDE_STORE",
        )


@contextmanager
def _upgrade_transaction(engine: Engine, url: str) -> Iterator[Connection]:
    """One connection in one transaction that holds the store's upgrade lock."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as connection:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _POSTGRES_LOCK_KEY})
            yield connection
        return
    if make_url(url).database in (None, "", ":memory:"):
        # A database in memory lives in the store's own connection, and no other process sees it.
        with engine.begin() as connection:
            yield connection
        return
    # pysqlite commits implicitly around DDL unless it is left in autocommit mode and the
    # transaction is begun by hand (SQLAlchemy's documented recipe); IMMEDIATE takes the write
    # lock at once, so a second process waits for it (the busy timeout) rather than failing half
    # way through.
    sqlite = create_engine(url, poolclass=NullPool)

    @event.listens_for(sqlite, "connect")
    def _autocommit(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.execute(f"PRAGMA busy_timeout={SQLITE_UPGRADE_WAIT_MS}")

    @event.listens_for(sqlite, "begin")
    def _begin_immediate(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        with sqlite.begin() as connection:
            yield connection
    finally:
        sqlite.dispose()


__all__ = [
    "BASELINE_REVISION",
    "HEAD_REVISION",
    "MIGRATIONS_DIR",
    "head_revision",
    "is_premigration_store",
    "require_current_revision",
    "script_directory",
    "store_revisions",
    "upgrade_store",
]
