"""Latency histograms as the control plane sees them: HDR V2 bytes, merged exactly.

The engine records latency in microseconds into HDR histograms and ships them as HDR V2 bytes.
Python never averages percentiles: it merges histograms bucket by bucket (through the engine's
own HDR implementation, so both sides agree to the count) and reads percentiles off the merge.

>>> empty = merge([])
>>> stats(empty).count
0
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
