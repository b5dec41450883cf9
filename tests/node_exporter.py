"""A real node_exporter (Debian package prometheus-node-exporter) on a free loopback port, for
the monitors' tests.

With ``textfile_dir`` its textfile collector also serves every ``*.prom`` file of that folder:
a test writes a gauge there (:func:`write_gauge`) and node_exporter serves it at the next
scrape, so a test moves a monitored figure at a moment it chooses, through the real exporter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import free_tcp_port, wait_for_port

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def start_node_exporter(port: int, textfile_dir: Path | None = None) -> subprocess.Popen[bytes]:
    """node_exporter serving 127.0.0.1:``port``, once it answers (the caller stops it)."""
    if NODE_EXPORTER is None:
        pytest.fail(
            "prometheus-node-exporter is not installed (apt-get install prometheus-node-exporter; .ci/run does)"
        )
    # Loopback included (Debian's build leaves it out by default): tests' traffic goes there.
    flags = [f"--web.listen-address=127.0.0.1:{port}", "--collector.netdev.device-exclude=^$"]
    if textfile_dir is not None:
        flags.append(f"--collector.textfile.directory={textfile_dir}")
    process = subprocess.Popen([NODE_EXPORTER, *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
    except BaseException:
        stop(process)
        raise
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=10)


@contextmanager
def node_exporter(textfile_dir: Path | None = None) -> Iterator[str]:
    """Starts node_exporter; yields its /metrics URL; stops it at the end."""
    port = free_tcp_port()
    process = start_node_exporter(port, textfile_dir)
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        stop(process)


def write_gauge(textfile_dir: Path, name: str, value: float) -> None:
    """Sets gauge ``name`` to ``value`` in the textfile collector's folder. The file is renamed
    into place: node_exporter must never read a half-written one."""
    partial = textfile_dir / f".{name}.prom.partial"
    partial.write_text(f"# TYPE {name} gauge\n{name} {value}\n")
    os.replace(partial, textfile_dir / f"{name}.prom")
