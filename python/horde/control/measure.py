"""The figures of a scope over a span of snapshots: what thresholds judge on the whole run, what
autostop watches over a sliding window, and what load steering reads step by step.

A *scope* says which step entries of a snapshot count: by default every request step (groups
are left out, as in the summary: a group's pass is made of requests already counted), or the
steps and groups named, optionally only those of one scenario. :func:`measure` adds the scope's
entries up and merges their latency histograms exactly (never averaging percentiles);
:class:`Window` does the same over the last N seconds of a run as it goes.

>>> from horde.engine.histogram import from_values
>>> second = {"elapsed_s": 1.0, "interval_s": 1.0, "final": False, "iterations": 9,
...           "dropped_arrivals": 1, "steps": [
...     {"scenario": "shop", "step": "home", "kind": "request", "requests": 10, "ok": 9,
...      "errors": {"timeout": 1}, "histogram": from_values([1000] * 9 + [2000])},
...     {"scenario": "shop", "step": "visit", "kind": "group", "requests": 5, "ok": 5,
...      "errors": {}, "histogram": from_values([1500] * 5)}]}
>>> figures = measure([second])
>>> figures.requests, figures.latency_ms(50), figures.max_ms, figures.error_percent("timeout")
(10, 1.0, 2.0, 10.0)
>>> measure([second], step="visit").mean_ms, figures.dropped_percent
(1.5, 10.0)

The dropped arrivals and iterations of a snapshot are the whole run's (snapshots do not split
them by scenario or step), so every scope of the same snapshots sees the same ``dropped``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from horde.engine import histogram
from horde.engine.histogram import LatencyStats
from horde.plan.control import Condition
from horde.engine.snapshot import Snapshot

#: A snapshot as the engine hands it over (see ARCHITECTURE.md, "snapshot").


@dataclass(frozen=True)
class Scope:
    """Which step entries of a snapshot count.

    ``steps`` empty means every *request* step; otherwise the steps and groups of those names.
    Naming a group and the requests inside it counts those requests twice: a group is a whole
    pass, so name either the group or its requests.

    >>> Scope.of(step="login").describe(), Scope.of(scenario="shop").describe()
    ('step login', 'all requests of scenario shop')
    """

    steps: tuple[str, ...] = ()
    scenario: str | None = None
    #: Latency from each request's actual send (the target's side), rather than as users felt it
    #: (open-model requests timed from their intended instant, delays before the send included).
    from_send: bool = False

    @classmethod
    def of(
        cls,
        *,
        scenario: str | None = None,
        step: str | None = None,
        steps: Iterable[str] | None = None,
        from_send: bool = False,
    ) -> Scope:
        """The scope of ``step`` and/or any of ``steps`` (every request step when neither),
        only in ``scenario`` when given."""
        names = ([step] if step is not None else []) + list(steps or ())
        return cls(steps=tuple(dict.fromkeys(names)), scenario=scenario, from_send=from_send)

    def includes(self, entry: Mapping[str, Any]) -> bool:
        """Whether a snapshot's step entry is in the scope."""
        if self.scenario is not None and entry["scenario"] != self.scenario:
            return False
        if self.steps:
            return entry["step"] in self.steps
        # Stores written before groups existed have no kind: every entry was a request.
        return bool(entry.get("kind", "request") == "request")

    def describe(self) -> str:
        """The scope in words, for messages: ``step login``, ``all requests of scenario shop``."""
        if not self.steps:
            where = "all requests"
        elif len(self.steps) == 1:
            where = f"step {self.steps[0]}"
        else:
            where = "steps " + ", ".join(self.steps)
        return f"{where} of scenario {self.scenario}" if self.scenario is not None else where


@dataclass(frozen=True)
class Figures:
    """Totals of a scope over some snapshots, and the figures conditions are judged on.

    Latencies are in milliseconds, shares in percent, rates per second of the snapshots'
    summed ``interval_s``. Frozen, so the latency figures read off the histogram once stay true.
    """

    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    #: The exact merge of the scope's HDR V2 histograms (microseconds); b"" when there were none.
    histogram: bytes = b""
    #: The sum of the snapshots' ``interval_s``: the time the figures cover.
    seconds: float = 0.0
    #: The run's arrivals that found no free VU (open model), whatever the scope.
    dropped_arrivals: int = 0
    #: The run's completed iterations, whatever the scope.
    iterations: int = 0

    @cached_property
    def _latency(self) -> LatencyStats | None:
        if not self.histogram:
            return None
        stats = histogram.stats(self.histogram, ())
        return stats if stats.count else None

    @property
    def samples(self) -> int:
        """How many latencies the histogram holds."""
        return self._latency.count if self._latency else 0

    def latency_ms(self, percentile: float) -> float | None:
        """The latency at ``percentile`` (0 to 100) in ms; None when there are no samples."""
        if self._latency is None:
            return None
        return histogram.stats(self.histogram, (percentile,)).percentile(percentile)

    @property
    def mean_ms(self) -> float | None:
        return self._latency.mean_ms if self._latency else None

    @property
    def min_ms(self) -> float | None:
        return self._latency.min_ms if self._latency else None

    @property
    def max_ms(self) -> float | None:
        return self._latency.max_ms if self._latency else None

    @property
    def rps(self) -> float:
        """Requests (or group passes) per second; 0 when the figures cover no time."""
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def ok_rps(self) -> float:
        return self.ok / self.seconds if self.seconds > 0 else 0.0

    def error_percent(self, kind: str | None = None) -> float:
        """The share of requests that failed (of one error kind when given); 0 when none.

        >>> Figures(requests=200, ok=190, errors={"timeout": 4, "status_503": 6}).error_percent("timeout")
        2.0
        """
        failed = self.requests - self.ok if kind is None else self.errors.get(kind, 0)
        return 100.0 * failed / self.requests if self.requests else 0.0

    @property
    def dropped_percent(self) -> float:
        """Dropped arrivals as a share of all arrivals (iterations + dropped); 0 when none."""
        arrivals = self.iterations + self.dropped_arrivals
        return 100.0 * self.dropped_arrivals / arrivals if arrivals else 0.0

    def value(self, condition: Condition) -> float | None:
        """The measured value of a condition's metric, in its units; None when there is
        nothing to measure it on (no latency samples, no requests for an error share, no time
        for a rate). ``requests`` and ``dropped`` always have a value: 0 is a measurement.
        """
        metric = condition.metric
        if condition.kind == "latency":
            if metric == "mean":
                return self.mean_ms
            if metric == "min":
                return self.min_ms
            if metric == "max":
                return self.max_ms
            percentile = condition.percentile
            assert percentile is not None  # the condition parser only lets pNN through here
            return self.latency_ms(percentile)
        if metric == "dropped":
            return self.dropped_percent
        if metric == "errors" or metric.startswith("errors."):
            if not self.requests:
                return None
            return self.error_percent(metric.partition(".")[2] or None)
        if metric == "requests":
            return float(self.requests)
        if metric in ("rps", "ok_rps"):
            if self.seconds <= 0:
                return None
            return self.rps if metric == "rps" else self.ok_rps
        raise ValueError(f"'{metric}' is not a metric figures can measure")


def measure(
    snapshots: Iterable[Snapshot],
    *,
    scenario: str | None = None,
    step: str | None = None,
    steps: Iterable[str] | None = None,
    from_send: bool = False,
) -> Figures:
    """The figures of a scope (see :class:`Scope`) over ``snapshots``, final ones included.

    Every histogram in scope is merged in one call, so the cost is one decode per entry.
    """
    return _measure(snapshots, Scope.of(scenario=scenario, step=step, steps=steps, from_send=from_send))


def combine(parts: Iterable[Figures]) -> Figures:
    """The figures of several spans as one (counts added, histograms merged exactly)."""
    parts = list(parts)
    errors: dict[str, int] = {}
    for part in parts:
        for kind, count in part.errors.items():
            errors[kind] = errors.get(kind, 0) + count
    blobs = [part.histogram for part in parts if part.histogram]
    return Figures(
        requests=sum(part.requests for part in parts),
        ok=sum(part.ok for part in parts),
        errors=errors,
        # One blob is already what a merge would give; skip the round trip through the engine.
        histogram=blobs[0] if len(blobs) == 1 else histogram.merge(blobs) if blobs else b"",
        seconds=sum(part.seconds for part in parts),
        dropped_arrivals=sum(part.dropped_arrivals for part in parts),
        iterations=sum(part.iterations for part in parts),
    )


def _measure(snapshots: Iterable[Snapshot], scope: Scope) -> Figures:
    requests = ok = dropped = iterations = 0
    seconds = 0.0
    errors: dict[str, int] = {}
    blobs: list[bytes] = []
    for snapshot in snapshots:
        seconds += float(snapshot["interval_s"])
        dropped += int(snapshot["dropped_arrivals"])
        iterations += int(snapshot["iterations"])
        for entry in snapshot["steps"]:
            if not scope.includes(entry):
                continue
            requests += int(entry["requests"])
            ok += int(entry["ok"])
            for kind, count in entry["errors"].items():
                errors[kind] = errors.get(kind, 0) + int(count)
            blob = (scope.from_send and entry.get("from_send_histogram")) or entry["histogram"]
            if blob:
                blobs.append(bytes(blob))
    merged = b"" if not blobs else blobs[0] if len(blobs) == 1 else histogram.merge(blobs)
    return Figures(
        requests=requests,
        ok=ok,
        errors=errors,
        histogram=merged,
        seconds=seconds,
        dropped_arrivals=dropped,
        iterations=iterations,
    )


class Window:
    """The last ``size_s`` seconds of a run, as it goes: add each snapshot, read figures.

    Final snapshots (the few milliseconds of draining at the end) are ignored: their rates are
    noise. Snapshots come one a second, so the window is full once it holds ``size_s`` of them.
    Each second's figures are kept per scope once asked for, so reading a window merges at most
    ``size_s`` histograms, however many steps the scope holds.

    >>> window = Window(2)
    >>> for second in (1, 2, 3):
    ...     window.add({"second": second, "elapsed_s": float(second), "interval_s": 1.0, "final": False,
    ...                 "iterations": second, "dropped_arrivals": 0, "steps": []})
    >>> window.full, [snapshot["second"] for snapshot in window.snapshots], window.figures().iterations
    (True, [2, 3], 5)
    """

    def __init__(self, size_s: int) -> None:
        if size_s < 1:
            raise ValueError(f"a window holds at least 1 s (got {size_s})")
        self.size_s = size_s
        # Each second with the figures of the scopes read so far.
        self._seconds: deque[tuple[Snapshot, dict[Scope, Figures]]] = deque(maxlen=size_s)

    def add(self, snapshot: Snapshot) -> None:
        """Adds one second; the oldest falls out once the window is full."""
        if not snapshot["final"]:
            self._seconds.append((snapshot, {}))

    def __len__(self) -> int:
        return len(self._seconds)

    @property
    def full(self) -> bool:
        """Whether the window holds ``size_s`` seconds."""
        return len(self._seconds) == self.size_s

    @property
    def snapshots(self) -> list[Snapshot]:
        """The seconds in the window, oldest first."""
        return [snapshot for snapshot, _ in self._seconds]

    def figures(
        self,
        *,
        scenario: str | None = None,
        step: str | None = None,
        steps: Iterable[str] | None = None,
        from_send: bool = False,
    ) -> Figures:
        """The figures of a scope over the window (see :func:`measure`)."""
        scope = Scope.of(scenario=scenario, step=step, steps=steps, from_send=from_send)
        parts = []
        for snapshot, by_scope in self._seconds:
            if scope not in by_scope:
                by_scope[scope] = _measure((snapshot,), scope)
            parts.append(by_scope[scope])
        return combine(parts)


def unit_of(condition: Condition) -> str:
    """The unit a condition's measured value is written in: ``ms``, ``%``, ``req/s`` or ``""``."""
    if condition.kind == "latency":
        return "ms"
    if condition.kind == "share":
        return "%"
    return "" if condition.metric == "requests" else "req/s"


def format_value(value: float, unit: str) -> str:
    """A measured value or a limit for people: enough digits to compare, none to spare.

    >>> format_value(812.4321, "ms"), format_value(12.5, "%"), format_value(0.48, "ms"), format_value(1500, "")
    ('812.4 ms', '12.5 %', '0.48 ms', '1,500')
    """
    magnitude = abs(value)
    digits = 1 if magnitude >= 100 else 2 if magnitude >= 1 else 3
    text = f"{value:,.{digits}f}".rstrip("0").rstrip(".")
    return f"{text} {unit}" if unit else text


def format_limit(condition: Condition) -> str:
    """The comparison a condition asks for, in its units: ``< 200 ms``, ``> 5 %``."""
    return f"{condition.op} {format_value(condition.value, unit_of(condition))}"
