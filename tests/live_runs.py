"""Following a `horde run` started in a subprocess by a test, until the store shows it going."""

from __future__ import annotations

import subprocess
import time

from conftest import HordeCli
from horde.errors import StoreUnavailable
from horde.web.store_reads import RunFilter, StoreReader


def first_stored_second(horde_cli: HordeCli, process: subprocess.Popen[str], *, timeout_s: float = 30) -> str:
    """The id of the run `process` runs, once its first second is stored (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert process.poll() is None, f"horde run ended early: {process.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"the run stored no second within {timeout_s:g} s"
        time.sleep(0.2)
        if not horde_cli.store_path.exists():
            continue
        reader = StoreReader(horde_cli.store_url)
        try:
            running = reader.find_runs(RunFilter(status="running"))
            if running and reader.snapshots_after(running[0].run_id, 0):
                return running[0].run_id
        except StoreUnavailable:
            continue  # the file exists but the run's process has not created its tables yet
        finally:
            reader.close()
