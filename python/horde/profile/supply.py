"""What a plan written from an access log leaves to its user, and how it is marked.

An access log tells what was asked (method, path, query) and how it went (status, time), never
what came with it: no body, no header, no credential. A plan written from one (``horde profile
--plan``) marks each such part with ``{{ supply("what") }}``, a template that crate horde-plan's
check reports at its file and line, ``to supply: what``, until the user puts the part in its
place: ``horde validate`` exits 2 (and ``horde run``, which checks first, refuses to start).
This module is the rule of what is marked, and its wording:

- **a body** for each kept endpoint whose method carries one (:data:`BODY_METHODS`);
- **a credential** for each kept endpoint the log shows guarded: some of its requests were
  answered 401 (not authenticated) or 403 (not allowed), :data:`GUARD_STATUSES`. The server
  asked for a credential there, so the requests it served carried one the log does not show.
  The step gets an ``Authorization`` header to supply (the one most services read; the user may
  rename it). It is put on each such step, not on the target: only those endpoints showed it,
  and horde-plan checks the templates of a step's headers, where a ``supply`` is reported;
- **a secret query field's value** (a token in a query string): the plan writer makes it a
  plan parameter whose default is no secret; it is listed here with the rest, given with ``-p``.

Each part is named by its endpoint, its place in the step and a count from the log: never a
value from the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from horde.profile.profile import EndpointStats

#: Methods whose requests usually carry a body, which a log does not hold.
BODY_METHODS: Final = ("POST", "PUT", "PATCH")
#: Statuses that tell an endpoint asks for a credential: 401 (none, or not a valid one) and 403
#: (not one allowed there).
GUARD_STATUSES: Final = (401, 403)
#: The header a guarded endpoint's step gets, its value to supply.
CREDENTIAL_HEADER: Final = "Authorization"


def marker(what: str) -> str:
    """The template that marks ``what`` as the user's to give.

    >>> marker("the body of POST /orders")
    '{{ supply("the body of POST /orders") }}'
    """
    return "{{ supply(" + json.dumps(what) + ") }}"


def body_text(stats: EndpointStats) -> str:
    return f"the body of {stats.name}: the log holds none (a template, or values from a feeder)"


def refused(stats: EndpointStats) -> dict[int, int]:
    """The endpoint's requests answered with each of :data:`GUARD_STATUSES` (those seen)."""
    return {status: stats.statuses[status] for status in GUARD_STATUSES if stats.statuses.get(status)}


def credential_text(stats: EndpointStats) -> str:
    statuses = refused(stats)
    answered = " and ".join(f"{count:,} with {status}" for status, count in statuses.items())
    return (
        f"the credential of {stats.name}: the log holds none, and the server asked for one ({answered} of its "
        f"{stats.count:,} requests): e.g. Bearer and a token (a plan parameter keeps it out of the file), or the header "
        "your service reads"
    )


def mark(step: dict[str, Any], stats: EndpointStats) -> None:
    """Marks in ``step`` (a plan's step as data) what the log could not hold of ``stats``'s
    requests: a header to supply where the endpoint was guarded, a body where its method
    carries one."""
    if refused(stats):
        step["headers"] = {CREDENTIAL_HEADER: marker(credential_text(stats))}
    if stats.shape.method in BODY_METHODS:
        step["body"] = marker(body_text(stats))


def parts(chosen: Iterable[EndpointStats], parameters: Mapping[str, str]) -> list[dict[str, Any]]:
    """What the plan leaves to its user, one row per part: the endpoint (None for a plan
    parameter), the part (``body``, ``header Authorization``, ``parameter NAME``) and why."""
    rows: list[dict[str, Any]] = []
    for stats in chosen:
        if refused(stats):
            rows.append(
                {
                    "endpoint": stats.name,
                    "part": f"header {CREDENTIAL_HEADER}",
                    "why": credential_text(stats),
                    "refused": {str(status): count for status, count in refused(stats).items()},
                    "requests": stats.count,
                }
            )
        if stats.shape.method in BODY_METHODS:
            rows.append({"endpoint": stats.name, "part": "body", "why": body_text(stats)})
    rows += [
        {
            "endpoint": None,
            "part": f"parameter {name}",
            "why": f"a secret query field's value: the plan sends {default!r} until you give it with -p {name}=...",
        }
        for name, default in parameters.items()
    ]
    return rows


def comment_lines(chosen: Iterable[EndpointStats]) -> list[str]:
    """What the plan's comments say is left to complete (the lines, without ``#``)."""
    chosen = list(chosen)
    with_body = [stats.name for stats in chosen if stats.shape.method in BODY_METHODS]
    guarded = [stats for stats in chosen if refused(stats)]
    lines: list[str] = []
    if with_body or guarded:
        lines.append("To complete: an access log holds no request body, header or credential. What these need is a")
        lines.append("supply(...) template that `horde validate` points at until you replace it:")
    if with_body:
        lines.append("Bodies (with a `Content-Type` in the step's `headers:`), of:")
        lines += [f"  {name}" for name in with_body]
    if guarded:
        lines.append(
            f"Credentials (the {CREDENTIAL_HEADER} header), of those the server asked one of: requests "
            f"answered {' or '.join(map(str, GUARD_STATUSES))}, of all:"
        )
        lines += [f"  {stats.name}: {sum(refused(stats).values()):,} of {stats.count:,}" for stats in guarded]
    return lines


def notes(chosen: Iterable[EndpointStats]) -> list[str]:
    """The summary's notes on what is left to complete."""
    chosen = list(chosen)
    told: list[str] = []
    for names, need in (
        ([stats.name for stats in chosen if stats.shape.method in BODY_METHODS], "a body the log does not hold"),
        (
            [stats.name for stats in chosen if refused(stats)],
            f"a credential the log does not show (answered {' or '.join(map(str, GUARD_STATUSES))})",
        ),
    ):
        if names:
            told.append(
                f"{len(names)} endpoint{'' if len(names) == 1 else 's'} ({', '.join(names[:3])}"
                f"{', ...' if len(names) > 3 else ''}) need{'s' if len(names) == 1 else ''} {need}: "
                "`horde validate` points at each supply(...) template until it is replaced"
            )
    return told
