"""The buckets of an HDR V2 histogram: which latency ranges hold how many requests.

``horde.histogram`` merges histograms and reads percentiles; rank tests, distribution charts
and fixed-bucket exposition need the bucket counts themselves, which the engine's own HDR code
reads (``horde._engine.histogram_buckets``), so Python and Rust share one reading of the format.

A bucket is every value the histogram cannot tell apart at its precision (3 significant digits
for Horde's latency histograms): ``[lowest_us, highest_us]``, both inclusive.

>>> from horde import histogram
>>> buckets(histogram.merge([]))
[]
"""

from __future__ import annotations

from dataclasses import dataclass

from horde import _engine


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
