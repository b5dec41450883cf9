"""The buckets of an HDR V2 histogram: which latency ranges hold how many requests.

``horde.histogram`` merges histograms and reads percentiles through the engine's own HDR code;
rank tests and distribution charts need the bucket counts themselves, which the native module
does not expose, so this module reads them from the HDR V2 bytes (the documented wire format
every HdrHistogram port shares). Tests check the decoded counts against the native count,
minimum, maximum and percentiles, so both readings agree.

A bucket is every value the histogram cannot tell apart at its precision (3 significant digits
for Horde's latency histograms): ``[lowest_us, highest_us]``, both inclusive.

>>> from horde import histogram
>>> buckets(histogram.merge([]))
[]
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Final

# Cookies of the V2 format (uncompressed, and zlib-compressed around an uncompressed one).
_V2_COOKIE: Final = 0x1C849303 | 0x10
_V2_COMPRESSED_COOKIE: Final = 0x1C849304 | 0x10
# cookie, payload length, normalising offset, significant digits, lowest, highest, int/double ratio
_HEADER: Final = struct.Struct(">IIIIqqd")


@dataclass(frozen=True)
class Bucket:
    """Requests whose latency fell in ``[lowest_us, highest_us]`` (microseconds, inclusive)."""

    lowest_us: int
    highest_us: int
    count: int


class HistogramDecodeError(ValueError):
    """Bytes that are not an HDR V2 histogram this module can read."""


def buckets(blob: bytes) -> list[Bucket]:
    """The non-empty buckets of an HDR V2 histogram, lowest values first."""
    if len(blob) < 4:
        raise HistogramDecodeError("not an HDR V2 histogram: too short")
    (cookie,) = struct.unpack_from(">I", blob)
    if cookie == _V2_COMPRESSED_COOKIE:
        (payload_length,) = struct.unpack_from(">I", blob, 4)
        try:
            blob = zlib.decompress(blob[8 : 8 + payload_length])
        except zlib.error as error:
            raise HistogramDecodeError(f"not an HDR V2 histogram: {error}") from error
    if len(blob) < _HEADER.size:
        raise HistogramDecodeError("not an HDR V2 histogram: header cut short")
    cookie, payload_length, offset, digits, lowest, _highest, ratio = _HEADER.unpack_from(blob)
    if cookie != _V2_COOKIE:
        raise HistogramDecodeError(f"not an HDR V2 histogram (cookie {cookie:#x})")
    if offset != 0 or ratio != 1.0 or not 0 <= digits <= 5 or lowest < 1:
        raise HistogramDecodeError("an HDR V2 histogram with settings Horde never writes")
    payload = blob[_HEADER.size : _HEADER.size + payload_length]
    if len(payload) != payload_length:
        raise HistogramDecodeError("not an HDR V2 histogram: counts cut short")
    layout = _Layout(int(digits), int(lowest))
    found: list[Bucket] = []
    index = 0
    for count_or_zeros in _zigzag_varints(payload):
        if count_or_zeros < 0:
            # A negative number is a run of that many empty buckets.
            index += -count_or_zeros
            continue
        if count_or_zeros > 0:
            low = layout.value_at(index)
            found.append(Bucket(low, low + layout.width_at(low) - 1, count_or_zeros))
        index += 1
    return found


class _Layout:
    """Where each counts-array index sits on the value axis (HdrHistogram's bucket layout)."""

    def __init__(self, digits: int, lowest: int) -> None:
        largest_single_unit = 2 * int(10**digits)
        self.unit_magnitude = lowest.bit_length() - 1
        sub_bucket_count_magnitude = (largest_single_unit - 1).bit_length()
        self.half_count_magnitude = max(sub_bucket_count_magnitude - 1, 0)
        self.half_count = 1 << self.half_count_magnitude
        self.sub_bucket_mask = ((1 << sub_bucket_count_magnitude) - 1) << self.unit_magnitude

    def value_at(self, index: int) -> int:
        bucket = (index >> self.half_count_magnitude) - 1
        sub_bucket = (index & (self.half_count - 1)) + self.half_count
        if bucket < 0:
            # The lower half of the first bucket: values below half_count, at unit resolution.
            sub_bucket -= self.half_count
            bucket = 0
        return sub_bucket << (bucket + self.unit_magnitude)

    def width_at(self, value: int) -> int:
        # The bucket index is how many doublings the value lies above the first bucket's range.
        bucket = (value | self.sub_bucket_mask).bit_length() - self.sub_bucket_mask.bit_length()
        return 1 << (self.unit_magnitude + bucket)


def _zigzag_varints(payload: bytes) -> list[int]:
    """The signed numbers of a ZigZag LEB128 stream (at most 9 bytes each, as HdrHistogram's:
    the ninth byte carries 8 bits)."""
    numbers: list[int] = []
    position = 0
    end = len(payload)
    while position < end:
        value = 0
        for byte_index in range(9):
            if position >= end:
                raise HistogramDecodeError("not an HDR V2 histogram: a count is cut short")
            byte = payload[position]
            position += 1
            if byte_index == 8:
                value |= byte << 56
                break
            value |= (byte & 0x7F) << (7 * byte_index)
            if not byte & 0x80:
                break
        numbers.append((value >> 1) ^ -(value & 1))
    return numbers
