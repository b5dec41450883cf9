"""The results store: every run, its plan, per-second snapshots and per-step HDR histograms.

SQLite by default (``~/.local/share/horde/runs.sqlite``), or PostgreSQL
(``postgresql+psycopg://...``), chosen by ``--store`` > ``HORDE_STORE`` > the default; see
:func:`resolve_store_url`. Histograms are opaque bytes here: only ``horde.engine.histogram`` reads them.

>>> with Store.open("sqlite:///:memory:") as store:  # doctest: +SKIP
...     run_id = store.create_run(plan=plan, plan_name="quickstart", parameters={}, tags={})
...     store.add_snapshot(run_id, snapshot)
...     store.finish_run(run_id, status="finished", summary=summary)
"""

from __future__ import annotations

from horde.store.core import FINAL_STATUSES, RunRecord, Store, new_run_id, pid_alive
from horde.store.monitor_samples import MonitorSample
from horde.store.url import (
    DEFAULT_STORE_PATH,
    STORE_ENV,
    default_store_path,
    redact_url,
    resolve_store_url,
)

__all__ = [
    "DEFAULT_STORE_PATH",
    "FINAL_STATUSES",
    "MonitorSample",
    "STORE_ENV",
    "RunRecord",
    "Store",
    "default_store_path",
    "new_run_id",
    "pid_alive",
    "redact_url",
    "resolve_store_url",
]
