"""Whether a value is what its declared type says: the summary, its blocks and the snapshot are
TypedDicts that mypy checks where Python builds them; this checks the values a real run makes.

(``tests/test_summary.py`` tests the check itself.)
"""

from __future__ import annotations

import types
import typing
from typing import Any


def conforms(value: Any, declared: Any, where: str) -> list[str]:
    """Where ``value`` differs from the type ``declared``: a TypedDict's keys missing or not
    declared, and each value against its key's type (unions, lists, dicts and nested TypedDicts
    followed; an int is a float, a bool is neither)."""
    if typing.is_typeddict(declared):
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not a mapping"]
        hints = typing.get_type_hints(declared)
        # Under postponed annotations a NotRequired key still counts in __required_keys__.
        extras = typing.get_type_hints(declared, include_extras=True)
        required = {
            key for key in declared.__required_keys__ if typing.get_origin(extras[key]) is not typing.NotRequired
        }
        problems = [f"{where}.{key}: missing" for key in sorted(required - value.keys())]
        problems += [f"{where}.{key}: not declared" for key in sorted(value.keys() - hints.keys())]
        for key in [key for key in value if key in hints]:
            problems += conforms(value[key], hints[key], f"{where}.{key}")
        return problems
    origin, arguments = typing.get_origin(declared), typing.get_args(declared)
    if declared is Any:
        return []
    if declared is None or declared is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if origin in (typing.Union, types.UnionType):
        for argument in arguments:
            if not conforms(value, argument, where):
                return []
        return [f"{where}: {value!r} is not {declared}"]
    if origin is typing.Literal:
        return [] if value in arguments else [f"{where}: {value!r} is not one of {arguments}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        return [
            problem for index, item in enumerate(value) for problem in conforms(item, arguments[0], f"{where}[{index}]")
        ]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not a mapping"]
        return [problem for key, item in value.items() for problem in conforms(item, arguments[1], f"{where}[{key}]")]
    if declared is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif declared is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, origin or declared)
    return [] if ok else [f"{where}: {value!r} is not {getattr(declared, '__name__', declared)}"]
