"""A bounded-memory histogram of durations from a log: log-spaced buckets, 1 % wide.

A log of billions of requests cannot keep every duration to take a percentile. The engine's HDR
histograms are built for its own recorders (:mod:`horde.engine.histogram` reads and merges them,
and builds one from a list only for tests), so the profile counts durations in buckets whose
bounds grow by 1 % each: any percentile is then within 1 % of the exact one, the count and the
mean are exact, and memory is one counter per bucket touched (at most about 2,100 between 1 µs
and 20 minutes).

>>> histogram = LogHistogram()
>>> for ms in range(1, 101):
...     histogram.add(float(ms))
>>> histogram.count, histogram.mean(), round(histogram.percentile(50), 1), round(histogram.percentile(95), 1)
(100, 50.5, 50.1, 94.6)
"""

from __future__ import annotations

import math
from typing import Final

#: Bucket width: each bucket's upper bound is 1 % above its lower one.
GROWTH: Final = 1.01
_SCALE: Final = 1.0 / math.log(GROWTH)
#: Durations below this (ms) share the first bucket: a log's clock has no finer grain.
FLOOR_MS: Final = 0.001


class LogHistogram:
    """Counts of durations (ms) in 1 %-wide buckets, with the exact count, sum and maximum."""

    __slots__ = ("buckets", "count", "total", "maximum", "zeros")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.maximum = 0.0
        #: Durations under FLOOR_MS (a log's ``0.000``): counted apart, read as 0.
        self.zeros = 0

    def add(self, value_ms: float) -> None:
        self.count += 1
        self.total += value_ms
        if value_ms > self.maximum:
            self.maximum = value_ms
        if value_ms < FLOOR_MS:
            self.zeros += 1
            return
        index = int(math.log(value_ms / FLOOR_MS) * _SCALE)
        buckets = self.buckets
        buckets[index] = buckets.get(index, 0) + 1

    def merge(self, other: LogHistogram) -> None:
        self.count += other.count
        self.total += other.total
        self.maximum = max(self.maximum, other.maximum)
        self.zeros += other.zeros
        for index, count in other.buckets.items():
            self.buckets[index] = self.buckets.get(index, 0) + count

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, percent: float) -> float:
        """The value under which ``percent`` % of the durations fall (within 1 %): the middle
        of its bucket, never above the largest duration seen."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(self.count * percent / 100.0))
        if rank >= self.count:
            return self.maximum  # the largest is known exactly
        seen = self.zeros
        if seen >= rank:
            return 0.0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                middle: float = FLOOR_MS * GROWTH ** (index + 0.5)
                return min(middle, self.maximum)
        return self.maximum
