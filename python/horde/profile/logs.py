"""Access logs read as requests: the formats `horde profile` knows, and the streaming reader.

Formats:

- ``combined``: the Apache/nginx combined format (``%h %l %u %t "%r" %>s %b "%{Referer}i"
  "%{User-agent}i"``), with whatever the site appended after it. A request's time is taken from
  ``rt=``/``request_time=`` (seconds) or ``urt=``/``upstream_response_time=`` pairs when present,
  else from the first bare number after the user agent: with a decimal point it is seconds
  (nginx's ``$request_time`` always has one), a whole number is microseconds (Apache's ``%D``).
- ``nginx``: the same, a whole number being seconds too (a format that logs ``$request_time``
  rounded, or Apache's ``%T``).
- ``json``: one JSON object a line; the fields are given (``--field path=uri``) or guessed from
  the common names (:data:`FIELD_CANDIDATES`). A duration field's unit is read from its name
  (``duration_ms``, ``request_time`` in seconds...) or its value (``"0.12s"``).
- ``auto``: JSON when most of the first lines are objects, else ``combined``.

The formats' rules (the combined line, the request line, the common log format's time, a JSON
line's values) are the native reader's, crate ``horde-logs`` (:mod:`horde.engine.logs`), which
also reads logs whole at disk speed (:mod:`horde.profile.native`); this module decides the
format and a JSON log's fields, orders the files, and reads line by line (the reference the
native reader is checked against).

Files may be gzip-compressed (told by their first bytes, whatever their name). The reader
streams: memory does not grow with the log, and a line that does not parse is counted (the
first few are kept, redacted, with their line numbers), never fatal unless most lines fail. A
line longer than :data:`MAX_LINE_LENGTH` is such a line, skipped without being held whole; a
file whose first MiB holds no line break is no text log, and is refused before more of it is
read (a gzip of a GiB of zeros is one line of a GiB).
"""

from __future__ import annotations

import gzip
import heapq
import io
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from horde.engine.logs import CombinedParser, JsonLineParser
from horde.engine.logs import first_lines as native_first_lines
from horde.errors import InvalidInput
from horde.plan.redaction import redact_text

FORMATS: Final = ("auto", "combined", "nginx", "json")
TIME_UNITS: Final = {"s": 1000.0, "ms": 1.0, "us": 0.001, "ns": 0.000001}

#: JSON field names tried for each role, in order, when ``--field`` does not name one.
FIELD_CANDIDATES: Final[dict[str, tuple[str, ...]]] = {
    "time": (
        "time",
        "timestamp",
        "@timestamp",
        "ts",
        "time_iso8601",
        "time_local",
        "datetime",
        "date",
        "start_time",
        "received_at",
    ),
    "method": ("method", "request_method", "http_method", "verb", "httpRequest.requestMethod", "request.method"),
    "path": (
        "path",
        "uri",
        "request_uri",
        "url",
        "request_path",
        "httpRequest.requestUrl",
        "request.uri",
        "request.url",
        "request.path",
    ),
    "query": ("query", "query_string", "args", "querystring", "request.query"),
    "request": ("request", "request_line"),
    "status": (
        "status",
        "status_code",
        "response_status",
        "statusCode",
        "httpRequest.status",
        "response.status",
        "code",
    ),
    "duration": (
        "request_time",
        "duration_ms",
        "duration",
        "latency_ms",
        "latency",
        "response_time",
        "response_time_ms",
        "elapsed",
        "elapsed_ms",
        "took",
        "rt",
        "httpRequest.latency",
        "upstream_response_time",
    ),
    "client": (
        "remote_addr",
        "client_ip",
        "clientip",
        "ip",
        "remote_ip",
        "client",
        "httpRequest.remoteIp",
        "request.remote_addr",
        "x_forwarded_for",
    ),
    "agent": (
        "http_user_agent",
        "user_agent",
        "userAgent",
        "ua",
        "agent",
        "httpRequest.userAgent",
        "request.headers.user-agent",
    ),
    "cookie": ("http_cookie", "cookie", "cookies", "request.headers.cookie", "headers.cookie"),
}
ROLES: Final = tuple(FIELD_CANDIDATES)

#: How many unparsable lines are kept to show (the rest are only counted).
BAD_SAMPLES = 5
#: The longest line read, in characters without its line break: a longer one is counted as
#: unreadable and skipped in pieces (an access log's line is a request line and a few headers;
#: servers refuse request lines past 8 to 64 KiB).
MAX_LINE_LENGTH = 64 * 1024
#: A file whose first this many characters hold no line break is no text log.
MAX_FIRST_LINE_LENGTH = 1 << 20
#: The reason an over-long line is counted as unreadable.
LONG_LINE = f"longer than {MAX_LINE_LENGTH:,} characters"
#: Lines read before a file whose lines nearly all fail is refused early (a wrong --format).
EARLY_CHECK_LINES = 2000
#: The share of lines that may fail, at the end, before the whole log is refused.
MAX_BAD_SHARE = 0.5


@dataclass(slots=True)
class LogRecord:
    """One request as a log line tells it."""

    time_s: float  # Unix seconds; for nginx and Apache, when the response was logged
    method: str
    target: str  # the path with its query string, as requested
    status: int  # 0 when the log has none
    duration_ms: float | None
    client: str
    agent: str
    session: str | None  # the named cookie's or header's value, when sessions are keyed by one


@dataclass(frozen=True)
class BadLine:
    """A line that did not parse: where, why, and its start (redacted)."""

    source: str
    line: int
    reason: str
    text: str


@dataclass(frozen=True)
class SessionKey:
    """What tells one user's session from another: the client address and user agent (``ip-ua``),
    or a cookie or header (``cookie:NAME``, ``header:NAME``)."""

    kind: str
    name: str = ""

    @classmethod
    def parse(cls, text: str) -> SessionKey:
        kind, _, name = text.partition(":")
        if text == "ip-ua":
            return cls("ip-ua")
        if kind in ("cookie", "header") and re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            return cls(kind, name)
        raise InvalidInput(
            f"--session: {text!r} is not a session key",
            hint="give ip-ua (the default), cookie:NAME or header:NAME, e.g. --session cookie:sessionid",
        )

    def __str__(self) -> str:
        return self.kind if self.kind == "ip-ua" else f"{self.kind}:{self.name}"


# -- text formats (combined, nginx) -------------------------------------------------------------


class TextParser:
    """Parses combined-format lines (``combined`` or ``nginx``; see the module's text)."""

    def __init__(self, fmt: str, time_unit: str | None, session: SessionKey) -> None:
        self.format = fmt
        self.time_unit = time_unit
        self.session = session
        self._native = CombinedParser(
            nginx=fmt == "nginx",
            time_unit_ms=TIME_UNITS[time_unit] if time_unit else None,
            session_name=session.name if session.kind != "ip-ua" else None,
        )

    def __call__(self, line: str) -> LogRecord | str:
        found = self._native.parse(line)
        return found if isinstance(found, str) else LogRecord(*found)


# -- JSON lines --------------------------------------------------------------------------------


def unit_of_field(name: str) -> str | None:
    """The unit a duration field's name says, or None.

    >>> [unit_of_field(n) for n in ("duration_ms", "request_time", "latencyMicros", "took")]
    ['ms', 's', 'us', None]
    """
    last = name.rsplit(".", 1)[-1]
    lowered = last.lower()
    if lowered in ("request_time", "upstream_response_time", "rt", "urt") or lowered.endswith(
        ("_s", "_sec", "_secs", "seconds")
    ):
        return "s"
    if lowered.endswith(("_ms", "millis", "msec")) or last.endswith("Ms"):
        return "ms"
    if lowered.endswith(("_us", "micros", "usec")) or last.endswith("Us"):
        return "us"
    if lowered.endswith(("_ns", "nanos", "nsec")) or last.endswith("Ns"):
        return "ns"
    return None


def _getter(key: str, sample: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    """Reads ``key`` from an object: the key itself, or a dotted path into nested objects."""
    if key in sample or "." not in key:
        return lambda obj: obj.get(key)
    parts = key.split(".")

    def nested(obj: dict[str, Any]) -> Any:
        value: Any = obj
        for part in parts:
            if not isinstance(value, dict):
                return None
            value = value.get(part)
        return value

    return nested


def _has(key: str, sample: dict[str, Any]) -> bool:
    return _getter(key, sample)(sample) is not None


#: How sessions are told in a JSON log, as the native parser takes it: None (client address and
#: agent), ("cookie", name, False) or ("header", field, nested).
JsonSession = tuple[str, str, bool] | None


class JsonParser:
    """Parses JSON-lines logs with a field for each role (see :data:`FIELD_CANDIDATES`); the
    lines are read natively (crate ``horde-logs``), this class chooses the fields."""

    format = "json"

    def __init__(
        self, fields: dict[str, str], sample: dict[str, Any], time_unit: str | None, session: SessionKey
    ) -> None:
        self.fields = fields
        self.key = session
        # A field is a top-level key, or a dotted path into nested objects where the first
        # objects have no key of that name.
        self.native_fields = {role: (key, not (key in sample or "." not in key)) for role, key in fields.items()}
        named = unit_of_field(fields["duration"]) if "duration" in fields else None
        self.duration_ms = TIME_UNITS[time_unit or named or "ms"]
        self.session: JsonSession = None
        if session.kind == "cookie":
            self.session = ("cookie", session.name, False)
        elif session.kind == "header":
            lowered = session.name.lower()
            candidates = [
                session.name,
                f"http_{lowered.replace('-', '_')}",
                f"headers.{lowered}",
                f"request.headers.{lowered}",
                f"headers.{session.name}",
                f"request.headers.{session.name}",
            ]
            key = next((c for c in candidates if _has(c, sample)), candidates[1])
            self.session = ("header", key, not (key in sample or "." not in key))
        self._native = JsonLineParser(self.native_fields, self.duration_ms, self.session)

    @classmethod
    def guess(
        cls, given: dict[str, str], sample_lines: Sequence[str], time_unit: str | None, session: SessionKey
    ) -> JsonParser:
        """The parser for a log whose first lines are ``sample_lines``: each role's field as
        given, else the first candidate the first objects have."""
        samples = [obj for obj in (_loads(line) for line in sample_lines) if isinstance(obj, dict)]
        if not samples:
            raise InvalidInput(
                "none of the log's first lines is a JSON object",
                hint="give --format combined or nginx for a text access log",
            )
        fields = dict(given)
        for role, candidates in FIELD_CANDIDATES.items():
            if role not in fields:
                found = next((c for c in candidates if any(_has(c, obj) for obj in samples)), None)
                if found is not None:
                    fields[role] = found
        missing = [role for role in ("time",) if role not in fields]
        if "path" not in fields and "request" not in fields:
            missing.append("path")
        if missing:
            keys = sorted({key for obj in samples for key in obj})[:20]
            raise InvalidInput(
                f"cannot tell which JSON field holds the {' and the '.join(missing)}",
                hint=f"name it: --field {missing[0]}=NAME (the first objects have: {', '.join(keys)})",
            )
        merged: dict[str, Any] = {}
        for obj in samples:
            merged.update(obj)
        return cls(fields, merged, time_unit, session)

    def __call__(self, line: str) -> LogRecord | str:
        found = self._native.parse(line)
        return found if isinstance(found, str) else LogRecord(*found)


def _loads(line: str) -> Any:
    """The line's JSON, or None (a bad line). A line nested deeper than Python's recursion limit
    is a bad line too, not a crash."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


# -- reading files ------------------------------------------------------------------------------

Parser = TextParser | JsonParser


def open_log(path: Path) -> tuple[IO[str], IO[bytes]]:
    """The log as text (gzip unpacked when its first bytes say so) and the raw file, whose
    position tells how far the reading is; :func:`log_lines` reads its lines."""
    try:
        raw: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed by the caller with the text stream
    except OSError as error:
        raise InvalidInput(
            f"cannot read {path}: {error.strerror or error}", hint="give the path of an access log (plain or .gz)"
        ) from error
    magic = raw.read(2)
    raw.seek(0)
    source: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw  # type: ignore[assignment]
    # errors="replace": a stray byte in a user agent must not stop the whole log.
    return io.TextIOWrapper(source, encoding="utf-8", errors="replace"), raw


@dataclass(frozen=True, slots=True)
class LongLine:
    """A line past :data:`MAX_LINE_LENGTH`: only its start is kept (to show, redacted)."""

    start: str


def log_lines(text: IO[str], path: Path) -> Iterator[str | LongLine]:
    """The lines of a log, without their line breaks; a line past :data:`MAX_LINE_LENGTH` is
    read in pieces of that size and given as a :class:`LongLine`. Refuses a file whose first
    :data:`MAX_FIRST_LINE_LENGTH` characters hold no line break
    (:class:`~horde.errors.InvalidInput`)."""
    readline = text.readline
    first = True
    while True:
        # Two characters over the limit tell a line at the limit (with its break) from one past it.
        line = readline(MAX_LINE_LENGTH + 2)
        if len(line) <= MAX_LINE_LENGTH or (line.endswith("\n") and len(line) == MAX_LINE_LENGTH + 1):
            if not line:
                return
            first = False
            yield line.rstrip("\r\n")
            continue
        start = line[:160]
        skipped = len(line)
        while not line.endswith("\n"):
            line = readline(MAX_LINE_LENGTH)
            if not line:
                break
            skipped += len(line)
            if first and skipped > MAX_FIRST_LINE_LENGTH:
                raise not_text(path, not start.strip("\x00"))
        first = False
        yield LongLine(start)


def first_lines(path: Path, count: int = 50) -> list[str]:
    """Up to ``count`` non-empty lines from the start of the log (format detection), read
    natively; a line past :data:`MAX_LINE_LENGTH` is left out."""
    open_log(path)[1].close()  # a file that cannot be opened is told as when reading it
    found = native_first_lines(path, count)
    if isinstance(found, list):
        return found
    kind, detail = found
    if kind == "not_text":
        raise not_text(path, bool(detail))
    raise InvalidInput(f"cannot read {path}: {detail}", hint="is it a whole gzip file? try `gzip -t`")


def not_text(path: Path, zeros: bool) -> InvalidInput:
    """The error for a file whose first MiB holds no line break."""
    return InvalidInput(
        f"{path} is not a text log: its first {MAX_FIRST_LINE_LENGTH >> 20} MiB hold no line break"
        + (" (it starts with zero bytes)" if zeros else ""),
        hint="give an access log: one request a line, plain text or gzip-compressed text",
    )


def detect_format(lines: Sequence[str]) -> str:
    """``json`` when most lines are objects, else ``combined``.

    >>> detect_format(['{"a": 1}', '{"b": 2}']), detect_format(['1.2.3.4 - - [...] "GET / HTTP/1.1" 200 1'])
    ('json', 'combined')
    """
    objects = sum(1 for line in lines if line.lstrip().startswith("{"))
    return "json" if lines and objects * 2 > len(lines) else "combined"


def make_parser(
    fmt: str, paths: Sequence[Path], fields: dict[str, str], time_unit: str | None, session: SessionKey
) -> Parser:
    """The parser for ``fmt`` (``auto`` decided on the first file's first lines)."""
    if fmt not in FORMATS:
        raise InvalidInput(f"--format: {fmt!r} is not a log format", hint=f"give one of: {', '.join(FORMATS)}")
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise InvalidInput(f"--time-unit: {time_unit!r} is not a unit", hint=f"give one of: {', '.join(TIME_UNITS)}")
    unknown = sorted(set(fields) - set(ROLES))
    if unknown:
        raise InvalidInput(f"--field: {', '.join(unknown)} is not a field role", hint=f"roles: {', '.join(ROLES)}")
    sample = next((lines for lines in (first_lines(path) for path in paths) if lines), [])
    if fmt == "auto":
        fmt = detect_format(sample)
    if fmt == "json":
        return JsonParser.guess(fields, sample, time_unit, session)
    if fields:
        raise InvalidInput("--field names JSON fields", hint="give --format json, or leave --field out for a text log")
    return TextParser(fmt, time_unit, session)


def in_time_order(paths: Sequence[Path], parser: Parser) -> list[Path]:
    """The logs ordered by the time of their first request, so that rotated logs given newest
    first (``access.log access.log.1 access.log.2.gz``, as a shell lists them) are read as one
    stream in time order; a log whose first lines hold no request keeps its place after those
    before it (the order given is kept among equals)."""
    if len(paths) < 2:
        return list(paths)
    firsts: list[float] = []
    for path in paths:
        first = next(
            (record.time_s for record in map(parser, first_lines(path)) if not isinstance(record, str)),
            firsts[-1] if firsts else float("-inf"),
        )
        firsts.append(first)
    return [path for _, _, path in sorted(zip(firsts, range(len(paths)), paths))]


@dataclass
class ReadCounts:
    """What the reading met: lines, requests, the lines that failed (a few kept), bytes."""

    lines: int = 0
    records: int = 0
    bad: int = 0
    bad_samples: list[BadLine] = field(default_factory=list)
    bytes_read: int = 0
    bytes_total: int = 0

    def note_bad(self, source: str, number: int, reason: str, line: str) -> None:
        self.bad += 1
        if len(self.bad_samples) < BAD_SAMPLES:
            # Redacted: a line that failed may still carry a token or an address.
            self.bad_samples.append(BadLine(source, number, reason, redact_text(line[:160])))


#: How often (in lines) the reader reports its progress.
PROGRESS_EVERY = 65536


def read_records(
    paths: Sequence[Path], parser: Parser, counts: ReadCounts, on_progress: Callable[[ReadCounts], None] | None = None
) -> Iterator[LogRecord]:
    """Every request of the logs, one at a time; ``counts`` follows the reading. Several logs
    are merged into one stream in time order (the next request is the earliest of each log's
    next one, the log given first on a tie), as the native reader merges them. ``horde
    profile`` reads natively (:mod:`horde.profile.native`); this reader, with
    ``ProfileBuilder.add``, is what the native one is checked against
    (``tests/test_profile_native.py``)."""
    counts.bytes_total = sum(_size(path) for path in paths)
    read = [0] * len(paths)  # lines read of each log
    at: list[Callable[[], int]] = [lambda: 0] * len(paths)  # how far each log's file is read

    def tell() -> None:
        counts.lines, counts.bytes_read = sum(read), sum(position() for position in at)
        if on_progress is not None:
            on_progress(counts)

    def one(index: int, path: Path) -> Iterator[LogRecord]:
        text, raw = open_log(path)
        at[index] = raw.tell
        source = str(path)
        number = file_bad = 0
        try:
            with text:
                for number, line in enumerate(log_lines(text, path), start=1):
                    read[index] = number
                    if number % PROGRESS_EVERY == 0 or number == EARLY_CHECK_LINES:
                        if number == EARLY_CHECK_LINES and file_bad > 0.9 * number:
                            refuse(parser, counts, file_bad, number, source)
                        tell()
                    if isinstance(line, LongLine):
                        file_bad += 1
                        counts.note_bad(source, number, LONG_LINE, line.start)
                        continue
                    if line.isspace() or not line:
                        continue
                    record = parser(line)
                    if isinstance(record, str):
                        file_bad += 1
                        counts.note_bad(source, number, record, line)
                        continue
                    counts.records += 1
                    yield record
        except (OSError, EOFError, gzip.BadGzipFile) as error:
            raise InvalidInput(
                f"cannot read {path} past line {number}: {error}", hint="is it a whole gzip file? try `gzip -t`"
            ) from error
        finally:
            raw.close()
        size = _size(path)
        at[index] = lambda: size
        tell()

    streams = [one(index, path) for index, path in enumerate(paths)]
    # One log is read as it is; several, merged (rotated logs, oldest first: one after the other).
    yield from heapq.merge(*streams, key=lambda record: record.time_s) if len(streams) != 1 else streams[0]
    if counts.lines and counts.bad > MAX_BAD_SHARE * counts.lines:
        refuse(parser, counts, counts.bad, counts.lines, ", ".join(map(str, paths)))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def refuse(parser: Parser, counts: ReadCounts, bad: int, lines: int, where: str) -> None:
    """Raises InvalidInput: ``bad`` of ``lines`` lines of ``where`` did not read as the format."""
    first = counts.bad_samples[0] if counts.bad_samples else None
    shown = f"; line {first.line}: {first.reason}" if first else ""
    other = {"json": "combined or nginx"}.get(parser.format, "json (one object a line)")
    raise InvalidInput(
        f"{bad:,} of {lines:,} lines of {where} do not read as the {parser.format} format{shown}",
        hint=f"is it another format? try --format {other}; JSON logs may need --field ROLE=NAME",
    )
