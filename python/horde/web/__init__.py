"""The live web dashboard: runs, a run's panels updating each second, comparisons, trends.

Everything comes from the store (``horde.store``), so the dashboard shows runs started by any
process sharing it, a SQLite file or a team's PostgreSQL, live or finished; its controls (stop,
set VUs or rate) are requests queued in the store that the run's own process applies
(``conductor``). Modules: ``app`` (the Starlette application), ``server`` (uvicorn in a thread),
``access`` (loopback and tokens), ``api`` (JSON, the live stream, controls), ``pages`` (HTML),
``run_view`` (a run's figures built second by second), ``store_reads`` (the dashboard's read-only
queries), ``dashboard`` (what the handlers share).
"""

from __future__ import annotations

from horde.web.access import InsecureBind
from horde.web.app import create_app
from horde.web.server import DashboardServer

__all__ = ["DashboardServer", "InsecureBind", "create_app"]
