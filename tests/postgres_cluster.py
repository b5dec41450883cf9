"""A real PostgreSQL primary with a streaming standby on loopback, for the monitors' tests.

``initdb`` makes the primary (wal_level replica, pg_stat_statements preloaded, autovacuum every
second so that its runs show in a short test), ``pg_basebackup -R`` clones it into a standby
with ``hot_standby_feedback = on``; both on free ports of 127.0.0.1 with trust auth, stopped and
deleted at the end. Uses conftest's discovery of the binaries (skipped, or failed in CI, without
them).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from conftest import _PG_SUPERUSER, _as_postgres_user, _postgres_bindir, _run, _skip_or_fail, free_tcp_port


@dataclass(frozen=True)
class PostgresPair:
    primary_port: int
    standby_port: int

    def dsn(self, port: int, database: str = "postgres") -> str:
        return f"postgresql://{_PG_SUPERUSER}@127.0.0.1:{port}/{database}"

    @property
    def primary(self) -> str:
        return self.dsn(self.primary_port)

    @property
    def standby(self) -> str:
        return self.dsn(self.standby_port)


def _start(prefix: list[str], bindir: Path, datadir: Path, workdir: Path, port: int, settings: list[str]) -> None:
    options = " ".join(
        [
            f"-c port={port}",
            "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={workdir}",
            *[f"-c {setting}" for setting in settings],
        ]
    )
    _run(
        [
            *prefix,
            str(bindir / "pg_ctl"),
            "--pgdata",
            str(datadir),
            "--log",
            str(datadir.with_suffix(".log")),
            "--options",
            options,
            "--wait",
            "--timeout",
            "60",
            "start",
        ],
        cwd=workdir,
        what=f"pg_ctl start ({datadir.name})",
    )


def required_bindir() -> Path:
    """PostgreSQL's server binaries; the test is skipped (failed in CI) without them."""
    bindir = _postgres_bindir()
    if bindir is None:
        _skip_or_fail("no PostgreSQL binaries (initdb, pg_ctl, pg_basebackup); install postgresql")
        raise AssertionError("unreachable")
    return bindir


def initdb(prefix: list[str], bindir: Path, workdir: Path, datadir: Path) -> None:
    """A new cluster in ``datadir`` (trust auth), ``workdir`` handed to the user it runs as."""
    if prefix:
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
            "--no-sync",
        ],
        cwd=workdir,
        what="initdb",
    )


def postgres_pair() -> Iterator[PostgresPair]:
    """The generator behind the ``postgres_pair`` fixture."""
    bindir = required_bindir()
    prefix = _as_postgres_user()
    workdir = Path(tempfile.mkdtemp(prefix="horde-pg-pair-"))
    primary, standby = workdir / "primary", workdir / "standby"
    started: list[Path] = []
    try:
        initdb(prefix, bindir, workdir, primary)
        primary_port, standby_port = free_tcp_port(), free_tcp_port()
        common = ["fsync=off", "full_page_writes=off", "max_connections=30"]
        _start(
            prefix,
            bindir,
            primary,
            workdir,
            primary_port,
            [
                *common,
                "wal_level=replica",
                "max_wal_senders=4",
                "shared_preload_libraries=pg_stat_statements",
                "autovacuum_naptime=1",
                "autovacuum_vacuum_threshold=50",
                "autovacuum_vacuum_scale_factor=0",
                "autovacuum_vacuum_cost_delay=0",
            ],
        )
        started.append(primary)
        _run(
            [
                *prefix,
                str(bindir / "pg_basebackup"),
                "--pgdata",
                str(standby),
                "--host",
                "127.0.0.1",
                "--port",
                str(primary_port),
                "--username",
                _PG_SUPERUSER,
                "--write-recovery-conf",
                "--checkpoint",
                "fast",
                "--wal-method",
                "stream",
                "--no-sync",
            ],
            cwd=workdir,
            what="pg_basebackup",
        )
        _start(
            prefix,
            bindir,
            standby,
            workdir,
            standby_port,
            [*common, "hot_standby=on", "hot_standby_feedback=on", "wal_receiver_status_interval=1"],
        )
        started.append(standby)
        pair = PostgresPair(primary_port, standby_port)
        deadline = time.monotonic() + 30
        with psycopg.connect(pair.primary, autocommit=True) as connection:
            while connection.execute(
                "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
            ).fetchone() != (1,):
                if time.monotonic() > deadline:
                    raise AssertionError("the standby did not start streaming in 30 s")
                time.sleep(0.1)
        yield pair
    finally:
        for datadir in reversed(started):
            subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "--pgdata", str(datadir), "--mode", "immediate", "--wait", "stop"],
                cwd=workdir,
                capture_output=True,
                timeout=60,
                check=False,
            )
        shutil.rmtree(workdir, ignore_errors=True)
