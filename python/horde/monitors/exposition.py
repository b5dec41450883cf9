"""Reading the Prometheus text exposition format (what every exporter's ``/metrics`` serves).

>>> families = parse_exposition('''# TYPE http_requests_total counter
... http_requests_total{code="200",path="/a\\\\"b"} 1027 1395066363000
... temperature 21.5
... ''')
>>> families["http_requests_total"].kind, families["http_requests_total"].samples
('counter', [('http_requests_total', {'code': '200', 'path': '/a"b'}, 1027.0)])
>>> families["temperature"].kind
'untyped'
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

#: A sample: the series' own name (``x_bucket`` within family ``x``), its labels, its value.
Sample = tuple[str, dict[str, str], float]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
# Series a histogram or summary family holds beside its own name.
_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


@dataclass
class Family:
    """A metric family: its ``# TYPE`` (``counter``, ``gauge``, ``histogram``, ``summary``,
    ``untyped``) and its samples."""

    name: str
    kind: str = "untyped"
    samples: list[Sample] = field(default_factory=list)


class ExpositionError(ValueError):
    """The text is not the exposition format."""


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda match: _ESCAPES[match.group(0)], value)


def _value(text: str) -> float:
    lowered = text.lower()
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    return float(text)  # NaN is a float too


def parse_exposition(text: str) -> dict[str, Family]:
    """Families by name. Raises :class:`ExpositionError` on a line that is not the format."""
    families: dict[str, Family] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                families.setdefault(parts[2], Family(parts[2])).kind = parts[3].strip()
            continue
        match = _NAME.match(line)
        if match is None:
            raise ExpositionError(f"line {number}: no metric name: {line[:80]!r}")
        name, rest = match.group(0), line[match.end() :]
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            end = _labels_end(rest)
            if end < 0:
                raise ExpositionError(f"line {number}: unclosed labels: {line[:80]!r}")
            body, rest = rest[1:end], rest[end + 1 :]
            position = 0
            while position < len(body.strip()):
                label = _LABEL.match(body, position)
                if label is None:
                    raise ExpositionError(f"line {number}: bad labels: {line[:80]!r}")
                labels[label.group(1)] = _unescape(label.group(2))
                position = label.end()
        fields = rest.split()
        if not fields:
            raise ExpositionError(f"line {number}: no value: {line[:80]!r}")
        try:
            value = _value(fields[0])
        except ValueError:
            raise ExpositionError(f"line {number}: {fields[0]!r} is not a number") from None
        family = _family_of(name, families)
        family.samples.append((name, labels, value))
    return families


def _labels_end(rest: str) -> int:
    """The index of the ``}`` closing the labels, skipping quoted values."""
    quoted = False
    index = 1
    while index < len(rest):
        char = rest[index]
        if char == "\\" and quoted:
            index += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char == "}" and not quoted:
            return index
        index += 1
    return -1


def _family_of(name: str, families: dict[str, Family]) -> Family:
    if name in families:
        return families[name]
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return families[name[: -len(suffix)]]
    return families.setdefault(name, Family(name))


def is_counter(family: Family, series_name: str) -> bool:
    """Whether a series counts up (its rate is what matters): a counter's, or a histogram's or
    summary's buckets, sums and counts; an untyped series named ``*_total`` too."""
    if family.kind == "counter":
        return True
    if family.kind in ("histogram", "summary", "gaugehistogram"):
        return series_name.endswith(("_bucket", "_sum", "_count")) and family.kind != "gaugehistogram"
    return family.kind == "untyped" and series_name.endswith("_total")
