"""Where the results store lives: the default path, URL resolution and password redaction.

The store is named by a SQLAlchemy URL. Users may also give a bare file path (a SQLite file) or a
libpq-style ``postgres://`` / ``postgresql://`` URL; both are rewritten here so that the rest of
the store only ever sees ``sqlite:///...`` or ``postgresql+psycopg://...``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

#: The environment variable naming the store when ``--store`` is not given.
STORE_ENV = "HORDE_STORE"

#: The one PostgreSQL driver Horde ships with (psycopg 3); other spellings are rewritten to it.
POSTGRES_DRIVER = "postgresql+psycopg"

# libpq accepts both spellings; SQLAlchemy would pick psycopg2 (not installed) for the second.
_POSTGRES_SCHEMES = ("postgres://", "postgresql://")

# ``scheme://user:password@`` as it appears in any URL, for redaction when parsing fails.
_USERINFO_PASSWORD = re.compile(r"(?P<head>://[^/@:]*:)(?P<password>[^@]*)(?P<tail>@)")

# ``password=...`` in the query string (libpq accepts it there too).
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&]password=)[^&]*")

_REDACTED = "***"


def default_store_path() -> Path:
    """The default SQLite file, ``$XDG_DATA_HOME/horde/runs.sqlite``.

    ``XDG_DATA_HOME`` is honoured only when it is set to an absolute path, as the XDG base
    directory specification asks; otherwise ``~/.local/share`` is used. Read at call time so
    that a changed environment (tests, a wrapper script) is seen.
    """
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "horde" / "runs.sqlite"


#: The default store file, as resolved when ``horde.store`` was imported.
#: :func:`resolve_store_url` re-reads the environment instead of using this constant.
DEFAULT_STORE_PATH: Path = default_store_path()


def resolve_store_url(explicit: str | None) -> str:
    """The store URL to use: ``explicit`` (``--store``) > ``$HORDE_STORE`` > the default file.

    An empty string counts as not given, so ``HORDE_STORE=`` falls back to the default.
    A bare file path (anything without ``://``) becomes ``sqlite:///<absolute path>``, with
    ``~`` expanded, so the URL means the same file whatever the working directory is later.
    ``postgres://`` and ``postgresql://`` are rewritten to ``postgresql+psycopg://``.

    >>> resolve_store_url("postgres://u@db/horde")
    'postgresql+psycopg://u@db/horde'
    >>> resolve_store_url("/var/lib/horde/runs.sqlite")
    'sqlite:////var/lib/horde/runs.sqlite'
    """
    chosen = explicit or os.environ.get(STORE_ENV) or None
    if chosen is None:
        return sqlite_url_for(default_store_path())
    chosen = chosen.strip()
    if "://" not in chosen:
        return sqlite_url_for(Path(chosen))
    for scheme in _POSTGRES_SCHEMES:
        if chosen.startswith(scheme):
            return POSTGRES_DRIVER + "://" + chosen[len(scheme) :]
    return chosen


def sqlite_url_for(path: Path) -> str:
    """``sqlite:///`` followed by the absolute form of ``path`` (so four slashes on POSIX)."""
    return "sqlite:///" + str(path.expanduser().absolute())


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, safe to print in messages and logs.

    Both places a PostgreSQL password can hide are covered: the user-info part
    (``user:secret@host``) and a libpq ``password=`` query parameter. A URL that SQLAlchemy
    cannot parse is still redacted, by pattern, because it is about to be shown in an error.

    >>> redact_url("postgresql+psycopg://horde:sekret@db:5432/runs?password=x&sslmode=require")
    'postgresql+psycopg://horde:***@db:5432/runs?password=***&sslmode=require'
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        rendered = _USERINFO_PASSWORD.sub(rf"\g<head>{_REDACTED}\g<tail>", url)
    else:
        # Re-render only when there is a password to hide ("***"): rendering percent-quotes
        # parts of the URL (":memory:" becomes "%3Amemory%3A"), which would confuse readers.
        rendered = parsed.render_as_string(hide_password=True) if parsed.password else url
    return _QUERY_PASSWORD.sub(rf"\g<head>{_REDACTED}", rendered)


def password_of(url: str) -> str | None:
    """The password in ``url`` (user-info or ``password=`` parameter), if any.

    Used to scrub it from driver error messages, which are outside our control.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        match = _USERINFO_PASSWORD.search(url)
        return match.group("password") if match and match.group("password") else None
    if parsed.password:
        return str(parsed.password)
    value = parsed.query.get("password")
    if isinstance(value, tuple):
        value = value[0] if value else None
    return value or None


def backend_of(url: str) -> str:
    """The backend name of a resolved URL: ``"sqlite"``, ``"postgresql"`` or the raw scheme."""
    scheme = url.split("://", 1)[0]
    return scheme.split("+", 1)[0]
