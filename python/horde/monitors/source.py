"""What every monitor's source is: something read once per interval into named figures.

A source connects when the run starts (:meth:`Source.open`), gives its figures at each reading
(:meth:`Source.read`: ``{"cpu.busy_percent": 12.5, ...}``) and is closed at the end. A source
that cannot be reached raises :class:`SourceUnavailable`: a warning at the start, a gap in its
series while it lasts, never a failed run.
"""

from __future__ import annotations

from typing import Protocol


class SourceUnavailable(Exception):
    """The source could not be read this time (not reachable, refused, timed out, malformed)."""


class Source(Protocol):
    """One monitor's source. ``read`` is called from the monitor's own thread only."""

    name: str
    kind: str

    def open(self) -> None: ...
    def read(self, now: float) -> dict[str, float]: ...
    def close(self) -> None: ...


class CounterRates:
    """Per-second rates of counters read at successive instants, by key.

    A counter that went down was reset (the process restarted, a statistics reset): what it
    counted since is its value, so the rate is value / elapsed rather than a negative number.

    >>> rates = CounterRates()
    >>> rates.rate("requests", 100, 10.0) is None   # the first reading only sets the base
    True
    >>> rates.rate("requests", 150, 11.0), rates.rate("requests", 20, 12.0)
    (50.0, 20.0)
    """

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, float]] = {}

    def rate(self, key: str, value: float, now: float) -> float | None:
        previous = self._last.get(key)
        self._last[key] = (value, now)
        if previous is None:
            return None
        last_value, last_time = previous
        elapsed = now - last_time
        if elapsed <= 0:
            return None
        counted = value - last_value if value >= last_value else value
        return counted / elapsed

    def delta(self, key: str, value: float) -> float | None:
        """How much a counter moved since its last reading (resets counted from zero); the
        first reading gives None."""
        previous = self._last.get(key)
        self._last[key] = (value, 0.0)
        if previous is None:
            return None
        return value - previous[0] if value >= previous[0] else value
