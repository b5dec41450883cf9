"""What every request handler of the dashboard shares: the store, its reader, the templates.

One :class:`Dashboard` per application, kept in ``app.state.dashboard``. Handlers read runs only
through it, so they work the same on a SQLite file and on a shared PostgreSQL store, for runs
started by any process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

import jinja2
from starlette.requests import Request

from horde import __version__
from horde.errors import InvalidInput
from horde.report.page import exact, plain, script_json, signed_percent
from horde.store import Store
from horde.web.store_reads import RunFilter, StoreReader


@dataclass
class Dashboard:
    #: The store's URL as resolved (password included: never shown; ``store.display_url`` is).
    store_url: str
    store: Store
    reader: StoreReader
    #: Set when the server stops: live streams end within a poll instead of holding it open.
    closing: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.closing.set()
        self.reader.close()
        self.store.close()


def dashboard_of(request: Request) -> Dashboard:
    found = request.app.state.dashboard
    assert isinstance(found, Dashboard)
    return found


@lru_cache(maxsize=1)
def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("horde.web", "templates"),
        # Plan, step and tag names are the user's text: always escaped.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(exact=exact, plain=plain, script_json=script_json, signed_percent=signed_percent)
    env.globals["version"] = __version__
    return env


def render(template: str, **context: Any) -> str:
    return templates().get_template(template).render(**context)


def run_filter_of(query: dict[str, list[str]]) -> RunFilter:
    """The runs list's filters from query parameters: ``plan``, ``status``, ``tag`` (``key`` or
    ``key=value``, repeatable), ``from`` and ``to`` (dates, UTC; ``to`` includes its day).

    >>> run_filter_of({"tag": ["build=42", "ci"], "to": ["2026-11-22"]}).tags
    (('build', '42'), ('ci', None))
    """

    def one(name: str) -> str | None:
        values = [value.strip() for value in query.get(name, []) if value.strip()]
        return values[-1] if values else None

    tags: list[tuple[str, str | None]] = []
    for text in query.get("tag", []):
        text = text.strip()
        if not text:
            continue
        key, equals, value = text.partition("=")
        if not key.strip():
            raise InvalidInput(f"tag filter {text!r} has no key", hint="tag=build=42, or tag=build for any value")
        tags.append((key.strip(), value.strip() if equals else None))
    started_to = _instant(one("to"), "to", end_of_day=True)
    return RunFilter(
        plan=one("plan"),
        status=one("status"),
        tags=tuple(tags),
        started_from=_instant(one("from"), "from", end_of_day=False),
        started_before=started_to,
    )


def _instant(text: str | None, name: str, *, end_of_day: bool) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"{name}={text!r} is not a date", hint="write dates as 2026-11-22 (UTC), or 2026-11-22T14:30"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    if end_of_day and len(text) == 10:
        value += timedelta(days=1)
    return value
