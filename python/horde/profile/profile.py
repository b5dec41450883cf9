"""The production profile: what a log's requests add up to.

Per endpoint: requests, share by count, total time and share by time (count × response time:
the heaviest endpoints, not only the most frequent), p50/p95 time, the status mix, and its
requests per minute (where it had any), so that its intensity in any :class:`Window` of
minutes (the peak minute, the peak hour, a chosen window) is exact. Over the log:
the rate per minute, the peak minute and hour, the peak-to-mean ratio. Per session: requests,
think times, the most common transitions. :func:`build_profile` reads the logs once, streaming;
:meth:`Profile.to_dict` is the JSON kept by ``--json`` (endpoint names, figures and counts:
no id, address, agent or cookie from the log).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

from horde.errors import InvalidInput
from horde.profile.endpoints import Shape, Templater
from horde.profile.histogram import LogHistogram
from horde.profile.logs import JsonParser, LogRecord, ReadCounts, SessionKey, in_time_order, make_parser
from horde.profile.native import NativeRead, read_native
from horde.profile.sessions import Sessions

#: Distinct endpoints kept; requests of further ones are counted together (bounded memory).
MAX_ENDPOINTS = 5000
#: The name the requests of endpoints past MAX_ENDPOINTS are counted under.
OTHER: Final = "(other endpoints)"
#: Requests whose slot values are kept per endpoint (a uniform sample: frequent ids stay frequent).
SAMPLE_SIZE = 100
#: Transitions listed in the profile.
TOP_TRANSITIONS = 10
#: A request counts as an error from this status up (as Horde counts them).
ERROR_STATUS = 400
#: Shapes of one endpoint remembered by identity (ids of kinds int, hex, uuid in one slot, as
#: ``{id}``; more are looked up by name, which is slower but right).
MAX_VARIANTS = 16


def endpoint_key(shape: Shape) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What makes one endpoint, one row: its name as shown and its slots' labels, whatever the
    kinds of their values (``/items/{id}`` with a number or a hex id is one endpoint)."""
    return shape.name, tuple((slot.label, slot.where) for slot in shape.slots)


@dataclass(frozen=True)
class ProfileOptions:
    """How the logs are read and grouped."""

    format: str = "auto"
    fields: dict[str, str] = field(default_factory=dict)
    time_unit: str | None = None
    session: SessionKey = SessionKey("ip-ua")
    session_gap_s: float = 1800.0
    templates: tuple[str, ...] = ()
    max_endpoints: int = MAX_ENDPOINTS


class EndpointStats:
    """One endpoint's figures, and a sample of its slots' values for the plan. ``shape`` is its
    first shape; ``shapes`` all those seen, which differ only in their slots' kinds (a number, a
    hex id) and tell the plan what values to make up where the log gives none."""

    __slots__ = ("shape", "shapes", "index", "count", "timing", "statuses", "samples", "per_minute", "_rng")

    def __init__(self, shape: Shape, index: int, rng: random.Random) -> None:
        self.shape = shape
        self.shapes = [shape]
        self.index = index
        self.count = 0
        self.timing = LogHistogram()
        self.statuses: dict[int, int] = {}
        self.samples: list[tuple[str | None, ...]] = []
        #: minute since the epoch -> requests, only the minutes it had requests in (sparse).
        self.per_minute: dict[int, int] = {}
        self._rng = rng

    def add(self, record: LogRecord, values: tuple[str | None, ...]) -> None:
        self.count += 1
        if record.duration_ms is not None:
            self.timing.add(record.duration_ms)
        self.statuses[record.status] = self.statuses.get(record.status, 0) + 1
        if values:
            # Reservoir sampling (Algorithm R): every request has the same chance to be kept,
            # SAMPLE_SIZE / count, and replaces a kept one drawn uniformly.
            if len(self.samples) < SAMPLE_SIZE:
                self.samples.append(values)
            elif self._rng.random() * self.count < SAMPLE_SIZE:
                self.samples[int(self._rng.random() * SAMPLE_SIZE)] = values

    @property
    def name(self) -> str:
        return self.shape.name

    def slot_kinds(self, index: int) -> set[str]:
        """The kinds of values slot ``index`` held across the endpoint's shapes."""
        return {shape.slots[index].kind for shape in self.shapes}

    def errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if status >= ERROR_STATUS)


@dataclass(frozen=True)
class Window:
    """Whole minutes of the log: the first (minutes since the epoch) and how many; what a
    rate is measured over (the peak minute, the part of the peak hour the log covers, or a
    chosen window's minutes in the log)."""

    first: int
    minutes: int

    @property
    def seconds(self) -> float:
        return self.minutes * 60.0

    def count(self, per_minute: dict[int, int]) -> int:
        """The requests of ``per_minute`` (minute -> requests) in the window."""
        end = self.first + self.minutes
        if self.minutes <= len(per_minute):
            return sum(per_minute.get(minute, 0) for minute in range(self.first, end))
        return sum(requests for minute, requests in per_minute.items() if self.first <= minute < end)


@dataclass
class Profile:
    """The profile of one or more logs (see the module's text)."""

    files: list[str]
    format: str
    counts: ReadCounts
    endpoints: list[EndpointStats]  # by requests, most first
    other: EndpointStats | None  # the endpoints past the limit, together
    per_minute: dict[int, int]  # minute since the epoch -> requests
    overall: LogHistogram
    sessions: Sessions
    fields: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def requests(self) -> int:
        return self.counts.records

    @property
    def timed(self) -> bool:
        """Whether the log gave durations (shares by time need them)."""
        return self.overall.count > 0

    def total_time_ms(self) -> float:
        return self.overall.total

    def first_minute(self) -> int:
        return min(self.per_minute) if self.per_minute else 0

    def span_minutes(self) -> int:
        """Minutes from the first request's to the last one's, both counted."""
        return max(self.per_minute) - min(self.per_minute) + 1 if self.per_minute else 0

    def mean_per_s(self) -> float:
        span = self.span_minutes()
        return self.requests / (span * 60.0) if span else 0.0

    def peak_minute(self) -> tuple[int, int]:
        """(minute, requests) of the busiest minute (the earliest on a tie)."""
        if not self.per_minute:
            return 0, 0
        minute = max(sorted(self.per_minute), key=lambda m: self.per_minute[m])
        return minute, self.per_minute[minute]

    def per_hour(self) -> dict[int, int]:
        hours: dict[int, int] = {}
        for minute, count in self.per_minute.items():
            hours[minute // 60] = hours.get(minute // 60, 0) + count
        return hours

    def peak_hour(self) -> tuple[int, int]:
        hours = self.per_hour()
        if not hours:
            return 0, 0
        hour = max(sorted(hours), key=lambda h: hours[h])
        return hour, hours[hour]

    def hour_covered(self, hour: int) -> tuple[int, int]:
        """(first minute, minutes) of the clock hour ``hour`` that the log's span covers: all 60
        but at the log's ends (a 16-minute log covers 16 minutes of its hour)."""
        if not self.per_minute:
            return hour * 60, 0
        start = max(hour * 60, min(self.per_minute))
        return start, min(hour * 60 + 59, max(self.per_minute)) - start + 1

    def peak_window(self, peak: str = "minute") -> Window:
        """The busiest minute, or the part of the busiest clock hour the log covers (a log under
        an hour: its span, not 3,600 s)."""
        if peak == "minute":
            return Window(self.peak_minute()[0], 1 if self.per_minute else 0)
        return Window(*self.hour_covered(self.peak_hour()[0]))

    def chosen_window(self, start_s: float, length_s: float) -> Window:
        """The whole minutes from ``start_s`` for ``length_s`` that the log's span covers (a
        window reaching past the log is its part in it); no minute for a window outside it."""
        if not self.per_minute:
            return Window(int(start_s // 60), 0)
        first = max(int(start_s // 60), min(self.per_minute))
        last = min(int((start_s + length_s) // 60) - 1, max(self.per_minute))
        return Window(first, max(0, last - first + 1))

    def requests_in(self, window: Window, stats: EndpointStats | None = None) -> int:
        """The requests in ``window``: the log's, or one endpoint's."""
        return window.count(self.per_minute if stats is None else stats.per_minute)

    def rate_in(self, window: Window) -> float:
        """The log's requests/s over ``window`` (0 for a window of no minute)."""
        return self.requests_in(window) / window.seconds if window.minutes else 0.0

    def peak_per_s(self, peak: str = "minute") -> float:
        """The peak rate, requests/s, over the busiest minute or hour (:meth:`peak_window`)."""
        return self.rate_in(self.peak_window(peak))

    def window_per_s(self, start_s: float, length_s: float) -> tuple[float, int]:
        """(requests/s, minutes) over :meth:`chosen_window`; (0, 0) for a window outside the log."""
        window = self.chosen_window(start_s, length_s)
        return self.rate_in(window), window.minutes

    def per_user_rate(self) -> float | None:
        """Requests/s one user makes: 1000 / (mean think time + mean response time), from the
        sessions (None when no session had a second request)."""
        if not self.sessions.think_ms.count:
            return None
        cycle_ms = self.sessions.think_ms.mean() + self.overall.mean()
        return 1000.0 / cycle_ms if cycle_ms > 0 else None

    def share(self, stats: EndpointStats, by: str) -> float:
        if by == "time":
            return stats.timing.total / self.overall.total if self.overall.total else 0.0
        return stats.count / self.requests if self.requests else 0.0

    def to_dict(self, *, top_transitions: int = TOP_TRANSITIONS) -> dict[str, Any]:
        """The profile as JSON-ready data (``--json``)."""
        counts = self.counts
        peak_minute, peak_minute_requests = self.peak_minute()
        peak_hour, peak_hour_requests = self.peak_hour()
        mean = self.mean_per_s()
        peaks = self.peak_window("minute"), self.peak_window("hour")
        rows = [self._endpoint_dict(stats, peaks) for stats in self.endpoints]
        if self.other is not None:
            rows.append(self._endpoint_dict(self.other, peaks))
        return {
            "source": {
                "files": self.files,
                "format": self.format,
                "fields": self.fields or None,
                "lines": counts.lines,
                "requests": self.requests,
                "unparsed": counts.bad,
                "unparsed_examples": [
                    {"file": bad.source, "line": bad.line, "reason": bad.reason} for bad in counts.bad_samples
                ],
                "timed_requests": self.overall.count,
                "first_minute": _iso(self.first_minute() * 60) if self.per_minute else None,
                "last_minute": _iso(max(self.per_minute) * 60) if self.per_minute else None,
                "span_minutes": self.span_minutes(),
                "read_s": round(self.elapsed_s, 3),
            },
            "overall": {
                "mean_ms": _r(self.overall.mean()),
                "p50_ms": _r(self.overall.percentile(50)),
                "p95_ms": _r(self.overall.percentile(95)),
                "total_time_s": _r(self.overall.total / 1000.0),
            }
            if self.timed
            else None,
            "endpoints": rows,
            "rate": {
                "mean_per_s": _r(mean),
                "peak_minute": {
                    "at": _iso(peak_minute * 60),
                    "requests": peak_minute_requests,
                    "per_s": _r(peak_minute_requests / 60.0),
                }
                if self.per_minute
                else None,
                # "at": where the log's span enters the hour; "minutes": how much of it it covers.
                "peak_hour": {
                    "at": _iso(self.hour_covered(peak_hour)[0] * 60),
                    "requests": peak_hour_requests,
                    "minutes": self.hour_covered(peak_hour)[1],
                    "per_s": _r(self.peak_per_s("hour")),
                }
                if self.per_minute
                else None,
                "peak_to_mean": _r(peak_minute_requests / 60.0 / mean) if mean else None,
                "per_minute": [[_iso(minute * 60), count] for minute, count in sorted(self.per_minute.items())],
            },
            "sessions": self._sessions_dict(top_transitions),
        }

    def _endpoint_dict(self, stats: EndpointStats, peaks: tuple[Window, Window]) -> dict[str, Any]:
        timing = stats.timing
        return {
            "endpoint": OTHER if stats is self.other else stats.name,
            "method": stats.shape.method,
            "path": stats.shape.path,
            "query": list(stats.shape.query),
            "requests": stats.count,
            "share_by_count": _r(self.share(stats, "count"), 6),
            "total_time_s": _r(timing.total / 1000.0) if timing.count else None,
            "share_by_time": _r(self.share(stats, "time"), 6) if self.timed else None,
            "mean_ms": _r(timing.mean()) if timing.count else None,
            "p50_ms": _r(timing.percentile(50)) if timing.count else None,
            "p95_ms": _r(timing.percentile(95)) if timing.count else None,
            "statuses": {str(status): count for status, count in sorted(stats.statuses.items())},
            "error_percent": _r(100.0 * stats.errors() / stats.count, 3) if stats.count else 0.0,
            # Its own intensity at the log's peaks (what a plan's per-endpoint rates come from).
            "peak_minute_requests": self.requests_in(peaks[0], stats),
            "peak_hour_requests": self.requests_in(peaks[1], stats),
        }

    def endpoint_names(self) -> dict[int, str]:
        names = {stats.index: stats.name for stats in self.endpoints}
        if self.other is not None:
            names[self.other.index] = OTHER
        return names

    def _sessions_dict(self, top: int) -> dict[str, Any]:
        sessions = self.sessions
        names = self.endpoint_names()
        moves = sum(sessions.transitions.values())
        rate = self.per_user_rate()
        return {
            "key": str(sessions.key),
            "gap_s": sessions.gap_s,
            "sessions": sessions.count,
            "requests_without_key": sessions.unkeyed,
            "requests_per_session": {
                "mean": _r(sessions.mean_length()),
                "p50": sessions.length_percentile(50),
                "p95": sessions.length_percentile(95),
                "max": max(sessions.lengths) if sessions.lengths else 0,
            },
            "think_time_ms": {
                "count": sessions.think_ms.count,
                "mean": _r(sessions.think_ms.mean()),
                "p50": _r(sessions.think_ms.percentile(50)),
                "p95": _r(sessions.think_ms.percentile(95)),
            }
            if sessions.think_ms.count
            else None,
            "per_user_rate_per_s": _r(rate, 6) if rate is not None else None,
            "transitions_pruned": sessions.transitions_pruned,
            "top_transitions": [
                {"from": names.get(a, "?"), "to": names.get(b, "?"), "count": count, "share": _r(count / moves, 6)}
                for (a, b), count in sessions.transitions.most_common(top)
            ],
        }


def _r(value: float, digits: int = 3) -> float:
    return round(value, digits)


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ProfileBuilder:
    """Adds requests one at a time; :meth:`finish` gives the profile."""

    def __init__(self, options: ProfileOptions, seed: int = 0) -> None:
        self.options = options
        self.templater = Templater(options.templates, max_shapes=options.max_endpoints)
        self.sessions = Sessions(options.session, options.session_gap_s)
        #: By endpoint_key(): one row per name, whatever the kinds of its ids.
        self.endpoints: dict[tuple[str, tuple[tuple[str, str], ...]], EndpointStats] = {}
        # The same endpoints by the id of their (interned) shapes: an int's hash, not a tuple's.
        # Each shape so keyed is kept in its endpoint's shapes, so that its id stays its own.
        self._by_id: dict[int, EndpointStats] = {}
        self.other: EndpointStats | None = None
        self.per_minute: dict[int, int] = {}
        self._last_time = -1.0
        self._last_minute = 0
        self.overall = LogHistogram()
        self._rng = random.Random(seed)  # a fixed seed: the same log writes the same plan

    def add(self, record: LogRecord) -> None:
        shape, values = self.templater.template(record.method, record.target)
        stats = self._by_id.get(id(shape)) or self._endpoint(shape)
        if stats is None:
            if self.other is None:
                self.other = EndpointStats(Shape("*", (OTHER,), (), ()), self.options.max_endpoints, self._rng)
            stats = self.other
            values = ()
        stats.add(record, values)
        if record.time_s != self._last_time:
            self._last_time, self._last_minute = record.time_s, int(record.time_s // 60)
        minute = self._last_minute
        self.per_minute[minute] = self.per_minute.get(minute, 0) + 1
        stats.per_minute[minute] = stats.per_minute.get(minute, 0) + 1
        self.sessions.add(record, stats.index)

    def _endpoint(self, shape: Shape) -> EndpointStats | None:
        """The endpoint of a shape not seen before (by identity): the one of the same name, or a
        new one while there is room (None past max_endpoints)."""
        key = endpoint_key(shape)
        stats = self.endpoints.get(key)
        if stats is None:
            if len(self.endpoints) >= self.options.max_endpoints:
                return None
            stats = self.endpoints[key] = self._by_id[id(shape)] = EndpointStats(shape, len(self.endpoints), self._rng)
        elif len(stats.shapes) < MAX_VARIANTS and shape not in stats.shapes:
            stats.shapes.append(shape)
            self._by_id[id(shape)] = stats
        return stats

    def take(self, read: NativeRead) -> None:
        """The requests as the native reader added them up (:mod:`horde.profile.native`), in
        place of adding them one at a time."""
        for index, found in enumerate(read.endpoints):
            stats = self.endpoints[endpoint_key(found.shapes[0])] = EndpointStats(found.shapes[0], index, self._rng)
            stats.shapes, stats.count, stats.timing = found.shapes, found.count, found.timing
            stats.statuses, stats.samples, stats.per_minute = found.statuses, found.samples, found.per_minute
        if read.other is not None:
            self.other = EndpointStats(Shape("*", (OTHER,), (), ()), self.options.max_endpoints, self._rng)
            self.other.count, self.other.timing, self.other.statuses = (
                read.other.count,
                read.other.timing,
                read.other.statuses,
            )
            self.other.per_minute = read.other.per_minute
        self.per_minute = read.per_minute
        self.sessions = read.sessions

    def finish(self, files: Sequence[str], fmt: str, counts: ReadCounts, fields: dict[str, str]) -> Profile:
        self.sessions.finish()
        # All requests' durations: the endpoints' histograms merged (exact: same buckets).
        for stats in [*self.endpoints.values(), *([self.other] if self.other else [])]:
            self.overall.merge(stats.timing)
        ordered = sorted(self.endpoints.values(), key=lambda stats: (-stats.count, stats.name))
        return Profile(
            files=list(files),
            format=fmt,
            counts=counts,
            endpoints=ordered,
            other=self.other,
            per_minute=self.per_minute,
            overall=self.overall,
            sessions=self.sessions,
            fields=fields,
        )


def build_profile(
    paths: Sequence[Path], options: ProfileOptions, on_progress: Callable[[ReadCounts], None] | None = None
) -> Profile:
    """Reads the logs once and returns their profile; InvalidInput for a log that cannot be
    read as its format (most lines failing) or that holds no request."""
    started = time.perf_counter()
    parser = make_parser(options.format, paths, options.fields, options.time_unit, options.session)
    paths = in_time_order(paths, parser)
    counts = ReadCounts()
    builder = ProfileBuilder(options)
    builder.take(
        read_native(paths, parser, options.session_gap_s, options.max_endpoints, counts, on_progress, options.templates)
    )
    if not counts.records:
        raise InvalidInput(
            f"no request found in {', '.join(map(str, paths))}", hint="give a non-empty access log (plain or .gz)"
        )
    fields = parser.fields if isinstance(parser, JsonParser) else {}
    profile = builder.finish([str(path) for path in paths], parser.format, counts, fields)
    profile.elapsed_s = time.perf_counter() - started
    return profile
