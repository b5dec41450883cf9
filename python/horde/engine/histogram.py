"""Latency histograms as the control plane sees them: HDR V2 bytes, merged exactly, read as
percentiles or as buckets.

The engine records latency in microseconds into HDR histograms and ships them as HDR V2 bytes.
Python never averages percentiles: it merges histograms bucket by bucket (through the engine's
own HDR implementation, so both sides agree to the count) and reads percentiles off the merge.
Rank tests, distribution charts and fixed-bucket exposition need the bucket counts themselves,
which the engine's HDR code reads too, so Python and Rust share one reading of the format.

A bucket is every value the histogram cannot tell apart at its precision (3 significant digits
for Horde's latency histograms): ``[lowest_us, highest_us]``, both inclusive.

>>> empty = merge([])
>>> stats(empty).count
0
>>> buckets(empty)
[]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from horde import _engine

#: The percentiles every summary reports.
SUMMARY_PERCENTILES = (50.0, 90.0, 95.0, 99.0)


@dataclass(frozen=True)
class LatencyStats:
    """Figures read off one histogram, in milliseconds."""

    count: int
    min_ms: float
    max_ms: float
    mean_ms: float
    percentiles_ms: dict[float, float]

    def percentile(self, value: float) -> float:
        return self.percentiles_ms[value]


def merge(parts: Iterable[bytes]) -> bytes:
    """The exact merge of HDR V2 histograms (an empty histogram when there are none)."""
    return bytes(_engine.histogram_merge(list(parts)))


def from_values(values_us: Iterable[int]) -> bytes:
    """A histogram of known latencies (microseconds), as the engine would record them: for
    examples and tests.

    >>> stats(from_values([1000, 3000])).count
    2
    """
    return bytes(_engine.histogram_from_values(list(values_us)))


def stats(blob: bytes, percentiles: Iterable[float] = SUMMARY_PERCENTILES) -> LatencyStats:
    wanted = list(percentiles)
    raw = _engine.histogram_stats(blob, wanted)
    values = raw["percentiles_us"]
    return LatencyStats(
        count=int(raw["count"]),
        min_ms=raw["min_us"] / 1000.0,
        max_ms=raw["max_us"] / 1000.0,
        mean_ms=raw["mean_us"] / 1000.0,
        percentiles_ms={p: v / 1000.0 for p, v in zip(wanted, values)},
    )


@dataclass(frozen=True)
class Bucket:
    """Requests whose latency fell in ``[lowest_us, highest_us]`` (microseconds, inclusive)."""

    lowest_us: int
    highest_us: int
    count: int


class HistogramDecodeError(ValueError):
    """Bytes that are not an HDR V2 histogram."""


def buckets(blob: bytes) -> list[Bucket]:
    """The non-empty buckets of an HDR V2 histogram, lowest values first."""
    try:
        found = _engine.histogram_buckets(blob)
    except ValueError as error:
        raise HistogramDecodeError(f"not an HDR V2 histogram: {error}") from None
    return [Bucket(lowest, highest, count) for lowest, highest, count in found]
