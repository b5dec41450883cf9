"""horde.engine.histogram: exact merges and percentiles of HDR V2 histograms, with known answers.

Histograms with known contents are encoded here, in Python, in the HDR V2 wire format (the
engine's format), so the expected percentiles are exact by construction.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterable

import pytest

from horde.engine import histogram

_V2_COOKIE = 0x1C849313  # HDR V2, 8-byte words, uncompressed


def _zigzag_varint(value: int) -> bytes:
    encoded = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode(values_us: Iterable[int]) -> bytes:
    """An HDR V2 histogram (3 significant digits) of values below 2048 µs, where every
    microsecond has its own bucket, so percentiles read back exactly."""
    counts: dict[int, int] = {}
    for value in values_us:
        assert 0 <= value < 2048
        counts[value] = counts.get(value, 0) + 1
    payload = bytearray()
    zeros = 0
    for index in range(max(counts, default=-1) + 1):
        count = counts.get(index, 0)
        if count == 0:
            zeros += 1
            continue
        if zeros:
            payload += _zigzag_varint(-zeros)  # a run of empty buckets
            zeros = 0
        payload += _zigzag_varint(count)
    header = struct.pack(">IIIIqqd", _V2_COOKIE, len(payload), 0, 3, 1, 3_600_000_000, 1.0)
    return header + bytes(payload)


def nearest_rank(values: list[int], percentile: float) -> int:
    ordered = sorted(values)
    rank = max(1, -(-int(percentile * len(ordered)) // 100))  # ceil(p/100 * n), exact for ints
    return ordered[rank - 1]


def test_stats_of_a_known_histogram() -> None:
    stats = histogram.stats(encode(range(1, 1001)))
    assert stats.count == 1000
    assert stats.min_ms == 0.001
    assert stats.max_ms == 1.0
    assert stats.mean_ms == pytest.approx(0.5005)
    assert stats.percentiles_ms == {50.0: 0.5, 90.0: 0.9, 95.0: 0.95, 99.0: 0.99}
    assert stats.percentile(99.0) == 0.99
    assert tuple(stats.percentiles_ms) == histogram.SUMMARY_PERCENTILES


def test_stats_with_chosen_percentiles_keep_their_order() -> None:
    stats = histogram.stats(encode(range(1, 101)), [99.0, 0.0, 100.0, 50.0])
    assert list(stats.percentiles_ms.items()) == [(99.0, 0.099), (0.0, 0.001), (100.0, 0.1), (50.0, 0.05)]


def test_merge_is_exact_like_recording_everything_in_one() -> None:
    generator = random.Random(7)
    parts = [[generator.randrange(0, 2048) for _ in range(generator.randrange(1, 400))] for _ in range(12)]
    everything = [value for part in parts for value in part]
    merged = histogram.stats(histogram.merge(encode(part) for part in parts), [1.0, 50.0, 90.0, 99.0, 99.9])
    assert merged.count == len(everything)
    assert merged.max_ms == max(everything) / 1000
    assert merged.min_ms == min(everything) / 1000
    assert merged.mean_ms == pytest.approx(sum(everything) / len(everything) / 1000)
    for percentile in (1.0, 50.0, 90.0, 99.0, 99.9):
        assert merged.percentile(percentile) == nearest_rank(everything, percentile) / 1000, percentile


def test_merge_does_not_average_percentiles() -> None:
    # 99 fast requests in one second and one slow one in the next: the merged p99 is the
    # 99th value (fast), the p100 is the slow one; averaging per-second p99s would give ~1 ms.
    fast, slow = encode([10] * 99), encode([2000])
    merged = histogram.stats(histogram.merge([fast, slow]), [99.0, 100.0])
    assert merged.percentiles_ms == {99.0: 0.01, 100.0: 2.0}


def test_merge_order_and_grouping_do_not_matter() -> None:
    a, b, c = encode([1, 2, 3]), encode([500] * 5), encode([1500, 1501])
    expected = histogram.stats(histogram.merge([a, b, c]), [10.0, 50.0, 100.0])
    assert histogram.stats(histogram.merge([c, a, b]), [10.0, 50.0, 100.0]) == expected
    assert histogram.stats(histogram.merge([histogram.merge([a, b]), c]), [10.0, 50.0, 100.0]) == expected


def test_empty_histograms() -> None:
    empty = histogram.merge([])
    assert isinstance(empty, bytes)
    stats = histogram.stats(empty)
    assert (stats.count, stats.min_ms, stats.max_ms, stats.mean_ms) == (0, 0.0, 0.0, 0.0)
    assert set(stats.percentiles_ms.values()) == {0.0}
    assert histogram.stats(histogram.merge([empty, encode([7])])).percentile(50.0) == 0.007


def test_garbage_is_refused() -> None:
    with pytest.raises(ValueError, match="HDR"):
        histogram.stats(b"not a histogram")
    with pytest.raises(ValueError, match="HDR"):
        histogram.merge([encode([1]), b"\x00" * 40])
