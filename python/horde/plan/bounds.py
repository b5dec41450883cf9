"""What a plan may hold, checked before anything walks it: its size, how deep its values nest,
how many values it expands to (YAML aliases included), and text that is valid Unicode.

A plan is small (the largest example is a few KiB); these bounds are far above any real plan and
keep a hostile or broken file from costing more than a moment: a 2.7 KB YAML alias bomb expands
to billions of values, a JSON body nested 100,000 deep or a number of 5,000 digits breaks
Python's parsers, a lone surrogate escape cannot be sent to the engine. Each is a located
problem with a hint (exit 2), in well under a second.

>>> shape_problems({"a": [[[1]]]}, max_depth=3)
[(('a', 0, 0), 'values nest deeper than 3 levels', 'a plan nests at most 3 levels deep; flatten this value')]
>>> shape_problems({"name": "ok"})
[]
"""

from __future__ import annotations

import json
import re
from typing import Any, Union

from horde import _engine

#: The engine's bounds on a plan's values (crates/horde-plan's ``bounds``), read once: the
#: schema's ``le``/``ge`` and every message that names a bound use these numbers, never a copy.
_ENGINE_BOUNDS = _engine.plan_bounds()


def _count(name: str) -> int:
    value = _ENGINE_BOUNDS[name]
    assert isinstance(value, int), (name, value)
    return value


def _amount(name: str) -> float:
    return float(_ENGINE_BOUNDS[name])


# Upper bounds: far beyond any real test, low enough that no valid plan can overflow a duration,
# an allocation or a counter in the engine.
MAX_STAGE_DURATION_S = _amount("MAX_STAGE_DURATION_S")
MAX_TIMEOUT_MS = _amount("MAX_TIMEOUT_MS")
MAX_GRACEFUL_STOP_S = _amount("MAX_GRACEFUL_STOP_S")
MAX_THINK_TIME_MS = _amount("MAX_THINK_TIME_MS")
MAX_VUS = _count("MAX_VUS")
MAX_RATE_PER_S = _amount("MAX_RATE_PER_S")
#: A scenario's weight, a branch's weight.
MAX_WEIGHT = _amount("MAX_WEIGHT")
#: A count loop's passes, a while loop's ``max_iterations``.
MAX_LOOP_COUNT = _count("MAX_LOOP_COUNT")
#: Steps inside steps: a top-level step is at depth 1.
MAX_STEP_DEPTH = _count("MAX_STEP_DEPTH")
#: A pool's largest size: far beyond any one process's open-file limit.
MAX_POOL_CONNECTIONS = _count("MAX_POOL_CONNECTIONS")
#: ``max_response_header_bytes``: by default 256 KiB (Chrome's limit on a response's headers;
#: servers send a few KiB), from 1 KiB to 64 MiB.
DEFAULT_MAX_RESPONSE_HEADER_BYTES = _count("DEFAULT_MAX_RESPONSE_HEADER_BYTES")
MIN_RESPONSE_HEADER_BYTES = _count("MIN_RESPONSE_HEADER_BYTES")
MAX_RESPONSE_HEADER_BYTES = _count("MAX_RESPONSE_HEADER_BYTES")
#: ``max_kept_body_bytes``: by default 1 MiB per VU, from 1 byte to 1 GiB.
DEFAULT_MAX_KEPT_BODY_BYTES = _count("DEFAULT_MAX_KEPT_BODY_BYTES")
MAX_KEPT_BODY_BYTES = _count("MAX_KEPT_BODY_BYTES")
#: ``parallel_connections``: the HTTP/1.1 connections a VU uses at once for a parallel group, its
#: own among them: 6 by default, as browsers open per host; 1 to 256.
DEFAULT_PARALLEL_CONNECTIONS = _count("DEFAULT_PARALLEL_CONNECTIONS")
MAX_PARALLEL_CONNECTIONS = _count("MAX_PARALLEL_CONNECTIONS")
#: ``http2``'s bounds (RFC 9113 6.9.1: a window is at most 2^31-1 octets; the connection's starts
#: at 65,535 and WINDOW_UPDATE only widens it).
MAX_H2_WINDOW_BYTES = _count("MAX_H2_WINDOW_BYTES")
MIN_H2_CONNECTION_WINDOW_BYTES = _count("MIN_H2_CONNECTION_WINDOW_BYTES")
MAX_H2_CONCURRENT_STREAMS = _count("MAX_H2_CONCURRENT_STREAMS")
DEFAULT_H2_STREAM_WINDOW_BYTES = _count("DEFAULT_H2_STREAM_WINDOW_BYTES")
DEFAULT_H2_CONNECTION_WINDOW_BYTES = _count("DEFAULT_H2_CONNECTION_WINDOW_BYTES")
#: The most a WebSocket control frame (a ping step's ``control_frame``) carries.
MAX_CONTROL_FRAME_BYTES = _count("MAX_CONTROL_FRAME_BYTES")
#: The most messages one stream step may send (duration over interval).
MAX_STREAM_MESSAGES = _count("MAX_STREAM_MESSAGES")

#: The largest plan file read, in bytes.
MAX_PLAN_BYTES = 256 * 1024
#: The deepest nesting of mappings and lists (a JSON body's own nesting included).
MAX_DEPTH = 64
#: The most values (mappings, lists, scalars) a plan may expand to, YAML aliases counted each
#: time they are used.
MAX_VALUES = 200_000
#: The most problems a refused plan lists (the count of the rest is given).
MAX_PROBLEMS = 50

Loc = tuple[Union[str, int], ...]
Shaped = tuple[Loc, str, str]


def shape_problems(data: Any, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> list[Shaped]:
    """The first problem of shape found in ``data`` (plain or YAML-loaded values), or none:
    walked without recursion and stopped at the first, so a bomb costs at most ``max_values``
    steps."""
    stack: list[tuple[Any, Loc]] = [(data, ())]
    seen = 0
    while stack:
        node, loc = stack.pop()
        seen += 1
        if seen > max_values:
            return [
                (
                    loc,
                    f"the plan expands to more than {max_values:,} values",
                    "a plan this large is likely a YAML alias bomb or a generated mistake; "
                    f"a plan may hold at most {max_values:,} values, aliases counted each time they are used",
                )
            ]
        if isinstance(node, str):
            if not _is_unicode(node):
                return [
                    (
                        loc,
                        "holds a lone surrogate (an escape like \\ud800 that is no character)",
                        "write the character itself, or a valid surrogate pair",
                    )
                ]
            if loc and loc[-1] == "body" and json_text_too_deep(node, max_depth=max_depth):
                return [
                    (
                        loc,
                        f"holds JSON text nested deeper than {max_depth} levels",
                        f"a body read as JSON nests at most {max_depth} levels deep (as a plan does); flatten it",
                    )
                ]
            continue
        if isinstance(node, (dict, list)) and len(loc) >= max_depth:
            return [
                (
                    loc,
                    f"values nest deeper than {max_depth} levels",
                    f"a plan nests at most {max_depth} levels deep; flatten this value",
                )
            ]
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and not _is_unicode(key):
                    return [
                        (
                            loc,
                            "a key holds a lone surrogate (an escape like \\ud800 that is no character)",
                            "write the character itself, or a valid surrogate pair",
                        )
                    ]
                stack.append((value, (*loc, str(key))))
        elif isinstance(node, list):
            stack.extend((item, (*loc, index)) for index, item in enumerate(node))
    return []


#: A JSON string (with its escapes), skipped when JSON text's brackets are counted.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def json_text_too_deep(text: str, *, max_depth: int = MAX_DEPTH) -> bool:
    """Whether ``text`` starts as JSON does (with ``[`` or ``{``) and its brackets, outside its
    strings, nest deeper than ``max_depth``: counted without parsing, so a body nested 100,000
    deep costs a scan, not a RecursionError. A text body that merely starts with a bracket is
    read the same way: it would be decoded as JSON to find its secrets.

    >>> json_text_too_deep("[" * 65 + "]" * 65), json_text_too_deep('{"a": "[[[[[["}', max_depth=2)
    (True, False)
    >>> json_text_too_deep("text [[[[", max_depth=2)
    False
    """
    if not text.lstrip().startswith(("[", "{")) or text.count("[") + text.count("{") <= max_depth:
        return False
    depth = 0
    for match in _BRACKETS.finditer(_JSON_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > max_depth:
                return True
        else:
            depth = max(0, depth - 1)
    return False


def loads_bounded(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(text)`` for JSON text from a plan, a flag or a response, refused (ValueError)
    when it nests deeper than ``max_depth`` instead of raising RecursionError.

    >>> loads_bounded('{"a": [1]}')
    {'a': [1]}
    >>> loads_bounded("[" * 100_000 + "]" * 100_000)
    Traceback (most recent call last):
    ...
    ValueError: JSON text nested deeper than 64 levels
    """
    if json_text_too_deep(text, max_depth=max_depth):
        raise ValueError(f"JSON text nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - the scan above finds it first
        raise ValueError(f"JSON text nested deeper than {max_depth} levels") from None


def flow_depth_problem(text: str, *, max_depth: int = MAX_DEPTH) -> tuple[int, str, str] | None:
    """Brackets (``[``, ``{``) nested past ``max_depth`` in YAML or JSON text, found before a
    parser recurses into them (ruamel takes seconds over a few thousand), with the line where
    the bound was crossed. Quoted text and comments are skipped; a plain scalar with brackets
    (``/items[0]``) closes what it opens.

    >>> flow_depth_problem("x: " + "[" * 70 + "]" * 70, max_depth=64)[0]
    1
    >>> flow_depth_problem('path: "/a[[[[[["') is None
    True
    """
    depth = 0
    line = 1
    quote = ""
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char == "\n":
            line += 1
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#" and (index == 0 or text[index - 1] in " \t\n"):
            newline = text.find("\n", index)
            index = length if newline == -1 else newline
            continue
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                return (
                    line,
                    f"values nest deeper than {max_depth} levels",
                    f"a plan nests at most {max_depth} levels deep; flatten this value",
                )
        elif char in "]}":
            depth = max(0, depth - 1)
        index += 1
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
