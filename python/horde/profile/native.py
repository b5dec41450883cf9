"""Text logs (combined, nginx) read by the native reader (:func:`horde.engine.logs.profile_logs`,
crate ``horde-logs``) into a :class:`~horde.profile.profile.ProfileBuilder`'s state: the same
endpoints, minutes and sessions the Python reader adds up request by request, at disk speed.

The format and the endpoint templates are the same code whichever reader reads a log (crate
``horde-logs``); the adding up is the builder's, repeated natively (reservoir samples drawn as
``random.Random(0)`` draws them, sessions closed by gap and by count), so the profile and the
plan are the same whichever reader read the log (``tests/test_profile_native.py`` compares
them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from horde.engine.logs import JsonFormat, profile_logs
from horde.errors import InvalidInput
from horde.plan.redaction import redact_text
from horde.profile.endpoints import RULES, GivenTemplate, Shape, Slot
from horde.profile.histogram import LogHistogram
from horde.profile.logs import TIME_UNITS, BadLine, Parser, ReadCounts, TextParser, not_text, refuse
from horde.profile.sessions import SampledSession, Sessions


@dataclass
class NativeEndpoint:
    """One endpoint as the native reader added it up (see ``EndpointStats``)."""

    shapes: list[Shape]
    count: int
    timing: LogHistogram
    statuses: dict[int, int]
    samples: list[tuple[str | None, ...]]
    #: minute since the epoch -> requests, only the minutes it had requests in.
    per_minute: dict[int, int]


@dataclass
class NativeRead:
    """The logs' requests added up: endpoints by first appearance, those past the limit
    together (``other``, its shape left to the builder), requests per minute, sessions."""

    endpoints: list[NativeEndpoint]
    other: NativeEndpoint | None
    per_minute: dict[int, int]
    sessions: Sessions


def read_native(
    paths: Sequence[Path],
    parser: Parser,
    session_gap_s: float,
    max_endpoints: int,
    counts: ReadCounts,
    on_progress: Callable[[ReadCounts], None] | None = None,
    templates: Sequence[str] = (),
) -> NativeRead:
    """The logs' requests, added up natively; InvalidInput as the Python reader raises it (a
    file unreadable, no text log, most lines failing)."""

    def progress(lines: int, records: int, bad: int, bytes_read: int, bytes_total: int) -> None:
        counts.lines, counts.records, counts.bad = lines, records, bad
        counts.bytes_read, counts.bytes_total = bytes_read, bytes_total
        if on_progress is not None:
            on_progress(counts)

    given = [GivenTemplate(text).native() for text in templates]
    if isinstance(parser, TextParser):
        session = parser.session
        result = profile_logs(
            paths,
            nginx=parser.format == "nginx",
            time_unit_ms=TIME_UNITS[parser.time_unit] if parser.time_unit else None,
            session_name=session.name if session.kind != "ip-ua" else None,
            session_gap_s=session_gap_s,
            max_endpoints=max_endpoints,
            rules=RULES,
            templates=given,
            on_progress=progress,
        )
    else:
        session = parser.key
        result = profile_logs(
            paths,
            nginx=False,
            time_unit_ms=None,
            session_name=None,
            session_gap_s=session_gap_s,
            max_endpoints=max_endpoints,
            rules=RULES,
            templates=given,
            on_progress=progress,
            json=JsonFormat(parser.native_fields, parser.duration_ms, parser.session),
        )
    error = result.get("error")
    if error is not None:
        path = paths[error["file"]]
        if error["kind"] == "not_text":
            raise not_text(path, error["zeros"])
        where = f" past line {error['line']}" if error["line"] else ""
        raise InvalidInput(
            f"cannot read {path}{where}: {error['message']}",
            hint="give the path of an access log (plain or .gz); is it a whole gzip file? try `gzip -t`",
        )
    read = result["counts"]
    counts.lines, counts.records, counts.bad = read["lines"], read["records"], read["bad"]
    counts.bytes_read, counts.bytes_total = read["bytes_read"], read["bytes_total"]
    # Redacted here: a line that failed may still carry a token or an address.
    counts.bad_samples = [
        BadLine(str(paths[file]), line, reason, redact_text(text)) for file, line, reason, text in read["bad_samples"]
    ]
    if result["refused"] is not None:
        bad, lines, file = result["refused"]
        refuse(parser, counts, bad, lines, str(paths[file]) if file is not None else ", ".join(map(str, paths)))
    sessions, found = Sessions(session, session_gap_s), result["sessions"]
    sessions.think_ms = _histogram(found["think_ms"])
    sessions.lengths = Counter(dict(found["lengths"]))
    sessions.transitions = Counter({(a, b): count for (a, b), count in found["transitions"]})
    sessions.transitions_pruned = found["transitions_pruned"]
    sessions.unkeyed, sessions.closed_early = found["unkeyed"], found["closed_early"]
    sessions.sample = [
        SampledSession(list(mix), think_ms_total, thinks) for mix, think_ms_total, thinks in found["sample"]
    ]
    sessions.paced = found["paced"]
    return NativeRead(
        endpoints=[_endpoint(row) for row in result["endpoints"]],
        other=_endpoint(result["other"]) if result["other"] is not None else None,
        per_minute=dict(result["per_minute"]),
        sessions=sessions,
    )


def _shape(found: tuple[str, list[str | int], list[str], list[tuple[str, str, str]]]) -> Shape:
    method, pieces, query, slots = found
    return Shape(method, tuple(pieces), tuple(query), tuple(Slot(*slot) for slot in slots))


def _histogram(found: tuple[list[tuple[int, int]], int, float, float, int]) -> LogHistogram:
    histogram = LogHistogram()
    buckets, histogram.count, histogram.total, histogram.maximum, histogram.zeros = found
    histogram.buckets = dict(buckets)
    return histogram


def _endpoint(row: dict[str, Any]) -> NativeEndpoint:
    return NativeEndpoint(
        shapes=[_shape(shape) for shape in row["shapes"]],
        count=row["count"],
        timing=_histogram(row["timing"]),
        statuses=dict(row["statuses"]),
        samples=list(row["samples"]),
        per_minute=dict(row["per_minute"]),
    )
