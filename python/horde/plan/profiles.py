"""Load profiles written the compact way engineers know from other tools, lowered to a workload
model's stages: ``line(from, to, duration)``, ``const(level, duration)`` and
``step(from, to, step, duration)``, one after the other, separated by spaces.

>>> lower_profile("line(0, 100, 1m) const(100, 5m)")
(0.0, [(60.0, 100.0), (300.0, 100.0)])
>>> lower_profile("step(10, 30, 10, 30s)")
(10.0, [(30.0, 10.0), (0.001, 20.0), (29.999, 20.0), (0.001, 30.0), (29.999, 30.0)])

Stages move linearly from the previous level, so a jump (a ``step``, or a segment that starts
elsewhere than the last one ended) is a ramp of one millisecond taken from the segment's own
duration: the total length stays what was written.
"""

from __future__ import annotations

import math
import re

#: A jump between levels: a ramp this short.
JUMP_S = 0.001
#: A profile that lowers to more stages than this is almost certainly a typo (step 1 over 0..1e6).
MAX_PROFILE_STAGES = 2000

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SEGMENT = re.compile(r"\s*([a-z]+)\s*\(([^()]*)\)\s*")
_ARITY = {"line": 3, "const": 2, "step": 4}

PROFILE_HINT = (
    "write segments such as 'line(0, 100, 1m) const(100, 5m)' or 'step(10, 100, 10, 30s)': "
    "line(from, to, duration), const(level, duration), step(from, to, step, duration)"
)


def duration_seconds(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``1m30s``, ``250ms``, ``2h``; ValueError otherwise.

    >>> duration_seconds("1m30s"), duration_seconds("250ms"), duration_seconds("20")
    (90.0, 0.25, 20.0)
    """
    cleaned = text.strip().lower()
    try:
        value = float(cleaned)
    except ValueError:
        parts = _DURATION_PART.findall(cleaned)
        if not parts or "".join(number + unit for number, unit in parts) != cleaned:
            raise ValueError(f"'{text}' is not a duration") from None
        value = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"'{text}' must be a positive duration")
    return value


def _number(text: str, segment: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"'{text.strip()}' in {segment} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"'{text.strip()}' in {segment} must be 0 or more")
    return value


def lower_profile(text: str) -> tuple[float, list[tuple[float, float]]]:
    """The start level and the stages ``(duration_s, level)`` of a compact profile; ValueError
    with a message naming the faulty segment."""
    position = 0
    start: float | None = None
    stages: list[tuple[float, float]] = []

    def move(level: float, duration: float, segment: str) -> None:
        nonlocal start
        if duration <= 0:
            raise ValueError(f"{segment} lasts no time; give a duration above 0")
        if start is None:
            start = level
            return
        current = stages[-1][1] if stages else start
        if level != current:
            if duration <= JUMP_S:
                raise ValueError(f"{segment} is too short to jump to its level; give it more than {JUMP_S * 1000:g} ms")
            stages.append((JUMP_S, level))
            stages.append((round(duration - JUMP_S, 9), level))
        else:
            stages.append((duration, level))

    text = text.strip().lower()
    if not text:
        raise ValueError("the profile is empty")
    while position < len(text):
        match = _SEGMENT.match(text, position)
        if match is None:
            raise ValueError(f"cannot read the profile from '{text[position:].strip()}'")
        name, inside = match.groups()
        segment = match.group(0).strip()
        position = match.end()
        if name not in _ARITY:
            raise ValueError(f"'{name}' is not a profile segment (line, const or step)")
        args = [part.strip() for part in inside.split(",")]
        if len(args) != _ARITY[name]:
            raise ValueError(f"{segment} takes {_ARITY[name]} values, got {len(args)}")
        try:
            duration = duration_seconds(args[-1])
        except ValueError as error:
            raise ValueError(f"{segment}: {error}") from None
        if duration <= 0:
            raise ValueError(f"{segment} lasts no time; give a duration above 0")
        numbers = [_number(arg, segment) for arg in args[:-1]]
        if name == "const":
            move(numbers[0], duration, segment)
            if len(stages) == 0:
                stages.append((duration, numbers[0]))
        elif name == "line":
            low, high = numbers
            if start is None:
                start = low
            elif low != (stages[-1][1] if stages else start):
                move(low, duration, segment)  # jump to the line's start, then run the line
                stages[-1] = (stages[-1][0], high)
                continue
            stages.append((duration, high))
        else:
            low, high, step = numbers
            if step <= 0:
                raise ValueError(f"{segment}: the step must be above 0")
            levels = [low + i * step for i in range(int(math.floor((abs(high - low) + 1e-9) / step)) + 1)]
            if high < low:
                levels = [low - i * step for i in range(len(levels))]
            for level in levels:
                if start is None:
                    start = level
                    stages.append((duration, level))
                else:
                    move(level, duration, segment)
        if len(stages) > MAX_PROFILE_STAGES:
            raise ValueError(f"the profile makes more than {MAX_PROFILE_STAGES} stages; use larger steps")
    assert start is not None
    return float(start), [(float(d), float(level)) for d, level in stages]
