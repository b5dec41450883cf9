"""Access logs read natively (crate ``horde-logs``): the combined and nginx formats, endpoint
templates, and the logs added up for ``horde profile`` at disk speed, with no Python object per
line. The rules live in that crate, once; the Python reader (JSON logs, ``--template``) asks
them here line by line.

:func:`profile_logs` reads combined or nginx logs (plain or gzip, in bounded memory), templates
each request into its endpoint, and adds the requests up per endpoint, per minute and per
session; :mod:`horde.profile.native` turns the result into the profile. Horde's rules on secrets
(what names a credential, what holds an e-mail address) are the caller's (:class:`SecretRules`):
the native side asks them, once per distinct name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from horde import _engine

#: on_progress(lines, requests, bad lines, bytes read, bytes in all)
Progress = Callable[[int, int, int, int, int], None]
#: (time_s, method, target, status, duration_ms, client, agent, session)
Fields = tuple[float, str, str, int, float | None, str, str, str | None]
#: (pieces: literal text or a slot's index, query names, slots (label, kind, where), kept values)
Template = tuple[list[str | int], list[str], list[tuple[str, str, str]], list[str | None]]


@dataclass(frozen=True)
class SecretRules:
    """What names a credential (a query field; a path segment naming what follows it) and what
    holds an e-mail address: Horde's redaction rules, given by the layer that owns them."""

    is_secret_parameter: Callable[[str], bool]
    names_a_secret: Callable[[str], bool]
    has_email: Callable[[str], bool]


#: A template given by the user: (method or None, pieces: literal text or a placeholder's index,
#: the placeholders' labels, whether each holds a secret whatever its value).
GivenTemplate = tuple[str | None, list[str | int], list[str], list[bool]]
#: A JSON log's fields: role -> (name, nested: a dotted path into nested objects).
JsonFields = dict[str, tuple[str, bool]]
#: How a JSON log's sessions are told: None (client address and agent), ("cookie", name, False)
#: or ("header", field, nested).
JsonSession = tuple[str, str, bool] | None


@dataclass(frozen=True)
class JsonFormat:
    """A JSON log as the native reader takes it: the fields, a bare duration's ms per unit, and
    how sessions are told."""

    fields: JsonFields
    duration_ms: float
    session: JsonSession


def profile_logs(
    paths: Sequence[Path],
    *,
    nginx: bool,
    time_unit_ms: float | None,
    session_name: str | None,
    session_gap_s: float,
    max_endpoints: int,
    rules: SecretRules,
    json: JsonFormat | None = None,
    templates: Sequence[GivenTemplate] = (),
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """The logs' aggregate (its form: ``python/horde/_engine.pyi``, ``profile_logs``), or
    ``{"error": {...}}`` naming the file that could not be read and why. ``json``: the logs are
    JSON lines (``nginx``, ``time_unit_ms`` and ``session_name`` are then a text log's, unused)."""
    return _engine.profile_logs(
        [str(path) for path in paths],
        nginx=nginx,
        time_unit_ms=time_unit_ms,
        session_name=session_name,
        json_fields=json.fields if json else None,
        json_duration_ms=json.duration_ms if json else 1.0,
        json_session=json.session if json else None,
        templates=list(templates),
        session_gap_s=session_gap_s,
        max_endpoints=max_endpoints,
        is_secret_parameter=rules.is_secret_parameter,
        names_a_secret=rules.names_a_secret,
        has_email=rules.has_email,
        on_progress=on_progress,
    )


class CombinedParser:
    """Combined (or nginx) lines one at a time: their fields, or why a line is no request."""

    def __init__(self, *, nginx: bool, time_unit_ms: float | None, session_name: str | None) -> None:
        self._native = _engine.CombinedParser(nginx=nginx, time_unit_ms=time_unit_ms, session_name=session_name)

    def parse(self, line: str) -> Fields | str:
        found: Fields | str = self._native.parse(line)
        return found


class JsonLineParser:
    """JSON lines one at a time: their fields, or why a line is no request."""

    def __init__(self, fields: JsonFields, duration_ms: float, session: JsonSession) -> None:
        self._native = _engine.JsonLineParser(fields, duration_ms, session)

    def parse(self, line: str) -> Fields | str:
        found: Fields | str = self._native.parse(line)
        return found


def first_lines(path: Path, count: int) -> list[str] | tuple[str, bool | str]:
    """Up to ``count`` non-blank lines from the start of a log, a line past the limit left out;
    or why the file cannot be read: ``("not_text", starts with zeros)``, ``("io", message)``."""
    kind, found = _engine.first_lines(str(path), count)
    if kind == "lines":
        lines: list[str] = found
        return lines
    return kind, found


class Templater:
    """Requests templated one at a time into their endpoints and slots' values (None: not to be
    kept), through the first given template a path matches whole, else automatically; the
    rules' answers are remembered between requests."""

    def __init__(self, rules: SecretRules, templates: Sequence[GivenTemplate] = ()) -> None:
        self._native = _engine.Templater(
            rules.is_secret_parameter, rules.names_a_secret, rules.has_email, list(templates)
        )

    def template(self, method: str, target: str) -> Template:
        found: Template = self._native.template(method, target)
        return found


def classify(segment: str, rules: SecretRules) -> str | None:
    """The kind of id a path segment or a value is (``int``, ``uuid``, ``hex``, ``token``,
    ``email``), or None when it is literal text."""
    return _engine.classify(segment, rules.has_email)
