"""The results store: runs, their per-second snapshots and per-step histograms.

One code path serves SQLite and PostgreSQL (SQLAlchemy 2 Core). Every write is its own
transaction, committed before the call returns, so a crash of the running process loses at most
the snapshot it was handing over. A run left ``running`` by a process that is gone is marked
``aborted`` the next time the store is opened on the same host.

A SQLite store this user may only read (the file, or its folder, is not writable: a teammate's
store, a copy made read-only) is opened read-only: ``horde runs``, ``show``, ``compare`` and
``report`` read it, and a write is refused with a message that says why.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, Final, cast
from urllib.parse import quote

from sqlalchemy import Connection, Engine, RowMapping, create_engine, event, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError

from horde.engine.snapshot import Snapshot
from horde.errors import RunNotFound, StoreUnavailable
from horde.store.migration import require_current_revision, upgrade_store
from horde.store.monitor_samples import MonitorSample, read_monitor_samples, sample_rows
from horde.store.schema import (
    SCHEMA_VERSION,
    SNAPSHOT_FIELDS,
    SNAPSHOT_REQUIRED,
    STEP_FIELDS,
    controls,
    monitor_samples,
    runs,
    snapshot_steps,
    snapshots,
)
from horde.store.url import backend_of, default_store_path, password_of, redact_url, resolve_store_url

#: How many passes bringing the tables up to date may take when another process does it too.
_CREATE_ATTEMPTS = 6

#: The statuses a run can end with (``running`` is the only other one).
FINAL_STATUSES: Final = frozenset({"finished", "interrupted", "autostopped", "aborted", "failed"})

# How long a SQLite writer waits for another writer (or a checkpoint) before giving up. WAL lets
# readers and the writer run side by side, so this only matters for two concurrent writers.
_SQLITE_BUSY_TIMEOUT_MS = 10_000

# A PostgreSQL server that does not answer should fail `horde run` quickly, not hang; an
# explicit connect_timeout in the URL wins.
_POSTGRES_CONNECT_TIMEOUT_S = 10

# run ids carry 16 random bits; a clash needs two runs in the same second, so a few retries do.
_RUN_ID_ATTEMPTS = 8

# Driver messages can run long (SQLAlchemy appends statements and parameters); keep the gist.
_MAX_REASON_CHARS = 300

#: How long a SQLite store file of 0 bytes may take to become a database before it is judged
#: emptied: a process creating a new store writes its first page within milliseconds.
_EMPTY_FILE_GRACE_S = 1.0

_RUNNING = "running"


@dataclass(frozen=True)
class RunRecord:
    """One stored run, as ``horde runs`` lists it and ``horde show`` reads it."""

    run_id: str
    plan_name: str
    plan: dict[str, Any]
    parameters: dict[str, Any]
    tags: dict[str, str]
    status: str
    started_at: datetime
    ended_at: datetime | None
    summary: dict[str, Any] | None
    host: str
    pid: int


def new_run_id(now: datetime | None = None) -> str:
    """A short id that sorts by start time: ``YYYYMMDD-HHMMSS-xxxx`` (UTC, 4 random hex digits).

    >>> new_run_id(datetime(2026, 11, 22, 14, 3, 12, tzinfo=timezone.utc))[:16]
    '20261122-140312-'
    """
    now = now or datetime.now(timezone.utc)
    return now.astimezone(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (and is not a zombie).

    ``PermissionError`` means the process exists but belongs to another user: alive.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        # Cannot tell (e.g. a platform without signals): do not abort a run that may be alive.
        return True
    # A zombie has exited but not been reaped; its run is over. Only Linux tells us cheaply.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    # The state follows the parenthesised command name, which may itself contain spaces.
    state = stat.rpartition(")")[2].split()
    return not (state and state[0] in ("Z", "X"))


class Store:
    """A handle on one results store. Open it with :meth:`Store.open`.

    Thread-safe as far as SQLAlchemy's connection pool is: each call checks a connection out
    for its own transaction. Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, engine: Engine, url: str, *, read_only: bool = False) -> None:
        """Wrap an engine; prefer :meth:`open`, which also creates the tables."""
        self._engine = engine
        self._url = url
        #: Opened read-only: a SQLite store this user may only read (see the module's text).
        self.read_only = read_only
        self._backend = backend_of(url)
        self._password = password_of(url)
        #: The store's URL with any password replaced by ``***``, for messages.
        self.display_url: str = redact_url(url)
        #: The schema revision this store was at before :meth:`open` upgraded it (``"0001"``,
        #: ``"empty"`` for a new store); None when it was already up to date.
        self.upgraded_from: str | None = None

    @property
    def url(self) -> str:
        """The store's full URL, password included: for opening the same store again in this
        process (the dashboard's own reader); never print it, print ``display_url``."""
        return self._url

    # -- opening and closing -------------------------------------------------------------------

    @classmethod
    def open(cls, url: str | None = None) -> Store:
        """Open (and create if needed) the store at ``url`` (see :func:`resolve_store_url`).

        Creates the SQLite file's directory and the tables if they are missing, then marks runs
        left ``running`` by dead processes of this host as ``aborted``. A SQLite file this user
        may only read is opened read-only, as it is: not upgraded, nothing marked.

        Raises :class:`StoreUnavailable` (naming the URL, password redacted, with a hint) on any
        failure: bad URL, unreachable server, bad credentials, unwritable directory.
        """
        resolved = resolve_store_url(url)
        display = redact_url(resolved)
        backend = backend_of(resolved)
        if backend not in ("sqlite", "postgresql"):
            raise StoreUnavailable(
                f"cannot open the results store {display}: unsupported kind of store {backend!r}",
                hint="give a SQLite file path or a postgresql:// URL with --store or HORDE_STORE",
            )
        read_only_path = None
        if backend == "sqlite":
            _refuse_an_emptied_file(resolved, display)
            read_only_path = _only_readable(resolved)
        try:
            engine = (
                _read_only_sqlite_engine(resolved, read_only_path)
                if read_only_path
                else _create_engine(resolved, backend)
            )
        except (ArgumentError, SQLAlchemyError, ImportError, ValueError) as exc:
            raise _unavailable("open", display, backend, exc, password_of(resolved)) from exc
        store = cls(engine, resolved, read_only=read_only_path is not None)
        try:
            with store._guard("open"):
                if store.read_only:
                    require_current_revision(engine, display_url=display)
                else:
                    store.upgraded_from = _migrate(engine, resolved, display)
                    store._mark_abandoned_runs()
        except BaseException:
            engine.dispose()
            raise
        return store

    def close(self) -> None:
        """Release every pooled connection. Calling it twice is harmless."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.display_url!r})"

    # -- writing -------------------------------------------------------------------------------

    def create_run(
        self,
        *,
        plan: dict[str, Any],
        plan_name: str,
        parameters: dict[str, Any],
        tags: dict[str, str],
    ) -> str:
        """Record a new run in status ``running`` and return its id.

        ``plan`` is stored as JSON in the key order given (what was run, exactly); the host and
        pid of this process are recorded so that an abandoned run can be recognised later.
        """
        plan_json = _dumps(plan)
        parameters_json = _dumps(parameters)
        tags_json = _dumps(tags)
        host = socket.gethostname()
        pid = os.getpid()
        with self._guard("write to"):
            for attempt in range(_RUN_ID_ATTEMPTS):
                started_at = datetime.now(timezone.utc)
                run_id = new_run_id(started_at)
                try:
                    with self._engine.begin() as conn:
                        conn.execute(
                            runs.insert().values(
                                run_id=run_id,
                                plan_name=plan_name,
                                plan_json=plan_json,
                                parameters_json=parameters_json,
                                tags_json=tags_json,
                                status=_RUNNING,
                                started_at=started_at,
                                ended_at=None,
                                summary_json=None,
                                host=host,
                                pid=pid,
                                schema_version=SCHEMA_VERSION,
                            )
                        )
                except IntegrityError:
                    # Same second, same 4 hex digits as an existing run: draw again.
                    if attempt == _RUN_ID_ATTEMPTS - 1:
                        raise
                    continue
                return run_id
        raise AssertionError("unreachable")  # pragma: no cover

    def add_snapshot(self, run_id: str, snapshot: Mapping[str, Any]) -> None:
        """Store one snapshot (the shape in ARCHITECTURE.md) in one committed transaction.

        Keys this version does not know are kept in ``extra_json`` and come back from
        :meth:`snapshots`. Raises ``ValueError`` for a snapshot missing a required key or
        repeating a stored second, :class:`RunNotFound` for an unknown run.
        """
        snapshot_row, step_rows = _snapshot_rows(run_id, snapshot)
        with self._guard("write to"):
            try:
                with self._engine.begin() as conn:
                    conn.execute(snapshots.insert(), [snapshot_row])
                    if step_rows:
                        conn.execute(snapshot_steps.insert(), step_rows)
                return
            except IntegrityError as exc:
                conflict = exc
        # Foreign key (no such run) or primary key (second already stored): tell which.
        self._require_run(run_id)
        raise ValueError(
            f"snapshot for second {snapshot_row['second']} of run {run_id} conflicts with the "
            f"stored data (a second stored twice, or a step listed twice?): {_reason(conflict)}"
        ) from conflict

    def finish_run(self, run_id: str, *, status: str, summary: Mapping[str, Any] | None) -> None:
        """Close a run: set its final ``status``, ``ended_at`` (now, UTC) and ``summary``."""
        if status not in FINAL_STATUSES:
            raise ValueError(
                f"a run cannot finish with status {status!r}; expected one of {', '.join(sorted(FINAL_STATUSES))}"
            )
        summary_json = None if summary is None else _dumps(summary)
        with self._guard("write to"), self._engine.begin() as conn:
            result = conn.execute(
                update(runs)
                .where(runs.c.run_id == run_id)
                .values(
                    status=status,
                    ended_at=datetime.now(timezone.utc),
                    summary_json=summary_json,
                )
            )
            updated = result.rowcount
        if updated == 0:
            raise self._not_found(run_id)

    # -- re-targets asked from elsewhere -------------------------------------------------------

    def request_control(self, run_id: str, request: dict[str, Any]) -> int:
        """Queue a re-target for a running run; its process answers within about a second."""
        self._require_run(run_id)
        with self._guard("write to"), self._engine.begin() as conn:
            result = conn.execute(
                controls.insert().values(
                    run_id=run_id,
                    requested_at=datetime.now(timezone.utc),
                    request_json=_dumps(request),
                )
            )
            key = result.inserted_primary_key
        assert key is not None
        return int(key[0])

    def pending_controls(self, run_id: str) -> list[tuple[int, dict[str, Any]]]:
        """Unanswered re-targets of a run, oldest first."""
        query = (
            select(controls.c.request_id, controls.c.request_json)
            .where(controls.c.run_id == run_id, controls.c.answered_at.is_(None))
            .order_by(controls.c.request_id)
        )
        with self._guard("read"), self._engine.connect() as conn:
            rows = conn.execute(query).all()
        return [(int(row[0]), json.loads(row[1])) for row in rows]

    def answer_control(self, request_id: int, answer: str) -> None:
        with self._guard("write to"), self._engine.begin() as conn:
            conn.execute(
                update(controls)
                .where(controls.c.request_id == request_id)
                .values(answered_at=datetime.now(timezone.utc), answer=answer)
            )

    def control_answer(self, request_id: int) -> str | None:
        """The answer to a re-target, or None while it waits."""
        with self._guard("read"), self._engine.connect() as conn:
            row = conn.execute(select(controls.c.answer).where(controls.c.request_id == request_id)).first()
        return None if row is None else row[0]

    def add_monitor_samples(self, run_id: str, samples: Sequence[MonitorSample]) -> None:
        """Store monitors' samples (a second's, usually) in one committed transaction."""
        if not samples:
            return
        with self._guard("write to"), self._engine.begin() as conn:
            conn.execute(monitor_samples.insert(), sample_rows(run_id, samples))

    # -- reading -------------------------------------------------------------------------------

    def list_runs(self, *, limit: int = 50) -> list[RunRecord]:
        """The most recent ``limit`` runs, newest first."""
        query = select(runs).order_by(runs.c.started_at.desc(), runs.c.run_id.desc()).limit(max(limit, 0))
        with self._guard("read"), self._engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_record(row) for row in rows]

    def get_run(self, ref: str) -> RunRecord:
        """The run named by ``ref``: a full run id, a unique prefix of one, or ``last``.

        Raises :class:`RunNotFound` when nothing matches, or when a prefix matches several runs
        (the message lists some of them).
        """
        ref = ref.strip().lower()
        if ref == "last":
            runs_found = self.list_runs(limit=1)
            if not runs_found:
                raise RunNotFound(
                    f"there are no runs in the store {self.display_url} yet",
                    hint="`horde run PLAN` records one; `horde runs` lists runs",
                )
            return runs_found[0]
        if not ref:
            raise self._not_found(ref)
        with self._guard("read"), self._engine.connect() as conn:
            exact = conn.execute(select(runs).where(runs.c.run_id == ref)).mappings().first()
            if exact is not None:
                return _record(exact)
            # autoescape: a '%' or '_' typed by the user is not a wildcard.
            candidates = (
                conn.execute(
                    select(runs)
                    .where(runs.c.run_id.startswith(ref, autoescape=True))
                    .order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
                    .limit(6)
                )
                .mappings()
                .all()
            )
        if not candidates:
            raise self._not_found(ref)
        if len(candidates) > 1:
            shown = ", ".join(str(row["run_id"]) for row in candidates[:5])
            more = ", ..." if len(candidates) > 5 else ""
            raise RunNotFound(
                f"{ref!r} is ambiguous: it starts the ids of several runs ({shown}{more})",
                hint="give more characters of the run id; `horde runs` lists runs",
            )
        return _record(candidates[0])

    def snapshots(self, run_id: str) -> list[Snapshot]:
        """Every snapshot of the run, ordered by second, in the shape given to add_snapshot.

        Known keys a stored snapshot lacked (a run stored by an older Horde) come back as
        ``None``, so readers take a number with ``or 0``.
        """
        with self._guard("read"), self._engine.connect() as conn:
            if conn.execute(select(runs.c.run_id).where(runs.c.run_id == run_id)).first() is None:
                raise self._not_found(run_id)
            return read_snapshots(conn, run_id)

    def monitor_samples(self, run_id: str) -> dict[str, list[MonitorSample]]:
        """Every sample of the run's monitors, by monitor, in order of second (empty for a run
        without monitors, or stored before they existed)."""
        with self._guard("read"), self._engine.connect() as conn:
            return read_monitor_samples(conn, run_id)

    # -- internals -----------------------------------------------------------------------------

    def _mark_abandoned_runs(self) -> None:
        """Mark this host's ``running`` runs whose process is gone as ``aborted``.

        Only runs of this host are judged: a pid means nothing on another machine. ``ended_at``
        becomes the time of the run's last stored snapshot (when it was last seen alive), or its
        start if it stored none, rather than now, which may be days later.
        """
        host = socket.gethostname()
        with self._engine.connect() as conn:
            candidates = conn.execute(
                select(runs.c.run_id, runs.c.pid, runs.c.started_at).where(
                    runs.c.status == _RUNNING, runs.c.host == host
                )
            ).all()
        for run_id, pid, started_at in candidates:
            if pid_alive(int(pid)):
                continue
            with self._engine.begin() as conn:
                last_seen = conn.execute(
                    select(snapshots.c.timestamp)
                    .where(snapshots.c.run_id == run_id)
                    .order_by(snapshots.c.second.desc())
                    .limit(1)
                ).scalar()
                ended_at = (
                    datetime.fromtimestamp(float(last_seen), timezone.utc) if last_seen is not None else started_at
                )
                # The status guard keeps a run that finished meanwhile from being overwritten.
                conn.execute(
                    update(runs)
                    .where(runs.c.run_id == run_id, runs.c.status == _RUNNING)
                    .values(status="aborted", ended_at=ended_at)
                )

    def _require_run(self, run_id: str) -> None:
        with self._guard("read"), self._engine.connect() as conn:
            found = conn.execute(select(runs.c.run_id).where(runs.c.run_id == run_id)).first()
        if found is None:
            raise self._not_found(run_id)

    def _not_found(self, ref: str) -> RunNotFound:
        return RunNotFound(
            f"no run matches {ref!r} in the store {self.display_url}",
            hint="`horde runs` lists runs (pass --store if they are in another store)",
        )

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn database errors into :class:`StoreUnavailable` naming the (redacted) URL."""
        try:
            yield
        except SQLAlchemyError as exc:
            error = _unavailable(action, self.display_url, self._backend, exc, self._password)
            if self.read_only:
                error.hint = READ_ONLY_HINT
            raise error from exc

    def refuse_read_only(self, action: str) -> None:
        """Raise :class:`StoreUnavailable` if this user may only read the store: a command that
        records (``horde run``) stops here, before its load or its progress begins, rather than
        at its first write."""
        if self.read_only:
            raise StoreUnavailable(
                f"cannot {action}: this user may only read the results store {self.display_url}", hint=READ_ONLY_HINT
            )


#: What to do about a store this user may only read (its file or its folder is not writable).
READ_ONLY_HINT = (
    "this user may only read the store (its file or its folder is not writable): runs, show, compare, "
    "report and ui read it; to record runs, give a store you can write with --store or HORDE_STORE"
)


def _create_engine(url: str, backend: str) -> Engine:
    """An engine for ``url``, set up for the store's access pattern on each backend."""
    if backend == "sqlite":
        database = make_url(url).database
        if database and database != ":memory:" and not database.startswith("file:"):
            # The first run on a machine creates ~/.local/share/horde/.
            path = Path(database).expanduser()
            # Only the default store's folder is made: a mistyped --store path must not leave a
            # tree of folders behind it (it would be /nonexistent/dir, made by root).
            if not path.parent.is_dir() and path != default_store_path():
                raise ValueError(f"the folder {path.parent} does not exist")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # A new store is readable by its owner only (plans, tags, results are the team's;
                # SQLite gives its -wal and -shm files the database file's permissions).
                if not path.exists():
                    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError as exc:
                raise ValueError(f"cannot create the store file {database}: {exc}") from exc
        engine = create_engine(url, pool_pre_ping=True)
        event.listen(engine, "connect", _configure_sqlite)
        return engine
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in make_url(url).query:
        connect_args["connect_timeout"] = _POSTGRES_CONNECT_TIMEOUT_S
    # pre_ping: a long run outlives server restarts and idle-connection reapers.
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


def _only_readable(url: str) -> Path | None:
    """The SQLite store file's path when it exists and this user may read it but not write it
    or its folder (SQLite writes its -wal and -shm files beside it); None otherwise, a new or
    unreadable store included (the ordinary open creates the one, reports the other)."""
    try:
        database = make_url(url).database
    except ArgumentError:
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = Path(database).expanduser()
    if not path.is_file() or not os.access(path, os.R_OK):
        return None
    return None if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK) else path


def only_readable_sqlite_engine(url: str) -> Engine | None:
    """For a reader beside the store (the dashboard's): the engine :meth:`Store.open` itself
    uses where this user may only read the SQLite file at ``url``; None where the user may write
    it (or it is no such file), and the reader opens it its own way."""
    path = _only_readable(url)
    return _read_only_sqlite_engine(url, path) if path is not None else None


def _read_only_sqlite_engine(url: str, path: Path) -> Engine:
    """An engine that opens the SQLite file at ``path`` read-only (``mode=ro``).

    A store in WAL mode is read through its -shm file, which SQLite makes beside the database
    when it is absent; where the folder is not writable either, the file is read as immutable
    (``immutable=1``): no other process is writing it then, since a writer's -wal and -shm files
    would be there, with the database file's permissions, and the first open would have used them.
    """
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"

    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(uri, uri=True, timeout=_SQLITE_BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return connection
        except sqlite3.OperationalError as error:
            connection.close()
            if "readonly" not in str(error) and "unable to open" not in str(error):
                raise
        return sqlite3.connect(f"{uri}&immutable=1", uri=True, check_same_thread=False)

    return create_engine(url, creator=connect, pool_pre_ping=True)


def _refuse_an_emptied_file(url: str, display_url: str) -> None:
    """Refuse a SQLite store file of 0 bytes: SQLite would take it for a new, empty store and
    every run it held would silently be gone. A file that gains its first page within
    :data:`_EMPTY_FILE_GRACE_S` is a store another process is creating at this moment."""
    try:
        database = make_url(url).database
    except ArgumentError:
        return  # the open says what is wrong with the URL
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database).expanduser()
    deadline = time.monotonic() + _EMPTY_FILE_GRACE_S
    while True:
        try:
            if path.stat().st_size > 0:
                return
        except OSError:
            return  # absent: a new store; unreadable: the open says so
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    raise StoreUnavailable(
        f"cannot open the results store {display_url}: the file is empty (0 bytes), so it holds no runs",
        hint="it was truncated or copied wrongly: restore it from a backup, or remove it to start a new store, or "
        "choose another store with --store or HORDE_STORE",
    )


def _switch_to_wal(cursor: Any) -> None:
    """Puts the database in WAL mode. Switching takes an exclusive lock that SQLite does not
    wait for (the busy timeout does not apply), so two processes opening a new store at the same
    instant (a run and a dashboard, or a run's generators' coordinator and a watcher) would see
    "database is locked": retry for as long as the busy timeout."""
    deadline = time.monotonic() + _SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    """Per-connection SQLite settings; see the comments for why each one is needed."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")
        # WAL: `horde runs` in another terminal reads while `horde run` writes, neither blocks.
        _switch_to_wal(cursor)
        # SQLite leaves foreign keys off unless asked; they keep orphan snapshots out.
        cursor.execute("PRAGMA foreign_keys=ON")
        # FULL: each committed second is on disk even if the machine, not just Horde, dies.
        # One fsync a second is cheap.
        cursor.execute("PRAGMA synchronous=FULL")
    finally:
        cursor.close()


def _migrate(engine: Engine, url: str, display_url: str) -> str | None:
    """Bring the store's tables to this Horde's schema (:mod:`horde.store.migration`).

    Connects once on its own first, so that an unreachable server fails here, once. Two
    processes creating a new store at the same instant serialise on the upgrade's lock; the
    retries cover what is outside it (SQLite's switch to WAL on a brand-new file).
    """
    with engine.connect():
        pass
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            return upgrade_store(engine, url, display_url=display_url)
        except SQLAlchemyError:
            if attempt == _CREATE_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def _unavailable(
    action: str, display_url: str, backend: str, exc: BaseException, password: str | None
) -> StoreUnavailable:
    """A :class:`StoreUnavailable` for ``exc``, with the URL redacted and a hint per backend."""
    reason = _reason(exc)
    if password:
        # Drivers sometimes echo the connection string; never let the password through.
        reason = reason.replace(password, "***")
    if backend == "postgresql":
        hint = (
            "is the PostgreSQL server running? check host/port/credentials and that the "
            "database exists; choose another store with --store or HORDE_STORE"
        )
    else:
        hint = (
            "check that the folder exists (only the default store's folder is made for you) and is writable, and that the "
            "file is a SQLite database; choose another store with --store or HORDE_STORE"
        )
    return StoreUnavailable(f"cannot {action} the results store {display_url}: {reason}", hint=hint)


def _reason(exc: BaseException) -> str:
    """The useful part of a driver error: the DBAPI message's first line, not the SQL."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if len(first) > _MAX_REASON_CHARS:
        first = first[: _MAX_REASON_CHARS - 3] + "..."
    return first


def _dumps(value: Any) -> str:
    """JSON text in the key order given (what was run, as it was written)."""
    return json.dumps(value, sort_keys=False)


def _loads_dict(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


def _record(row: RowMapping) -> RunRecord:
    return RunRecord(
        run_id=str(row["run_id"]),
        plan_name=str(row["plan_name"]),
        plan=_loads_dict(row["plan_json"]) or {},
        parameters=_loads_dict(row["parameters_json"]) or {},
        tags=_loads_dict(row["tags_json"]) or {},
        status=str(row["status"]),
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        summary=_loads_dict(row["summary_json"]),
        host=str(row["host"]),
        pid=int(row["pid"]),
    )


def _snapshot_rows(run_id: str, snapshot: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Split a snapshot into its ``snapshots`` row and its ``snapshot_steps`` rows."""
    # Checked here, not left to NOT NULL constraints, so the error names the key.
    missing = [key for key in (*SNAPSHOT_REQUIRED, "steps") if snapshot.get(key) is None]
    if missing:
        raise ValueError(f"snapshot lacks {', '.join(missing)}")
    row: dict[str, Any] = {"run_id": run_id}
    for key in SNAPSHOT_FIELDS:
        row[key] = snapshot.get(key)
    known = {*SNAPSHOT_FIELDS, "steps"}
    extra = {key: value for key, value in snapshot.items() if key not in known}
    row["extra_json"] = _dumps(extra) if extra else None

    step_rows: list[dict[str, Any]] = []
    for position, step in enumerate(snapshot["steps"]):
        absent = [key for key in STEP_FIELDS if step.get(key) is None]
        if absent:
            raise ValueError(f"snapshot step #{position} lacks {', '.join(absent)}")
        step_extra = {key: value for key, value in step.items() if key not in STEP_FIELDS}
        step_rows.append(
            {
                "run_id": run_id,
                "second": snapshot["second"],
                "scenario": step["scenario"],
                "step": step["step"],
                "position": position,
                "requests": step["requests"],
                "ok": step["ok"],
                "errors_json": _dumps(step["errors"]),
                "bytes_sent": step["bytes_sent"],
                "bytes_received": step["bytes_received"],
                "histogram": bytes(step["histogram"]),
                "extra_json": _dumps(_bytes_as_text(step_extra)) if step_extra else None,
            }
        )
    return row, step_rows


def read_snapshots(conn: Connection, run_id: str, *, after_second: int = 0) -> list[Snapshot]:
    """The run's snapshots after ``after_second`` (all of them by default), ordered by second,
    in the shape given to ``Store.add_snapshot``; on the caller's connection, so a reader with
    its own (read-only) engine gets the same shapes as :meth:`Store.snapshots`."""
    snapshot_rows = (
        conn.execute(
            select(snapshots)
            .where(snapshots.c.run_id == run_id, snapshots.c.second > after_second)
            .order_by(snapshots.c.second)
        )
        .mappings()
        .all()
    )
    if not snapshot_rows:
        return []
    step_rows = (
        conn.execute(
            select(snapshot_steps)
            .where(
                snapshot_steps.c.run_id == run_id,
                snapshot_steps.c.second > after_second,
                snapshot_steps.c.second <= snapshot_rows[-1]["second"],
            )
            .order_by(snapshot_steps.c.second, snapshot_steps.c.position)
        )
        .mappings()
        .all()
    )
    steps_by_second: dict[int, list[dict[str, Any]]] = {}
    for row in step_rows:
        steps_by_second.setdefault(int(row["second"]), []).append(_step_from_row(row))
    # The rows hold what add_snapshot was given: a snapshot's shape (see _snapshot_from_row).
    return [
        cast(Snapshot, _snapshot_from_row(row, steps_by_second.get(int(row["second"]), []))) for row in snapshot_rows
    ]


def _snapshot_from_row(row: RowMapping, steps: list[dict[str, Any]]) -> dict[str, Any]:
    snapshot: dict[str, Any] = {}
    for key in SNAPSHOT_FIELDS:
        snapshot[key] = row[key]
        if key == "final":
            snapshot["final"] = bool(row["final"])
            # ARCHITECTURE.md lists "steps" right after "final"; keep that order for readers.
            snapshot["steps"] = steps
    snapshot.update(_loads_dict(row["extra_json"]) or {})
    return snapshot


def _step_from_row(row: RowMapping) -> dict[str, Any]:
    step: dict[str, Any] = {
        "scenario": row["scenario"],
        "step": row["step"],
        "requests": row["requests"],
        "ok": row["ok"],
        "errors": json.loads(row["errors_json"]),
        "bytes_sent": row["bytes_sent"],
        "bytes_received": row["bytes_received"],
        # Some drivers hand back memoryview for binary columns; callers get plain bytes.
        "histogram": bytes(row["histogram"]),
    }
    step.update(_text_as_bytes(_loads_dict(row["extra_json"]) or {}))
    return step


#: How a binary value among a step's extra keys (the latency from the send, HDR V2) is kept in
#: its JSON column: ``{"$base64": "..."}``.
_BYTES_KEY = "$base64"


def _bytes_as_text(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        key: {_BYTES_KEY: base64.b64encode(bytes(value)).decode("ascii")}
        if isinstance(value, (bytes, bytearray, memoryview))
        else value
        for key, value in extra.items()
    }


def _text_as_bytes(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        key: base64.b64decode(value[_BYTES_KEY]) if isinstance(value, dict) and set(value) == {_BYTES_KEY} else value
        for key, value in extra.items()
    }
