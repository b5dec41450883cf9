"""Access logs read and added up natively (crate ``horde-logs``): what ``horde profile`` builds
its profile from, at disk speed, with no Python object per line.

:func:`profile_logs` reads combined or nginx logs (plain or gzip, in bounded memory), templates
each request into its endpoint, and adds the requests up per endpoint, per minute and per
session; :mod:`horde.profile.native` turns the result into the profile. Horde's redaction rules
(what names a credential, what holds an e-mail address) stay :mod:`horde.plan.redaction`'s: the
native reader asks them, once per distinct name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from horde import _engine
from horde.plan.redaction import has_email, is_secret_parameter

#: on_progress(lines, requests, bad lines, bytes read, bytes in all)
Progress = Callable[[int, int, int, int, int], None]


def profile_logs(paths: Sequence[Path], *, nginx: bool, time_unit_ms: float | None, session_name: str | None,
                 session_gap_s: float, max_endpoints: int, on_progress: Progress | None = None) -> dict[str, Any]:
    """The logs' aggregate (its form: ``python/horde/_engine.pyi``, ``profile_logs``), or
    ``{"error": {...}}`` naming the file that could not be read and why."""
    return _engine.profile_logs([str(path) for path in paths], nginx=nginx, time_unit_ms=time_unit_ms,
                                session_name=session_name, session_gap_s=session_gap_s, max_endpoints=max_endpoints,
                                is_secret_parameter=is_secret_parameter, has_email=has_email, on_progress=on_progress)
