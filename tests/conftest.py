"""Shared test fixtures.

PostgreSQL
----------
``postgres_url`` (session): an admin URL of a real PostgreSQL server. Either
``$HORDE_TEST_POSTGRES_URL``, or a private throwaway cluster started from the binaries in
``/usr/lib/postgresql/*/bin`` on a free port of 127.0.0.1 (trust auth), stopped and deleted at the
end of the session. Without binaries the tests using it are skipped, unless
``HORDE_REQUIRE_POSTGRES=1`` (CI), which turns the skip into a failure.

``postgres_database`` (function): a URL of a fresh, empty database on that server, dropped after
the test, so tests never see each other's rows.

Declared blocks
---------------
Every block a run's observers fold into its summary (the capacity answer, thresholds, autostop,
monitors, a cluster's spread, a sighting run's reading) is checked against its declaration in
``horde.results.summary_blocks`` in every test that conducts a run in this process; a block
that is not what its type says fails the test.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

# The repository's Python sources, for tests that start a Horde subprocess.
PYTHON_SRC = Path(__file__).resolve().parents[1] / "python"

_PG_SUPERUSER = "postgres"


def free_tcp_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _skip_or_fail(reason: str) -> None:
    """Skip, or fail when CI demands PostgreSQL (so its tests can never be skipped silently)."""
    if os.environ.get("HORDE_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"HORDE_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL's bin directory (Debian layout first, then PATH)."""

    def version(path: str) -> tuple[int, ...]:
        match = re.search(r"/postgresql/([\d.]+)/bin", path)
        return tuple(int(part) for part in match.group(1).split(".")) if match else ()

    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda p: version(str(p)),
    )
    if found:
        return found[-1]
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    return None


def _as_postgres_user() -> list[str]:
    """The command prefix that runs initdb/pg_ctl as an unprivileged user.

    initdb refuses to run as root, so root runs them as the ``postgres`` system user (created
    by the Debian packages); any other user runs them as itself.
    """
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(_PG_SUPERUSER)
    except KeyError:
        _skip_or_fail(
            "running as root and there is no `postgres` system user to run initdb as "
            "(install PostgreSQL from packages, or set HORDE_TEST_POSTGRES_URL)"
        )
    runuser = shutil.which("runuser")
    if runuser is None:
        _skip_or_fail("running as root and `runuser` is missing, so initdb cannot be run")
        raise AssertionError("unreachable")
    return [runuser, "-u", _PG_SUPERUSER, "--"]


def _run(command: list[str], cwd: Path, what: str) -> None:
    """Run a cluster command; a failure fails the session set-up with its output."""
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        pytest.fail(
            f"{what} failed ({proc.returncode}): {' '.join(command)}\n{proc.stdout}\n{proc.stderr}",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """An admin URL (``postgresql+psycopg://``) of a real PostgreSQL server for this session."""
    external = os.environ.get("HORDE_TEST_POSTGRES_URL")
    if external:
        url = make_url(external).set(drivername="postgresql+psycopg")
        yield url.render_as_string(hide_password=False)
        return

    bindir = _postgres_bindir()
    if bindir is None:
        _skip_or_fail(
            "no PostgreSQL binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or on PATH; "
            "install postgresql or set HORDE_TEST_POSTGRES_URL"
        )
        raise AssertionError("unreachable")
    prefix = _as_postgres_user()

    workdir = Path(tempfile.mkdtemp(prefix="horde-pg-"))
    datadir = workdir / "data"
    started = False
    try:
        if prefix:
            # The cluster's files (and its unix socket) belong to the user that runs it.
            shutil.chown(workdir, user=_PG_SUPERUSER, group=None)
        _run(
            [
                *prefix,
                str(bindir / "initdb"),
                "--pgdata",
                str(datadir),
                "--auth",
                "trust",
                "--username",
                _PG_SUPERUSER,
                "--encoding",
                "UTF8",
                "--locale",
                "C",
                # Durability of a throwaway cluster does not matter; speed does.
                "--no-sync",
            ],
            cwd=workdir,
            what="initdb",
        )
        port = free_tcp_port()
        options = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-c port={port}",
                # Our own socket directory: /var/run/postgresql may be absent or not ours.
                f"-c unix_socket_directories={workdir}",
                "-c fsync=off",
                "-c full_page_writes=off",
                "-c max_connections=50",
            ]
        )
        # Set before starting: a start that times out may still leave a server to stop.
        started = True
        _run(
            [
                *prefix,
                str(bindir / "pg_ctl"),
                "--pgdata",
                str(datadir),
                "--log",
                str(workdir / "server.log"),
                "--options",
                options,
                "--wait",
                "--timeout",
                "60",
                "start",
            ],
            cwd=workdir,
            what="pg_ctl start",
        )
        yield f"postgresql+psycopg://{_PG_SUPERUSER}@127.0.0.1:{port}/postgres"
    finally:
        if started:
            # immediate: nothing in a throwaway cluster is worth a clean shutdown's wait.
            subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "--pgdata", str(datadir), "--mode", "immediate", "--wait", "stop"],
                cwd=workdir,
                capture_output=True,
                timeout=60,
                check=False,
            )
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def postgres_database(postgres_url: str) -> Iterator[str]:
    """A URL of a fresh, empty database on the session's server, dropped after the test."""
    name = f"horde_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            version = conn.dialect.server_version_info or (0,)
            # FORCE (PostgreSQL 13+) ends connections a test left behind (a killed child's).
            force = " WITH (FORCE)" if version >= (13,) else ""
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"{force}'))
    finally:
        admin.dispose()


# -- Horde processes and the built-in target --------------------------------------------------

#: The ``horde`` command of the environment running the tests (``.venv/bin/horde``).
HORDE_BIN = Path(sys.executable).with_name("horde")


def _default_sigint() -> None:
    """In a child: SIGINT raises KeyboardInterrupt even if the test runner was started in the
    background by a shell (which sets it to 'ignore', and Python keeps an ignored SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_port(port: int, *, timeout_s: float = 15.0) -> None:
    """Wait (bounded) until something accepts connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s") from None
            time.sleep(0.05)


class HordeCli:
    """Runs the ``horde`` command in a subprocess with its own SQLite store in ``tmp_path``."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.store_path = tmp_path / "store" / "runs.sqlite"
        self.store_path.parent.mkdir(exist_ok=True)  # horde makes only the default store's folder
        self.store_url = f"sqlite:///{self.store_path}"
        self.env = {**os.environ, "HORDE_STORE": str(self.store_path), "NO_COLOR": "1"}
        self.env.pop("COLUMNS", None)
        #: The CPUs the command runs on (all by default): a test pins the generator with it.
        self.cpus: set[int] | None = None

    def run(self, *args: str, timeout: float = 60.0, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        cpus = self.cpus

        def child() -> None:
            _default_sigint()
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        return subprocess.run(
            [str(HORDE_BIN), *args],
            env=self.env,
            cwd=cwd or self.tmp_path,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            preexec_fn=child,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(HORDE_BIN), *args],
            env=self.env,
            cwd=self.tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_default_sigint,
        )


@pytest.fixture
def horde_cli(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[HordeCli]:
    """The ``horde`` command, with ``HORDE_STORE`` pointing into this test's ``tmp_path``. After
    the test, every summary the command stored there is checked against its declaration
    (``horde.results.summary.Summary``, its blocks included): a key missing, undeclared or of
    another type fails the test (a test that writes summaries of its own there is marked
    ``hand_made_summaries``; a store the test broke is not read)."""
    cli = HordeCli(tmp_path)
    yield cli
    if cli.store_path.exists() and request.node.get_closest_marker("hand_made_summaries") is None:
        problems = stored_summary_problems(cli.store_url)
        if problems:
            pytest.fail("a stored summary is not what horde.results.summary declares: " + "; ".join(problems[:20]))


def stored_summary_problems(store_url: str) -> list[str]:
    """Where each summary stored at ``store_url`` differs from ``Summary``."""
    from horde.errors import HordeError
    from horde.results.summary import Summary
    from horde.store import Store
    from typed_dicts import conforms

    try:
        store = Store.open(store_url)
    except HordeError:
        return []  # a store the test broke on purpose (emptied, read-only): nothing of a run to check
    try:
        records = store.list_runs(limit=10_000)
        return [
            problem
            for record in records
            if record.summary is not None
            for problem in conforms(record.summary, Summary, f"run {record.run_id}")
        ]
    finally:
        store.close()


@pytest.fixture(scope="module")
def builtin_target() -> Iterator[Any]:
    """The built-in target, in-process on a free port of 127.0.0.1 (no capacity model)."""
    from horde.engine.target import start

    handle = start(port=0)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def target_process() -> Iterator[Callable[..., int]]:
    """Starts ``horde target`` in its own process (so its CPU is not the generator's); call it
    with the target's flags, get its port. Every process started is stopped after the test."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*flags: str, cpus: set[int] | None = None) -> int:
        """``cpus``: pin the target to these CPUs (away from the generator's)."""
        port = free_tcp_port()

        def child() -> None:
            _default_sigint()
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        proc = subprocess.Popen(
            [str(HORDE_BIN), "target", "--port", str(port), *flags],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child,
        )
        started.append(proc)
        wait_for_port(port)
        return port

    try:
        yield start
    finally:
        for proc in started:
            proc.terminate()
        for proc in started:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture(autouse=True)
def _blocks_are_what_they_declare(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from horde.control import conductor
    from horde.results.summary import SummaryBlocks
    from typed_dicts import conforms

    problems: list[str] = []
    fold = conductor.fold_blocks

    def checked(summary: Any, blocks: Any) -> None:
        problems.extend(conforms(blocks, SummaryBlocks, "summary"))
        fold(summary, blocks)

    monkeypatch.setattr(conductor, "fold_blocks", checked)
    yield
    if problems:
        pytest.fail("a summary block is not what horde.results.summary_blocks declares: " + "; ".join(problems))
